"""PGN export with ``[%clk]`` clock comments, written by hand so the engine stays free of
``chess.pgn`` (which imports python-chess's engine-process module, with asyncio and subprocess).

The output is PGN export format as python-chess, lichess and ChessBase read it:

- the Seven Tag Roster first (``Event``, ``Site``, ``Date``, ``Round``, ``White``, ``Black``, ``Result``;
  ``?`` / ``????.??.??`` where unknown), then the caller's other tags in their order, then ``SetUp`` and
  ``FEN`` for a game that did not start from the usual position, then ``Termination`` with the reason in
  words (``tiebreak: stalemate, Black wins on material``);
- the moves in SAN with move numbers, each followed by ``{ [%clk h:mm:ss] }`` (or ``h:mm:ss.s`` when the
  clock has sub-second digits, truncated to tenths as lichess writes them), lines of at most 80
  characters, and the result token (``1-0``, ``0-1``, ``1/2-1/2``, ``*``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import chess

from libs.engines.base import Outcome, Termination
from libs.engines.chess.engine import ChessState
from libs.engines.chess.notation import COLOR_NAMES, format_clock
from libs.engines.chess.tiebreak import CAUSE_NAMES

SEVEN_TAG_ROSTER: tuple[tuple[str, str], ...] = (
    ("Event", "?"),
    ("Site", "?"),
    ("Date", "????.??.??"),
    ("Round", "?"),
    ("White", "?"),
    ("Black", "?"),
    ("Result", "*"),
)
"""The tags every PGN game carries, in order, with their values when unknown."""

EXPORTER_TAGS = frozenset({"Result", "SetUp", "FEN", "Termination"})
"""Tags the exporter writes itself from the game; the caller's values for them are ignored."""

LINE_LENGTH = 80

_TAG_NAME = re.compile(r"[A-Za-z0-9_]+\Z")

_TERMINATION_NAMES: dict[Termination, str] = {
    **CAUSE_NAMES,
    Termination.DISCONNECT: "disconnect forfeit",
    Termination.FIFTY_MOVES: "fifty-move rule",
    Termination.TIMEOUT_VS_INSUFFICIENT_MATERIAL: "timeout vs insufficient material",
}

_STEP_NAMES = {
    "material": "on material",
    "moves": "on move count",
    "time": "on time left",
    "white": "as White, all else being equal",
}


def roster(headers: Mapping[str, str]) -> dict[str, str]:
    """The Seven Tag Roster with the caller's ``headers`` added or replacing its values (except the
    exporter's own tags, :data:`EXPORTER_TAGS`); ``ValueError`` for a name PGN does not allow."""
    tags = dict(SEVEN_TAG_ROSTER)
    for name, value in headers.items():
        if not _TAG_NAME.match(name):
            raise ValueError(f"not a PGN tag name: {name!r}")
        if name not in EXPORTER_TAGS:
            tags[name] = value
    return tags


def result_token(outcome: Outcome | None) -> str:
    """The PGN result of ``outcome``: ``1-0``, ``0-1``, ``1/2-1/2``, or ``*`` (in progress or aborted)."""
    if outcome is None or outcome.termination is Termination.ABORTED:
        return "*"
    if outcome.winner is None:
        return "1/2-1/2"
    return "1-0" if outcome.winner == 0 else "0-1"


def termination_text(outcome: Outcome) -> str:
    """The reason a game ended, in words, for the ``Termination`` tag.

    >>> from libs.engines.base import Outcome, Termination
    >>> termination_text(Outcome(Termination.TIEBREAK, 1, Termination.STALEMATE, "material"))
    'tiebreak: stalemate, Black wins on material'
    >>> termination_text(Outcome(Termination.TIMEOUT, 0))
    'timeout, White wins'
    """
    if outcome.termination is Termination.TIEBREAK:
        cause = _name(outcome.cause) if outcome.cause is not None else "drawn position"
        step = _STEP_NAMES.get(outcome.tiebreak_step or "", f"on {outcome.tiebreak_step}")
        return f"tiebreak: {cause}, {_winner_name(outcome)} wins {step}"
    if outcome.termination in (Termination.ABORTED, Termination.DRAW_AGREED):
        return _name(outcome.termination)
    if outcome.winner is None:
        return f"{_name(outcome.termination)}, draw"
    return f"{_name(outcome.termination)}, {_winner_name(outcome)} wins"


def export_pgn(
    state: ChessState,
    headers: Mapping[str, str],
    clock_after_move_ms: Sequence[int],
    outcome: Outcome | None = None,
) -> str:
    """The game as PGN text.

    ``headers`` adds or replaces tags (``White``, ``Event``, ``TimeControl``, ...); the exporter's own
    tags (:data:`EXPORTER_TAGS`) come from the game. ``clock_after_move_ms[i]`` is the mover's clock
    just after move ``i``; give one per move, or fewer (the later moves then carry no clock).
    ``outcome`` is how the match ended when that was not on the board (timeout, resignation, disconnect
    forfeit, abort); ``None`` takes the board's own outcome, or ``*`` for a game still in progress.
    """
    if len(clock_after_move_ms) > state.ply_count:
        raise ValueError(f"{len(clock_after_move_ms)} clocks for {state.ply_count} moves")
    final = outcome if outcome is not None else state.result
    tags = roster(headers)
    tags["Result"] = result_token(final)
    if state.options.initial_fen is not None:
        tags["SetUp"] = "1"
        tags["FEN"] = state.options.initial_fen
    if final is not None:
        tags["Termination"] = termination_text(final)
    lines = [f'[{name} "{escape_tag(value)}"]' for name, value in tags.items()]
    movetext = wrap([*_move_tokens(state, clock_after_move_ms), tags["Result"]])
    return "\n".join([*lines, "", *movetext]) + "\n"


def _move_tokens(state: ChessState, clocks: Sequence[int]) -> list[str]:
    board = state.options.initial_board()
    number, white_to_move = board.fullmove_number, board.turn == chess.WHITE
    tokens: list[str] = []
    after_comment = False
    for index, san in enumerate(state.moves_san):
        if white_to_move:
            tokens.append(f"{number}.")
        elif index == 0 or after_comment:
            tokens.append(f"{number}...")
        tokens.append(san)
        after_comment = index < len(clocks)
        if after_comment:
            tokens.append(f"{{ [%clk {format_clock(clocks[index])}] }}")  # never split across lines
        if not white_to_move:
            number += 1
        white_to_move = not white_to_move
    return tokens


def wrap(tokens: Sequence[str]) -> list[str]:
    lines: list[str] = []
    line = ""
    for token in tokens:
        if line and len(line) + 1 + len(token) > LINE_LENGTH:
            lines.append(line)
            line = token
        else:
            line = f"{line} {token}" if line else token
    if line:
        lines.append(line)
    return lines


def escape_tag(value: str) -> str:
    flat = " ".join(value.splitlines())
    return flat.replace("\\", "\\\\").replace('"', '\\"')


def _name(termination: Termination) -> str:
    return _TERMINATION_NAMES.get(termination, termination.value.replace("_", " "))


def _winner_name(outcome: Outcome) -> str:
    return COLOR_NAMES[outcome.winner] if outcome.winner in (0, 1) else f"seat {outcome.winner}"
