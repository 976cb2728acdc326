"""Playing cards for gin rummy: text, deck indices, values and bitmasks.

A card is written rank then suit: rank one of ``A 2 3 4 5 6 7 8 9 T J Q K``, suit one of ``C D H S``
(clubs, diamonds, hearts, spades); ``"TD"`` is the ten of diamonds. Inside the engine a card is its
*deck index* ``suit_index * 13 + (rank - 1)`` with suits in the order C, D, H, S: ``AC`` is 0, ``KC`` 12,
``AD`` 13, ``KS`` 51. Sorting by deck index sorts by suit, then rank. A set of cards is also a 52-bit
mask with bit ``i`` standing for the card of deck index ``i``.

Values: ace 1, two to nine their face value, ten, jack, queen and king 10.
"""

from __future__ import annotations

from collections.abc import Iterable

from libs.engines.base import MalformedActionError

RANKS = "A23456789TJQK"
"""The ranks in order; the rank number of ``RANKS[i]`` is ``i + 1`` (ace 1, king 13)."""
SUITS = "CDHS"
"""The suits in deck order: clubs, diamonds, hearts, spades."""
DECK_SIZE = 52

Card = int
"""A card as its deck index, 0 to 51."""

CardLike = int | str
"""A card as its deck index or its text (case-insensitive, ``10`` accepted for ``T``)."""

CARD_TEXT: tuple[str, ...] = tuple(rank + suit for suit in SUITS for rank in RANKS)
"""The text of every card by deck index."""
CARD_VALUE: tuple[int, ...] = tuple(min(rank, 10) for _ in SUITS for rank in range(1, 14))
"""The deadwood value of every card by deck index."""
FULL_DECK_MASK = (1 << DECK_SIZE) - 1

_CARD_INDEX = {text: index for index, text in enumerate(CARD_TEXT)}

CARD_HINT = "write a card as rank then suit: rank A 2-9 T J Q K, suit C D H S (for example 7H, TD, AS)"


def card_index(text: str) -> Card:
    """The deck index of the card ``text`` (``"7H"``, ``"td"``, ``"10S"``).

    :raises MalformedActionError: ``text`` is not a card.
    """
    if not isinstance(text, str):
        raise MalformedActionError(f"a card is text like '7H', not {type(text).__name__}")
    normal = text.strip().upper()
    if normal.startswith("10"):
        normal = "T" + normal[2:]
    index = _CARD_INDEX.get(normal)
    if index is None:
        raise MalformedActionError(f"cannot read {text!r} as a card: {CARD_HINT}")
    return index


def to_card(card: CardLike) -> Card:
    """The deck index of ``card``, given as a deck index or as text."""
    if isinstance(card, str):
        index = _CARD_INDEX.get(card)  # the canonical text, the common case
        return card_index(card) if index is None else index
    if isinstance(card, bool):
        raise MalformedActionError(f"not a card: {card!r}")
    if isinstance(card, int):
        if not 0 <= card < DECK_SIZE:
            raise MalformedActionError(f"a deck index runs from 0 to 51, not {card}")
        return card
    raise MalformedActionError(f"not a card: {card!r}")


def card_text(card: Card) -> str:
    """The text of the card of deck index ``card`` (``20`` is ``"8D"``)."""
    return CARD_TEXT[card]


def canonical_card(text: str) -> str:
    """The canonical text of a card (upper case, ``T`` for ten): ``canonical_card("th") == "TH"``."""
    return CARD_TEXT[card_index(text)]


def rank_of(card: Card) -> int:
    """The rank number of a card: ace 1 to king 13."""
    return card % 13 + 1


def suit_of(card: Card) -> int:
    """The suit index of a card: 0 clubs, 1 diamonds, 2 hearts, 3 spades."""
    return card // 13


def value_of(card: Card) -> int:
    """The deadwood value of a card: ace 1, 2-9 face value, T J Q K 10."""
    return CARD_VALUE[card]


def make_card(rank: int, suit: int) -> Card:
    """The deck index of the card of rank number ``rank`` (1-13) and suit index ``suit`` (0-3)."""
    return suit * 13 + rank - 1


def mask_of(cards: Iterable[CardLike]) -> int:
    """The bitmask of ``cards``.

    :raises MalformedActionError: a card cannot be read.
    :raises ValueError: a card appears twice.
    """
    mask = 0
    for card in cards:
        bit = 1 << to_card(card)
        if mask & bit:
            raise ValueError(f"card {card_text(to_card(card))} appears twice")
        mask |= bit
    return mask


def cards_of(mask: int) -> tuple[Card, ...]:
    """The cards of a bitmask, in deck order."""
    cards: list[Card] = []
    while mask:
        low = mask & -mask
        cards.append(low.bit_length() - 1)
        mask ^= low
    return tuple(cards)


def texts_of(mask: int) -> tuple[str, ...]:
    """The texts of the cards of a bitmask, in deck order (suit, then rank)."""
    return tuple(CARD_TEXT[card] for card in cards_of(mask))


def points_of(mask: int) -> int:
    """The total deadwood value of the cards of a bitmask."""
    return sum(CARD_VALUE[card] for card in cards_of(mask))


def sort_cards(cards: Iterable[CardLike]) -> tuple[str, ...]:
    """The texts of ``cards`` sorted by suit (C D H S), then rank (ace low)."""
    return tuple(CARD_TEXT[card] for card in sorted(to_card(card) for card in cards))
