"""The record of a match as a Jellyfish "MAT" match file, the text format gnubg imports and exports.

The format is not formally specified; this module writes the layout gnubg itself writes (see
``docs/backgammon.md``, "Record (MAT)") and reads it back (:func:`parse_mat`, used by the round-trip
tests and usable for files from other programs that follow the same layout)::

    ; [Variation "NackGammon"]

     5 point match

     Game 1
     White : 0                      Black : 0
      1)                             52: 13/8 13/11
      2) 31: 8/5 6/5                 Doubles => 2
      3)  Takes                      64: 24/18 13/9
     ...
                                      Wins 2 points

- White (seat 0) is the left column, Black (seat 1) the right; rows are numbered from 1.
- A play is its dice (as drawn; the opening roll: White's die first) and its single-die checker moves in
  the mover's own numbering, the bar 25 and off 0, ``*`` after a hit: ``52: 25/20* 13/11``. A forfeited
  turn is its dice alone (``65:``).
- Cube actions: `` Doubles => 4``, `` Takes``, `` Drops``, `` Beavers => 8``; the end of a game:
  ``Wins N point(s)`` in the winner's column (``and the match`` after the match's last game).
- Resign offers are not part of the format: an accepted one shows as the winner's ``Wins`` line; rejected
  ones and opening ties leave no trace. A money game is a ``0 point match``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from libs.engines.backgammon.board import Variant
from libs.engines.backgammon.engine import SEAT_NAMES, BackgammonState, Event, EventKind

LEFT_WIDTH = 27
"""Columns of the left cell: a row is ``"%3d) "``, the left cell padded to this width, a space, the right
cell (which so starts at the 34th column)."""
WINS_INDENT = (" " * 6, " " * 34)

_VARIATIONS = {Variant.NACKGAMMON: "NackGammon", Variant.HYPERGAMMON: "HyperGammon (3)"}


@dataclass(frozen=True, slots=True)
class MatAction:
    """One cell of a MAT game: a seat's roll and play, cube action or win."""

    seat: int
    kind: str
    """``roll``, ``double``, ``take``, ``drop``, ``beaver`` or ``win``."""
    dice: tuple[int, int] | None = None
    moves: tuple[str, ...] = ()
    """A roll's checker moves (empty: the turn was forfeited)."""
    value: int = 0
    """``double`` / ``beaver``: the cube offered; ``win``: the points won."""
    match_won: bool = False


@dataclass(frozen=True, slots=True)
class MatGame:
    number: int
    score: tuple[int, int]
    """The match score before this game."""
    actions: tuple[MatAction, ...]


@dataclass(frozen=True, slots=True)
class MatMatch:
    match_to: int
    names: tuple[str, str]
    games: tuple[MatGame, ...]
    variation: str = ""
    """The ``; [Variation "..."]`` header, if any (``NackGammon``, ``HyperGammon (3)``)."""


# ---------------------------------------------------------------------------------------------------------
# From a match state


def mat_match(state: BackgammonState) -> MatMatch:
    """The match record of ``state`` (finished games, then the game in progress if it has begun) in the
    terms of the MAT format."""
    games: list[MatGame] = []
    last_number = state.games[-1].number if state.games else 0
    for result in state.games:
        actions = _actions(result.events)
        match_won = state.result is not None and result.number == last_number
        actions.append(MatAction(result.winner, "win", value=result.points, match_won=match_won))
        games.append(MatGame(result.number, result.score_before, tuple(actions)))
    if state.result is None and state.events and state.game_number > last_number:
        current = _actions(state.events)
        if current:
            games.append(MatGame(state.game_number, state.match.score, tuple(current)))
    return MatMatch(
        match_to=state.options.match_to,
        names=(SEAT_NAMES[0], SEAT_NAMES[1]),
        games=tuple(games),
        variation=_VARIATIONS.get(state.options.variant, ""),
    )


