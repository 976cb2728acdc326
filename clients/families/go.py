"""Go for the clients: the board as a go player draws it, points typed in GTP style, and two bots.

Actions are the family's notation (``protos/skillclassics/go/v1/go.proto``): a point ``D4`` (a column
letter A-T without I, A on the left, and a row number from 1 at the bottom; any case), ``pass``, and
during the count (which two passes in a row open) ``accept`` or ``resume``. ``?`` lists the legal points.

The board is drawn with Black at the bottom as go boards are printed: the column letters above and below,
the row numbers (``size`` at the top down to 1) on both sides, Black ``●`` (``X`` in ASCII), White ``○``
(``O``), empty points ``·`` (``.``) and the star points ``+``. The last stone played is drawn between
parentheses, ``(●)``, as GNU Go does; the ko point (the point the player to move may not take back at
once) is drawn ``□`` (``*`` in ASCII) and named below the board.

Bots (both never fill one of their own single-point eyes, see :func:`own_eye`, and pass from move
:func:`move_cap` on, so that two bots always end a game; during the count both accept, never resume):

- ``random`` plays a random legal point that is not one of its own eyes, and passes when none is left;
- ``greedy`` captures (the most stones first), else saves a group of its own in atari by extending on its
  last liberty when that gives it at least two, else extends next to its own stones (the move leaving
  the new stone's group the most liberties), else plays a random point; it never fills its own eyes and
  never puts its own stones in atari, and passes when no other move is left.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import ClassVar

from skillclassics.go.v1 import go_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import FamilyClient, InputError, Strategy
from libs.engines.go import (
    ACCEPT,
    COLUMNS,
    EMPTY,
    PASS,
    RESUME,
    SIZES,
    Board,
    geometry,
    handicap_points,
    score_board,
)
from libs.engines.go.engine import DEFAULT_KOMI, HANDICAP_KOMI, MAX_KOMI

__all__ = [
    "FAMILY",
    "GoClient",
    "board_of",
    "greedy_action",
    "liberties_after",
    "move_cap",
    "own_eye",
    "random_action",
    "render_board",
    "star_points",
]

_WORDS = (PASS, ACCEPT, RESUME)
_SCORINGS = {"area": go_pb2.SCORING_AREA, "territory": go_pb2.SCORING_TERRITORY}
_SCORING_NAMES = {go_pb2.SCORING_AREA: "area", go_pb2.SCORING_TERRITORY: "territory"}
_SIZE_WORDS = {text: size for size in SIZES for text in (str(size), f"{size}x{size}")}
_HANDICAPS = ("0", "2", "3", "4", "5", "6", "7", "8", "9")
_ENDED = (rules_pb2.MATCH_STATUS_FINISHED, rules_pb2.MATCH_STATUS_ABORTED)

_GLYPHS_UNICODE = {"X": "●", "O": "○", ".": "·", "+": "+", "ko": "□"}
_GLYPHS_ASCII = {"X": "X", "O": "O", ".": ".", "+": "+", "ko": "*"}

MOVE_CAP_FACTOR = 1.5
"""Bots pass from move ``size * size * 1.5`` on (121 on 9x9, 253 on 13x13, 541 on 19x19)."""


def move_cap(size: int) -> int:
    """The move from which the bots pass whatever the position, so that two bots always end a game."""
    return int(size * size * MOVE_CAP_FACTOR)


def star_points(size: int) -> frozenset[int]:
    """The star points (hoshi) of a board, as engine points: the 3-3 points and tengen on 9x9, the 4-4
    points and tengen on 13x13, the nine 4th-line points on 19x19 (where the handicap stones go)."""
    if size not in SIZES:
        return frozenset()
    return frozenset(handicap_points(size, 9 if size == 19 else 5))


def _point(size: int, row_from_top: int, column: int) -> int:
    """The engine's number of a point (row 0 is the bottom row)."""
    return (size - 1 - row_from_top) * size + column


def _default_komi(size: int, handicap: int) -> float:
    return HANDICAP_KOMI if handicap else DEFAULT_KOMI.get(size, 7.5)


