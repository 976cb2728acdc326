"""The rules of a gin match, hand by hand, on rigged deals."""

from __future__ import annotations

import pytest

from libs.engines.base import (
    ChanceRequest,
    IllegalActionError,
    InvalidOptionsError,
    Outcome,
    Termination,
)
from libs.engines.gin import (
    DEALER_REQUEST,
    GIN,
    GinOptions,
    GinState,
    HandEnd,
    HandResult,
    Phase,
    Take,
    Variant,
    card_text,
    describe,
    hand_log,
    sort_cards,
)
from tests.libs.engines.gin import CLOCKS, deal_next, new, play, rigged, start

# Seat 1 (the non-dealer when seat 0 deals) holds three melds and a king; the upcard decides the rest.
MELDS_AND_KING = "AC 2C 3C 7D 7H 7S 9S TS JS KD"
MELDS_ONLY = "AC 2C 3C 7D 7H 7S 9S TS JS QS"
# A defender with lay-offs for MELDS_AND_KING: 4C 5C (club run, chained), 7C (fourth seven), 8S (below
# the spade run), QS KS (above it, chained); 9D 9H QD 2H stay deadwood (30).
LAYING_DEFENDER = "4C 5C 8S QS KS 7C 9D 9H QD 2H"
# A defender with no meld: 64 deadwood points.
LOOSE_DEFENDER = "4C 8S 9D 9H QD 2H 3D 5D 6H 8H"


def last(state: GinState) -> HandResult:
    return state.results[-1]


# ---------------------------------------------------------------------------------------------------------
# Options and chance


def test_options_are_validated() -> None:
    assert GinOptions() == GinOptions(Variant.STANDARD, 3)
    assert GinOptions(variant="oklahoma").variant is Variant.OKLAHOMA  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionsError, match="unknown gin variant"):
        GinOptions(variant="rummy")  # type: ignore[arg-type]
    for hands in (0, 11, -1, True):
        with pytest.raises(InvalidOptionsError, match="from 1 to 10"):
            GinOptions(hands_to_win=hands)
    with pytest.raises(InvalidOptionsError, match="expected GinOptions"):
        GIN.new_game("standard")  # type: ignore[arg-type]


def test_match_starts_waiting_for_the_dealer_then_the_shuffle() -> None:
    state = GIN.new_game(GinOptions())
    assert GIN.chance_needed(state) == DEALER_REQUEST == ChanceRequest("dealer", 0, "coin", 1, 0)
    assert GIN.to_move(state) is None
    assert GIN.legal_actions(state, 0) == GIN.legal_actions(state, 1) == []
    with pytest.raises(IllegalActionError, match="being dealt"):
        GIN.apply(state, 0, "stock", CLOCKS)
    state = GIN.apply_chance(state, DEALER_REQUEST, (1,))
    assert state.dealer == 1
    assert GIN.chance_needed(state) == ChanceRequest("shuffle", 0, "shuffle", 1, 52)
    assert GIN.to_move(state) is None
    assert GIN.view(state, None).phase is Phase.DEALING
    assert GIN.view(state, None).hand_number == 0


def test_the_deal_follows_the_documented_order() -> None:
    # Dealer seat 1: deck positions 0, 2, ..., 18 go to seat 0, positions 1, 3, ..., 19 to seat 1,
    # position 20 is the upcard, 21 the top of the stock.
    state = new(dealer=1)
    permutation = tuple(range(52))
    state = GIN.apply_chance(state, ChanceRequest("shuffle", 0, "shuffle", 1, 52), permutation)
    assert GIN.view(state, 0).hand == ("AC", "3C", "5C", "7C", "9C", "JC", "KC", "2D", "4D", "6D")
    assert GIN.view(state, 1).hand == ("2C", "4C", "6C", "8C", "TC", "QC", "AD", "3D", "5D", "7D")
    assert GIN.view(state, 0).discard_pile == ("8D",)
    assert state.stock[0] == 21  # 9D
    assert GIN.view(state, 0).stock_count == 31
    assert GIN.to_move(state) == 0  # the non-dealer
    assert GIN.view(state, 0).phase is Phase.UPCARD_OFFER
    assert GIN.view(state, 0).hand_number == 1


