"""Legal plays: every distinct position a roll can lead to, with its checker moves and notation.

The generator works on the mover's own numbering with a plain list ``b`` of 26 ints: ``b[0]`` the
mover's checkers off, ``b[1..24]`` the points (the mover's checkers positive, the opponent's negative),
``b[25]`` the mover's bar. It is the hottest operation of the family, so:

- doubles are generated as multisets: the starts of the up to four moves never increase (the bar, 25,
  first). Every legal multiset of moves of one die can be played in that order (moving the rearmost
  checker first never blocks a later move of that die, and is the order that allows most bear-offs), and
  different multisets give different positions, so no position is generated twice;
- two different dice are tried in both orders, deduplicated by the resulting board;
- results are cached (positions are immutable; the engine lists, checks and shows the same roll several
  times).

See ``docs/backgammon.md`` ("Legal plays") for the rules as implemented.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import neg

from libs.engines.backgammon.board import SEATS, WHITE, Position, pip_count
from libs.engines.backgammon.notation import _canonical

_Step = tuple[int, int, bool]
"""(start, end, hit) in own numbering: one checker moved by one die."""


@dataclass(frozen=True, slots=True)
class Move:
    """One checker moving by one die, in the mover's own numbering."""

    start: int
    """25 = the bar, else 1..24."""
    end: int
    """0 = off, else 1..24."""
    hit: bool
    """An opponent's blot on ``end`` went to the bar."""

    def __str__(self) -> str:
        start = "bar" if self.start == 25 else str(self.start)
        end = "off" if self.end == 0 else str(self.end)
        return f"{start}/{end}{'*' if self.hit else ''}"


@dataclass(frozen=True, slots=True)
class Play:
    """One legal way to play a roll."""

    moves: tuple[Move, ...]
    """In the order they were played, one per die used."""
    notation: str
    """The canonical notation (docs/backgammon.md)."""
    result: Position
    """The position after the play."""
    dice_used: tuple[int, ...]
    """The die of each move, in order."""


_MOVES: dict[_Step, Move] = {
    (s, e, h): Move(s, e, h) for s in range(1, 26) for e in range(0, 25) if e < s for h in (False, True)
}


def _own_board(position: Position, seat: int) -> list[int]:
    points = position.points
    if seat == WHITE:
        board = [position.off[0], *points[24:0:-1], position.bar[0]]
    else:
        board = [position.off[1], *[-n for n in points[1:25]], position.bar[1]]
    return board


def _single_steps(b: list[int], die: int, outside: int, top: int) -> list[_Step]:
    """Every legal move of one checker by ``die`` starting at own point ``top`` or lower (the bar only,
    if the mover has a checker there). ``outside``: the mover's checkers on 7..25."""
    steps: list[_Step] = []
    if b[25]:
        target = b[25 - die]
        if target >= -1:
            steps.append((25, 25 - die, target == -1))
        return steps
    if top > 24:
        top = 24
    # Ordinary moves land on 1..24.
    for s in range(top, die, -1):
        if b[s] > 0:
            target = b[s - die]
            if target >= -1:
                steps.append((s, s - die, target == -1))
    if outside == 0:
        if die <= top and b[die] > 0:
            steps.append((die, 0, False))
        else:
            # The higher-point rule: a die above the highest occupied point bears off from that point.
            for s in range(6, 0, -1):
                if b[s] > 0:
                    if s < die and s <= top:
                        steps.append((s, 0, False))
                    break
    return steps


def _apply(b: list[int], step: _Step) -> list[int]:
    s, e, hit = step
    nb = b.copy()
    nb[s] -= 1
    if hit:
        nb[e] = 1
    else:
        nb[e] += 1  # e == 0 counts a checker off
    return nb


def _outside(b: list[int]) -> int:
    return sum(n for n in b[7:26] if n > 0)


_Leaf = tuple[tuple[_Step, ...], list[int], tuple[int, ...]]
"""The steps of a play, the final own board, the dice in the order used."""


def _doubles(b: list[int], die: int) -> list[_Leaf]:
    """The plays of a double: as many moves as possible, up to four, each multiset of moves once."""
    leaves: list[_Leaf] = []
    best = 0

    def walk(board: list[int], outside: int, top: int, depth: int, done: tuple[_Step, ...]) -> None:
        nonlocal best
        if depth < 4:
            steps = _single_steps(board, die, outside, top)
            if steps:
                for step in steps:
                    s, e, _ = step
                    left = outside - 1 if s >= 7 and e <= 6 else outside
                    walk(_apply(board, step), left, s, depth + 1, (*done, step))
                return
        if depth > best:
            best = depth
            leaves.clear()
        if depth == best and depth:
            leaves.append((done, board, (die,) * depth))

    walk(b, _outside(b), 25, 0, ())
    return leaves