def _number(value: float) -> str:
    """``6.5`` as ``6.5``, ``7.0`` as ``7``."""
    return f"{value:g}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


# -- the board ------------------------------------------------------------------------------------------


def render_board(rows: Sequence[str], *, last_move: str = "", ko: str = "", ascii: bool = False) -> list[str]:
    """The board's lines: column letters above and below, row numbers on both sides; ``last_move`` (a
    point name) between parentheses, ``ko`` (a point name) drawn with the ko mark, star points ``+``.

    ``rows`` are the view's, the top row first (``X`` Black, ``O`` White, ``.`` empty).
    """
    size = len(rows)
    glyphs = _GLYPHS_ASCII if ascii else _GLYPHS_UNICODE
    letters = COLUMNS[:size]
    stars = star_points(size)
    marked = _parse_name(size, last_move)
    ko_point = _parse_name(size, ko)
    width = len(str(size))
    header = " " * (width + 2) + " ".join(letters)
    lines = [header]
    for index, row in enumerate(rows):
        number = size - index
        cells = []
        for column in range(size):
            char = row[column] if column < len(row) else "."
            point = _point(size, index, column)
            if char in ("X", "O"):
                glyph = glyphs[char]
            elif point == ko_point:
                glyph = glyphs["ko"]
            elif point in stars:
                glyph = glyphs["+"]
            else:
                glyph = glyphs["."]
            cells.append(glyph)
        marked_column = marked % size if marked is not None and marked // size == number - 1 else None
        text = [f"{number:>{width}} "]
        for column, glyph in enumerate(cells):
            if column == marked_column:
                text.append("(")
            elif column - 1 == marked_column:
                text.append(")")
            else:
                text.append(" ")
            text.append(glyph)
        text.append(")" if marked_column == size - 1 else " ")
        text.append(f" {number}")
        lines.append("".join(text))
    lines.append(header)
    return lines


def _parse_name(size: int, name: str) -> int | None:
    """The engine point of a GTP name on a ``size`` board (``None``: empty, ``pass`` or not a point)."""
    if size not in SIZES or not name:
        return None
    return geometry(size).by_name.get(name.strip().upper())


def _ranges(numbers: Iterable[int]) -> str:
    """``1 2 3 5 7 8`` as ``1-3 5 7-8``."""
    ordered = sorted(numbers)
    parts: list[str] = []
    start = previous = None
    for n in [*ordered, None]:
        if start is not None and previous is not None and (n is None or n != previous + 1):
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        if n is not None:
            if start is None:
                start = n
            previous = n
    return " ".join(parts)


# -- the family -----------------------------------------------------------------------------------------