def test_worked_example_of_the_docs() -> None:
    # docs/gin.md, "Chance: the dealer and the deal": auditors recompute the deal exactly like this.
    shuffle = (
        32, 48, 27, 34, 10, 18, 31, 35, 30, 1, 19, 0, 16, 3, 7, 26, 50, 41, 9, 44, 25, 6, 22, 8, 47, 29,
        12, 5, 4, 36, 42, 2, 39, 14, 24, 51, 37, 45, 38, 20, 33, 21, 11, 28, 43, 40, 23, 17, 15, 13, 49, 46,
    )  # fmt: skip
    state = GIN.apply_chance(new(dealer=0), ChanceRequest("shuffle", 0, "shuffle", 1, 52), shuffle)
    assert sorted(GIN.view(state, 1).hand) == sorted(
        ["7H", "2H", "JC", "6H", "5H", "7D", "4D", "8C", "QS", "TC"]
    )
    assert sorted(GIN.view(state, 0).hand) == sorted(
        ["TS", "9H", "6D", "TH", "2C", "AC", "4C", "AH", "3S", "6S"]
    )
    assert GIN.view(state, 0).discard_pile == ("KD",)
    assert [card_text(card) for card in state.stock[:6]] == ["7C", "TD", "9C", "9S", "4H", "KC"]
    assert hand_log(state)[2:4] == [
        "  seat 0 is dealt AC 2C 4C 6D AH 9H TH 3S 6S TS",
        "  seat 1 is dealt 8C TC JC 4D 7D 2H 5H 6H 7H QS",
    ]


def test_chance_is_checked() -> None:
    state = GIN.new_game(GinOptions())
    with pytest.raises(ValueError, match="waits for"):
        GIN.apply_chance(state, ChanceRequest("shuffle", 0, "shuffle", 1, 52), tuple(range(52)))
    with pytest.raises(ValueError, match="0 or 1"):
        GIN.apply_chance(state, DEALER_REQUEST, (2,))
    state = GIN.apply_chance(state, DEALER_REQUEST, (0,))
    shuffle = ChanceRequest("shuffle", 0, "shuffle", 1, 52)
    with pytest.raises(ValueError, match="permutation"):
        GIN.apply_chance(state, shuffle, (0,) * 52)
    with pytest.raises(ValueError, match="permutation"):
        GIN.apply_chance(state, shuffle, tuple(range(51)))
    state = GIN.apply_chance(state, shuffle, tuple(range(52)))
    with pytest.raises(ValueError, match="waits for no draw"):
        GIN.apply_chance(state, shuffle, tuple(range(52)))


# ---------------------------------------------------------------------------------------------------------
# The first turn


def test_non_dealer_takes_the_upcard() -> None:
    state = start(LOOSE_DEFENDER, MELDS_AND_KING, "2D")
    assert GIN.legal_actions(state, 1) == ["pass", "take"]
    assert GIN.legal_actions(state, 0) == []
    state = play(state, "take")
    view = GIN.view(state, 1)
    assert view.phase is Phase.DISCARD
    assert view.taken_from_discard == "2D"
    assert view.discard_pile == ()
    assert view.seats[1].known_cards == ("2D",)
    assert len(view.hand) == 11
    with pytest.raises(IllegalActionError, match="you cannot discard 2D: you took it from the discard pile"):
        play(state, "discard 2D")
    state = play(state, "discard 9S")
    assert GIN.to_move(state) == 0
    assert GIN.view(state, 0).phase is Phase.DRAW
    assert GIN.legal_actions(state, 0) == ["stock", "take"]
    assert GIN.view(state, 0).discard_pile == ("9S",)
    assert GIN.view(state, 0).seats[1] == GIN.view(state, None).seats[1]
    assert GIN.view(state, None).seats[1].known_cards == ("2D",)


