"""Legal plays: the opening rolls, hand-made positions for every rule, and random positions checked
against the independent generator of ``reference.py``."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libs.engines.backgammon import (
    BLACK,
    WHITE,
    Play,
    Position,
    Variant,
    absolute_point,
    best_bearoff,
    legal_plays,
    parse_play,
    pip_count,
)
from tests.libs.engines.backgammon.reference import random_game_positions, random_placement, reference_results

ROLLS = [(high, low) for high in range(1, 7) for low in range(1, high + 1)]

OPENING_COUNTS = {
    (1, 1): 42, (2, 1): 15, (2, 2): 75, (3, 1): 16, (3, 2): 17, (3, 3): 73, (4, 1): 14,
    (4, 2): 18, (4, 3): 17, (4, 4): 52, (5, 1): 8, (5, 2): 8, (5, 3): 9, (5, 4): 9,
    (5, 5): 4, (6, 1): 10, (6, 2): 14, (6, 3): 14, (6, 4): 14, (6, 5): 7, (6, 6): 11,
}  # fmt: skip
"""Distinct legal plays from the standard start for the player on roll. Equal to the reference
generator's counts and to gnubg 1.1.0a16's ``findbestmoves`` (test_gnubg.py); 6-5, 5-5 and 6-6 are also
checked by hand below."""


def notations(position: Position, seat: int, dice: tuple[int, int]) -> list[str]:
    return [play.notation for play in legal_plays(position, seat, dice)]


def black(layout: dict[int, int], white: dict[int, int] | None = None, **kwargs: object) -> Position:
    """A position from Black's side (Black's own numbering is the absolute one)."""
    return Position.from_counts(white or {}, layout, **kwargs)  # type: ignore[arg-type]


def replay(position: Position, seat: int, play: Play) -> Position:
    """Apply a play's moves one by one (own numbering), independently of the generator."""
    points = list(position.points)
    bar, off = list(position.bar), list(position.off)
    sign = 1 if seat == WHITE else -1
    for move in play.moves:
        if move.start == 25:
            assert bar[seat] > 0
            bar[seat] -= 1
        else:
            source = absolute_point(seat, move.start)
            assert points[source] * sign > 0
            points[source] -= sign
        if move.end == 0:
            off[seat] += 1
            continue
        target = absolute_point(seat, move.end)
        assert move.hit == (points[target] == -sign)
        if move.hit:
            points[target] = 0
            bar[1 - seat] += 1
        assert points[target] * sign >= 0
        points[target] += sign
    return Position(tuple(points), (bar[0], bar[1]), (off[0], off[1]))


def check_plays(position: Position, seat: int, dice: tuple[int, int]) -> tuple[Play, ...]:
    """Every invariant of one legal_plays answer, against the reference generator."""
    plays = legal_plays(position, seat, dice)
    results = [play.result for play in plays]
    assert len(set(results)) == len(results), "a position is listed twice"
    assert set(results) == reference_results(position, seat, dice)
    assert [play.notation for play in plays] == sorted(play.notation for play in plays)
    assert legal_plays(position, seat, (dice[1], dice[0])) == plays
    used = {len(play.dice_used) for play in plays}
    assert len(used) <= 1, "plays using different numbers of dice"
    for play in plays:
        assert len(play.moves) == len(play.dice_used)
        assert Counter(play.dice_used) <= Counter(dice * 2 if dice[0] == dice[1] else dice)
        for move, die in zip(play.moves, play.dice_used, strict=True):
            assert move.start - move.end == die or (move.end == 0 and move.start < die)
        assert replay(position, seat, play) == play.result
        for side in (WHITE, BLACK):
            assert play.result.checkers(side) == position.checkers(side)
        assert parse_play(play.notation, plays) is play
    return plays


@pytest.mark.parametrize("seat", [WHITE, BLACK])
@pytest.mark.parametrize("dice", ROLLS)
def test_opening_counts(seat: int, dice: tuple[int, int]) -> None:
    plays = check_plays(Position.start(Variant.STANDARD), seat, dice)
    assert len(plays) == OPENING_COUNTS[dice]