class GoClient(FamilyClient):
    """Go: Black is seat 0, White seat 1."""

    name = "go"
    uses_chance = False
    option_names = ("size", "handicap", "komi", "scoring")
    option_help: ClassVar[Mapping[str, str]] = {
        "size": "go: the board, 9, 13 or 19 lines (default: 19)",
        "handicap": "go: handicap stones for Black, 0 (none, the default) or 2 to 9",
        "komi": "go: White's komi, a multiple of 0.5 (default: 0.5 with a handicap, else 5.5 on 9x9, 7.5)",
        "scoring": "go: area (Chinese, the default) or territory (Japanese)",
    }
    option_choices: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "size": tuple(str(size) for size in SIZES),
        "handicap": _HANDICAPS,
        "scoring": tuple(_SCORINGS),
    }
    quick_minutes = 5
    demo_settings: ClassVar[Mapping[str, str]] = MappingProxyType({"size": "9"})
    """The demo plays 9x9: two bots finish it (to the count) well inside the demo's ply cap."""

    # -- setting a table up ----------------------------------------------------------------------------

    def options(self, settings: Mapping[str, str]) -> rules_pb2.MatchOptions:
        unknown = sorted(set(settings) - set(self.option_names))
        if unknown:
            raise InputError(
                f"go has no option {', '.join(unknown)} (options: {', '.join(self.option_names)})"
            )
        size_text = settings.get("size", "19").strip().lower()
        size = _SIZE_WORDS.get(size_text)
        if size is None:
            raise InputError(f"a go board is 9, 13 or 19 lines (9x9, 13x13, 19x19), not {size_text!r}")
        handicap_text = settings.get("handicap", "0").strip()
        if handicap_text not in _HANDICAPS:
            raise InputError(
                f"a go handicap is 0 (none) or 2 to 9 stones, not {handicap_text!r} "
                "(one stone is an even game without komi: handicap 0 and komi 0.5)"
            )
        handicap = int(handicap_text)
        komi_text = settings.get("komi", "").strip().lower()
        go_options = go_pb2.GoOptions(size=size, handicap=handicap)
        if komi_text not in ("", "default"):
            try:
                komi = float(komi_text)
            except ValueError:
                komi = float("nan")
            if komi != komi or abs(komi) > MAX_KOMI or komi * 2 != int(komi * 2):
                raise InputError(
                    f"go komi is a multiple of 0.5 from -400 to 400 (like 6.5 or 7), not {komi_text!r}"
                )
            go_options.komi = komi
        scoring_text = settings.get("scoring", "area").strip().lower()
        scoring_text = {"chinese": "area", "japanese": "territory"}.get(scoring_text, scoring_text)
        scoring = _SCORINGS.get(scoring_text)
        if scoring is None:
            raise InputError(
                f"go scoring is area (Chinese) or territory (Japanese), not {settings.get('scoring')!r}"
            )
        go_options.scoring = scoring
        return rules_pb2.MatchOptions(go=go_options)

    def describe_options(self, options: rules_pb2.MatchOptions) -> str:
        given = options.go if options.WhichOneof("family") == "go" else go_pb2.GoOptions()
        size = given.size or 19
        komi = given.komi if given.HasField("komi") else _default_komi(size, given.handicap)
        parts = [f"{size}x{size}", _SCORING_NAMES.get(given.scoring, "area"), f"komi {_number(komi)}"]
        if given.handicap:
            parts.append(f"handicap {given.handicap}")
        return ", ".join(parts)

    # -- seats -----------------------------------------------------------------------------------------

    def seat_label(self, seat: int) -> str:
        return {0: "Black", 1: "White"}.get(seat, f"seat {seat}")

    # -- rendering ---------------------------------------------------------------------------------------

    def render(self, update: rules_pb2.MatchUpdate, seat: int | None, *, ascii: bool = False) -> str:
        view = update.view.go
        glyphs = _GLYPHS_ASCII if ascii else _GLYPHS_UNICODE
        size = view.size if view.size in SIZES else 19
        rows = list(view.rows) if len(view.rows) == size else ["." * size] * size
        lines = render_board(rows, last_move=view.last_move, ko=view.ko, ascii=ascii)

        def who(other: int) -> str:
            return f"{self.seat_label(other)} (you)" if other == seat else self.seat_label(other)

        def actor(other: int) -> str:
            return "you" if other == seat else self.seat_label(other)

        prisoners = list(view.prisoners) if len(view.prisoners) == 2 else [0, 0]
        scoring = _SCORING_NAMES.get(view.scoring, "area")
        handicap = f", handicap {view.handicap}" if view.handicap else ""
        lines.append(
            f"{glyphs['X']} {who(0)}: {_plural(prisoners[0], 'prisoner')}   "
            f"{glyphs['O']} {who(1)}: {_plural(prisoners[1], 'prisoner')}   "
            f"komi {_number(view.komi)}, {scoring} scoring{handicap}"
        )
        if view.last_move:
            mover = who(view.last_seat) if view.HasField("last_seat") else "?"
            if view.last_move == PASS:
                last = f"{mover} passed"
            else:
                last = f"{mover} played {view.last_move}"
                if view.last_captured:
                    taken = _plural(len(view.last_captured), "stone")
                    shown = f" ({' '.join(view.last_captured)})" if len(view.last_captured) <= 8 else ""
                    last += f", capturing {taken}{shown}"
            lines.append(f"move {view.move_number}: {last}")
        if view.ko and view.phase == go_pb2.PHASE_PLAY and update.status not in _ENDED:
            mover_text = f"{actor(view.turn)} may not" if view.HasField("turn") else "no retaking"
            lines.append(f"ko at {view.ko} ({glyphs['ko']}): {mover_text} take back there at once")
        if view.phase in (go_pb2.PHASE_COUNT, go_pb2.PHASE_OVER) and view.HasField("score"):
            lines += _score_lines(view, who)
        over = view.phase == go_pb2.PHASE_OVER or update.status in _ENDED
        if over:
            lines.append("game over")
        elif view.phase == go_pb2.PHASE_COUNT:
            accepted = [s for s in (0, 1) if s in view.accepted]
            waiting = [s for s in (0, 1) if s not in view.accepted]
            said = " and ".join(who(s) for s in accepted) or "nobody yet"
            pending = " and ".join(actor(s) for s in waiting) or "nobody"
            lines.append(f"accepted: {said}; waiting for {pending} to accept (or resume play)")
        elif view.phase == go_pb2.PHASE_PLAY and view.HasField("turn"):
            hint = " (a point like D4, or pass; ? lists the legal points)" if view.turn == seat else ""
            lines.append(f"{actor(view.turn)} to play{hint}")
        if view.message:
            lines.append(view.message)
        return "\n".join(lines)

    def describe_legal(self, update: rules_pb2.MatchUpdate) -> str:
        actions = list(update.legal_actions)
        if not actions:
            return "nothing to play now (not your turn)"
        words = [action for action in actions if action in _WORDS]
        if ACCEPT in words or RESUME in words:
            if ACCEPT in words:
                return "the count: accept it, or resume play (" + ", ".join(words) + ")"
            return "you accepted the count; you may still resume play (resume)"
        names = [action for action in actions if action not in _WORDS]
        by_column: dict[str, list[int]] = {}
        for name in names:
            letter, row = name[0].upper(), name[1:]
            if row.isdigit():
                by_column.setdefault(letter, []).append(int(row))
        lines = [f"{_plural(len(names), 'legal point')}, and pass:" if names else "no legal point: pass"]
        for letter in sorted(by_column, key=COLUMNS.find):
            lines.append(f"  {letter}: {_ranges(by_column[letter])}")
        others = [word for word in words if word != PASS]
        if others:
            lines.append("also: " + ", ".join(others))
        return "\n".join(lines)

    def input_help(self) -> str:
        return (
            "a point (D4, q16: a column A-T without I, a row from 1 at the bottom) or pass; "
            "during the count accept or resume"
        )

    def parse(self, text: str, update: rules_pb2.MatchUpdate | None = None) -> rules_pb2.Action:
        typed = "".join(text.split()).lower()
        if not typed:
            raise InputError(f"type an action: {self.input_help()}")
        if typed == "?":
            raise InputError(self.describe_legal(update) if update is not None else "no position yet")
        if typed in _WORDS:
            return _action(typed)
        name = typed.upper()
        if len(name) < 2 or not name[0].isascii() or not name[0].isalpha() or not name[1:].isdigit():
            raise InputError(f"cannot read {text.strip()!r} as a go action: {self.input_help()}")
        if name[0] == "I":
            raise InputError(f"{text.strip()!r}: there is no column I on a go board (H is followed by J)")
        size = update.view.go.size if update is not None and update.view.WhichOneof("family") == "go" else 0
        size = size if size in SIZES else 19
        column, row = COLUMNS.find(name[0]), int(name[1:])
        if column < 0 or column >= size or not 1 <= row <= size or name[1] == "0":
            raise InputError(
                f"{text.strip()!r} is not on the {size}x{size} board (columns A-{COLUMNS[size - 1]}, "
                f"rows 1-{size})"
            )
        return _action(name)

    def needs_turn(self, action: rules_pb2.Action) -> bool:
        """A stone or a pass waits for one's turn; ``accept`` and ``resume`` answer the count, which
        either seat may do in any order (both seats have legal actions then): they go at once."""
        if action.WhichOneof("kind") == "go":
            return action.go.action not in (ACCEPT, RESUME)
        return super().needs_turn(action)

    # -- bots --------------------------------------------------------------------------------------------

    def strategy(self, name: str, rng: random.Random) -> Strategy:
        if name == "random":
            return lambda update, seat: _maybe(random_action(update, seat, rng))
        if name == "greedy":
            return lambda update, seat: _maybe(greedy_action(update, seat, rng))
        raise InputError(f"go bots are {', '.join(self.strategies)}, not {name!r}")

    def plies(self, update: rules_pb2.MatchUpdate) -> int | None:
        return update.view.go.move_number if update.view.WhichOneof("family") == "go" else None

    def advantage(self, update: rules_pb2.MatchUpdate, seat: int) -> float | None:
        """Points ahead: the count's margin during the count and after it; during play the count of the
        board as it stands (every stone alive, komi included), or else the prisoners' difference."""
        if update.view.WhichOneof("family") != "go" or seat not in (0, 1):
            return None
        view = update.view.go
        sign = 1.0 if seat == 0 else -1.0
        if view.HasField("score") and view.phase != go_pb2.PHASE_PLAY:
            return sign * (view.score.black.total - view.score.white.total)
        prisoners = list(view.prisoners) if len(view.prisoners) == 2 else [0, 0]
        board = board_of(view)
        if board is None:
            return sign * (prisoners[0] - prisoners[1])
        scoring = "territory" if view.scoring == go_pb2.SCORING_TERRITORY else "area"
        score = score_board(board, view.komi, scoring, (prisoners[0], prisoners[1]))
        return sign * score.margin


