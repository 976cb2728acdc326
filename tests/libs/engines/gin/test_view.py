"""Views: the fields the protobuf codec relies on, and no hidden card ever in a seat's view."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from libs.engines.gin import (
    CARD_TEXT,
    GIN,
    GinOptions,
    GinState,
    GinView,
    HandResult,
    HandReveal,
    Phase,
    SeatCards,
    Variant,
    best_arrangement,
    texts_of,
)
from tests.libs.engines.gin import play, random_match, start


def test_view_fields_mirror_the_proto() -> None:
    assert [f.name for f in dataclasses.fields(GinView)] == [
        "variant",
        "hands_to_win",
        "hand_number",
        "dealer",
        "phase",
        "hand",
        "melds",
        "deadwood",
        "deadwood_points",
        "discard_pile",
        "stock_count",
        "seats",
        "knock_limit",
        "hand_wins",
        "points",
        "hands",
        "taken_from_discard",
        "to_move",
    ]
    assert [f.name for f in dataclasses.fields(SeatCards)] == ["seat", "card_count", "known_cards"]
    assert [f.name for f in dataclasses.fields(HandResult)] == [
        "hand_number",
        "end",
        "ender",
        "winner",
        "points",
        "hands",
        "dealer",
        "upcard",
        "knock_limit",
    ]
    assert [f.name for f in dataclasses.fields(HandReveal)] == [
        "seat",
        "cards",
        "melds",
        "deadwood",
        "deadwood_points",
        "laid_off",
    ]


def test_a_players_view() -> None:
    state = start("4C 8S 9D 9H QD 2H 3D 5D 6H 8H", "AC 2C 3C 7D 7H 7S 9S TS JS KD", "2D")
    state = play(state, "take")
    view = GIN.view(state, 1)
    assert view.variant is Variant.STANDARD
    assert view.hands_to_win == 3
    assert view.hand_number == 1
    assert view.dealer == 0
    assert view.phase is Phase.DISCARD
    assert view.hand == ("AC", "2C", "3C", "2D", "7D", "KD", "7H", "7S", "9S", "TS", "JS")
    assert view.melds == (("AC", "2C", "3C"), ("7D", "7H", "7S"), ("9S", "TS", "JS"))
    assert view.deadwood == ("2D", "KD")
    assert view.deadwood_points == 12
    assert view.discard_pile == ()
    assert view.stock_count == 31
    assert view.seats == (SeatCards(0, 10, ()), SeatCards(1, 11, ("2D",)))
    assert view.knock_limit == 10
    assert view.hand_wins == (0, 0)
    assert view.points == (0, 0)
    assert view.hands == ()
    assert view.taken_from_discard == "2D"
    assert view.to_move == 1


def test_a_spectators_view_has_no_hand() -> None:
    state = start("4C 8S 9D 9H QD 2H 3D 5D 6H 8H", "AC 2C 3C 7D 7H 7S 9S TS JS KD", "2D")
    view = GIN.view(state, None)
    assert (view.hand, view.melds, view.deadwood, view.deadwood_points) == ((), (), (), 0)
    assert view.seats == (SeatCards(0, 10, ()), SeatCards(1, 10, ()))
    assert view.discard_pile == ("2D",)


def strings(value: Any) -> set[str]:
    """Every string anywhere in ``value`` (dicts, lists, tuples), e.g. ``dataclasses.asdict(view)``."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(strings(v) for v in value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*(strings(v) for v in value)) if value else set()
    return set()


def secret_cards(state: GinState, viewer: int | None) -> set[str]:
    """The cards ``viewer`` must not see: the stock, and every hand but the viewer's, less the cards
    everybody saw taken from the discard pile."""
    secret = set(texts_of(sum(1 << card for card in state.stock)))
    for seat in (0, 1):
        if seat != viewer:
            secret |= set(texts_of(state.hands[seat] & ~state.known[seat]))
    return secret


def check_secrecy(state: GinState) -> None:
    for viewer in (0, 1, None):
        view = GIN.view(state, viewer)
        visible = dataclasses.asdict(view)
        finished = visible.pop("hands")  # finished hands are revealed on purpose
        assert view.hands == state.results
        secret = secret_cards(state, viewer)
        if state.phase not in (Phase.DEALING, Phase.MATCH_OVER):
            assert len(secret) > 2  # the stock at least: the check is never vacuous
        leaked = strings(visible) & secret
        assert not leaked, f"seat {viewer} sees {leaked}"
        if not state.results:
            assert not strings(finished)
        if viewer is not None:
            assert set(view.hand) == set(texts_of(state.hands[viewer]))
            arrangement = best_arrangement(view.hand)
            assert (view.melds, view.deadwood, view.deadwood_points) == (
                arrangement.melds,
                arrangement.deadwood,
                arrangement.deadwood_points,
            )
            assert list(view.hand) == sorted(view.hand, key=CARD_TEXT.index)


def test_no_hidden_card_in_any_view_over_random_matches() -> None:
    rng = random.Random(2024)
    for match in range(12):
        variant = list(Variant)[match % 3]
        random_match(rng, GinOptions(variant=variant, hands_to_win=2), check_secrecy)