def test_opening_plays_are_written_alike_for_both_seats() -> None:
    start = Position.start(Variant.STANDARD)
    for dice in ROLLS:
        assert notations(start, WHITE, dice) == notations(start, BLACK, dice)


def test_opening_six_five_by_hand() -> None:
    # Sixes: 24/18, 13/7, 8/2 (6/off is not allowed). Fives: 13/8, 8/3 (24/19 and 6/1 are blocked).
    assert notations(Position.start(Variant.STANDARD), WHITE, (6, 5)) == [
        "13/2",  # 13/7/2, or 13/8 8/2: the same position
        "13/7 8/3",
        "13/8 13/7",
        "24/13",
        "24/18 13/8",
        "24/18 8/3",
        "8/3 8/2",
    ]


def test_opening_doubles_by_hand() -> None:
    start = Position.start(Variant.STANDARD)
    # Fives: only 13/8 and 8/3 can move (24/19 and 6/1 are blocked).
    assert notations(start, BLACK, (5, 5)) == ["13/3 8/3(2)", "13/3(2)", "13/8(2) 13/3", "13/8(4)"]
    assert "24/18(2) 13/7(2)" in notations(start, BLACK, (6, 6))
    assert "bar" not in " ".join(notations(start, BLACK, (6, 6)))


def test_must_use_both_dice() -> None:
    # Black: one checker on 14, the rest on 6. White holds 8 and 3. 6-3: 14/8 is blocked, so the three
    # must go first; 14/11 alone (or 6/3) would leave a die unused.
    position = black({14: 1, 6: 14}, {8: 2, 3: 2, 24: 11})
    assert notations(position, BLACK, (6, 3)) == ["14/5"]
    (play,) = legal_plays(position, BLACK, (6, 3))
    assert play.dice_used == (3, 6)
    assert [str(move) for move in play.moves] == ["14/11", "11/5"]


def test_only_one_die_playable_then_the_higher() -> None:
    # 12/7 or 12/8 can be played, but not both dice: the higher (5) must be played.
    position = black({12: 1, 1: 14}, {3: 2, 24: 13})
    (play,) = legal_plays(position, BLACK, (5, 4))
    assert play.notation == "12/7"
    assert play.dice_used == (5,)


def test_only_the_lower_die_playable() -> None:
    position = black({12: 1, 1: 14}, {3: 2, 7: 2, 24: 11})
    (play,) = legal_plays(position, BLACK, (4, 5))
    assert play.notation == "12/8"
    assert play.dice_used == (4,)


def test_doubles_partially_playable() -> None:
    position = black({10: 1, 1: 14}, {4: 2, 24: 13})
    (play,) = legal_plays(position, BLACK, (3, 3))
    assert play.notation == "10/7"
    assert play.dice_used == (3,)
    position = black({13: 1, 1: 14}, {4: 2, 24: 13})
    (play,) = legal_plays(position, BLACK, (3, 3))
    assert play.notation == "13/7"
    assert play.dice_used == (3, 3)


def test_bar_entry_comes_first() -> None:
    # White holds 20 (Black's entry with a 5); 1/off is not allowed with a checker outside.
    position = black({13: 1, 1: 13}, {20: 15}, bar=(0, 1))
    plays = check_plays(position, BLACK, (6, 1))
    assert all(play.moves[0].start == 25 for play in plays)
    assert [play.notation for play in plays] == ["bar/18", "bar/19 13/12", "bar/24 13/7"]
    assert notations(position, BLACK, (5, 5)) == []


def test_closed_board_forfeits_the_turn() -> None:
    closed = {point: 2 for point in range(19, 25)}
    closed[1] = 3
    position = black({6: 14}, closed, bar=(0, 1))
    for dice in ROLLS:
        assert legal_plays(position, BLACK, dice) == ()
    assert reference_results(position, BLACK, (6, 6)) == set()