def test_dealer_takes_after_the_non_dealer_passes() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "2D"), "pass")
    assert GIN.to_move(state) == 0
    assert GIN.legal_actions(state, 0) == ["pass", "take"]
    state = play(state, "take")
    assert GIN.to_move(state) == 0
    assert GIN.view(state, 0).phase is Phase.DISCARD
    with pytest.raises(IllegalActionError, match="you took it from the discard pile"):
        play(state, "discard 2D")
    state = play(state, "discard QD")
    assert GIN.to_move(state) == 1
    assert GIN.legal_actions(state, 1) == ["stock", "take"]


def test_both_pass_then_the_non_dealer_must_draw_from_the_stock() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "2D", "5S"), "pass", "pass")
    assert GIN.to_move(state) == 1
    assert GIN.view(state, 1).phase is Phase.DRAW
    assert GIN.legal_actions(state, 1) == ["stock"]
    with pytest.raises(IllegalActionError, match="both players passed the upcard: draw from the stock"):
        play(state, "take")
    state = play(state, "stock")
    assert "5S" in GIN.view(state, 1).hand
    assert GIN.view(state, 1).taken_from_discard is None
    state = play(state, "discard 5S")
    assert GIN.legal_actions(state, 0) == ["stock", "take"]
    assert GIN.view(state, 0).discard_pile == ("2D", "5S")


def test_the_offer_accepts_only_take_and_pass() -> None:
    state = start(LOOSE_DEFENDER, MELDS_AND_KING, "2D")
    with pytest.raises(IllegalActionError, match="take the upcard \\(2D\\) or pass"):
        play(state, "stock")
    with pytest.raises(IllegalActionError, match="draw first"):
        play(state, "discard KD")
    state = play(state, "take", "discard KD")
    with pytest.raises(IllegalActionError, match="pass only on the upcard offer"):
        play(state, "pass")
    with pytest.raises(IllegalActionError, match="draw a card first"):
        play(state, "discard 4C")


def test_cannot_discard_the_card_taken_in_a_normal_turn() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "2D"), "take", "discard KD", "take")
    assert GIN.view(state, 0).taken_from_discard == "KD"
    assert "discard KD" not in GIN.legal_actions(state, 0)
    with pytest.raises(IllegalActionError, match="you cannot discard KD: you took it from the discard pile"):
        play(state, "discard KD")
    with pytest.raises(IllegalActionError, match="you have drawn already"):
        play(state, "stock")
    with pytest.raises(IllegalActionError, match="you do not hold AS"):
        play(state, "discard AS")
    state = play(state, "discard QD")
    assert GIN.view(state, None).seats[0].known_cards == ("KD",)
    # Discarding a known card later makes it unknown again.
    state = play(state, "stock", "discard 2D", "stock", "discard KD")
    assert GIN.view(state, None).seats[0].known_cards == ()


def test_out_of_turn_actions_are_refused() -> None:
    state = start(LOOSE_DEFENDER, MELDS_AND_KING, "2D")
    with pytest.raises(IllegalActionError, match="it is seat 1's turn"):
        GIN.apply(state, 0, "take", CLOCKS)
    state = play(state, "take")
    with pytest.raises(IllegalActionError, match="it is seat 1's turn"):
        GIN.apply(state, 0, "discard 4C", CLOCKS)
    with pytest.raises(ValueError, match="seats 0 and 1"):
        GIN.apply(state, 2, "take", CLOCKS)


# ---------------------------------------------------------------------------------------------------------
# Legal actions


def test_legal_actions_when_discarding() -> None:
    state = play(start(LAYING_DEFENDER, MELDS_AND_KING, "2D"), "take")
    discards = [f"discard {card}" for card in ["AC", "2C", "3C", "7D", "7H", "7S", "9S", "TS", "JS", "KD"]]
    assert GIN.legal_actions(state, 1) == sorted([*discards, "knock KD"])
    assert GIN.legal_actions(state, 0) == []