def _actions(events: Sequence[Event]) -> list[MatAction]:
    actions: list[MatAction] = []
    for event in events:
        kind = event.kind
        if kind in (EventKind.PLAY, EventKind.AUTO_PLAY, EventKind.FORFEIT):
            actions.append(MatAction(event.seat, "roll", dice=event.dice, moves=event.steps))
        elif kind is EventKind.DOUBLE:
            actions.append(MatAction(event.seat, "double", value=event.value))
        elif kind is EventKind.BEAVER:
            actions.append(MatAction(event.seat, "beaver", value=event.value))
        elif kind is EventKind.TAKE:
            actions.append(MatAction(event.seat, "take"))
        elif kind is EventKind.DROP:
            actions.append(MatAction(event.seat, "drop"))
    return actions


def export_mat(state: BackgammonState, names: tuple[str, str] = SEAT_NAMES) -> str:
    """``state``'s match as a MAT file gnubg can import (``names``: White's and Black's)."""
    record = mat_match(state)
    return format_mat(MatMatch(record.match_to, names, record.games, record.variation))


def format_mat(match: MatMatch) -> str:
    """The text of a MAT file."""
    lines: list[str] = []
    if match.variation:
        lines += [f'; [Variation "{match.variation}"]', ""]
    lines += [f" {match.match_to} point match", ""]
    for game in match.games:
        lines.append(f" Game {game.number}")
        left = f"{match.names[0]} : {game.score[0]}"
        lines.append(f" {left:<31}{match.names[1]} : {game.score[1]}")
        lines += _rows(game.actions)
        lines.append("")
    return "\n".join(lines) + "\n"


def _cell(action: MatAction) -> str:
    if action.kind == "roll":
        assert action.dice is not None
        return f"{action.dice[0]}{action.dice[1]}: {' '.join(action.moves)}".rstrip()
    if action.kind == "double":
        return f" Doubles => {action.value}"
    if action.kind == "beaver":
        return f" Beavers => {action.value}"
    if action.kind == "take":
        return " Takes"
    if action.kind == "drop":
        return " Drops"
    raise ValueError(f"not a MAT cell: {action.kind}")


def _rows(actions: Sequence[MatAction]) -> list[str]:
    rows: list[list[str | None]] = []
    wins: list[str] = []
    for action in actions:
        if action.kind == "win":
            points = f"Wins {action.value} point{'s' if action.value != 1 else ''}"
            wins.append(WINS_INDENT[action.seat] + points + (" and the match" if action.match_won else ""))
            continue
        text = _cell(action)
        if action.seat == 0 or not rows or rows[-1][1] is not None:
            rows.append([text, None] if action.seat == 0 else ["", text])
        else:
            rows[-1][1] = text
    out = []
    for number, (left, right) in enumerate(rows, start=1):
        out.append(f"{number:3d}) {left or '':<{LEFT_WIDTH}} {right or ''}".rstrip())
    return out + wins


# ---------------------------------------------------------------------------------------------------------
# Parsing


class MatFormatError(ValueError):
    """The text is not a MAT file this parser can read (the message names the line)."""


_HEADER = re.compile(r"^\s*(\d+)\s+point\s+match\s*$", re.IGNORECASE)
_GAME = re.compile(r"^\s*Game\s+(\d+)\s*$", re.IGNORECASE)
_SCORE = re.compile(r"^\s*(.+?)\s*:\s*(\d+)\s+(.+?)\s*:\s*(\d+)\s*$")
_ROW = re.compile(r"^\s*(\d+)\)(.*)$")
_VARIATION = re.compile(r'^;\s*\[Variation\s+"(.*)"\]\s*$', re.IGNORECASE)
_ITEM_START = re.compile(r"(\d\d:|Doubles\b|Beavers\b|Takes\b|Drops\b|Wins\b)", re.IGNORECASE)
_WINS = re.compile(r"^Wins\s+(\d+)\s+points?(\s+and\s+the\s+match)?\s*$", re.IGNORECASE)
EMPTY_LEFT = 20
"""A row whose text starts with at least this many spaces has an empty left cell."""