def _score_lines(view: go_pb2.GoView, who: Callable[[int], str]) -> list[str]:
    """The count by parts, one line per colour, then the neutral points and the result."""
    score = view.score
    territory_scoring = view.scoring == go_pb2.SCORING_TERRITORY
    lines = [f"count ({'territory' if territory_scoring else 'area'} scoring):"]
    for seat, part in ((0, score.black), (1, score.white)):
        if territory_scoring:
            terms = [f"{part.territory} territory", _plural(part.prisoners, "prisoner")]
            aside = f" ({_plural(part.stones, 'stone')} on the board)"
        else:
            terms = [_plural(part.stones, "stone"), f"{part.territory} territory"]
            aside = f" ({_plural(part.prisoners, 'prisoner')})" if part.prisoners else ""
        if part.komi:
            terms.append(f"{_number(part.komi)} komi")
        lines.append(f"  {who(seat)}: {' + '.join(terms)} = {_number(part.total)}{aside}")
    lines.append(f"  neutral {score.neutral}; result {score.result or '?'}")
    return lines


def _action(text: str) -> rules_pb2.Action:
    return rules_pb2.Action(go=go_pb2.GoAction(action=text))


def _maybe(text: str | None) -> rules_pb2.Action | None:
    return None if text is None else _action(text)


