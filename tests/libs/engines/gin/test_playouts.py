"""Random matches (fixed seeds) checking the engine's invariants at every step."""

from __future__ import annotations

import itertools
import random

import pytest

from libs.engines.base import IllegalActionError, Termination
from libs.engines.gin import (
    CARD_TEXT,
    GIN,
    GinOptions,
    GinState,
    HandEnd,
    Phase,
    Variant,
    deadwood_points,
)
from tests.libs.engines.gin import CLOCKS, random_match

EVERY_ACTION = ["take", "pass", "stock", "biggin"] + [
    f"{verb} {card}" for verb in ("discard", "knock", "gin") for card in CARD_TEXT
]
SWEEP_EVERY = 7
"""Trying every possible action is costly; do it on every so many states."""


class Checker:
    def __init__(self) -> None:
        self.steps = 0

    def __call__(self, state: GinState) -> None:
        self.steps += 1
        check_cards(state)
        check_scores(state)
        if self.steps % SWEEP_EVERY == 0:
            check_legal_actions(state)


def check_cards(state: GinState) -> None:
    mover = GIN.to_move(state)
    if state.phase in (Phase.DEALING, Phase.MATCH_OVER):
        assert state.hands == (0, 0)
        assert state.stock == state.discard_pile == ()
        return
    piles = [state.hands[0], state.hands[1], *(1 << card for card in state.stock + state.discard_pile)]
    union = 0
    for mask in piles:
        assert not union & mask, "a card is in two places"
        union |= mask
    assert union == (1 << 52) - 1, "the 52 cards are not all there"
    sizes = [state.hands[seat].bit_count() for seat in (0, 1)]
    assert mover is not None
    if state.phase is Phase.DISCARD:
        assert sizes[mover] == 11
        assert sizes[1 - mover] == 10
    else:
        assert sizes == [10, 10]
    if state.phase is Phase.UPCARD_OFFER:
        assert len(state.discard_pile) == 1
        assert len(state.stock) == 31
    assert len(state.stock) > 2 or state.phase is Phase.DISCARD
    for seat in (0, 1):
        assert state.known[seat] & ~state.hands[seat] == 0


def check_scores(state: GinState) -> None:
    wins, points = [0, 0], [0, 0]
    for number, result in enumerate(state.results, start=1):
        assert result.hand_number <= state.deals
        if result.end is HandEnd.VOID:
            assert result.winner is None
            continue
        assert result.winner is not None
        assert result.ender is not None
        wins[result.winner] += 1
        points[result.winner] += result.points
        ender = result.hands[result.ender]
        defender = result.hands[1 - result.ender]
        assert ender.deadwood_points == deadwood_points(ender.cards)
        if result.end in (HandEnd.KNOCK, HandEnd.UNDERCUT):
            assert 0 < ender.deadwood_points <= result.knock_limit
            undercut = defender.deadwood_points <= ender.deadwood_points
            assert (result.end is HandEnd.UNDERCUT) == undercut
            assert result.winner == (1 - result.ender if undercut else result.ender)
        else:
            assert ender.deadwood_points == 0
            assert defender.laid_off == ()
            assert len(ender.cards) == (11 if result.end is HandEnd.BIG_GIN else 10)
        del number
    assert tuple(wins) == state.hand_wins
    assert tuple(points) == state.points


def check_legal_actions(state: GinState) -> None:
    legal = {seat: set(GIN.legal_actions(state, seat)) for seat in (0, 1)}
    mover = GIN.to_move(state)
    for seat in (0, 1):
        if seat != mover or state.phase in (Phase.DEALING, Phase.MATCH_OVER):
            assert not legal[seat]
    if mover is None or state.phase is Phase.DEALING:
        return
    assert legal[mover]
    for action in EVERY_ACTION:
        if action in legal[mover]:
            GIN.apply(state, mover, action, CLOCKS)
        else:
            with pytest.raises(IllegalActionError):
                GIN.apply(state, mover, action, CLOCKS)


@pytest.mark.parametrize("variant", list(Variant))
def test_random_matches_keep_the_invariants(variant: Variant) -> None:
    rng = random.Random(f"gin-{variant}")
    ends: set[HandEnd] = set()
    for match in range(25):
        checker = Checker()
        hands = 1 + match % 3
        state = random_match(rng, GinOptions(variant=variant, hands_to_win=hands), checker)
        outcome = GIN.outcome(state)
        assert outcome is not None
        assert outcome.termination is Termination.HANDS_WON
        assert outcome.winner is not None
        assert state.hand_wins[outcome.winner] == hands
        assert state.hand_wins[1 - outcome.winner] < hands
        assert outcome.score == ((1.0, 0.0) if outcome.winner == 0 else (0.0, 1.0))
        assert GIN.view(state, None).phase is Phase.MATCH_OVER
        ends |= {result.end for result in state.results}
    if variant is Variant.STANDARD:
        assert {HandEnd.KNOCK, HandEnd.UNDERCUT} <= ends
    else:
        assert HandEnd.GIN in ends


def test_dealers_alternate_and_voids_are_redealt_by_the_same_dealer() -> None:
    rng = random.Random(5)
    for _ in range(6):
        state = random_match(rng, GinOptions(hands_to_win=3))
        results = state.results
        assert [r.hand_number for r in results] == list(range(1, len(results) + 1))
        for before, after in itertools.pairwise(results):
            expected = before.dealer if before.end is HandEnd.VOID else 1 - before.dealer
            assert after.dealer == expected