def parse_mat(text: str) -> MatMatch:
    """The match in a MAT file (the layout :func:`format_mat` writes, with some leeway: cells may
    overflow their column; ``bar``/``off`` are read as 25/0).

    :raises MatFormatError: the text is not such a file.
    """
    match_to: int | None = None
    variation = ""
    names = ("", "")
    games: list[MatGame] = []
    current: tuple[int, tuple[int, int]] | None = None
    actions: list[MatAction] = []

    def close() -> None:
        if current is not None:
            games.append(MatGame(current[0], current[1], tuple(actions)))

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.lstrip().startswith(";"):
            found = _VARIATION.match(line.strip())
            if found:
                variation = found.group(1)
            continue
        if match_to is None:
            header = _HEADER.match(line)
            if not header:
                raise MatFormatError(f"line {number}: expected ' N point match', got {line!r}")
            match_to = int(header.group(1))
            continue
        game = _GAME.match(line)
        if game:
            close()
            actions = []
            current = (int(game.group(1)), (0, 0))
            names = ("", "")
            continue
        if current is None:
            raise MatFormatError(f"line {number}: expected ' Game N', got {line!r}")
        if not names[0]:
            score = _SCORE.match(line)
            if not score:
                raise MatFormatError(f"line {number}: expected the players and the score, got {line!r}")
            names = (score.group(1), score.group(3))
            current = (current[0], (int(score.group(2)), int(score.group(4))))
            continue
        row = _ROW.match(line)
        body = row.group(2)[1:] if row else line
        try:
            actions += _parse_row(body)
        except MatFormatError as error:
            raise MatFormatError(f"line {number}: {error}") from None
    if match_to is None:
        raise MatFormatError("no ' N point match' header")
    close()
    return MatMatch(match_to, names, tuple(games), variation)


def _parse_row(body: str) -> list[MatAction]:
    stripped = body.lstrip(" ")
    first_seat = 1 if len(body) - len(stripped) >= EMPTY_LEFT else 0
    starts = [m.start() for m in _ITEM_START.finditer(stripped)]
    if not starts or starts[0] != 0:
        raise MatFormatError(f"cannot read {body.strip()!r}")
    items = [stripped[a:b].strip() for a, b in zip(starts, [*starts[1:], len(stripped)], strict=True)]
    if len(items) > 2 or (first_seat == 1 and len(items) > 1):
        raise MatFormatError(f"too many actions in one row: {body.strip()!r}")
    return [_parse_item(item, first_seat + index) for index, item in enumerate(items)]


def _parse_item(item: str, seat: int) -> MatAction:
    words = item.split()
    head = words[0].lower()
    if re.fullmatch(r"\d\d:", head):
        dice = (int(head[0]), int(head[1]))
        moves = tuple(_point_text(move) for move in words[1:])
        return MatAction(seat, "roll", dice=dice, moves=moves)
    if head in ("doubles", "beavers"):
        if len(words) != 3 or words[1] != "=>" or not words[2].isdigit():
            raise MatFormatError(f"cannot read {item!r}")
        return MatAction(seat, "double" if head == "doubles" else "beaver", value=int(words[2]))
    if head == "takes":
        return MatAction(seat, "take")
    if head == "drops":
        return MatAction(seat, "drop")
    wins = _WINS.match(item)
    if wins:
        return MatAction(seat, "win", value=int(wins.group(1)), match_won=wins.group(2) is not None)
    raise MatFormatError(f"cannot read {item!r}")


def _point_text(move: str) -> str:
    text = move.lower().replace("bar", "25").replace("off", "0")
    if not re.fullmatch(r"\d+(/\d+\*?)+", text):
        raise MatFormatError(f"cannot read the move {move!r}")
    return text
