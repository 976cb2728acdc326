"""Reading moves in UCI and SAN, the draw words, and clock readings."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from libs.engines.base import IllegalActionError, MalformedActionError
from libs.engines.chess import (
    CHESS,
    AcceptDraw,
    ClaimDraw,
    DeclineDraw,
    Move,
    OfferDraw,
    actions,
    format_clock,
    notation,
    parse_action,
    parse_clock,
    pgn,
    tiebreak,
)
from tests.libs.engines.chess import CLOCKS, new, play

# White: Ke1 that may castle either way, knights b3 and f3 (both reach d2), pawn e7 that can push to e8
# or take the knight on d8.
PROMOTION_FEN = "1k1n4/4P3/8/8/8/1N3N2/8/R3K2R w KQ - 0 1"


@pytest.mark.parametrize(
    ("notation", "uci", "san"),
    [
        ("e7e8q", "e7e8q", "e8=Q"),
        ("e7e8Q", "e7e8q", "e8=Q"),
        ("e8=Q", "e7e8q", "e8=Q"),
        ("e8=Q+", "e7e8q", "e8=Q"),
        ("e8Q", "e7e8q", "e8=Q"),
        ("e7d8n", "e7d8n", "exd8=N"),
        ("exd8=N", "e7d8n", "exd8=N"),
        ("e1g1", "e1g1", "O-O"),
        ("O-O", "e1g1", "O-O"),
        ("0-0", "e1g1", "O-O"),
        ("O-O-O", "e1c1", "O-O-O"),
        ("0-0-0", "e1c1", "O-O-O"),
        ("Nbd2", "b3d2", "Nbd2"),
        ("b3d2", "b3d2", "Nbd2"),
        ("Nb3d2", "b3d2", "Nbd2"),
        ("Rxd8", None, None),
    ],
)
def test_uci_and_san_are_both_accepted(notation: str, uci: str | None, san: str | None) -> None:
    state = new(PROMOTION_FEN)
    if uci is None:  # the rook on a1 does not reach d8
        with pytest.raises(IllegalActionError, match="Rxd8 is not a legal move in this position"):
            play(state, notation)
        return
    after = play(state, notation)
    assert after.moves_uci == (uci,)
    assert after.moves_san == (san,)


@pytest.mark.parametrize(
    ("notation", "example"), [("e7e8", "e7e8q"), ("e8", "e8=Q"), ("exd8", "exd8=Q"), ("e7d8", "e7d8q")]
)
def test_a_promotion_must_name_its_piece(notation: str, example: str) -> None:
    with pytest.raises(IllegalActionError, match="does not name a promotion piece") as error:
        play(new(PROMOTION_FEN), notation)
    assert f"e.g. {example}" in str(error.value)


def test_the_same_text_is_a_plain_move_where_no_pawn_promotes() -> None:
    """Why a missing promotion piece is illegal, not malformed: ``e7e8`` is a king move here."""
    assert play(new("k7/4K3/8/8/8/8/P7/8 w - - 0 1"), "e7e8").moves_san == ("Ke8",)
    assert play(new("k7/8/8/8/8/8/P7/4K3 w - - 0 1"), "e1e2").moves_san == ("Ke2",)


def test_castling_in_uci_is_the_kings_two_square_move() -> None:
    with pytest.raises(IllegalActionError, match="e1h1 is not a legal move in this position"):
        play(new(PROMOTION_FEN), "e1h1")  # the Chess960 form


def test_an_ambiguous_san_names_the_candidates() -> None:
    with pytest.raises(
        IllegalActionError, match="Nd2 is ambiguous in this position: it could be Nbd2 or Nfd2"
    ):
        play(new(PROMOTION_FEN), "Nd2")


@pytest.mark.parametrize("notation", ["e2e5", "e2e4q", "Nf4", "O-O", "e1e1", "Ke2"])
def test_illegal_moves_are_refused_with_the_move_named(notation: str) -> None:
    with pytest.raises(IllegalActionError, match=f"{notation} is not a legal move in this position"):
        play(new(), notation)


@pytest.mark.parametrize(
    "notation", ["", "e9e4", "xyz", "0000", "--", "e2-e4!", "Pe4", "resign", "E2E4", "e2e4 e7e5"]
)
def test_unreadable_actions_are_malformed(notation: str) -> None:
    with pytest.raises(MalformedActionError, match="cannot read"):
        parse_action(notation)
    with pytest.raises(MalformedActionError):
        CHESS.apply(new(), 0, notation, CLOCKS)


def test_apply_refuses_objects_that_are_not_actions() -> None:
    with pytest.raises(MalformedActionError, match="not a chess action"):
        CHESS.apply(new(), 0, 42, CLOCKS)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "action", [Move("e2e4"), Move("Nf3"), OfferDraw(), AcceptDraw(), DeclineDraw(), ClaimDraw()]
)
def test_every_action_round_trips_through_its_notation(action: object) -> None:
    assert parse_action(action.notation) == action  # type: ignore[attr-defined]


def test_parse_action_ignores_surrounding_spaces() -> None:
    assert parse_action("  e2e4\n") == Move("e2e4")
    assert parse_action(" claim_draw ") == ClaimDraw()


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0:00:00"),
        (180_000, "0:03:00"),
        (59_950, "0:00:59.9"),
        (1_001, "0:00:01.0"),
        (3_723_400, "1:02:03.4"),
        (36_000_000, "10:00:00"),
    ],
)
def test_clock_readings(ms: int, text: str) -> None:
    assert format_clock(ms) == text
    assert parse_clock(text) == ms - ms % 100


def test_negative_clocks_and_bad_readings_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        format_clock(-1)
    with pytest.raises(ValueError, match="not a clock reading"):
        parse_clock("3:00")


@pytest.mark.parametrize("module", [actions, notation, pgn, tiebreak], ids=lambda m: m.__name__)
def test_docstring_examples(module: ModuleType) -> None:
    failures, tried = doctest.testmod(module)
    assert tried > 0
    assert failures == 0
