"""The contest tiebreak: how a drawn position (stalemate, insufficient material, seventy-five moves)
becomes a win.

The steps, in order (SkillClassics contest rules, seed ``000``):

1. ``material``: more material wins, counting P=1 N=3 B=3 R=5 Q=9 (kings not counted);
2. ``moves``: fewer moves played in this game wins (the side that moved first in the game has made
   ``ceil(plies / 2)`` moves, the other ``floor(plies / 2)``; so when White started and made the last
   move, Black wins);
3. ``time``: more time left on the clock, as of the action that produced the drawn position, wins;
4. ``white``: White wins.
"""

from __future__ import annotations

from collections.abc import Sequence

import chess

from libs.engines.base import Outcome, Termination
from libs.engines.chess.notation import COLOR_NAMES, seat_of

PIECE_VALUES: dict[chess.PieceType, int] = {
    chess.PAWN: 1,
    chess.KNIGHT: 3,
    chess.BISHOP: 3,
    chess.ROOK: 5,
    chess.QUEEN: 9,
    chess.KING: 0,
}
"""Material value of each piece type for the tiebreak; kings count nothing."""

TIEBREAK_CAUSES = (Termination.STALEMATE, Termination.INSUFFICIENT_MATERIAL, Termination.SEVENTYFIVE_MOVES)
"""The drawn positions the contest tiebreak decides."""

CAUSE_NAMES: dict[Termination, str] = {
    Termination.STALEMATE: "stalemate",
    Termination.INSUFFICIENT_MATERIAL: "insufficient material",
    Termination.SEVENTYFIVE_MOVES: "seventy-five-move rule",
}


def material(board: chess.Board) -> tuple[int, int]:
    """Material per seat (White, Black) at P=1 N=3 B=3 R=5 Q=9, kings excluded."""
    totals = [0, 0]
    for piece_type, value in PIECE_VALUES.items():
        if value:
            totals[0] += value * len(board.pieces(piece_type, chess.WHITE))
            totals[1] += value * len(board.pieces(piece_type, chess.BLACK))
    return totals[0], totals[1]


def moves_played(plies: int, first_mover: int) -> tuple[int, int]:
    """Moves each seat (White, Black) has made in a game of ``plies`` half-moves that ``first_mover``
    started: the first mover has made ``ceil(plies / 2)``, the other ``floor(plies / 2)``.

    >>> moves_played(81, first_mover=0)
    (41, 40)
    """
    if plies < 0:
        raise ValueError(f"plies cannot be negative: {plies}")
    counts = [plies // 2, plies // 2]
    counts[first_mover] += plies % 2
    return counts[0], counts[1]


def break_tie(
    cause: Termination,
    board: chess.Board,
    plies: int,
    first_mover: int,
    remaining_ms: Sequence[int],
) -> Outcome:
    """The contest outcome of the drawn position ``board`` reached by ``cause``.

    ``plies`` and ``first_mover`` describe the moves of this game; ``remaining_ms`` is each seat's clock
    as of the action that produced the position.
    """
    if cause not in TIEBREAK_CAUSES:
        raise ValueError(f"{cause} is not a drawn position the tiebreak decides")
    if len(remaining_ms) != 2:
        raise ValueError(f"expected two clocks, got {len(remaining_ms)}")
    what = CAUSE_NAMES[cause]
    white, black = material(board)
    if white != black:
        winner = 0 if white > black else 1
        return _win(
            cause,
            winner,
            "material",
            f"{what}; {COLOR_NAMES[winner]} wins the tiebreak on material, "
            f"{max(white, black)} to {min(white, black)}",
        )
    moves = moves_played(plies, first_mover)
    if moves[0] != moves[1]:
        winner = 0 if moves[0] < moves[1] else 1
        return _win(
            cause,
            winner,
            "moves",
            f"{what}; material is equal ({white} each) and {COLOR_NAMES[winner]} wins the tiebreak "
            f"having made fewer moves, {min(moves)} to {max(moves)}",
        )
    clocks = (remaining_ms[0], remaining_ms[1])
    if clocks[0] != clocks[1]:
        winner = 0 if clocks[0] > clocks[1] else 1
        return _win(
            cause,
            winner,
            "time",
            f"{what}; material ({white} each) and moves ({moves[0]} each) are equal and "
            f"{COLOR_NAMES[winner]} wins the tiebreak on time left, "
            f"{_seconds(max(clocks))} to {_seconds(min(clocks))}",
        )
    return _win(
        cause,
        seat_of(chess.WHITE),
        "white",
        f"{what}; material, moves and time left are all equal, so White wins the tiebreak",
    )


def _win(cause: Termination, winner: int, step: str, detail: str) -> Outcome:
    score = (1.0, 0.0) if winner == 0 else (0.0, 1.0)
    return Outcome(
        termination=Termination.TIEBREAK,
        winner=winner,
        cause=cause,
        tiebreak_step=step,
        detail=detail,
        score=score,
    )


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.3f} s"