def test_gin_and_big_gin_are_listed() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_ONLY, "KS"), "take")
    actions = GIN.legal_actions(state, 1)
    assert "biggin" in actions
    # Only 9S leaves ten melded cards (TS JS QS KS stays a run); KS was taken, so it cannot go.
    assert [action for action in actions if action.startswith("gin")] == ["gin 9S"]
    assert "knock AC" in actions  # 2C 3C left: 5 points


# ---------------------------------------------------------------------------------------------------------
# Ending a hand


def test_knock_with_lay_offs_at_both_ends_and_chained() -> None:
    state = play(start(LAYING_DEFENDER, MELDS_AND_KING, "2D"), "take", "knock KD")
    result = last(state)
    assert result.end is HandEnd.KNOCK
    assert (result.ender, result.winner, result.points) == (1, 1, 28)
    defender, knocker = result.hands
    assert knocker.seat == 1
    assert knocker.melds == (("AC", "2C", "3C"), ("7D", "7H", "7S"), ("9S", "TS", "JS"))
    assert knocker.deadwood == ("2D",)
    assert knocker.deadwood_points == 2
    assert defender.seat == 0
    assert sorted(defender.laid_off) == sorted(["4C", "5C", "7C", "8S", "QS", "KS"])
    assert defender.laid_off.index("4C") < defender.laid_off.index("5C")
    assert defender.laid_off.index("QS") < defender.laid_off.index("KS")
    assert defender.deadwood == ("9D", "QD", "2H", "9H")
    assert defender.deadwood_points == 30
    assert state.hand_wins == (0, 1)
    assert state.points == (0, 28)
    # The next hand: seat 1 deals, so seat 0 will act first; only the shuffle can happen now.
    assert GIN.chance_needed(state) == ChanceRequest("shuffle", 1, "shuffle", 1, 52)
    assert state.dealer == 1
    assert GIN.to_move(state) == 0
    assert GIN.legal_actions(state, 0) == []
    with pytest.raises(IllegalActionError, match="being dealt"):
        play(state, "take")


def test_undercut_on_a_tie() -> None:
    defender = "4H 5H 6H 2S 3S 4S QC QD QH 8C"  # 8 deadwood, nothing to lay off
    state = play(start(defender, MELDS_AND_KING, "8D"), "take", "knock KD")
    result = last(state)
    assert result.end is HandEnd.UNDERCUT
    assert (result.ender, result.winner, result.points) == (1, 0, 25)
    assert [reveal.deadwood_points for reveal in result.hands] == [8, 8]
    assert state.hand_wins == (1, 0)


def test_undercut_below_the_knocker() -> None:
    defender = "4H 5H 6H 2S 3S 4S QC QD QH 5C"
    state = play(start(defender, MELDS_AND_KING, "8D"), "take", "knock KD")
    result = last(state)
    assert (result.end, result.winner, result.points) == (HandEnd.UNDERCUT, 0, 3 + 25)


def test_undercut_thanks_to_lay_offs() -> None:
    # 4C 5C (9 points, more than the knocker's 8) lay off on AC 2C 3C, leaving the defender nothing.
    defender = "3H 4H 5H 6H 9D TD JD QD 4C 5C"
    state = play(start(defender, MELDS_AND_KING, "8D"), "take", "knock KD")
    result = last(state)
    assert (result.end, result.winner, result.points) == (HandEnd.UNDERCUT, 0, 8 + 25)
    assert result.hands[0].laid_off == ("4C", "5C")
    assert result.hands[0].deadwood_points == 0


def test_knock_with_zero_deadwood_must_be_gin() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "QS"), "take")
    with pytest.raises(IllegalActionError, match="declare gin \\('gin KD'\\)"):
        play(state, "knock KD")


def test_knock_over_the_limit_is_refused() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "QH"), "take")
    with pytest.raises(IllegalActionError, match="would be 40, over this hand's knock limit of 10"):
        play(state, "knock 9S")
    with pytest.raises(IllegalActionError, match="cannot go gin discarding KD: 10 deadwood points"):
        play(state, "gin KD")


