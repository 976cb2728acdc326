"""Melds, the deadwood optimiser and lay-offs.

A *set* is three or four cards of one rank; a *run* is three or more cards of one suit in consecutive
ranks, ace low only (``AH 2H 3H`` is a run, ``QH KH AH`` is not). Cards in no meld are *deadwood*.

The optimiser
-------------
:func:`best_arrangement` finds an arrangement of a hand into disjoint melds with the least deadwood
points. It is an exact search over the candidate melds of the hand (every set and every run the hand
contains, so a card that could go into a set or a run is tried both ways), memoised on the bitmask of
the cards still to place: at each step the lowest card left (in deck order) is either deadwood or the
lowest card of one of the candidate melds made of cards still left. Cards that are in no candidate
meld are deadwood outright and never searched. A 10- or 11-card hand takes a few microseconds (a few
tens for dense hands full of overlapping melds); results are cached by hand.

Ties between arrangements with the same deadwood points are broken, in this order, by:

1. fewer deadwood cards;
2. fewer melds (``3H 4H 5H 6H 7H 8H`` is one run, not two);
3. then, going through the cards in deck order (clubs A to K, diamonds, hearts, spades), the lowest card
   not yet placed goes into the first candidate meld it can start (melds compared card by card in deck
   order, so a run ``7C 8C 9C`` comes before a set ``7C 7D 7H``), and is deadwood only when no meld
   keeps the arrangement optimal.

Melds in an :class:`Arrangement` are listed in deck order of their first card; the cards of a meld and
the deadwood are in deck order (a run from low to high, a set in suit order C D H S).

Lay-offs
--------
When a player knocks, the defender may lay deadwood off onto the knocker's melds: a run takes the card
just below or just above it in its suit, again and again (a card laid off makes the next one fit), and a
set of three takes its fourth card. :func:`lay_off` chooses the defender's own melds and the cards laid
off *jointly* so that the defender's final deadwood is the least possible; see its docstring for ties.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import NamedTuple

from libs.engines.gin.cards import (
    CARD_TEXT,
    CARD_VALUE,
    Card,
    CardLike,
    cards_of,
    make_card,
    mask_of,
    points_of,
    rank_of,
    suit_of,
    texts_of,
)

# ---------------------------------------------------------------------------------------------------------
# Every meld of the deck, indexed by its lowest card.


def _all_melds() -> list[int]:
    melds: list[int] = []
    for rank in range(1, 14):
        cards = [make_card(rank, suit) for suit in range(4)]
        for size in (3, 4):
            for chosen in combinations(cards, size):
                melds.append(mask_of(chosen))
    for suit in range(4):
        for low in range(1, 12):
            for high in range(low + 2, 14):
                melds.append(mask_of(make_card(rank, suit) for rank in range(low, high + 1)))
    return melds


def _melds_by_low() -> tuple[tuple[int, ...], ...]:
    by_low: list[list[int]] = [[] for _ in range(52)]
    for meld in _all_melds():
        by_low[(meld & -meld).bit_length() - 1].append(meld)
    return tuple(tuple(sorted(melds, key=cards_of)) for melds in by_low)


MELDS_BY_LOW: tuple[tuple[int, ...], ...] = _melds_by_low()
"""Every meld of the deck as a bitmask, grouped by its lowest card, each group in the tie-break order."""
ALL_MELDS: frozenset[int] = frozenset(meld for group in MELDS_BY_LOW for meld in group)
"""Every set and run of the deck as a bitmask (65 sets, 264 runs)."""

# The search minimises one integer that orders arrangements by (deadwood points, deadwood cards, melds):
# a deadwood card adds value * 4096 + 64, a meld adds 1. The parts never overflow into each other (at
# most 52 deadwood cards, 17 melds), so integer order is lexicographic order on the three.
_POINTS_SHIFT = 12
_DEAD_SHIFT = 6
_PART_MASK = (1 << _DEAD_SHIFT) - 1
_DEAD_COST: tuple[int, ...] = tuple((value << _POINTS_SHIFT) + (1 << _DEAD_SHIFT) for value in CARD_VALUE)
_MELD_COST = 1


def is_meld(mask: int) -> bool:
    """Whether the cards of ``mask`` form one set or one run."""
    return mask in ALL_MELDS


def is_set(mask: int) -> bool:
    """Whether the cards of ``mask`` form a set (three or four of a rank)."""
    cards = cards_of(mask)
    return len(cards) in (3, 4) and len({rank_of(card) for card in cards}) == 1


@dataclass(frozen=True, slots=True)
class Arrangement:
    """A hand arranged into melds and deadwood (cards as text, see the module docstring for order)."""

    melds: tuple[tuple[str, ...], ...]
    deadwood: tuple[str, ...]
    deadwood_points: int


class LayOff(NamedTuple):
    """The defender's hand after lay-offs: own melds, cards laid off (in an order that lays them off one
    by one), deadwood left and its points."""

    defender_melds: tuple[tuple[str, ...], ...]
    laid_off: tuple[str, ...]
    deadwood: tuple[str, ...]
    points: int


_SUIT_BITS = (1 << 13) - 1
_RUN_STARTS = sum(((1 << 11) - 1) << (13 * suit) for suit in range(4))
"""The cards a run can start from (ace to jack of every suit)."""


def _dead_cost(mask: int) -> int:
    total = 0
    while mask:
        low = mask & -mask
        total += _DEAD_COST[low.bit_length() - 1]
        mask ^= low
    return total


class _Search:
    """The memoised search over one hand's candidate melds (valid for any part of that hand).

    Only the cards of some candidate meld (``meldable``) are searched; the others are deadwood outright.
    """

    __slots__ = ("by_low", "meldable", "memo")

    def __init__(self, hand: int) -> None:
        # Cards that may start a meld: three in a row in a suit, or a rank held in three suits or more.
        starts = hand & (hand >> 1) & (hand >> 2) & _RUN_STARTS
        clubs, diamonds = hand & _SUIT_BITS, (hand >> 13) & _SUIT_BITS
        hearts, spades = (hand >> 26) & _SUIT_BITS, hand >> 39
        three = (clubs & diamonds & (hearts | spades)) | ((clubs | diamonds) & hearts & spades)
        if three:
            starts |= hand & (three | three << 13 | three << 26 | three << 39)
        by_low: list[tuple[int, ...]] = [()] * 52
        meldable = 0
        while starts:
            low = starts & -starts
            starts ^= low
            card = low.bit_length() - 1
            melds = tuple(meld for meld in MELDS_BY_LOW[card] if meld & hand == meld)
            by_low[card] = melds
            for meld in melds:
                meldable |= meld
        self.by_low = by_low
        self.meldable = meldable
        self.memo: dict[int, int] = {0: 0}

    def cost(self, mask: int) -> int:
        """The least cost of ``mask`` (a part of the hand), encoded as described above."""
        return _dead_cost(mask & ~self.meldable) + self._cost(mask & self.meldable)

    def _cost(self, mask: int) -> int:
        best = self.memo.get(mask)
        if best is not None:
            return best
        low = mask & -mask
        card = low.bit_length() - 1
        best = _DEAD_COST[card] + self._cost(mask ^ low)
        for meld in self.by_low[card]:
            if meld & mask == meld:
                cost = _MELD_COST + self._cost(mask ^ meld)
                if cost < best:
                    best = cost
        self.memo[mask] = best
        return best

    def build(self, mask: int) -> tuple[tuple[int, ...], int]:
        """The canonical optimal arrangement of ``mask``: meld masks in order, and the deadwood mask."""
        melds: list[int] = []
        dead = mask & ~self.meldable
        mask &= self.meldable
        while mask:
            target = self._cost(mask)
            low = mask & -mask
            card = low.bit_length() - 1
            for meld in self.by_low[card]:
                if meld & mask == meld and _MELD_COST + self._cost(mask ^ meld) == target:
                    melds.append(meld)
                    mask ^= meld
                    break
            else:
                dead |= low
                mask ^= low
        return tuple(melds), dead


def _points(cost: int) -> int:
    return cost >> _POINTS_SHIFT


def _arrangement(melds: Iterable[int], dead: int) -> Arrangement:
    return Arrangement(
        melds=tuple(texts_of(meld) for meld in melds),
        deadwood=texts_of(dead),
        deadwood_points=points_of(dead),
    )


@lru_cache(maxsize=8192)
def arrange_mask(hand: int) -> tuple[tuple[int, ...], int]:
    """The canonical best arrangement of the hand ``hand`` (a bitmask): meld masks and deadwood mask."""
    return _Search(hand).build(hand)


@lru_cache(maxsize=8192)
def deadwood_mask(hand: int) -> int:
    """The least deadwood points of the hand ``hand`` (a bitmask)."""
    return _points(_Search(hand).cost(hand))


@lru_cache(maxsize=8192)
def discard_deadwood_mask(hand: int) -> tuple[tuple[Card, int], ...]:
    """For a hand (a bitmask, typically 11 cards): every card with the least deadwood points of the hand
    without it, in deck order. One search serves all the discards (they share sub-hands)."""
    search = _Search(hand)
    meldable = search.meldable
    loose = _dead_cost(hand & ~meldable)
    melded = search.cost(hand & meldable)
    found: list[tuple[Card, int]] = []
    for card in cards_of(hand):
        bit = 1 << card
        if meldable & bit:
            found.append((card, _points(loose + search.cost((hand & meldable) ^ bit))))
        else:
            found.append((card, _points(loose - _DEAD_COST[card] + melded)))
    return tuple(found)


MAX_HAND = 11
"""The most cards the optimiser accepts (a hand about to discard); the search grows exponentially."""


def _hand_mask(cards: Iterable[CardLike]) -> int:
    mask = mask_of(cards)
    if mask.bit_count() > MAX_HAND:
        raise ValueError(f"a gin hand has at most {MAX_HAND} cards, not {mask.bit_count()}")
    return mask


def best_arrangement(cards: Iterable[CardLike]) -> Arrangement:
    """The arrangement of ``cards`` (0 to 11 of them) with the least deadwood points, ties broken as the
    module docstring says.

    >>> best_arrangement(["7C", "7D", "7H", "5H", "6H", "8H", "KS"])
    Arrangement(melds=(('5H', '6H', '7H', '8H'),), deadwood=('7C', '7D', 'KS'), deadwood_points=24)

    :raises MalformedActionError: a card cannot be read.
    :raises ValueError: a card appears twice, or there are more than 11 cards.
    """
    melds, dead = arrange_mask(_hand_mask(cards))
    return _arrangement(melds, dead)


def deadwood_points(cards: Iterable[CardLike]) -> int:
    """The least deadwood points of ``cards`` (what :func:`best_arrangement` reports, computed faster)."""
    return deadwood_mask(_hand_mask(cards))


def discard_deadwood(cards: Iterable[CardLike]) -> dict[str, int]:
    """For each card of ``cards`` (an 11-card hand about to discard): the least deadwood points of the
    other cards, by card text."""
    return {CARD_TEXT[card]: points for card, points in discard_deadwood_mask(_hand_mask(cards))}


def can_meld_all(cards: Iterable[CardLike]) -> bool:
    """Whether every card of ``cards`` is in some meld of one arrangement (gin, or big gin for 11)."""
    return deadwood_mask(_hand_mask(cards)) == 0


def optimal_arrangements_mask(hand: int) -> list[tuple[tuple[int, ...], int]]:
    """Every arrangement of ``hand`` (a bitmask) with the least deadwood points, as (melds, deadwood)
    masks, each partition once; the canonical one (:func:`arrange_mask`) is among them. The knocker's
    melds are chosen among these (see ``docs/gin.md``)."""
    search = _Search(hand)
    memo: dict[int, int] = {0: 0}

    def least(mask: int) -> int:
        # Points only: ties on deadwood cards or meld count do not matter here.
        found = memo.get(mask)
        if found is not None:
            return found
        low = mask & -mask
        card = low.bit_length() - 1
        found = CARD_VALUE[card] + least(mask ^ low)
        for meld in search.by_low[card]:
            if meld & mask == meld:
                found = min(found, least(mask ^ meld))
        memo[mask] = found
        return found

    def walk(mask: int) -> list[tuple[tuple[int, ...], int]]:
        if not mask:
            return [((), 0)]
        target = least(mask)
        low = mask & -mask
        card = low.bit_length() - 1
        found: list[tuple[tuple[int, ...], int]] = []
        for meld in search.by_low[card]:
            if meld & mask == meld and least(mask ^ meld) == target:
                found += [((meld, *melds), dead) for melds, dead in walk(mask ^ meld)]
        if CARD_VALUE[card] + least(mask ^ low) == target:
            found += [(melds, dead | low) for melds, dead in walk(mask ^ low)]
        return found

    return walk(hand)


# ---------------------------------------------------------------------------------------------------------
# Lay-offs


class _Table:
    """The knocker's melds as lay-off targets: runs by (suit, low rank, high rank), and the missing fourth
    card of each set of three."""

    __slots__ = ("runs", "set_gaps")

    def __init__(self, knocker_melds: Sequence[int]) -> None:
        self.runs: list[tuple[int, int, int]] = []
        self.set_gaps = 0
        for meld in knocker_melds:
            cards = cards_of(meld)
            if is_set(meld):
                if len(cards) == 3:
                    rank = rank_of(cards[0])
                    self.set_gaps |= mask_of(make_card(rank, suit) for suit in range(4)) ^ meld
            else:
                self.runs.append((suit_of(cards[0]), rank_of(cards[0]), rank_of(cards[-1])))

    def closure(self, offered: int) -> tuple[int, tuple[Card, ...]]:
        """The cards of ``offered`` that can be laid off one after another, and an order that does it.

        Laying a card off only ever makes more cards fit (a run grows, nothing shrinks), so the result
        does not depend on the order in which fitting cards are taken; a card that fits a run end goes
        onto the run (never worse than the set it might complete too)."""
        runs = list(self.runs)
        placed = 0
        order: list[Card] = []
        progress = True
        while progress:
            progress = False
            for card in cards_of(offered & ~placed):
                suit, rank = suit_of(card), rank_of(card)
                fitted = False
                for index, (run_suit, low, high) in enumerate(runs):
                    if run_suit != suit:
                        continue
                    if rank == low - 1:
                        runs[index] = (run_suit, rank, high)
                        fitted = True
                        break
                    if rank == high + 1:
                        runs[index] = (run_suit, low, rank)
                        fitted = True
                        break
                if fitted or self.set_gaps >> card & 1:
                    placed |= 1 << card
                    order.append(card)
                    progress = True
        return placed, tuple(order)

    def fitting(self, laid: int) -> int:
        """The cards (bitmask) that fit the knocker's melds once the cards of ``laid`` (a set of cards that
        can be laid off) are on them: the ends of every run extended by ``laid``, and the missing cards of
        the sets of three."""
        fits = self.set_gaps
        for suit, low, high in self.runs:
            base = suit * 13 - 1  # the card of rank r in this suit is base + r
            while low > 1 and laid >> (base + low - 1) & 1:
                low -= 1
            while high < 13 and laid >> (base + high + 1) & 1:
                high += 1
            if low > 1:
                fits |= 1 << (base + low - 1)
            if high < 13:
                fits |= 1 << (base + high + 1)
        return fits & ~laid

    def choices(self, defender: int) -> list[int]:
        """Every set of the defender's cards that can be laid off (as bitmasks, the empty set first).

        They are found by growing sets one fitting card at a time, so only playable sets are visited: a
        chain of n cards beyond a run end gives n + 1 choices, not 2 ** n."""
        seen = {0}
        found = [0]
        index = 0
        while index < len(found):
            laid = found[index]
            index += 1
            extra = self.fitting(laid) & defender
            while extra:
                low = extra & -extra
                extra ^= low
                grown = laid | low
                if grown not in seen:
                    seen.add(grown)
                    found.append(grown)
        return found


def lay_off_mask(
    knocker_melds: Sequence[int], defender: int
) -> tuple[tuple[int, ...], tuple[Card, ...], int]:
    """:func:`lay_off` on bitmasks: the defender's meld masks, the cards laid off in order, the deadwood
    mask."""
    table = _Table(knocker_melds)
    search = _Search(defender)
    best_key: tuple[int, int, int, int, tuple[Card, ...]] | None = None
    best_laid = 0
    for laid in table.choices(defender):
        cost = search.cost(defender ^ laid)
        chosen = cards_of(laid)
        key = (_points(cost), (cost >> _DEAD_SHIFT) & _PART_MASK, len(chosen), cost & _PART_MASK, chosen)
        if best_key is None or key < best_key:
            best_key, best_laid = key, laid
    melds, dead = search.build(defender ^ best_laid)
    return melds, table.closure(best_laid)[1], dead


def lay_off(knocker_melds: Iterable[Iterable[CardLike]], defender_cards: Iterable[CardLike]) -> LayOff:
    """The defender's best response to a knock: own melds and lay-offs chosen together so that the
    defender's final deadwood points are the least possible.

    Lay-offs extend the knocker's runs at either end, repeatedly (``4H`` then ``3H`` below ``5H 6H 7H``),
    and complete the knocker's sets of three. Ties on deadwood points are broken by fewer deadwood cards,
    then fewer cards laid off (the defender's own melds first), then fewer defender melds, then the
    cards laid off compared in deck order; the defender's melds are then arranged as
    :func:`best_arrangement` would. (Gin and big gin allow no lay-offs: do not call this for them.)

    :raises ValueError: a knocker meld is not a set or a run, the melds share a card, the defender
        holds one of the knocker's cards, or more than 11 cards.
    """
    masks: list[int] = []
    used = 0
    for meld in knocker_melds:
        mask = mask_of(meld)
        if not is_meld(mask):
            raise ValueError(f"{' '.join(texts_of(mask))} is not a meld")
        if mask & used:
            raise ValueError("the knocker's melds share a card")
        used |= mask
        masks.append(mask)
    defender = _hand_mask(defender_cards)
    if defender & used:
        raise ValueError(f"the defender holds the knocker's {' '.join(texts_of(defender & used))}")
    melds, laid, dead = lay_off_mask(masks, defender)
    return LayOff(
        defender_melds=tuple(texts_of(meld) for meld in melds),
        laid_off=tuple(CARD_TEXT[card] for card in laid),
        deadwood=texts_of(dead),
        points=points_of(dead),
    )
