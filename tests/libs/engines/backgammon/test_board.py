"""The board: start positions, numbering, pip counts, contact, home, game values, JSON."""

from __future__ import annotations

import pytest

from libs.engines.backgammon import (
    BLACK,
    WHITE,
    Position,
    Variant,
    absolute_point,
    all_home,
    game_value,
    has_contact,
    own_point,
    pip_count,
)


def own_layout(position: Position, seat: int) -> dict[int, int]:
    return {
        own: position.count(seat, absolute_point(seat, own))
        for own in range(1, 25)
        if position.count(seat, absolute_point(seat, own))
    }


@pytest.mark.parametrize(
    ("variant", "layout", "checkers", "pips"),
    [
        (Variant.STANDARD, {24: 2, 13: 5, 8: 3, 6: 5}, 15, 167),
        (Variant.NACKGAMMON, {24: 2, 23: 2, 13: 4, 8: 3, 6: 4}, 15, 194),
        (Variant.HYPERGAMMON, {24: 1, 23: 1, 22: 1}, 3, 69),
    ],
)
def test_start_positions(variant: Variant, layout: dict[int, int], checkers: int, pips: int) -> None:
    position = Position.start(variant)
    for seat in (WHITE, BLACK):
        assert own_layout(position, seat) == layout
        assert position.checkers(seat) == checkers == variant.checkers
        assert pip_count(position, seat) == pips
        assert not all_home(position, seat)
    assert position.bar == position.off == (0, 0)
    assert position.points[0] == 0
    assert len(position.points) == 25
    assert has_contact(position)


def test_standard_start_in_absolute_points() -> None:
    position = Position.start(Variant.STANDARD)
    # White (positive) moves 1 -> 24: two on 1, five on 12, three on 17, five on 19.
    assert {p: n for p, n in enumerate(position.points) if n > 0} == {1: 2, 12: 5, 17: 3, 19: 5}
    assert {p: -n for p, n in enumerate(position.points) if n < 0} == {24: 2, 13: 5, 8: 3, 6: 5}


def test_hypergammon_checkers_stand_in_the_opponents_home_board() -> None:
    position = Position.start(Variant.HYPERGAMMON)
    assert {p: n for p, n in enumerate(position.points) if n} == {1: 1, 2: 1, 3: 1, 22: -1, 23: -1, 24: -1}


def test_numbering() -> None:
    assert own_point(BLACK, 6) == 6
    assert absolute_point(BLACK, 6) == 6
    assert own_point(WHITE, 19) == 6
    assert absolute_point(WHITE, 6) == 19
    assert own_point(WHITE, 1) == 24
    for seat in (WHITE, BLACK):
        for point in range(0, 26):
            assert own_point(seat, absolute_point(seat, point)) == point
    with pytest.raises(ValueError, match="seat"):
        own_point(2, 3)


def test_pip_count_counts_the_bar_as_25() -> None:
    position = Position.from_counts({19: 14}, {6: 15}, bar=(1, 0))
    assert pip_count(position, WHITE) == 14 * 6 + 25
    assert pip_count(position, BLACK) == 90


def test_contact() -> None:
    race = Position.from_counts({20: 15}, {10: 15})
    assert not has_contact(race)
    assert has_contact(Position.from_counts({9: 15}, {10: 15}))
    assert not has_contact(Position.from_counts({11: 15}, {10: 15}))
    # Passed each other but a checker on the bar re-enters behind the other side.
    assert has_contact(Position.from_counts({20: 14}, {10: 15}, bar=(1, 0)))
    assert has_contact(Position.from_counts({20: 14, 2: 1}, {10: 15}))
    assert not has_contact(Position.from_counts({}, {10: 15}, off=(15, 0)))


def test_all_home() -> None:
    assert all_home(Position.from_counts({19: 5}, {1: 15}), WHITE)
    assert all_home(Position.from_counts({19: 5}, {1: 15}), BLACK)
    assert not all_home(Position.from_counts({18: 1, 19: 4}, {1: 15}), WHITE)
    assert not all_home(Position.from_counts({19: 4}, {7: 1, 1: 14}), BLACK)
    assert not all_home(Position.from_counts({19: 4}, {1: 14}, bar=(0, 1)), BLACK)


def test_game_values() -> None:
    # White has borne everything off.
    single = Position.from_counts({}, {1: 14}, off=(15, 1))
    gammon = Position.from_counts({}, {1: 10, 7: 5})
    backgammon_home = Position.from_counts({}, {1: 14, 20: 1})
    backgammon_bar = Position.from_counts({}, {1: 14}, bar=(0, 1))
    assert game_value(single, WHITE) == 1
    assert game_value(gammon, WHITE) == 2
    assert game_value(backgammon_home, WHITE) == 3
    assert game_value(backgammon_bar, WHITE) == 3
    # Black has borne everything off; White's checkers on 1-6 are in Black's home board.
    assert game_value(Position.from_counts({6: 1, 19: 14}, {}), BLACK) == 3
    assert game_value(Position.from_counts({7: 1, 19: 14}, {}), BLACK) == 2
    assert game_value(Position.from_counts({19: 14}, {}, off=(1, 15)), BLACK) == 1


def test_json_round_trip() -> None:
    position = Position.from_counts({1: 2, 19: 10}, {6: 5, 8: 3}, bar=(1, 2))
    assert Position.from_json(position.to_json()) == position
    for variant in Variant:
        assert Position.from_json(Position.start(variant).to_json()) == Position.start(variant)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"points": [0] * 24, "bar": [0, 0], "off": [15, 15]},
        {"points": [0] * 25, "bar": [0], "off": [15, 15]},
        {"points": [0] * 25, "bar": [0, 0], "off": [15, 14]},
        {"points": [0] * 25, "bar": [0, -1], "off": [15, 16]},
        {"points": [1] + [0] * 24, "bar": [0, 0], "off": [15, 15]},
    ],
)
def test_from_json_refuses_bad_data(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"."):
        Position.from_json(data)


def test_from_counts_checks() -> None:
    with pytest.raises(ValueError, match="both sides"):
        Position.from_counts({5: 1}, {5: 1})
    with pytest.raises(ValueError, match="15 checkers"):
        Position.from_counts({5: 1}, {6: 1}, off=(0, 0))
