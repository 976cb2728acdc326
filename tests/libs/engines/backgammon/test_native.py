"""The C legal-play generator (``_native.c`` through ``native.generate``, and ``native.decode`` of
``native.raw_plays``) against the Python one (``moves._generate``): whole ``Play`` equality (moves,
notation, result, dice used) and the same order,
on the openings of every variant, positions from random games with every roll and with random rolls, random
placements, and hand-made edge cases."""

from __future__ import annotations

import dataclasses
import pickle
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from libs.engines.backgammon import BLACK, WHITE, Play, Position, Variant, native
from libs.engines.backgammon.moves import _generate, _own_board
from tests.libs.engines.backgammon.reference import random_game_positions, random_placement

if not native.available:
    pytest.skip(
        "the C generator is not built: .venv/bin/python setup.py build_ext --inplace",
        allow_module_level=True,
    )

ROLLS = [(high, low) for high in range(1, 7) for low in range(1, high + 1)]

SPREAD = Position.from_counts({1: 1, 2: 1, 3: 1, 4: 1, 24: 11}, {p: 1 for p in range(6, 21)})
"""benchmarks/backgammon.py's: Black's fifteen checkers one per point from 20 down to 6 (1,654 plays
with 1-1, 1,733 with 2-2)."""


def check(position: Position, seat: int, high: int, low: int) -> int:
    """The two generators agree; the number of plays."""
    expected = _generate(position, seat, high, low)
    got = native.generate(position, seat, high, low)
    assert got == expected, (position, seat, high, low)
    assert native.decode(position, seat, native.raw_plays(position, seat, high, low)) == expected
    return len(got)