def _two_dice(b: list[int], high: int, low: int) -> list[_Leaf]:
    """The plays of two different dice (both if possible, else the higher if possible, else the lower)."""
    outside = _outside(b)
    both: dict[tuple[int, ...], _Leaf] = {}
    singles: dict[int, dict[tuple[int, ...], _Leaf]] = {high: {}, low: {}}
    for first, second in ((high, low), (low, high)):
        for step in _single_steps(b, first, outside, 25):
            board = _apply(b, step)
            s, e, _ = step
            left = outside - 1 if s >= 7 and e <= 6 else outside
            seconds = _single_steps(board, second, left, 25)
            if seconds:
                for step2 in seconds:
                    after = _apply(board, step2)
                    key = tuple(after)
                    if key not in both:
                        both[key] = ((step, step2), after, (first, second))
            elif not both:
                key = tuple(board)
                if key not in singles[first]:
                    singles[first][key] = ((step,), board, (first,))
    if both:
        return list(both.values())
    return list(singles[high].values() or singles[low].values())


def _generate(position: Position, seat: int, high: int, low: int) -> tuple[Play, ...]:
    b = _own_board(position, seat)
    leaves = _doubles(b, high) if high == low else _two_dice(b, high, low)
    if not leaves:
        return ()
    # The hot loop of the family: locals only, no helper calls per play.
    moves_of, canonical, make_play, make_position = _MOVES, _canonical, Play, Position
    bar_white, bar_black = position.bar
    off_white, off_black = position.off
    white = seat == WHITE
    plays: list[Play] = []
    append = plays.append
    for steps, board, used in leaves:
        hits = 0
        moves = []
        for step in steps:
            moves.append(moves_of[step])
            if step[2]:
                hits += 1
        if white:
            result = make_position((0, *board[24:0:-1]), (board[25], bar_black + hits), (board[0], off_black))
        else:
            result = make_position(
                (0, *map(neg, board[1:25])), (bar_white + hits, board[25]), (off_white, board[0])
            )
        append(make_play(tuple(moves), canonical(steps), result, used))
    plays.sort(key=_by_notation)
    return tuple(plays)


def _by_notation(play: Play) -> str:
    return play.notation


def _fastest_generator() -> Callable[[Position, int, int, int], tuple[Play, ...]]:
    """The C generator (``_native.c``, through ``native.py``) when it was built, else :func:`_generate`:
    the same plays in the same order (``tests/libs/engines/backgammon/test_native.py``), about ten times
    faster (docs/backgammon.md, "Legal plays")."""
    from libs.engines.backgammon import native  # it reads this module's Move, Play and _MOVES

    return native.generate if native.available else _generate


_cached = lru_cache(maxsize=512)(_fastest_generator())
"""About 5 MB when full with typical positions (about 19 plays each); a turn lists, checks and shows its
roll within moments, so recent entries are what matter."""


def legal_plays(position: Position, seat: int, dice: tuple[int, int]) -> tuple[Play, ...]:
    """Every legal play of ``dice`` by ``seat``, one per distinct resulting position, sorted by
    notation; ``()`` when none is legal (the turn is forfeited)."""
    if seat not in SEATS:
        raise ValueError(f"seat must be 0 (White) or 1 (Black), not {seat!r}")
    first, second = dice
    if not (1 <= first <= 6 and 1 <= second <= 6):
        raise ValueError(f"dice must be 1..6, not {dice!r}")
    return _cached(position, seat, max(first, second), min(first, second))


def best_bearoff(plays: Sequence[Play], seat: int) -> Play | None:
    """The play bearing off the most checkers; ties: the lowest pip count left, then the first by
    notation. ``None`` if no play bears a checker off."""
    best: tuple[int, int, str] | None = None
    chosen: Play | None = None
    for play in plays:
        off = sum(1 for move in play.moves if move.end == 0)
        if not off:
            continue
        key = (-off, pip_count(play.result, seat), play.notation)
        if best is None or key < best:
            best, chosen = key, play
    return chosen