def test_enter_with_one_die_then_play_the_other() -> None:
    # White holds Black's entry point 19 (the 6): enter with the 3, then the 6 must be played.
    position = black({13: 1, 6: 13}, {19: 2, 24: 13}, bar=(0, 1))
    plays = check_plays(position, BLACK, (6, 3))
    assert [play.notation for play in plays] == ["bar/16", "bar/22 13/7"]
    assert all(play.dice_used == (3, 6) for play in plays)


def test_two_on_the_bar_and_one_can_enter() -> None:
    position = black({6: 13}, {19: 2, 24: 13}, bar=(0, 2))
    (play,) = legal_plays(position, BLACK, (6, 3))
    assert play.notation == "bar/22"
    assert play.dice_used == (3,)
    plays = check_plays(position, BLACK, (3, 3))
    # Both enter; White's 19 blocks them from going on, so the other threes are played from 6.
    assert [play.notation for play in plays] == ["bar/22(2) 6/3(2)"]


def test_bear_off_exact_and_higher_point_rule() -> None:
    exact = black({5: 2, 3: 1}, {24: 15})
    assert "5/off 3/off" in notations(exact, BLACK, (5, 3))
    # Nothing on 6 or 5 and nothing higher than 3: both dice bear off from the highest point.
    assert notations(black({3: 2}, {24: 15}), BLACK, (6, 5)) == ["3/off(2)"]
    assert notations(black({4: 1, 2: 1}, {24: 15}), BLACK, (6, 5)) == ["4/off 2/off"]
    # A checker on a higher point: a die with no checker on its point must be moved inside.
    plays = check_plays(black({6: 2, 1: 13}, {24: 15}), BLACK, (4, 3))
    assert "6/3 6/2" in [play.notation for play in plays]
    assert "6/2 1/off" not in [play.notation for play in plays]


def test_cannot_bear_off_with_a_checker_outside() -> None:
    position = black({8: 1, 2: 14}, {24: 15})
    plays = check_plays(position, BLACK, (2, 1))
    assert plays
    assert not any(move.end == 0 for play in plays for move in play.moves)
    # Coming home with the first die allows bearing off with the second.
    plays = check_plays(black({7: 1, 2: 14}, {24: 15}), BLACK, (6, 2))
    assert "7/1 2/off" in [play.notation for play in plays]


def test_hits_and_their_marks() -> None:
    # A White blot on Black's 18 and an open 19: 24/18*/13 and 24/13 are different positions.
    position = black({24: 1, 6: 14}, {18: 1, 20: 14})
    plays = check_plays(position, BLACK, (6, 5))
    by_text = {play.notation: play for play in plays}
    assert "24/18*/13" in by_text
    assert "24/13" in by_text
    assert by_text["24/18*/13"].result.bar == (1, 0)
    assert by_text["24/13"].result.bar == (0, 0)
    assert "24/18* 6/1" in by_text
    assert parse_play("24/18/13", plays) is by_text["24/18*/13"]
    assert parse_play("24/18*/13", plays) is by_text["24/18*/13"]
    assert parse_play("24/19/13", plays) is by_text["24/13"]
    assert parse_play("24/13", plays) is by_text["24/13"]
    assert parse_play("24/18*  18/13", plays) is by_text["24/18*/13"]


def test_hit_then_continue_and_doubles_hits() -> None:
    position = black({8: 2, 6: 13}, {4: 1, 2: 1, 24: 13})
    plays = check_plays(position, BLACK, (2, 2))
    texts = [play.notation for play in plays]
    assert "6/4*(4)" in texts  # four checkers land on 4; the first hits
    assert "8/4*(2)" in texts
    by_text = {play.notation: play for play in plays}
    assert by_text["8/4*(2)"].result.bar == (1, 0)
    # One checker hits on 4 and goes on to hit on 2, another goes 6/2 behind it.
    assert by_text["6/2 6/4*/2*"].result.bar == (2, 0)
    assert parse_play("6/4* 4/2* 6/4 4/2", plays) is by_text["6/2 6/4*/2*"]
    assert parse_play("6/2(2)", plays) is by_text["6/2 6/4*/2*"]