def test_gin_scores_25_and_allows_no_lay_offs() -> None:
    # The defender holds 4C and 8S, which would lay off after a knock.
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "QS"), "take", "gin KD")
    result = last(state)
    assert result.end is HandEnd.GIN
    assert (result.ender, result.winner, result.points) == (1, 1, 64 + 25)
    assert result.hands[0].laid_off == ()
    assert result.hands[0].deadwood_points == 64
    assert result.hands[1].deadwood == ()


def test_big_gin_scores_31() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_ONLY, "KS"), "take", "biggin")
    result = last(state)
    assert result.end is HandEnd.BIG_GIN
    assert (result.ender, result.winner, result.points) == (1, 1, 64 + 31)
    assert len(result.hands[1].cards) == 11
    assert result.hands[1].melds[-1] == ("9S", "TS", "JS", "QS", "KS")


def test_big_gin_needs_eleven_melded_cards() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "QS"), "take")
    with pytest.raises(IllegalActionError, match=r"big gin needs all eleven cards melded.* 10 deadwood"):
        play(state, "biggin")


def test_knocker_melds_are_the_ones_that_leave_the_defender_most() -> None:
    # The knocker's square 5-7 of C D H melds as three runs or three sets, both with 1 deadwood (AS).
    # As runs the defender would lay off 4C 8C 9C 4D 8D 4H 8H; as sets nothing (no 5S 6S 7S), and the
    # defender keeps 4C 4D 4H and 8C 8D 8H as own sets: deadwood 9C 2S JS QS = 31.
    defender = "4C 8C 4D 8D 4H 8H QS JS 2S 9C"
    knocker = "5C 6C 7C 5D 6D 7D 5H 6H 7H KD"
    state = play(start(defender, knocker, "AS"), "take", "knock KD")
    result = last(state)
    assert result.hands[1].melds == (("5C", "5D", "5H"), ("6C", "6D", "6H"), ("7C", "7D", "7H"))
    assert result.hands[0].laid_off == ()
    assert result.hands[0].deadwood_points == 31
    assert (result.end, result.winner, result.points) == (HandEnd.KNOCK, 1, 30)


# ---------------------------------------------------------------------------------------------------------
# Variants


def test_straight_gin_refuses_a_knock() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "2D", variant=Variant.STRAIGHT), "take")
    assert GIN.view(state, 1).knock_limit == 0
    assert not any(action.startswith("knock") for action in GIN.legal_actions(state, 1))
    with pytest.raises(IllegalActionError, match="knocking is not allowed in straight gin: go gin"):
        play(state, "knock KD")


def test_straight_gin_allows_gin() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "QS", variant=Variant.STRAIGHT), "take", "gin KD")
    assert last(state).end is HandEnd.GIN
    assert last(state).knock_limit == 0


def test_oklahoma_ace_upcard_means_gin_only() -> None:
    state = start(LOOSE_DEFENDER, MELDS_AND_KING, "AH", variant=Variant.OKLAHOMA)
    assert GIN.view(state, 1).knock_limit == 0
    state = play(state, "take")
    assert not any(action.startswith("knock") for action in GIN.legal_actions(state, 1))
    with pytest.raises(IllegalActionError, match="upcard AH is an ace: knocking is not allowed"):
        play(state, "knock KD")
    defender = "KC 8S 9D 9H QD 2H 3D 5D 6H 8H"
    gin = play(start(defender, "2C 3C 4C 7D 7H 7S 9S TS JS KD", "AC", variant=Variant.OKLAHOMA), "take")
    gin = play(gin, "gin KD")
    assert last(gin).end is HandEnd.GIN
    assert (last(gin).upcard, last(gin).knock_limit) == ("AC", 0)


def test_oklahoma_face_card_upcard_allows_ten() -> None:
    state = start(LOOSE_DEFENDER, MELDS_AND_KING, "KH", variant=Variant.OKLAHOMA)
    assert GIN.view(state, 0).knock_limit == 10
    state = play(state, "take", "knock KD")
    assert last(state).end is HandEnd.KNOCK
    assert last(state).hands[1].deadwood_points == 10
    assert last(state).knock_limit == 10


