"""Legal plays against gnubg's own move generator (the ``gnubg`` package from PyPI, a dev-only
dependency): the 21 opening rolls, and random positions from random games (the number of plays always,
the resulting positions whenever the binding returns the plays whole).

gnubg's ``findbestmoves`` lists every legal play of a roll (one per resulting position) with its
evaluation; only the list is used here. Its board is two arrays of 25 (the opponent's, then the player on
roll's), each in that side's own numbering: index ``i`` is point ``i + 1``, index 24 the bar.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from libs.engines.backgammon import BLACK, WHITE, Position, Variant, absolute_point, legal_plays
from tests.libs.engines.backgammon.reference import random_game_positions

gnubg: Any = pytest.importorskip("gnubg")

ROLLS = [(high, low) for high in range(1, 7) for low in range(1, high + 1)]


def gnubg_board(position: Position, seat: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    def side(who: int) -> tuple[int, ...]:
        return (*(position.count(who, absolute_point(who, own)) for own in range(1, 25)), position.bar[who])

    return side(1 - seat), side(seat)


def gnubg_plays(position: Position, seat: int, dice: tuple[int, int]) -> list[tuple[int, ...]]:
    board = gnubg_board(position, seat)
    found = gnubg.findbestmoves(board, gnubg.cubeinfo(), gnubg.evalcontext(), dice)
    return [tuple(entry["move"]) for entry in found]


def gnubg_results(
    position: Position, seat: int, dice: tuple[int, int]
) -> set[tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """The positions gnubg's plays lead to, as gnubg boards of the mover (its ``from``/``to`` pairs in
    own numbering: 25 the bar, 0 off), or None when the binding cut a play short: it ends each move
    tuple at the first 0, so a play with a bear-off before its last move comes back truncated (always to
    an odd length)."""
    results = set()
    plays = gnubg_plays(position, seat, dice)
    if any(len(move) % 2 for move in plays):
        return None
    for move in plays:
        theirs, mine = (list(half) for half in gnubg_board(position, seat))
        for start, end in zip(move[0::2], move[1::2], strict=True):
            if start < 0:
                break  # unused slots
            mine[start - 1] -= 1
            if end > 0:
                mine[end - 1] += 1
                if theirs[24 - end] == 1:  # the opponent's own point 25 - end
                    theirs[24 - end] = 0
                    theirs[24] += 1
        results.add((tuple(theirs), tuple(mine)))
    return results


@pytest.mark.parametrize("dice", ROLLS)
def test_opening_counts_match_gnubg(dice: tuple[int, int]) -> None:
    start = Position.start(Variant.STANDARD)
    for seat in (WHITE, BLACK):
        assert len(legal_plays(start, seat, dice)) == len(gnubg_plays(start, seat, dice))


def test_random_positions_match_gnubg() -> None:
    rng = random.Random(7)
    compared = 0
    for position, seat in random_game_positions(rng, 1500, Position.start(Variant.STANDARD)):
        if position.off[0] == 15 or position.off[1] == 15:
            continue
        dice = (rng.randint(1, 6), rng.randint(1, 6))
        plays = legal_plays(position, seat, dice)
        assert len(plays) == len(gnubg_plays(position, seat, dice)), (position, seat, dice)
        theirs = gnubg_results(position, seat, dice)
        if theirs is not None:
            assert {gnubg_board(play.result, seat) for play in plays} == theirs, (position, seat, dice)
            compared += 1
    assert compared > 1000