def test_white_plays_in_own_numbering() -> None:
    # White's checker on absolute 1 is its own 24; a Black blot on absolute 7 is White's 18.
    position = Position.from_counts({1: 1, 19: 14}, {7: 1, 24: 14})
    plays = check_plays(position, WHITE, (6, 5))
    assert "24/18*/13" in [play.notation for play in plays]
    (play,) = [play for play in plays if play.notation == "24/18*/13"]
    assert play.result.count(WHITE, 12) == 1
    assert play.result.bar == (0, 1)


def test_best_bearoff() -> None:
    position = black({6: 1, 5: 2, 1: 2}, {24: 15})
    plays = legal_plays(position, BLACK, (6, 5))
    assert best_bearoff(plays, BLACK) is not None
    assert best_bearoff(plays, BLACK).notation == "6/off 5/off"  # type: ignore[union-attr]
    # 2-1 with checkers on 6 and 1: one checker off at most; the tie goes to the fewest pips left.
    plays = legal_plays(black({6: 2, 1: 1}, {24: 15}), BLACK, (2, 1))
    best = best_bearoff(plays, BLACK)
    assert best is not None
    assert best.notation == "6/4 1/off"
    assert pip_count(best.result, BLACK) == min(
        pip_count(p.result, BLACK) for p in plays if any(m.end == 0 for m in p.moves)
    )
    assert best_bearoff(legal_plays(Position.start(Variant.STANDARD), BLACK, (6, 5)), BLACK) is None


@pytest.mark.parametrize("variant", [Variant.NACKGAMMON, Variant.HYPERGAMMON])
def test_other_variants_openings(variant: Variant) -> None:
    start = Position.start(variant)
    for dice in ROLLS:
        for seat in (WHITE, BLACK):
            check_plays(start, seat, dice)
    if variant is Variant.HYPERGAMMON:
        # One checker each on 24, 23, 22 and nothing blocks: every pair of a six and a five.
        assert notations(start, BLACK, (6, 5)) == [
            "22/11", "23/12", "23/17 22/17", "23/18 22/16", "24/13", "24/18 22/17", "24/18 23/18",
            "24/19 22/16", "24/19 23/17",
        ]  # fmt: skip


def test_refuses_bad_arguments() -> None:
    start = Position.start(Variant.STANDARD)
    with pytest.raises(ValueError, match="dice"):
        legal_plays(start, WHITE, (0, 3))
    with pytest.raises(ValueError, match="seat"):
        legal_plays(start, 2, (1, 3))


SLOW = [HealthCheck.too_slow]


@settings(max_examples=100, deadline=None, suppress_health_check=SLOW)
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(list(Variant)))
def test_random_games_agree_with_the_reference(seed: int, variant: Variant) -> None:
    rng = random.Random(seed)
    for position, seat in random_game_positions(rng, 20, Position.start(variant)):
        check_plays(position, seat, (rng.randint(1, 6), rng.randint(1, 6)))


@settings(max_examples=100, deadline=None, suppress_health_check=SLOW)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_placements_agree_with_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(8):
        position = random_placement(rng, rng.choice([15, 15, 3]))
        check_plays(position, rng.randrange(2), (rng.randint(1, 6), rng.randint(1, 6)))


def mirrored(position: Position) -> Position:
    """The same position with the colours swapped (White's checkers become Black's, mirrored)."""
    points = (0, *(-position.points[25 - p] for p in range(1, 25)))
    return Position(points, (position.bar[1], position.bar[0]), (position.off[1], position.off[0]))


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW)
@given(seed=st.integers(0, 2**32 - 1))
def test_both_seats_play_alike(seed: int) -> None:
    rng = random.Random(seed)
    for position, seat in random_game_positions(rng, 15, Position.start(Variant.STANDARD)):
        for dice in rng.sample(ROLLS, 3):
            plays = legal_plays(position, seat, dice)
            other = legal_plays(mirrored(position), 1 - seat, dice)
            assert [p.notation for p in plays] == [p.notation for p in other]
            assert [mirrored(p.result) for p in plays] == [p.result for p in other]
