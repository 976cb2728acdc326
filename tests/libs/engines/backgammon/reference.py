"""An independent legal-play generator for the tests, written separately from ``libs/engines/backgammon``.

Deliberately simple and different: the absolute numbering with a direction per side, a plain list board,
brute force over every order of the dice and every checker for every die (only visited states are
skipped), every reachable prefix recorded, then the rules applied to the whole set (most dice used; the
higher die when only one of two different dice can be played), deduplicated by the resulting position.

Also random positions: from random games and from random placements.
"""

from __future__ import annotations

import itertools
import random

from libs.engines.backgammon import Position, legal_plays

WHITE, BLACK = 0, 1


def _mine(points: list[int], seat: int, point: int) -> int:
    value = points[point]
    return value if seat == WHITE and value > 0 else -value if seat == BLACK and value < 0 else 0


def _theirs(points: list[int], seat: int, point: int) -> int:
    return _mine(points, 1 - seat, point)


def _home(seat: int) -> range:
    return range(19, 25) if seat == WHITE else range(1, 7)


def _all_home(points: list[int], bar: list[int], seat: int) -> bool:
    if bar[seat]:
        return False
    return all(_mine(points, seat, p) == 0 for p in range(1, 25) if p not in _home(seat))


def _one_move(
    points: list[int], bar: list[int], off: list[int], seat: int, die: int
) -> list[tuple[list[int], list[int], list[int]]]:
    """Every state after moving one checker of ``seat`` by ``die``."""
    sign = 1 if seat == WHITE else -1
    results = []
    if bar[seat]:
        sources = [0 if seat == WHITE else 25]  # the bar, as a virtual point behind point 1 / 24
    else:
        sources = [p for p in range(1, 25) if _mine(points, seat, p)]
    for source in sources:
        target = source + sign * die
        new_points, new_bar, new_off = points.copy(), bar.copy(), off.copy()
        if 1 <= target <= 24:
            if _theirs(points, seat, target) >= 2:
                continue
            if source in (0, 25):
                new_bar[seat] -= 1
            else:
                new_points[source] -= sign
            if _theirs(points, seat, target) == 1:
                new_points[target] = 0
                new_bar[1 - seat] += 1
            new_points[target] += sign
        else:
            if source in (0, 25) or not _all_home(points, bar, seat):
                continue
            exact = target == (25 if seat == WHITE else 0)
            if not exact:
                # Overshooting: only from the point farthest from home among the mover's checkers.
                behind = range(19, source) if seat == WHITE else range(source + 1, 7)
                if any(_mine(points, seat, p) for p in behind):
                    continue
            new_points[source] -= sign
            new_off[seat] += 1
        results.append((new_points, new_bar, new_off))
    return results


def reference_results(position: Position, seat: int, dice: tuple[int, int]) -> set[Position]:
    """The positions a legal play of ``dice`` can lead to (empty: no legal play)."""
    first, second = dice
    orders = [(first,) * 4] if first == second else list(set(itertools.permutations(dice)))
    start = (list(position.points), list(position.bar), list(position.off))
    found: list[tuple[tuple[int, ...], Position]] = []
    seen: set[tuple[object, ...]] = set()

    def explore(
        state: tuple[list[int], list[int], list[int]], order: tuple[int, ...], used: tuple[int, ...]
    ) -> None:
        key = (tuple(state[0]), tuple(state[1]), tuple(state[2]), order, used)
        if key in seen:
            return
        seen.add(key)
        found.append(
            (used, Position(tuple(state[0]), (state[1][0], state[1][1]), (state[2][0], state[2][1])))
        )
        if len(used) == len(order):
            return
        die = order[len(used)]
        for after in _one_move(*state, seat, die):
            explore(after, order, (*used, die))

    for order in orders:
        explore(start, order, ())
    most = max(len(used) for used, _ in found)
    if most == 0:
        return set()
    chosen = [(used, result) for used, result in found if len(used) == most]
    if most == 1 and first != second:
        higher = [(used, result) for used, result in chosen if used[0] == max(dice)]
        chosen = higher or chosen
    return {result for _, result in chosen}


def random_game_positions(rng: random.Random, positions: int, start: Position) -> list[tuple[Position, int]]:
    """(position, seat to move) along random games from ``start``, random legal plays (our generator's),
    restarting when a game ends."""
    out: list[tuple[Position, int]] = []
    position, seat = start, rng.randrange(2)
    while len(out) < positions:
        out.append((position, seat))
        dice = (rng.randint(1, 6), rng.randint(1, 6))
        plays = legal_plays(position, seat, dice)
        if plays:
            position = rng.choice(plays).result
        if position.off[seat] == position.checkers(seat):
            position, seat = start, rng.randrange(2)
            continue
        seat = 1 - seat
    return out


def random_placement(rng: random.Random, checkers: int = 15) -> Position:
    """Checkers of both sides scattered at random over the points, the bar and off; often crowded into
    the home boards so that bear-offs and closed boards come up."""
    points = [0] * 25
    bar = [0, 0]
    off = [0, 0]
    for seat in (WHITE, BLACK):
        sign = 1 if seat == WHITE else -1
        home = list(_home(seat))
        style = rng.random()
        for _ in range(checkers):
            roll = rng.random()
            if roll < 0.05:
                bar[seat] += 1
                continue
            if roll < 0.15:
                off[seat] += 1
                continue
            for _attempt in range(20):
                point = rng.choice(home) if style < 0.4 else rng.randint(1, 24)
                if points[point] * sign >= 0:
                    points[point] += sign
                    break
            else:
                off[seat] += 1
    return Position(tuple(points), (bar[0], bar[1]), (off[0], off[1]))
