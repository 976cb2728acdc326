"""A skirmish duel: moves played from a start position until it ends.

Ends, checked in this order after every move:

1. the move captured a king: the mover wins (:attr:`DuelEnd.KING_CAPTURED`);
2. the position (board and side to move) has now occurred three times, the start counted: a draw
   (:attr:`DuelEnd.REPETITION`);
3. :data:`MAX_PLIES` (16) plies have been played: a draw (:attr:`DuelEnd.PLY_LIMIT`);
4. the side to move has no legal move: a draw (:attr:`DuelEnd.NO_MOVES`).

A duel whose first mover has no legal move is drawn at once (:func:`new_duel`). Running out of skirmish
time (:func:`time_out`, called by whoever keeps the skirmish clocks) loses the duel
(:attr:`DuelEnd.TIMEOUT`).

Repetition bookkeeping: :attr:`Duel.seen` counts each position since the last capture or pawn move. A
capture or a pawn move can never be undone (pieces are never added back, pawns never step back), so
no position before it can occur again and the counts start afresh; a duel holds at most a few entries.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from libs.engines.base import GameOverError, IllegalActionError, MalformedActionError
from libs.engines.skirmish.board import EMPTY, NAMES, SQUARES, Position, side_name
from libs.engines.skirmish.moves import (
    Move,
    _apply,
    _has_move,
    _reason,
    legal_moves,
    parse_move,
    san,
)

MAX_PLIES = 16
"""The hard cap: a duel that reaches this many plies without another end is a draw."""


class DuelEnd(StrEnum):
    """Why a duel ended."""

    KING_CAPTURED = "king_captured"
    NO_MOVES = "no_moves"
    REPETITION = "repetition"
    PLY_LIMIT = "ply_limit"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True)
class DuelResult:
    """The end of a duel: the winner (``True`` skirmish White, the attacker; ``False`` skirmish Black,
    the defender; ``None`` a draw) and why."""

    winner: bool | None
    end: DuelEnd

    @property
    def detail(self) -> str:
        """A sentence for players, e.g. ``"White captured Black's king"``."""
        if self.end is DuelEnd.KING_CAPTURED:
            assert self.winner is not None
            return f"{side_name(self.winner)} captured {side_name(not self.winner)}'s king"
        if self.end is DuelEnd.TIMEOUT:
            assert self.winner is not None
            return f"{side_name(not self.winner)} ran out of skirmish time"
        if self.end is DuelEnd.REPETITION:
            return "drawn by threefold repetition"
        if self.end is DuelEnd.PLY_LIMIT:
            return f"drawn: {MAX_PLIES} plies played"
        return "drawn: the side to move has no legal move"


@dataclass(frozen=True, slots=True)
class Duel:
    """A duel in progress or over. Made by :func:`new_duel`, advanced by :func:`play` and
    :func:`time_out`; never changed in place."""

    position: Position
    ply: int = 0
    """Plies played so far."""
    moves_san: tuple[str, ...] = ()
    moves_uci: tuple[str, ...] = ()
    seen: tuple[tuple[str, int], ...] = ()
    """Repetition counts: (:attr:`Position.key`, occurrences) of each position since the last capture
    or pawn move (see the module docstring)."""
    result: DuelResult | None = None
    start: Position | None = None
    """The position the duel started from (``None`` only for a duel made by hand)."""

    @property
    def legal(self) -> tuple[Move, ...]:
        """The moves the side to move may play, sorted by UCI; empty once the duel is over."""
        if self.result is not None:
            return ()
        return legal_moves(self.position)

    @property
    def over(self) -> bool:
        return self.result is not None

    @property
    def white_to_move(self) -> bool:
        """Whether skirmish White (the attacker) is to move (also once over: who would be)."""
        return self.position.white_to_move


def new_duel(position: Position) -> Duel:
    """A duel starting from ``position`` (normally White to move). If the side to move has no legal
    move, the duel is drawn at once (:attr:`DuelEnd.NO_MOVES`).

    :raises ValueError: the position does not have exactly one king of each side.
    """
    board = position.board
    if len(board) != SQUARES or board.count("K") != 1 or board.count("k") != 1:
        raise ValueError(f"a skirmish needs a 5x5 board with one king of each side, not {position.fen()!r}")
    result = None
    if not _has_move(board, position.white_to_move):
        result = DuelResult(None, DuelEnd.NO_MOVES)
    return Duel(position, seen=((position.key, 1),), result=result, start=position)


def _over(duel: Duel) -> GameOverError:
    assert duel.result is not None
    return GameOverError(f"the skirmish is over ({duel.result.detail}): no move can be played")


def play(duel: Duel, move: Move | str) -> Duel:
    """The duel after the side to move plays ``move`` (a :class:`Move`, or text that
    :func:`~libs.engines.skirmish.moves.parse_move` reads), with its SAN and UCI recorded and the duel
    ended if the move ends it (see the module docstring for the order of the checks).

    :raises MalformedActionError: the move cannot be read.
    :raises IllegalActionError: the move is not legal here (the message says why); a
        :class:`~libs.engines.base.GameOverError` when the duel is over.
    """
    if duel.result is not None:
        raise _over(duel)
    position = duel.position
    if isinstance(move, str):
        chosen = parse_move(position, move)
    elif isinstance(move, Move):
        if not (0 <= move.from_sq < SQUARES and 0 <= move.to_sq < SQUARES):
            raise MalformedActionError(f"{move!r} is not a skirmish move: squares are 0 (a1) to 24 (e5)")
        reason = _reason(position.board, position.white_to_move, move.from_sq, move.to_sq)
        if reason is not None:
            raise IllegalActionError(f"{move.uci} is not a legal skirmish move: {reason}")
        chosen = move
    else:
        raise MalformedActionError(f"{move!r} is not a skirmish move: write it like b2b3 or Nc3")
    board = position.board
    white = position.white_to_move
    from_sq, to_sq = chosen.from_sq, chosen.to_sq
    captured = board[to_sq]
    after = Position(_apply(board, from_sq, to_sq), not white)
    key = after.key
    if captured != EMPTY or board[from_sq] in "Pp":
        seen: tuple[tuple[str, int], ...] = ((key, 1),)
        count = 1
    else:
        count = 1
        entries = []
        for entry in duel.seen:
            if entry[0] == key:
                count = entry[1] + 1
            else:
                entries.append(entry)
        entries.append((key, count))
        seen = tuple(entries)
    ply = duel.ply + 1
    result = None
    if captured in "Kk":
        result = DuelResult(white, DuelEnd.KING_CAPTURED)
    elif count >= 3:
        result = DuelResult(None, DuelEnd.REPETITION)
    elif ply >= MAX_PLIES:
        result = DuelResult(None, DuelEnd.PLY_LIMIT)
    elif not _has_move(after.board, not white):
        result = DuelResult(None, DuelEnd.NO_MOVES)
    return Duel(
        after,
        ply,
        (*duel.moves_san, san(position, chosen)),
        (*duel.moves_uci, NAMES[from_sq] + NAMES[to_sq]),
        seen,
        result,
        duel.start,
    )


def time_out(duel: Duel) -> Duel:
    """The duel after the side to move ran out of skirmish time: the other side wins
    (:attr:`DuelEnd.TIMEOUT`).

    :raises GameOverError: the duel is already over.
    """
    if duel.result is not None:
        raise _over(duel)
    return replace(duel, result=DuelResult(not duel.position.white_to_move, DuelEnd.TIMEOUT))


def replay(position: Position, moves: tuple[str, ...] | list[str]) -> Duel:
    """The duel from ``position`` after ``moves`` (UCI or SAN text), each checked as :func:`play` does."""
    duel = new_duel(position)
    for move in moves:
        duel = play(duel, move)
    return duel