def test_oklahoma_number_upcard_sets_the_limit_and_is_read_each_hand() -> None:
    state = start(LOOSE_DEFENDER, "AC 2C 3C 7D 7H 7S 9S TS JS 6C", "5S", "8C", variant=Variant.OKLAHOMA)
    assert GIN.view(state, 1).knock_limit == 5
    state = play(state, "pass", "pass", "stock")
    with pytest.raises(
        IllegalActionError, match="discarding 8C would be 6, over this hand's knock limit of 5"
    ):
        play(state, "knock 8C")
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "4D", variant=Variant.OKLAHOMA), "take", "knock KD")
    assert last(state).knock_limit == 4
    assert GIN.view(state, 0).knock_limit == 0  # while dealing: unknown until the upcard
    state = deal_next(state, MELDS_AND_KING, LOOSE_DEFENDER, "9C")
    assert GIN.view(state, 0).knock_limit == 9


# ---------------------------------------------------------------------------------------------------------
# Void hands


def cycle_stock(state: GinState, turns: int) -> GinState:
    """``state`` after ``turns`` turns in which the mover draws from the stock and discards that card."""
    for _ in range(turns):
        state = play(state, "stock", f"discard {card_text(state.stock[0])}")
    return state


def test_void_hand_when_the_stock_runs_down() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "2D"), "pass", "pass")
    state = cycle_stock(state, 28)
    assert len(state.stock) == 3
    assert GIN.view(state, 1).phase is Phase.DRAW
    state = cycle_stock(state, 1)
    result = last(state)
    assert result.end is HandEnd.VOID
    assert (result.ender, result.winner, result.points) == (None, None, 0)
    assert state.hand_wins == (0, 0)
    assert state.points == (0, 0)
    # The same dealer deals again, with the next shuffle.
    assert state.dealer == 0
    assert GIN.to_move(state) == 1
    assert GIN.chance_needed(state) == ChanceRequest("shuffle", 1, "shuffle", 1, 52)
    assert GIN.view(state, 0).hand_number == 1
    state = deal_next(state, LOOSE_DEFENDER, MELDS_AND_KING, "2D")
    assert GIN.view(state, 0).hand_number == 2
    assert GIN.view(state, 0).dealer == 0
    assert GIN.to_move(state) == 1


def test_knock_on_the_last_turn_beats_the_void() -> None:
    state = play(start(LOOSE_DEFENDER, MELDS_AND_KING, "2D"), "pass", "pass")
    state = cycle_stock(state, 28)
    drawn = state.stock[0]
    state = play(state, "stock")
    assert len(state.stock) == 2
    state = play(state, f"knock {card_text(drawn)}")
    assert last(state).end in (HandEnd.KNOCK, HandEnd.UNDERCUT)
    assert last(state).ender == 1


# ---------------------------------------------------------------------------------------------------------
# A whole match


