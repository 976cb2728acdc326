"""Tests of the gin rummy engine (``libs/engines/gin``), with the helpers they share.

Deals are rigged by choosing the shuffle handed to ``apply_chance``: :func:`rigged` builds the
permutation that deals the given cards (the engine's deal is fixed by the rules, so this is exactly what
a fairness stream would have to draw).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from libs.engines.base import ActionContext
from libs.engines.gin import GIN, GinOptions, GinState, Variant, card_index, discard_deadwood

CLOCKS = ActionContext(remaining_ms=(60_000, 60_000))


def cards(text: str) -> list[int]:
    """Deck indices of space-separated cards (``"AC 2C 3C"``)."""
    return [card_index(card) for card in text.split()]


def rigged(dealer: int, seat0: str, seat1: str, upcard: str, stock: str = "") -> tuple[int, ...]:
    """The shuffle that deals ``seat0`` and ``seat1`` (ten cards each), turns ``upcard`` up and puts
    ``stock`` on top of the stock (the other cards follow in deck order)."""
    hands = {0: cards(seat0), 1: cards(seat1)}
    assert len(hands[0]) == len(hands[1]) == 10
    non_dealer, dealer_cards = hands[1 - dealer], hands[dealer]
    order: list[int] = []
    for mine, theirs in zip(non_dealer, dealer_cards, strict=True):
        order += [mine, theirs]
    order += cards(upcard) + cards(stock)
    assert len(set(order)) == len(order), "a card is dealt twice"
    order += [card for card in range(52) if card not in order]
    return tuple(order)


def new(variant: Variant = Variant.STANDARD, hands_to_win: int = 3, dealer: int = 0) -> GinState:
    """A new match whose first dealer has been drawn (waiting for the first shuffle)."""
    state = GIN.new_game(GinOptions(variant=variant, hands_to_win=hands_to_win))
    request = GIN.chance_needed(state)
    assert request is not None
    return GIN.apply_chance(state, request, (dealer,))


def deal_next(state: GinState, seat0: str, seat1: str, upcard: str, stock: str = "") -> GinState:
    """``state`` after the pending shuffle, rigged to deal these cards."""
    request = GIN.chance_needed(state)
    assert request is not None
    assert request.kind == "shuffle"
    assert state.dealer is not None
    return GIN.apply_chance(state, request, rigged(state.dealer, seat0, seat1, upcard, stock))


def start(
    seat0: str,
    seat1: str,
    upcard: str,
    stock: str = "",
    *,
    dealer: int = 0,
    variant: Variant = Variant.STANDARD,
    hands_to_win: int = 3,
) -> GinState:
    """A match with the first hand rigged and dealt."""
    return deal_next(new(variant, hands_to_win, dealer), seat0, seat1, upcard, stock)


def play(state: GinState, *actions: str) -> GinState:
    """``state`` after ``actions``, each taken by the seat to move."""
    for action in actions:
        seat = GIN.to_move(state)
        assert seat is not None, f"nobody may act before {action!r}"
        state = GIN.apply(state, seat, action, CLOCKS)
    return state


def random_permutation(rng: random.Random) -> tuple[int, ...]:
    permutation = list(range(52))
    rng.shuffle(permutation)
    return tuple(permutation)


def choose(rng: random.Random, state: GinState, seat: int) -> str:
    """A legal action for ``seat``, random but biased towards ending hands (so that matches finish): end
    the hand when possible, usually discard the card that leaves the least deadwood."""
    actions = GIN.legal_actions(state, seat)
    assert actions, "the seat to move has no legal action"
    ends = [a for a in actions if a.startswith(("knock", "gin", "biggin"))]
    if ends and rng.random() < 0.85:
        return rng.choice(ends)
    if rng.random() < 0.15:
        return rng.choice(actions)
    view = GIN.view(state, seat)
    if actions[0].startswith("discard"):
        after = discard_deadwood(view.hand)
        discards = [a for a in actions if a.startswith("discard")]
        return min(discards, key=lambda a: (after[a.split()[1]], a))
    if "take" in actions:
        # Take the upcard or the discard when it would lower the deadwood after the best discard.
        top = view.discard_pile[-1]
        after = discard_deadwood([*view.hand, top])
        best = min(points for card, points in after.items() if card != top)
        if best < view.deadwood_points:
            return "take"
        return "pass" if "pass" in actions else "stock"
    return rng.choice(actions)


def random_match(
    rng: random.Random, options: GinOptions, check: Callable[[GinState], None] | None = None
) -> GinState:
    """A whole match played by :func:`choose` with random shuffles; ``check`` sees every state."""
    state = GIN.new_game(options)
    while GIN.outcome(state) is None:
        if check is not None:
            check(state)
        request = GIN.chance_needed(state)
        if request is not None:
            values = (rng.randrange(2),) if request.kind == "coin" else random_permutation(rng)
            state = GIN.apply_chance(state, request, values)
            continue
        seat = GIN.to_move(state)
        assert seat is not None
        state = GIN.apply(state, seat, choose(rng, state, seat), CLOCKS)
    if check is not None:
        check(state)
    return state