def black(layout: dict[int, int], white: dict[int, int] | None = None, **kwargs: object) -> Position:
    """A position from Black's side (Black's own numbering is the absolute one)."""
    return Position.from_counts(white or {}, layout, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("variant", list(Variant))
def test_openings(variant: Variant) -> None:
    for seat in (WHITE, BLACK):
        for high, low in ROLLS:
            assert check(Position.start(variant), seat, high, low)


def test_random_games_every_roll() -> None:
    rng = random.Random(2024)
    positions = 0
    for variant, count in ((Variant.STANDARD, 300), (Variant.NACKGAMMON, 100), (Variant.HYPERGAMMON, 100)):
        for position, seat in random_game_positions(rng, count, Position.start(variant)):
            for high, low in ROLLS:
                check(position, seat, high, low)
            positions += 1
    assert positions == 500  # 10,500 position-rolls


def test_random_games_random_rolls() -> None:
    rng = random.Random(77)
    cases = random_game_positions(rng, 6_000, Position.start(Variant.STANDARD))
    for position, seat in cases:
        first, second = rng.randint(1, 6), rng.randint(1, 6)
        check(position, seat, max(first, second), min(first, second))


def test_random_placements() -> None:
    """Scattered checkers: bear-offs, closed boards, several on the bar, blots everywhere."""
    rng = random.Random(5)
    for _ in range(1_000):
        position = random_placement(rng, rng.choice([15, 15, 3]))
        seat = rng.randrange(2)
        for high, low in rng.sample(ROLLS, 4):
            check(position, seat, high, low)


def test_worst_doubles() -> None:
    assert check(SPREAD, BLACK, 1, 1) == 1_654
    assert check(SPREAD, BLACK, 2, 2) == 1_733
    for high, low in ROLLS:
        check(SPREAD, BLACK, high, low)


CLOSED = {p: 2 for p in range(19, 25)}
"""White's six points closing Black's entry (Black's own 19..24)."""


@pytest.mark.parametrize(
    ("position", "rolls"),
    [
        # A closed board with a checker on the bar: nothing at all.
        (black({13: 14}, CLOSED, bar=(0, 1)), ROLLS),
        # Two on the bar, one entry point open, others behind.
        (black({13: 13}, {p: 2 for p in range(20, 25)}, bar=(0, 2)), ROLLS),
        # One on the bar and a blot on the entry points: enter with a hit, continue.
        (black({13: 14}, {20: 1, 22: 1, 1: 13}, bar=(0, 1)), ROLLS),
        # Bear-offs: exact, the higher-point rule, moves inside the board, a checker coming home first.
        (black({5: 2, 3: 3, 2: 4}, {24: 15}), ROLLS),
        (black({7: 1, 2: 3, 1: 2}, {24: 15}), ROLLS),
        (black({6: 1, 1: 1}, {24: 15}), ROLLS),
        (black({1: 1}, {24: 15}), ROLLS),
        (black({4: 4, 2: 1}, {3: 2, 24: 13}), ROLLS),
        # Only one die playable (then the higher), only the lower, doubles one to three moves.
        (black({24: 1, 1: 14}, {18: 2, 17: 2, 16: 2, 15: 2, 14: 2, 13: 2}), ROLLS),
        (black({13: 1, 1: 14}, {7: 2, 8: 2, 9: 2, 10: 2, 11: 2}), ROLLS),
        (black({24: 2, 1: 13}, {22: 2, 20: 2, 16: 2, 18: 2}), ROLLS),
        # Hits along a path (13/10*/7), several blots, doubles hitting twice.
        (black({13: 3, 24: 2, 6: 5, 8: 5}, {10: 1, 7: 1, 4: 1, 1: 1, 16: 11}), ROLLS),
        (black({20: 2, 13: 13}, {18: 1, 16: 1, 14: 1, 12: 1, 10: 1, 3: 10}), ROLLS),
    ],
)
def test_edge_cases(position: Position, rolls: list[tuple[int, int]]) -> None:
    for seat in (WHITE, BLACK):
        for high, low in rolls:
            check(position, seat, high, low)


def test_edge_cases_are_what_they_say() -> None:
    closed = black({13: 14}, CLOSED, bar=(0, 1))
    assert all(not _generate(closed, BLACK, high, low) for high, low in ROLLS)
    assert native.generate(closed, BLACK, 6, 5) == ()
    blots = black({13: 15}, {10: 1, 7: 1, 4: 1, 1: 1, 20: 11})
    assert "13/10*/7*/4*/1*" in [play.notation for play in native.generate(blots, BLACK, 3, 3)]
    path = black({13: 15}, {10: 1, 5: 1, 20: 13})
    assert [play.notation for play in native.generate(path, BLACK, 5, 3)] == [
        "13/10* 13/8",
        "13/10*/5*",
        "13/5*",
    ]
    bearoff = black({4: 4, 2: 1}, {3: 2, 24: 13})
    assert [play.notation for play in native.generate(bearoff, BLACK, 6, 5)] == ["4/off(2)"]


def test_raw_entries() -> None:
    """The C entries: notation, 4 bytes a move (start, end, hit, die), the own board after."""
    position = Position.start(Variant.STANDARD)
    entries = native.raw_plays(position, BLACK, 6, 5)
    assert [notation for notation, _, _ in entries] == [
        play.notation for play in _generate(position, BLACK, 6, 5)
    ]
    _, steps, after = next(entry for entry in entries if entry[0] == "24/13")
    assert steps == bytes([24, 18, 0, 6, 18, 13, 0, 5])
    board = _own_board(position, BLACK)
    board[24] -= 1
    board[13] += 1
    assert list(memoryview(after).cast("b")) == board


def test_bad_arguments() -> None:
    from libs.engines.backgammon import _native

    plays: Any = _native.plays  # called wrongly on purpose
    board = _own_board(Position.start(Variant.STANDARD), BLACK)
    with pytest.raises(ValueError, match="dice"):
        plays(board, 3, 4)
    with pytest.raises(ValueError, match="dice"):
        plays(board, 7, 1)
    with pytest.raises(ValueError, match="26"):
        plays(board[:25], 3, 1)
    with pytest.raises(ValueError, match="26"):
        plays(bytes(25), 3, 1)
    with pytest.raises(TypeError):
        plays(board, 3)
    with pytest.raises(TypeError):
        plays(42, 3, 1)
    with pytest.raises(TypeError):
        plays([*board[:25], "x"], 3, 1)
    assert plays(bytes(board[i] & 0xFF for i in range(26)), 6, 5) == plays(board, 6, 5)
    assert plays(tuple(board), 6, 5) == plays(board, 6, 5)


def test_play_objects_are_ordinary_plays() -> None:
    """Built in C without ``__init__``: still equal, hashable, picklable, frozen."""
    got = native.generate(SPREAD, BLACK, 2, 2)
    expected = _generate(SPREAD, BLACK, 2, 2)
    assert [hash(play) for play in got] == [hash(play) for play in expected]
    assert pickle.loads(pickle.dumps(got)) == expected
    assert repr(got) == repr(expected)
    assert all(type(n) is int for n in got[0].result.points)
    with pytest.raises(dataclasses.FrozenInstanceError):
        got[0].notation = "x"  # type: ignore[misc]


def test_play_objects_bad_arguments() -> None:
    from libs.engines.backgammon import _native

    play_objects: Any = _native.play_objects  # called wrongly on purpose
    board = _own_board(Position.start(Variant.STANDARD), BLACK)
    kinds = native._KINDS
    with pytest.raises(TypeError, match="kinds"):
        play_objects(board, 6, 5, False, 0, 0, kinds[:2])
    with pytest.raises(TypeError, match="move table"):
        play_objects(board, 6, 5, False, 0, 0, (*kinds[:2], kinds[2][:5]))
    with pytest.raises(AttributeError):
        play_objects(board, 6, 5, False, 0, 0, (Position, Play, kinds[2]))

    class Plain:
        moves = notation = result = dice_used = None

    with pytest.raises(TypeError, match="not a slot"):
        play_objects(board, 6, 5, False, 0, 0, (Plain, Position, kinds[2]))
    with pytest.raises(ValueError, match="opponent"):
        play_objects(board, 6, 5, False, -1, 0, kinds)
    with pytest.raises(ValueError, match="dice"):
        play_objects(board, 5, 6, False, 0, 0, kinds)
    with pytest.raises(TypeError):
        play_objects(board, 6, 5, False, 0, 0)


def test_threads() -> None:
    """No shared state: threads listing plays at once get the same answers (the search runs without the
    GIL)."""
    cases = [
        (position, seat, die)
        for position, seat in random_game_positions(random.Random(3), 60, Position.start(Variant.STANDARD))
        for die in (1, 2)
    ]
    cases.append((SPREAD, BLACK, 2))
    expected = [_generate(position, seat, die, die) for position, seat, die in cases]

    def run() -> bool:
        return all(
            native.generate(position, seat, die, die) == want
            for _ in range(5)
            for (position, seat, die), want in zip(cases, expected, strict=True)
        )

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(lambda _: run(), range(8)))


def test_the_classes_play_objects_fills() -> None:
    """``_native.play_objects`` fills these slots without calling ``__init__``: a new field, a
    ``__post_init__`` or a validation in ``Play`` or ``Position`` must be reflected there."""
    assert [field.name for field in dataclasses.fields(Play)] == ["moves", "notation", "result", "dice_used"]
    assert [field.name for field in dataclasses.fields(Position)] == ["points", "bar", "off"]
    assert not hasattr(Play, "__post_init__")
    assert not hasattr(Position, "__post_init__")