def test_match_to_three_hand_wins() -> None:
    state = play(start(LAYING_DEFENDER, MELDS_AND_KING, "2D"), "take", "knock KD")  # hand 1: seat 1, 28
    assert state.dealer == 1
    state = deal_next(state, MELDS_AND_KING, LOOSE_DEFENDER, "QS")
    assert GIN.to_move(state) == 0
    state = play(state, "take", "gin KD")  # hand 2: seat 0, 89
    assert state.dealer == 0
    state = deal_next(state, LOOSE_DEFENDER, MELDS_ONLY, "KS")
    state = play(state, "take", "biggin")  # hand 3: seat 1, 95
    assert state.hand_wins == (1, 2)
    state = deal_next(state, LOOSE_DEFENDER, MELDS_AND_KING, "QS")
    assert GIN.to_move(state) == 0
    state = play(state, "pass", "take", "gin KD")  # hand 4: the dealer, seat 1, 89
    assert [(r.hand_number, r.dealer, r.winner, r.points) for r in state.results] == [
        (1, 0, 1, 28),
        (2, 1, 0, 89),
        (3, 0, 1, 95),
        (4, 1, 1, 89),
    ]
    assert GIN.outcome(state) == Outcome(
        Termination.HANDS_WON,
        1,
        detail="seat 1 wins 3 hands to 1 (212 points to 89)",
        score=(0.0, 1.0),
    )
    assert GIN.is_over(state)
    assert GIN.to_move(state) is None
    assert GIN.chance_needed(state) is None
    assert GIN.legal_actions(state, 0) == GIN.legal_actions(state, 1) == []
    view = GIN.view(state, 0)
    assert view.phase is Phase.MATCH_OVER
    assert view.hand_wins == (1, 3)
    assert view.points == (89, 212)
    assert len(view.hands) == 4
    with pytest.raises(IllegalActionError, match="the match is over \\(seat 1 wins 3 hands to 1"):
        GIN.apply(state, 1, "stock", CLOCKS)
    log = hand_log(state)
    assert log[0] == "seat 0 deals hand 1 (dealer coin 0)"
    assert log[-1] == "seat 1 wins 3 hands to 1 (212 points to 89)"
    assert sum(line.startswith("hand ") for line in log) == 4
    assert "  seat 1: take (2D)" in log
    assert "  seat 1: knock KD" in log


def test_one_hand_match() -> None:
    state = play(
        start(LOOSE_DEFENDER, MELDS_AND_KING, "QS", dealer=1, hands_to_win=1), "pass", "take", "gin KD"
    )
    # Seat 1 deals: seat 0 is offered the upcard first and passes; the dealer takes it and goes gin.
    outcome = GIN.outcome(state)
    assert outcome is not None
    assert outcome.winner == 1
    assert outcome.detail == "seat 1 wins 1 hands to 0 (89 points to 0)"


# ---------------------------------------------------------------------------------------------------------
# Outcomes decided outside the table, notation


def test_timeout_and_resignation_lose_the_match() -> None:
    state = start(LOOSE_DEFENDER, MELDS_AND_KING, "2D")
    assert GIN.timeout_outcome(state, 0) == Outcome(
        Termination.TIMEOUT, 1, detail="seat 0 ran out of time; seat 1 wins", score=(0.0, 1.0)
    )
    assert GIN.resignation_outcome(state, 1) == Outcome(
        Termination.RESIGNATION, 0, detail="seat 1 resigned; seat 0 wins", score=(1.0, 0.0)
    )


def test_describe_gives_canonical_notation_without_hidden_cards() -> None:
    state = start(LOOSE_DEFENDER, MELDS_AND_KING, "2D")
    assert describe(state, " Knock kd ") == "knock KD"
    assert describe(state, Take()) == "take"
    assert describe(state, "stock") == "stock"


def test_hand_log_records_the_deal() -> None:
    state = start(LOOSE_DEFENDER, MELDS_AND_KING, "2D", "5S")
    log = hand_log(state)
    assert log[1] == "hand 1: seat 0 deals (shuffle 0)"
    assert log[2] == "  seat 0 is dealt 4C 3D 5D 9D QD 2H 6H 8H 9H 8S"
    assert log[3] == "  seat 1 is dealt " + " ".join(sort_cards(MELDS_AND_KING.split()))
    assert log[4].startswith("  upcard 2D (knock limit 10); stock, top first: 5S ")
    state = play(state, "pass", "pass", "stock")
    assert hand_log(state)[-1] == "  seat 1: stock (5S)"


def test_rigged_helper_matches_the_engine() -> None:
    # The helper is how every test controls the deal: check it against the documented order once more.
    permutation = rigged(0, LOOSE_DEFENDER, MELDS_AND_KING, "2D")
    assert sorted(permutation) == list(range(52))
    state = deal_next(new(dealer=0), LOOSE_DEFENDER, MELDS_AND_KING, "2D")
    assert sorted(GIN.view(state, 0).hand) == sorted(LOOSE_DEFENDER.split())
    assert sorted(GIN.view(state, 1).hand) == sorted(MELDS_AND_KING.split())
