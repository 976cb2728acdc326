"""The deadwood optimiser and lay-offs, checked against brute force written here from the rules alone.

The brute force shares no code with ``libs/engines/gin/melds.py``: cards are plain ``(rank, suit)``
pairs, a meld is checked by its definition, and a hand's deadwood is the least over every partition of
its cards into melds and deadwood.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import combinations, pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libs.engines.gin import (
    Arrangement,
    best_arrangement,
    can_meld_all,
    deadwood_points,
    discard_deadwood,
    is_meld,
    lay_off,
    mask_of,
)

# ---------------------------------------------------------------------------------------------------------
# The brute force

RANK_LETTERS = "A23456789TJQK"
SUIT_LETTERS = "CDHS"
EVERY_CARD = [(rank, suit) for suit in SUIT_LETTERS for rank in range(1, 14)]

Plain = tuple[int, str]


def plain(text: str) -> Plain:
    return RANK_LETTERS.index(text[0]) + 1, text[1]


def text(card: Plain) -> str:
    return RANK_LETTERS[card[0] - 1] + card[1]


def points(card: Plain) -> int:
    return min(card[0], 10)


def valid_meld(group: Sequence[Plain]) -> bool:
    if len(group) < 3:
        return False
    ranks = sorted(rank for rank, _ in group)
    suits = [suit for _, suit in group]
    if len(set(ranks)) == 1:
        return len(group) <= 4 and len(set(suits)) == len(group)
    if len(set(suits)) == 1:
        return all(b == a + 1 for a, b in pairwise(ranks))
    return False


def brute_deadwood(hand: Sequence[Plain]) -> int:
    """The least deadwood over every partition of ``hand`` into melds and deadwood."""
    if not hand:
        return 0
    first, rest = hand[0], list(hand[1:])
    best = points(first) + brute_deadwood(rest)
    # Every meld holding ``first``: the other cards all share its rank or all share its suit.
    for partners in ([c for c in rest if c[0] == first[0]], [c for c in rest if c[1] == first[1]]):
        for size in range(2, len(partners) + 1):
            for chosen in combinations(partners, size):
                if valid_meld([first, *chosen]):
                    left = [c for c in rest if c not in chosen]
                    best = min(best, brute_deadwood(left))
    return best


def can_lay_all(melds: list[list[Plain]], cards: list[Plain]) -> bool:
    """Whether ``cards`` can all be added one by one to ``melds``, each addition leaving a valid meld."""
    if not cards:
        return True
    for card in cards:
        for index, meld in enumerate(melds):
            if valid_meld([*meld, card]):
                grown = [*melds[:index], [*meld, card], *melds[index + 1 :]]
                if can_lay_all(grown, [c for c in cards if c != card]):
                    return True
    return False


def brute_lay_off(knocker_melds: list[list[Plain]], defender: list[Plain]) -> int:
    """The least deadwood the defender can keep, over every set of cards laid off."""
    best = sum(points(card) for card in defender)
    # A card can only join a meld whose cards share its suit or its rank: try subsets of those only.
    related = [
        card
        for card in defender
        if any(card[0] == other[0] or card[1] == other[1] for meld in knocker_melds for other in meld)
    ]
    for size in range(len(related) + 1):
        for laid in combinations(related, size):
            if can_lay_all(knocker_melds, list(laid)):
                best = min(best, brute_deadwood([c for c in defender if c not in laid]))
    return best


def check_arrangement(hand: Sequence[str], arrangement: Arrangement) -> None:
    """The arrangement partitions ``hand`` into valid melds and deadwood, and adds its points right."""
    placed = [card for meld in arrangement.melds for card in meld] + list(arrangement.deadwood)
    assert sorted(placed) == sorted(hand)
    for meld in arrangement.melds:
        assert valid_meld([plain(card) for card in meld]), meld
    assert arrangement.deadwood_points == sum(points(plain(card)) for card in arrangement.deadwood)


def random_hand(rng: random.Random, size: int, dense: bool) -> list[str]:
    """A random hand; ``dense`` hands come from few ranks and suits, so that melds overlap a lot."""
    if dense:
        low = rng.randint(1, 9)
        suits = rng.sample(SUIT_LETTERS, rng.choice((2, 3, 4)))
        pool = [(rank, suit) for rank in range(low, low + 5) for suit in suits]
        pool += rng.sample([c for c in EVERY_CARD if c not in pool], max(0, size - len(pool)) + 2)
    else:
        pool = EVERY_CARD
    return [text(card) for card in rng.sample(pool, size)]


# ---------------------------------------------------------------------------------------------------------
# The optimiser


@pytest.mark.parametrize("size", [10, 11])
def test_optimiser_matches_brute_force_on_random_hands(size: int) -> None:
    rng = random.Random(20_240 + size)
    for round_ in range(2_000):
        hand = random_hand(rng, size, dense=round_ % 2 == 0)
        arrangement = best_arrangement(hand)
        check_arrangement(hand, arrangement)
        assert arrangement.deadwood_points == brute_deadwood([plain(c) for c in hand]), hand
        assert deadwood_points(hand) == arrangement.deadwood_points
        assert can_meld_all(hand) == (arrangement.deadwood_points == 0)


def test_discard_deadwood_matches_brute_force() -> None:
    rng = random.Random(7)
    for round_ in range(300):
        hand = random_hand(rng, 11, dense=round_ % 2 == 0)
        after = discard_deadwood(hand)
        assert sorted(after) == sorted(hand)
        for card, left in after.items():
            assert left == brute_deadwood([plain(c) for c in hand if c != card]), (hand, card)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([text(c) for c in EVERY_CARD]), min_size=0, max_size=11, unique=True))
def test_optimiser_matches_brute_force_on_any_hand(hand: list[str]) -> None:
    arrangement = best_arrangement(hand)
    check_arrangement(hand, arrangement)
    assert arrangement.deadwood_points == brute_deadwood([plain(c) for c in hand])


def test_card_in_a_set_or_a_run_goes_where_it_saves_most() -> None:
    # 7H completes either 7C 7D 7H or 5H 6H 7H 8H; the run saves more (5H 6H 8H = 19 > 7C 7D = 14).
    assert best_arrangement(["7C", "7D", "7H", "5H", "6H", "8H", "KS"]) == Arrangement(
        melds=(("5H", "6H", "7H", "8H"),), deadwood=("7C", "7D", "KS"), deadwood_points=24
    )
    # With a fourth seven, the set gives 7H up and everything melds.
    assert best_arrangement(["7C", "7D", "7H", "7S", "5H", "6H", "8H"]) == Arrangement(
        melds=(("7C", "7D", "7S"), ("5H", "6H", "7H", "8H")), deadwood=(), deadwood_points=0
    )


def test_overlapping_sets_and_runs_in_a_square() -> None:
    # Three sets or three runs meld the same nine cards; the tie-break takes the runs (deck order).
    arrangement = best_arrangement(["5C", "6C", "7C", "5D", "6D", "7D", "5H", "6H", "7H", "KS"])
    assert arrangement.deadwood_points == 10
    assert arrangement.melds == (("5C", "6C", "7C"), ("5D", "6D", "7D"), ("5H", "6H", "7H"))


def test_one_long_run_rather_than_two() -> None:
    arrangement = best_arrangement(["3H", "4H", "5H", "6H", "7H", "8H"])
    assert arrangement.melds == (("3H", "4H", "5H", "6H", "7H", "8H"),)


def test_long_run_split_to_share_a_card_with_a_set() -> None:
    # The whole run 2H-7H leaves 6C 6D (12); giving 6H to the set 6C 6D 6H leaves only 7H (7).
    arrangement = best_arrangement(["2H", "3H", "4H", "5H", "6H", "7H", "6C", "6D"])
    assert arrangement.deadwood_points == 7
    assert arrangement.deadwood == ("7H",)


def test_ace_is_low_only() -> None:
    assert is_meld(mask_of(["AS", "2S", "3S"]))
    assert not is_meld(mask_of(["QS", "KS", "AS"]))
    assert not is_meld(mask_of(["KS", "AS", "2S"]))
    assert best_arrangement(["QS", "KS", "AS"]).deadwood_points == 21


def test_melds_by_definition() -> None:
    assert is_meld(mask_of(["9C", "9D", "9H"]))
    assert is_meld(mask_of(["9C", "9D", "9H", "9S"]))
    assert not is_meld(mask_of(["9C", "9D"]))
    assert not is_meld(mask_of(["9C", "TC", "JD"]))
    assert not is_meld(mask_of(["9C", "TC", "QC"]))
    assert is_meld(mask_of(["9C", "TC", "JC", "QC", "KC"]))


def test_gin_and_big_gin_hands() -> None:
    assert can_meld_all(["AC", "2C", "3C", "7D", "7H", "7S", "9S", "TS", "JS", "QS"])
    assert can_meld_all(["AC", "2C", "3C", "7D", "7H", "7S", "9S", "TS", "JS", "QS", "KS"])
    assert not can_meld_all(["AC", "2C", "3C", "7D", "7H", "7S", "9S", "TS", "JS", "QS", "5D"])


def test_empty_and_small_hands() -> None:
    assert best_arrangement([]) == Arrangement((), (), 0)
    assert best_arrangement(["KH"]) == Arrangement((), ("KH",), 10)


def test_bad_cards_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        best_arrangement(["7H", "7h"])
    with pytest.raises(ValueError, match="at most 11 cards"):
        best_arrangement([text(card) for card in EVERY_CARD[:12]])


# ---------------------------------------------------------------------------------------------------------
# Lay-offs


def test_lay_offs_extend_runs_at_both_ends_and_chain() -> None:
    result = lay_off([["5H", "6H", "7H"]], ["4H", "3H", "8H", "9H", "KC", "QD"])
    assert sorted(result.laid_off) == ["3H", "4H", "8H", "9H"]
    assert result.deadwood == ("KC", "QD")
    assert result.points == 20
    assert result.defender_melds == ()


def test_lay_off_order_is_playable() -> None:
    # 3H fits only after 4H: the order must lay 4H first.
    result = lay_off([["5H", "6H", "7H"]], ["3H", "4H"])
    assert result.laid_off == ("4H", "3H")


def test_chain_broken_by_a_gap_stops() -> None:
    result = lay_off([["5H", "6H", "7H"]], ["3H", "9H", "KC"])
    assert result.laid_off == ()
    assert result.points == 22


def test_fourth_card_of_a_set() -> None:
    result = lay_off([["9C", "9D", "9S"]], ["9H", "2C"])
    assert result.laid_off == ("9H",)
    assert result.points == 2
    assert lay_off([["9C", "9D", "9H", "9S"]], ["2C"]).laid_off == ()


def test_runs_do_not_wrap_past_the_king() -> None:
    result = lay_off([["JS", "QS", "KS"]], ["AS", "TS"])
    assert result.laid_off == ("TS",)
    assert result.deadwood == ("AS",)


def test_own_meld_against_lay_off_chosen_jointly() -> None:
    # Laying off 4H then 3H on 5H 6H 7H leaves 4C 4D (8); keeping 4H in the set 4C 4D 4H leaves 3H (3),
    # which no longer fits the run.
    result = lay_off([["5H", "6H", "7H"]], ["4C", "4D", "4H", "3H"])
    assert result.defender_melds == (("4C", "4D", "4H"),)
    assert result.deadwood == ("3H",)
    assert result.points == 3


def test_laid_off_card_may_bridge_two_knocker_runs() -> None:
    result = lay_off([["3H", "4H", "5H"], ["8H", "9H", "TH"]], ["6H", "7H"])
    assert sorted(result.laid_off) == ["6H", "7H"]
    assert result.points == 0


def test_lay_off_refuses_bad_knocker_melds() -> None:
    with pytest.raises(ValueError, match="not a meld"):
        lay_off([["5H", "6H", "8H"]], ["2C"])
    with pytest.raises(ValueError, match="holds the knocker's"):
        lay_off([["5H", "6H", "7H"]], ["7H"])
    with pytest.raises(ValueError, match="share a card"):
        lay_off([["5H", "6H", "7H"], ["7C", "7D", "7H"]], ["2C"])


def random_knocker_melds(rng: random.Random) -> list[list[Plain]]:
    melds: list[list[Plain]] = []
    used: set[Plain] = set()
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.5:
            rank = rng.randint(1, 13)
            group = [(rank, suit) for suit in rng.sample(SUIT_LETTERS, rng.choice((3, 3, 4)))]
        else:
            length = rng.randint(3, 5)
            low = rng.randint(1, 14 - length)
            suit = rng.choice(SUIT_LETTERS)
            group = [(rank, suit) for rank in range(low, low + length)]
        if not used & set(group):
            melds.append(group)
            used |= set(group)
    return melds


def random_defender(rng: random.Random, melds: list[list[Plain]]) -> list[Plain]:
    """Ten cards, half of them near the knocker's melds (same suit within three ranks, or same rank)."""
    used = {card for meld in melds for card in meld}
    free = [card for card in EVERY_CARD if card not in used]
    near = [
        card
        for card in free
        if any(
            card[0] == meld_card[0] or (card[1] == meld_card[1] and abs(card[0] - meld_card[0]) <= 3)
            for meld in melds
            for meld_card in meld
        )
    ]
    chosen = rng.sample(near, min(len(near), rng.randint(3, 7)))
    chosen += rng.sample([card for card in free if card not in chosen], 10 - len(chosen))
    return chosen


def test_lay_off_is_optimal_against_brute_force() -> None:
    rng = random.Random(99)
    for _ in range(200):
        melds = random_knocker_melds(rng)
        defender = random_defender(rng, melds)
        result = lay_off([[text(c) for c in meld] for meld in melds], [text(c) for c in defender])
        # The answer is consistent: a partition of the defender's cards, valid melds, playable lay-offs.
        placed = [c for meld in result.defender_melds for c in meld] + [*result.laid_off, *result.deadwood]
        assert sorted(placed) == sorted(text(c) for c in defender)
        for meld in result.defender_melds:
            assert valid_meld([plain(c) for c in meld])
        grown = [list(meld) for meld in melds]
        for card in map(plain, result.laid_off):
            index = next(i for i, meld in enumerate(grown) if valid_meld([*meld, card]))
            grown[index].append(card)
        assert result.points == sum(points(plain(c)) for c in result.deadwood)
        # ... and nothing does better.
        assert result.points == brute_lay_off(melds, defender), (melds, defender)
