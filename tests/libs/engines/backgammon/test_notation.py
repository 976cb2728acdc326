"""Notation: the canonical text of a play, and reading any equivalent text."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libs.engines.backgammon import (
    BLACK,
    WHITE,
    Play,
    Position,
    Variant,
    canonical_notation,
    legal_plays,
    parse_play,
)
from libs.engines.base import IllegalActionError, MalformedActionError
from tests.libs.engines.backgammon.reference import random_game_positions

START = Position.start(Variant.STANDARD)


@pytest.mark.parametrize(
    ("steps", "text"),
    [
        ([(24, 18, False), (13, 8, False)], "24/18 13/8"),
        ([(13, 8, False), (24, 18, False)], "24/18 13/8"),
        ([(24, 18, False), (18, 13, False)], "24/13"),
        ([(24, 18, True), (18, 13, False)], "24/18*/13"),
        ([(25, 22, True)], "bar/22*"),
        ([(6, 0, False)], "6/off"),
        ([(8, 4, False), (8, 4, False)], "8/4(2)"),
        ([(8, 4, False), (8, 4, False), (6, 2, False), (6, 2, False)], "8/4(2) 6/2(2)"),
        ([(13, 11, False), (11, 9, False), (13, 11, False), (11, 9, False)], "13/9(2)"),
        ([(6, 4, True), (6, 4, False)], "6/4*(2)"),
        ([(25, 22, False), (22, 19, False), (19, 16, False), (16, 13, False)], "bar/13"),
        ([(25, 20, False), (6, 1, False)], "bar/20 6/1"),
        ([(13, 8, False), (8, 2, False)], "13/2"),  # another checker from 8: the same position
        ([(6, 2, False), (6, 3, False)], "6/3 6/2"),
        ([(5, 0, False), (3, 0, False)], "5/off 3/off"),
        ([(10, 4, False), (4, 0, False)], "10/off"),
        ([(10, 4, True), (4, 0, False)], "10/4*/off"),
    ],
)
def test_canonical_notation(steps: list[tuple[int, int, bool]], text: str) -> None:
    assert canonical_notation(steps) == text


def plays_of(position: Position, seat: int, dice: tuple[int, int]) -> dict[str, Play]:
    return {play.notation: play for play in legal_plays(position, seat, dice)}


@pytest.mark.parametrize("seat", [WHITE, BLACK])
@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("24/18 13/8", "24/18 13/8"),
        ("13/8 24/18", "24/18 13/8"),
        ("13/8, 24/18", "24/18 13/8"),
        ("  24/18   13/8 ", "24/18 13/8"),
        ("24/13", "24/13"),
        ("24/18/13", "24/13"),
        ("24/19/13", "24/13"),
        ("24/18 18/13", "24/13"),
        ("18/13 24/18", "24/13"),
        ("13/7/2", "13/2"),
        ("13/8 8/2", "13/2"),
        ("8/2 13/8", "13/2"),
        ("13/2", "13/2"),
        ("8/3 8/2", "8/3 8/2"),
        ("8/2 8/3", "8/3 8/2"),
        ("24/18 8/3", "24/18 8/3"),
    ],
)
def test_equivalent_texts_six_five(seat: int, text: str, canonical: str) -> None:
    plays = legal_plays(START, seat, (6, 5))
    assert parse_play(text, plays).notation == canonical


def test_doubles_texts() -> None:
    plays = legal_plays(START, BLACK, (5, 5))
    by_text = {play.notation: play for play in plays}
    assert parse_play("13/3(2)", plays) is by_text["13/3(2)"]
    assert parse_play("13/8(2) 8/3(2)", plays) is by_text["13/3(2)"]
    assert parse_play("13/8 13/8 8/3 8/3", plays) is by_text["13/3(2)"]
    assert parse_play("13/3 13/3", plays) is by_text["13/3(2)"]
    assert parse_play("13/8/3(2)", plays) is by_text["13/3(2)"]
    assert parse_play("13/8(4)", plays) is by_text["13/8(4)"]
    assert parse_play("8/3(2) 13/3", plays) is by_text["13/3 8/3(2)"]
    assert parse_play("13/8 13/3 13/8", plays) is by_text["13/8(2) 13/3"]


def test_index() -> None:
    plays = legal_plays(START, WHITE, (6, 5))
    assert parse_play("1", plays) is plays[0]
    assert parse_play(" 7 ", plays) is plays[6]
    with pytest.raises(IllegalActionError, match="no play number 8: 7 legal plays with 6-5"):
        parse_play("8", plays)
    with pytest.raises(IllegalActionError, match="no play number 0"):
        parse_play("0", plays)


def test_bar_and_off_and_hits() -> None:
    position = Position.from_counts({19: 2, 24: 13}, {13: 1, 6: 13}, bar=(0, 1))
    plays = legal_plays(position, BLACK, (6, 3))
    assert parse_play("bar/22 13/7", plays).notation == "bar/22 13/7"
    assert parse_play("25/22 13/7", plays).notation == "bar/22 13/7"
    assert parse_play("bar/16", plays).notation == "bar/16"
    assert parse_play("bar/22/16", plays).notation == "bar/16"
    bearing = Position.from_counts({18: 1, 1: 14}, {5: 2, 3: 1}, off=(0, 12))
    plays = legal_plays(bearing, BLACK, (5, 3))
    assert parse_play("5/off 3/off", plays).notation == "5/off 3/off"
    assert parse_play("3/off 5/off", plays).notation == "5/off 3/off"
    assert parse_play("5/0 3/0", plays).notation == "5/off 3/off"
    # The last checker: both dice must be used, 5/2 then 2/off.
    last = Position.from_counts({18: 1, 1: 14}, {5: 1}, off=(0, 14))
    (play,) = legal_plays(last, BLACK, (5, 3))
    assert play.notation == "5/off"
    assert play.dice_used == (3, 5)
    assert parse_play("5/2/off", (play,)) is play
    assert parse_play("5/2 2/off", (play,)) is play


def test_marked_hit_that_is_not_one_is_refused() -> None:
    plays = legal_plays(START, WHITE, (6, 5))
    with pytest.raises(IllegalActionError, match="not a legal play with 6-5"):
        parse_play("24/18* 13/8", plays)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "hello", "24-18", "24/", "/18", "18/24", "24/24", "24/18**", "24*/18", "off/3", "3/bar",
     "26/20", "24/18(5)", "24/18(0)", "24/off/3", "6/off*", "24/18(x)", "24/18 (2)",
     "24/23 23/22 22/21 21/20 20/19", "13/8(3) 6/1(2)", "6/5/4/3/2/1", "1/off " * 40],
)  # fmt: skip
def test_malformed(text: str) -> None:
    with pytest.raises(MalformedActionError):
        parse_play(text, legal_plays(START, WHITE, (6, 5)))


@pytest.mark.parametrize("text", ["24/18 24/19", "13/7", "24/18 13/8 8/3", "6/off 6/1", "13/8(2)"])
def test_illegal_names_the_roll(text: str) -> None:
    with pytest.raises(IllegalActionError, match=r"not a legal play with 6-5; '\?' lists the legal plays"):
        parse_play(text, legal_plays(START, WHITE, (6, 5)))


def test_forfeited_turn() -> None:
    closed = {point: 2 for point in range(19, 25)} | {1: 3}
    position = Position.from_counts(closed, {6: 14}, bar=(0, 1))
    assert legal_plays(position, BLACK, (6, 6)) == ()
    with pytest.raises(IllegalActionError, match="no legal play with 6-6: the turn is forfeited"):
        parse_play("bar/19", (), dice=(6, 6))
    with pytest.raises(IllegalActionError, match="forfeited"):
        parse_play("1", ())


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_split_texts_parse_back(seed: int) -> None:
    """Every play written as its single-die moves, in a random order, names the same play."""
    rng = random.Random(seed)
    for position, seat in random_game_positions(rng, 10, Position.start(Variant.STANDARD)):
        plays = legal_plays(position, seat, (rng.randint(1, 6), rng.randint(1, 6)))
        for play in plays:
            assert parse_play(play.notation, plays) is play
            moves = [str(move) if rng.random() < 0.5 else str(move).rstrip("*") for move in play.moves]
            rng.shuffle(moves)
            assert parse_play(" ".join(moves), plays) is play


def test_every_listed_notation_read_as_moves_names_its_own_play() -> None:
    """parse_play finds a listed notation directly; read as moves instead (the path for any other text),
    each listed notation must name the same play, so the shortcut never changes an answer. Over the worst
    doubles positions (every 15th of their 1,654 and 1,733 plays) and positions from random games with every
    roll."""
    from libs.engines.backgammon import BLACK, legal_plays
    from libs.engines.backgammon.notation import _read_and_match

    spread = Position.from_counts({1: 1, 2: 1, 3: 1, 4: 1, 24: 11}, {p: 1 for p in range(6, 21)})
    cases = [(spread, BLACK, (1, 1)), (spread, BLACK, (2, 2))]
    rng = random.Random(21)
    for position, seat in random_game_positions(rng, 30, Position.start(Variant.STANDARD)):
        cases += [(position, seat, (a, b)) for a in range(1, 7) for b in range(a, 7)]
    checked = 0
    for position, seat, dice in cases:
        plays = legal_plays(position, seat, dice)
        for play in plays[:: 15 if len(plays) > 500 else 1]:
            assert _read_and_match(play.notation, play.notation, plays, "the roll") is play
            assert parse_play(play.notation.upper(), plays) is play
            checked += 1
    assert checked > 1_500