# -- bots ---------------------------------------------------------------------------------------------------


def board_of(view: go_pb2.GoView) -> Board | None:
    """The engine's :class:`Board` of the view's rows (``None`` when they do not make a board). It knows
    no ko: legality is taken from the update's legal actions."""
    try:
        return Board.from_rows(list(view.rows))
    except (ValueError, KeyError):
        return None


def own_eye(board: Board, point: int, color: int) -> bool:
    """Whether ``point`` is a single-point eye of ``color`` (1 Black, 2 White): an empty point whose every
    neighbour on the board (up, down, left, right: 2 in a corner, 3 on an edge, 4 elsewhere) is a stone
    of ``color``. Diagonals are not looked at, so a false eye counts too. Filling such a point never
    captures (no opponent stone touches it) and only takes a liberty from one's own stones."""
    if board[point] != EMPTY:
        return False
    return all(board[q] == color for q in board.geometry.neighbors[point])


def liberties_after(board: Board, point: int, color: int) -> int:
    """The liberties of the group a stone of ``color`` on the empty ``point`` would be part of, not
    counting captures: its empty neighbours and the liberties of the groups of its colour it joins."""
    liberties: set[int] = set()
    for q in board.geometry.neighbors[point]:
        if board[q] == EMPTY:
            liberties.add(q)
        elif board[q] == color:
            group = board.group(q)
            if group is not None:
                liberties |= group.liberties
    liberties.discard(point)
    return len(liberties)


def _count_phase_answer(update: rules_pb2.MatchUpdate) -> str | None:
    """During the count a bot accepts; once it has, it waits (it never resumes)."""
    return ACCEPT if ACCEPT in update.legal_actions else None


def _in_count(update: rules_pb2.MatchUpdate) -> bool:
    legal = set(update.legal_actions)
    return update.view.go.phase == go_pb2.PHASE_COUNT or ACCEPT in legal or RESUME in legal


def _playable(update: rules_pb2.MatchUpdate, board: Board, color: int) -> list[int]:
    """The update's legal points that are not single-point eyes of ``color``, in the update's order."""
    by_name = board.geometry.by_name
    points = []
    for action in update.legal_actions:
        point = by_name.get(action)
        if point is not None and not own_eye(board, point, color):
            points.append(point)
    return points


def random_action(update: rules_pb2.MatchUpdate, seat: int, rng: random.Random) -> str | None:
    """The random bot: a random legal point that is not one of its own single-point eyes; ``pass`` when
    none is left or from :func:`move_cap` on; during the count ``accept`` (``None`` once accepted)."""
    if not update.legal_actions:
        return None
    if _in_count(update):
        return _count_phase_answer(update)
    view = update.view.go
    if PASS not in update.legal_actions:
        return None
    board = board_of(view)
    if board is None or view.move_number >= move_cap(board.size):
        return PASS
    points = _playable(update, board, seat + 1)
    if not points:
        return PASS
    return board.geometry.names[rng.choice(points)]


def greedy_action(update: rules_pb2.MatchUpdate, seat: int, rng: random.Random) -> str | None:
    """The greedy bot (see the module's docstring); ``None`` when it has nothing to do."""
    if not update.legal_actions:
        return None
    if _in_count(update):
        return _count_phase_answer(update)
    view = update.view.go
    if PASS not in update.legal_actions:
        return None
    board = board_of(view)
    if board is None or view.move_number >= move_cap(board.size):
        return PASS
    color = seat + 1
    names = board.geometry.names
    points = _playable(update, board, color)
    playable = set(points)
    if not playable:
        return PASS

    def best(scored: Mapping[int, float]) -> str:
        top = max(scored.values())
        return names[rng.choice(sorted(p for p, value in scored.items() if value == top))]

    # 1. Captures, the most stones first (stones of groups in atari sharing that last liberty add up).
    captures: dict[int, float] = {}
    own_in_atari = []
    for group in board.groups():
        if len(group.liberties) != 1:
            continue
        (liberty,) = group.liberties
        if group.color == color:
            own_in_atari.append((liberty, len(group.stones)))
        elif liberty in playable:
            captures[liberty] = captures.get(liberty, 0) + len(group.stones)
    if captures:
        return best(captures)
    # 2. A group in atari extends on its last liberty when that gives it two liberties or more (no
    # capture is possible now, so the count of liberties is exact); the largest group first.
    saves: dict[int, float] = {}
    for liberty, stones in own_in_atari:
        if liberty in playable and liberties_after(board, liberty, color) >= 2:
            saves[liberty] = max(saves.get(liberty, 0), stones)
    if saves:
        return best(saves)
    # 3. Extend next to its own stones, never into atari: the most liberties after the move.
    safe = {p: float(liberties_after(board, p, color)) for p in points}
    safe = {p: libs for p, libs in safe.items() if libs >= 2}
    neighbors = board.geometry.neighbors
    extensions = {p: libs for p, libs in safe.items() if any(board[q] == color for q in neighbors[p])}
    if extensions:
        return best(extensions)
    # 4. Anywhere else that is not self-atari; else nothing sensible is left.
    if safe:
        return names[rng.choice(sorted(safe))]
    return PASS


FAMILY = GoClient()
