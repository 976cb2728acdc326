"""The gin rummy engine: a match of hands to a number of hand wins, for the match runtime.

Everything random comes in through :meth:`GinEngine.apply_chance`: first the dealer of hand 1 (a coin
from stream ``dealer``), then one shuffle of the 52 cards per deal (stream ``shuffle``, index = deals
made before it, void hands included). The deal from a shuffle is fixed (see :func:`deal`) so that an
auditor can recompute it from the fairness proof.

Hands are kept as 52-bit masks (bit ``i`` is the card of deck index ``i``, see
:mod:`libs.engines.gin.cards`); the stock and the discard pile as tuples of deck indices. States are
frozen and share nothing mutable, so they may be shared freely, across threads too.

See ``docs/gin.md`` for the rules as implemented.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from libs.engines.base import (
    ActionContext,
    ChanceRequest,
    GameOverError,
    IllegalActionError,
    InvalidOptionsError,
    MalformedActionError,
    NotYourTurnError,
    Outcome,
    Termination,
)
from libs.engines.gin.actions import (
    BigGin,
    Discard,
    Gin,
    GinAction,
    Knock,
    Pass,
    Stock,
    Take,
    parse_action,
)
from libs.engines.gin.cards import (
    CARD_TEXT,
    CARD_VALUE,
    DECK_SIZE,
    Card,
    card_index,
    points_of,
    texts_of,
)
from libs.engines.gin.melds import (
    arrange_mask,
    deadwood_mask,
    discard_deadwood_mask,
    lay_off_mask,
    optimal_arrangements_mask,
)

SEATS = (0, 1)
HAND_SIZE = 10
UPCARD_POSITION = 2 * HAND_SIZE
"""The position in the shuffled deck of the upcard (after the 20 cards dealt)."""
VOID_STOCK = 2
"""A turn that ends (by a discard, without a knock) with this many stock cards or fewer voids the hand."""
GIN_BONUS = 25
BIG_GIN_BONUS = 31
UNDERCUT_BONUS = 25
STANDARD_KNOCK_LIMIT = 10

DEALER_REQUEST = ChanceRequest("dealer", 0, "coin", 1, 0)
"""The draw that picks the dealer of hand 1: value 0, seat 0 deals; value 1, seat 1 deals."""


class Variant(StrEnum):
    """How a hand may be ended."""

    STANDARD = "standard"
    """Knock with 10 deadwood points or fewer, or go gin."""
    STRAIGHT = "straight"
    """No knocking: gin (or big gin) only."""
    OKLAHOMA = "oklahoma"
    """The upcard of each hand sets the knock limit (face cards 10; an ace means gin only)."""


class Phase(StrEnum):
    """Where the match is."""

    DEALING = "dealing"
    """Waiting for the first dealer or the next shuffle from the fairness stream."""
    UPCARD_OFFER = "upcard_offer"
    """The first-turn upcard offer: ``take`` or ``pass``."""
    DRAW = "draw"
    """The player to move draws: ``stock`` or ``take``."""
    DISCARD = "discard"
    """The player to move discards (and may knock, go gin or big gin)."""
    MATCH_OVER = "match_over"
    """A seat has taken the hands it needed."""


class HandEnd(StrEnum):
    """How a hand ended."""

    KNOCK = "knock"
    UNDERCUT = "undercut"
    GIN = "gin"
    BIG_GIN = "big_gin"
    VOID = "void"
    """The stock ran down to two cards: the hand does not count and is dealt again."""


@dataclass(frozen=True, slots=True)
class GinOptions:
    """A gin table's rules: the variant and the hand wins that take the match (1 to 10, default 3).

    A string variant is converted to :class:`Variant`; an unknown variant or a number of hands out of
    range raises :class:`InvalidOptionsError`.
    """

    variant: Variant = Variant.STANDARD
    hands_to_win: int = 3

    def __post_init__(self) -> None:
        try:
            variant = Variant(self.variant)
        except ValueError:
            choices = ", ".join(v.value for v in Variant)
            raise InvalidOptionsError(f"unknown gin variant {self.variant!r} (choose {choices})") from None
        object.__setattr__(self, "variant", variant)
        hands = self.hands_to_win
        if not isinstance(hands, int) or isinstance(hands, bool) or not 1 <= hands <= 10:
            raise InvalidOptionsError(f"hands_to_win must be a whole number from 1 to 10, not {hands!r}")


@dataclass(frozen=True, slots=True)
class HandReveal:
    """One seat's hand as shown when a hand ends."""

    seat: int
    cards: tuple[str, ...]
    """The seat's cards at the end (10, or 11 for big gin), in deck order."""
    melds: tuple[tuple[str, ...], ...]
    deadwood: tuple[str, ...]
    deadwood_points: int
    """Deadwood points (for a knock's defender: after lay-offs)."""
    laid_off: tuple[str, ...]
    """The defender's cards laid off onto the knocker's melds, in the order laid (empty otherwise)."""


@dataclass(frozen=True, slots=True)
class HandResult:
    """One finished hand."""

    hand_number: int
    """1 for the first deal; void hands are numbered too."""
    end: HandEnd
    ender: int | None
    """The seat that knocked or went gin (``None`` for a void hand)."""
    winner: int | None
    """The seat that won the hand (``None`` for a void hand)."""
    points: int
    """The points the winner scored (0 for a void hand)."""
    hands: tuple[HandReveal, ...]
    """Both seats' hands, seat 0 first."""
    dealer: int
    upcard: str
    knock_limit: int
    """The hand's knock limit (0: gin only)."""


@dataclass(frozen=True, slots=True)
class SeatCards:
    """What everybody knows about one seat's hand."""

    seat: int
    card_count: int
    known_cards: tuple[str, ...]
    """Cards this seat took from the discard pile and still holds (everybody saw them taken)."""


@dataclass(frozen=True, slots=True)
class GinView:
    """The match as one seat (or a spectator) sees it: never the opponent's hand or the stock order
    (those appear only in :attr:`hands`, once a hand has ended). Mirrors ``skillclassics.gin.v1.GinView``.
    """

    variant: Variant
    hands_to_win: int
    hand_number: int
    """The current deal from 1 (void hands count; after a hand ended, that hand until the next deal);
    0 before the first deal."""
    dealer: int | None
    """The dealer of the current hand; while dealing, of the hand being dealt (``None`` before the draw
    of the first dealer)."""
    phase: Phase
    hand: tuple[str, ...]
    """The viewer's own cards in deck order (suit C D H S, then rank); empty for spectators."""
    melds: tuple[tuple[str, ...], ...]
    deadwood: tuple[str, ...]
    deadwood_points: int
    """The viewer's best arrangement (of all 11 cards while holding 11)."""
    discard_pile: tuple[str, ...]
    """Bottom first: the last card is the top."""
    stock_count: int
    seats: tuple[SeatCards, ...]
    knock_limit: int
    """This hand's knock limit (0: gin only; while dealing in Oklahoma, 0 until the upcard is known)."""
    hand_wins: tuple[int, ...]
    points: tuple[int, ...]
    hands: tuple[HandResult, ...]
    """Every finished hand of the match, in order."""
    taken_from_discard: str | None
    """The card the player to move took from the discard pile this turn (it may not be discarded)."""
    to_move: int | None


@dataclass(frozen=True, slots=True)
class GinState:
    """A gin rummy match. Build it with :meth:`GinEngine.new_game`, :meth:`GinEngine.apply` and
    :meth:`GinEngine.apply_chance`; never by hand. It holds hidden information (both hands, the stock):
    show players only :meth:`GinEngine.view`."""

    options: GinOptions
    first_dealer: int | None
    """The dealer of hand 1 (from the ``dealer`` coin), ``None`` until drawn."""
    deals: int
    """Deals made so far, void ones included (the current hand's number)."""
    dealer: int | None
    """The current hand's dealer; while dealing, the dealer of the hand about to be dealt."""
    phase: Phase
    to_act: int | None
    """The seat to act (while dealing between hands: the seat that will act first in the next hand)."""
    hands: tuple[int, int]
    """Each seat's cards as a bitmask."""
    stock: tuple[Card, ...]
    """Top first."""
    discard_pile: tuple[Card, ...]
    """Bottom first."""
    upcard: Card | None
    knock_limit: int
    passes: int
    """Passes in this hand's upcard offer (0 to 2)."""
    stock_only: bool
    """Both players passed the upcard: the non-dealer must draw from the stock."""
    taken: Card | None
    """The card the player to move took from the discard pile this turn."""
    known: tuple[int, int]
    """Per seat, the cards (bitmask) taken from the discard pile this hand and still held."""
    hand_wins: tuple[int, int]
    points: tuple[int, int]
    results: tuple[HandResult, ...]
    journal: tuple[str, ...]
    """The match record so far, one line each (reveals everything: see :func:`hand_log`)."""
    result: Outcome | None

    @property
    def hand_number(self) -> int:
        return self.deals


def knock_limit(variant: Variant, upcard: Card) -> int:
    """The knock limit of a hand of ``variant`` whose upcard is ``upcard`` (0: gin only)."""
    if variant is Variant.STANDARD:
        return STANDARD_KNOCK_LIMIT
    if variant is Variant.STRAIGHT:
        return 0
    value = CARD_VALUE[upcard]
    return 0 if value == 1 else value


def deal(permutation: Sequence[int], dealer: int) -> tuple[tuple[int, int], Card, tuple[Card, ...]]:
    """The deal from a shuffle: the hands (bitmasks, seat 0 first), the upcard and the stock (top first).

    The shuffled deck is ``[card(p[0]), card(p[1]), ...]`` with ``p[0]`` on top, ``card(i)`` being the
    card of deck index ``i``. Ten cards each are dealt one at a time from the top, alternately, starting
    with the non-dealer (deck positions 0, 2, ..., 18 to the non-dealer; 1, 3, ..., 19 to the dealer);
    position 20 is the upcard; positions 21 to 51 are the stock, position 21 on top.
    """
    non_dealer = 1 - dealer
    hands = [0, 0]
    for position in range(UPCARD_POSITION):
        seat = non_dealer if position % 2 == 0 else dealer
        hands[seat] |= 1 << permutation[position]
    return (hands[0], hands[1]), permutation[UPCARD_POSITION], tuple(permutation[UPCARD_POSITION + 1 :])


class GinEngine:
    """Gin rummy for the match runtime (see :class:`libs.engines.base.Engine`).

    Actions may be given as :class:`Take`, :class:`Pass`, :class:`Stock`, :class:`Discard`,
    :class:`Knock`, :class:`Gin`, :class:`BigGin`, or as text that :func:`parse_action` reads.
    """

    family: str = "gin"

    def new_game(self, options: GinOptions | None = None) -> GinState:
        """A new match (default options: standard, first to 3 hands), waiting for the dealer draw."""
        options = GinOptions() if options is None else options
        if not isinstance(options, GinOptions):
            raise InvalidOptionsError(f"expected GinOptions, got {type(options).__name__}")
        return GinState(
            options=options,
            first_dealer=None,
            deals=0,
            dealer=None,
            phase=Phase.DEALING,
            to_act=None,
            hands=(0, 0),
            stock=(),
            discard_pile=(),
            upcard=None,
            knock_limit=_dealing_limit(options.variant),
            passes=0,
            stock_only=False,
            taken=None,
            known=(0, 0),
            hand_wins=(0, 0),
            points=(0, 0),
            results=(),
            journal=(),
            result=None,
        )

    def to_move(self, state: GinState) -> int | None:
        """The seat to act; ``None`` once the match is over and before the first deal. Between hands it is
        the seat that will act first in the next hand, although only the deal (:meth:`apply_chance`)
        can happen then."""
        if state.result is not None:
            return None
        return state.to_act

    def outcome(self, state: GinState) -> Outcome | None:
        """The end of the match (a seat took ``hands_to_win`` hands), or ``None``."""
        return state.result

    def is_over(self, state: GinState) -> bool:
        return state.result is not None

    def chance_needed(self, state: GinState) -> ChanceRequest | None:
        """The dealer coin first, then a shuffle before every deal; ``None`` while a hand is played."""
        if state.result is not None:
            return None
        if state.first_dealer is None:
            return DEALER_REQUEST
        if state.phase is Phase.DEALING:
            return ChanceRequest("shuffle", state.deals, "shuffle", 1, DECK_SIZE)
        return None

    def apply_chance(self, state: GinState, request: ChanceRequest, values: tuple[int, ...]) -> GinState:
        """The state once ``request`` was drawn with ``values``: the first dealer, or the next deal.

        :raises ValueError: ``request`` is not the pending draw, or ``values`` do not fit it (a coin is
            one value 0 or 1; a shuffle a permutation of 0 to 51).
        """
        expected = self.chance_needed(state)
        if expected is None:
            raise ValueError("this gin match waits for no draw")
        if request != expected:
            raise ValueError(f"this gin match waits for {expected}, not {request}")
        values = tuple(values)
        if request.kind == "coin":
            if len(values) != 1 or values[0] not in (0, 1) or isinstance(values[0], bool):
                raise ValueError(f"the dealer coin is one value, 0 or 1, not {values!r}")
            dealer = values[0]
            line = f"seat {dealer} deals hand 1 (dealer coin {dealer})"
            return replace(state, first_dealer=dealer, dealer=dealer, journal=(*state.journal, line))
        if sorted(values) != list(range(DECK_SIZE)) or any(isinstance(v, bool) for v in values):
            raise ValueError("a shuffle is a permutation of 0 to 51")
        return _deal(state, values)

    def apply(self, state: GinState, seat: int, action: GinAction | str, context: ActionContext) -> GinState:
        """The state after ``seat`` takes ``action`` (``context`` is not read: gin has no clock rules).

        :raises MalformedActionError: the action cannot be read.
        :raises IllegalActionError: the match is over, the cards are being dealt, it is not ``seat``'s
            turn, or the action is not allowed now (the message says why).
        """
        _check_seat(seat)
        if isinstance(action, str):
            action = parse_action(action)
        if not isinstance(action, Take | Pass | Stock | Discard | Knock | Gin | BigGin):
            raise MalformedActionError(f"not a gin action: {action!r}")
        if state.result is not None:
            raise GameOverError(f"the match is over ({state.result.detail})")
        if state.phase is Phase.DEALING:
            raise NotYourTurnError("the cards are being dealt: wait for the deal")
        if state.to_act != seat:
            raise NotYourTurnError(f"it is seat {state.to_act}'s turn")
        if state.phase is Phase.UPCARD_OFFER:
            return _offer(state, seat, action)
        if state.phase is Phase.DRAW:
            return _draw(state, seat, action)
        return _discard_phase(state, seat, action)

    def legal_actions(self, state: GinState, seat: int) -> list[str]:
        """Every action ``seat`` may take now, sorted; empty when it is not ``seat``'s turn (and while
        dealing, and once the match is over)."""
        _check_seat(seat)
        if state.result is not None or state.phase is Phase.DEALING or state.to_act != seat:
            return []
        if state.phase is Phase.UPCARD_OFFER:
            return [Pass.notation, Take.notation]
        if state.phase is Phase.DRAW:
            can_take = not state.stock_only and bool(state.discard_pile)
            return [Stock.notation, Take.notation] if can_take else [Stock.notation]
        actions: list[str] = []
        for card, points in discard_deadwood_mask(state.hands[seat]):
            if card == state.taken:
                continue
            text = CARD_TEXT[card]
            actions.append(f"{Discard.verb} {text}")
            if points == 0:
                actions.append(f"{Gin.verb} {text}")
            elif points <= state.knock_limit:
                actions.append(f"{Knock.verb} {text}")
        if deadwood_mask(state.hands[seat]) == 0:
            actions.append(BigGin.notation)
        actions.sort()
        return actions

    def timeout_outcome(self, state: GinState, seat: int) -> Outcome:
        """``seat`` ran out of time: the other seat wins the match."""
        _check_seat(seat)
        return _match_win(Termination.TIMEOUT, 1 - seat, f"seat {seat} ran out of time; seat {1 - seat} wins")

    def resignation_outcome(self, state: GinState, seat: int) -> Outcome:
        """``seat`` resigned: the other seat wins the match (gin has no draws)."""
        _check_seat(seat)
        return _match_win(Termination.RESIGNATION, 1 - seat, f"seat {seat} resigned; seat {1 - seat} wins")

    def view(self, state: GinState, seat: int | None) -> GinView:
        """What ``seat`` may see (``None``: a spectator, who sees no hand)."""
        if seat is not None:
            _check_seat(seat)
        if seat is None:
            hand: tuple[str, ...] = ()
            melds: tuple[tuple[str, ...], ...] = ()
            deadwood: tuple[str, ...] = ()
            points = 0
        else:
            mask = state.hands[seat]
            meld_masks, dead = arrange_mask(mask)
            hand = texts_of(mask)
            melds = tuple(texts_of(meld) for meld in meld_masks)
            deadwood = texts_of(dead)
            points = points_of(dead)
        over = state.result is not None
        return GinView(
            variant=state.options.variant,
            hands_to_win=state.options.hands_to_win,
            hand_number=state.deals,
            dealer=state.dealer,
            phase=Phase.MATCH_OVER if over else state.phase,
            hand=hand,
            melds=melds,
            deadwood=deadwood,
            deadwood_points=points,
            discard_pile=tuple(CARD_TEXT[card] for card in state.discard_pile),
            stock_count=len(state.stock),
            seats=tuple(
                SeatCards(s, state.hands[s].bit_count(), texts_of(state.known[s] & state.hands[s]))
                for s in SEATS
            ),
            knock_limit=state.knock_limit,
            hand_wins=state.hand_wins,
            points=state.points,
            hands=state.results,
            taken_from_discard=None if state.taken is None else CARD_TEXT[state.taken],
            to_move=self.to_move(state),
        )


GIN = GinEngine()
"""The gin rummy engine (it holds no state; one instance serves every match)."""


def describe(state_before: GinState, action: GinAction | str) -> str:
    """The action in canonical notation, as the match record shows it (``"discard TH"``). It never says
    which card a ``stock`` draw brought: the description may be shown to both players."""
    if isinstance(action, str):
        action = parse_action(action)
    return action.notation


def hand_log(state: GinState) -> list[str]:
    """The match so far as text lines: for every deal the dealer, both hands, the upcard and the stock;
    every action (with the card a draw brought); every hand's result; and the end of the match.

    It reveals everything, the current hand and the stock included: it is the record for after the match
    and for auditors, never for a player during the match."""
    return list(state.journal)


# ---------------------------------------------------------------------------------------------------------
# Dealing


def _dealing_limit(variant: Variant) -> int:
    """The knock limit shown while dealing (Oklahoma's is unknown until the upcard: 0)."""
    return STANDARD_KNOCK_LIMIT if variant is Variant.STANDARD else 0


def _deal(state: GinState, permutation: tuple[int, ...]) -> GinState:
    dealer = state.dealer
    assert dealer is not None
    hands, upcard, stock = deal(permutation, dealer)
    number = state.deals + 1
    limit = knock_limit(state.options.variant, upcard)
    limit_text = f"knock limit {limit}" if limit else "gin only"
    lines = (
        f"hand {number}: seat {dealer} deals (shuffle {state.deals})",
        f"  seat 0 is dealt {' '.join(texts_of(hands[0]))}",
        f"  seat 1 is dealt {' '.join(texts_of(hands[1]))}",
        f"  upcard {CARD_TEXT[upcard]} ({limit_text}); stock, top first: {_texts(stock)}",
    )
    return replace(
        state,
        deals=number,
        phase=Phase.UPCARD_OFFER,
        to_act=1 - dealer,
        hands=hands,
        stock=stock,
        discard_pile=(upcard,),
        upcard=upcard,
        knock_limit=limit,
        passes=0,
        stock_only=False,
        taken=None,
        known=(0, 0),
        journal=(*state.journal, *lines),
    )


# ---------------------------------------------------------------------------------------------------------
# Turns


def _logged(state: GinState, seat: int, text: str) -> tuple[str, ...]:
    return (*state.journal, f"  seat {seat}: {text}")


def _take(state: GinState, seat: int) -> GinState:
    card = state.discard_pile[-1]
    bit = 1 << card
    return replace(
        state,
        phase=Phase.DISCARD,
        hands=_with(state.hands, seat, state.hands[seat] | bit),
        discard_pile=state.discard_pile[:-1],
        taken=card,
        known=_with(state.known, seat, state.known[seat] | bit),
        stock_only=False,
        journal=_logged(state, seat, f"take ({CARD_TEXT[card]})"),
    )


def _offer(state: GinState, seat: int, action: GinAction) -> GinState:
    match action:
        case Take():
            return _take(state, seat)
        case Pass():
            dealer = state.dealer
            assert dealer is not None
            journal = _logged(state, seat, "pass")
            if state.passes == 0:
                return replace(state, passes=1, to_act=dealer, journal=journal)
            return replace(
                state, passes=2, to_act=1 - dealer, phase=Phase.DRAW, stock_only=True, journal=journal
            )
        case Stock():
            raise IllegalActionError(
                f"the first turn starts with the upcard offer: take the upcard "
                f"({CARD_TEXT[state.discard_pile[-1]]}) or pass"
            )
        case _:
            raise IllegalActionError("draw first: in the upcard offer, take the upcard or pass")


def _draw(state: GinState, seat: int, action: GinAction) -> GinState:
    match action:
        case Stock():
            card = state.stock[0]
            return replace(
                state,
                phase=Phase.DISCARD,
                hands=_with(state.hands, seat, state.hands[seat] | 1 << card),
                stock=state.stock[1:],
                taken=None,
                stock_only=False,
                journal=_logged(state, seat, f"stock ({CARD_TEXT[card]})"),
            )
        case Take():
            if state.stock_only:
                raise IllegalActionError("both players passed the upcard: draw from the stock")
            if not state.discard_pile:
                raise IllegalActionError("the discard pile is empty: draw from the stock")
            return _take(state, seat)
        case Pass():
            raise IllegalActionError("you may pass only on the upcard offer of the first turn")
        case _:
            raise IllegalActionError("draw a card first: from the stock (stock) or the discard pile (take)")


def _discard_phase(state: GinState, seat: int, action: GinAction) -> GinState:
    hand = state.hands[seat]
    match action:
        case Take() | Stock():
            raise IllegalActionError("you have drawn already: discard a card (or knock or go gin)")
        case Pass():
            raise IllegalActionError("you may pass only on the upcard offer of the first turn")
        case BigGin():
            points = deadwood_mask(hand)
            if points:
                raise IllegalActionError(
                    f"big gin needs all eleven cards melded; your best arrangement leaves "
                    f"{points} deadwood points"
                )
            return _end_hand(replace(state, journal=_logged(state, seat, "biggin")), HandEnd.BIG_GIN, seat)
        case Discard() | Knock() | Gin():
            card = card_index(action.card)
            bit = 1 << card
            if not hand & bit:
                raise IllegalActionError(f"you do not hold {action.card}")
            if card == state.taken:
                raise IllegalActionError(
                    f"you cannot discard {action.card}: you took it from the discard pile this turn"
                )
            rest = hand ^ bit
            if isinstance(action, Knock):
                _check_knock(state, action.card, deadwood_mask(rest))
            elif isinstance(action, Gin):
                points = deadwood_mask(rest)
                if points:
                    raise IllegalActionError(
                        f"you cannot go gin discarding {action.card}: {points} deadwood points would be left"
                    )
            after = replace(
                state,
                hands=_with(state.hands, seat, rest),
                discard_pile=(*state.discard_pile, card),
                known=_with(state.known, seat, state.known[seat] & ~bit),
                taken=None,
                journal=_logged(state, seat, action.notation),
            )
            if isinstance(action, Knock):
                return _end_hand(after, HandEnd.KNOCK, seat)
            if isinstance(action, Gin):
                return _end_hand(after, HandEnd.GIN, seat)
            if len(after.stock) <= VOID_STOCK:
                return _end_hand(after, HandEnd.VOID, None)
            return replace(after, phase=Phase.DRAW, to_act=1 - seat)
    raise MalformedActionError(f"not a gin action: {action!r}")


def _check_knock(state: GinState, card: str, points: int) -> None:
    limit = state.knock_limit
    if limit == 0:
        if state.options.variant is Variant.STRAIGHT:
            raise IllegalActionError("knocking is not allowed in straight gin: go gin")
        upcard = CARD_TEXT[state.upcard] if state.upcard is not None else "?"
        raise IllegalActionError(
            f"this hand's upcard {upcard} is an ace: knocking is not allowed in this hand, go gin"
        )
    if points == 0:
        raise IllegalActionError(
            f"your cards all meld after discarding {card}: declare gin ('gin {card}') instead of knocking"
        )
    if points > limit:
        raise IllegalActionError(
            f"your deadwood after discarding {card} would be {points}, "
            f"over this hand's knock limit of {limit}"
        )


# ---------------------------------------------------------------------------------------------------------
# The end of a hand


def _reveal(seat: int, hand: int, melds: Sequence[int], dead: int, laid: Sequence[Card] = ()) -> HandReveal:
    return HandReveal(
        seat=seat,
        cards=texts_of(hand),
        melds=tuple(texts_of(meld) for meld in melds),
        deadwood=texts_of(dead),
        deadwood_points=points_of(dead),
        laid_off=tuple(CARD_TEXT[card] for card in laid),
    )


def _canonical_reveal(seat: int, hand: int) -> HandReveal:
    melds, dead = arrange_mask(hand)
    return _reveal(seat, hand, melds, dead)


def _knock_reveals(knocker: int, hands: tuple[int, int]) -> tuple[HandReveal, HandReveal]:
    """The knocker's melds (among the arrangements with the least deadwood, the one that leaves the
    defender the most deadwood after lay-offs) and the defender's best response."""
    defender = 1 - knocker
    best: tuple[tuple[int, int, int, int], HandReveal, HandReveal] | None = None
    for order, (melds, dead) in enumerate(optimal_arrangements_mask(hands[knocker])):
        own, laid, left = lay_off_mask(melds, hands[defender])
        defender_reveal = _reveal(defender, hands[defender], own, left, laid)
        key = (-defender_reveal.deadwood_points, dead.bit_count(), len(melds), order)
        if best is None or key < best[0]:
            best = (key, _reveal(knocker, hands[knocker], melds, dead), defender_reveal)
    assert best is not None
    return best[1], best[2]


def _end_hand(state: GinState, end: HandEnd, ender: int | None) -> GinState:
    dealer, upcard = state.dealer, state.upcard
    assert dealer is not None
    assert upcard is not None
    hands = state.hands
    lines: list[str] = []
    winner: int | None
    if end is HandEnd.VOID:
        reveals = (_canonical_reveal(0, hands[0]), _canonical_reveal(1, hands[1]))
        winner, points = None, 0
        lines += [f"  seat {reveal.seat} shows {_describe_reveal(reveal)}" for reveal in reveals]
        lines.append(f"  void: the stock is down to {len(state.stock)} cards; seat {dealer} deals again")
    else:
        assert ender is not None
        defender = 1 - ender
        if end is HandEnd.KNOCK:
            ender_reveal, defender_reveal = _knock_reveals(ender, hands)
            ender_points, defender_points = ender_reveal.deadwood_points, defender_reveal.deadwood_points
            if defender_points <= ender_points:
                end, winner = HandEnd.UNDERCUT, defender
                points = ender_points - defender_points + UNDERCUT_BONUS
            else:
                winner, points = ender, defender_points - ender_points
        else:
            ender_reveal = _canonical_reveal(ender, hands[ender])
            defender_reveal = _canonical_reveal(defender, hands[defender])
            bonus = GIN_BONUS if end is HandEnd.GIN else BIG_GIN_BONUS
            winner, points = ender, defender_reveal.deadwood_points + bonus
        reveals = (ender_reveal, defender_reveal) if ender == 0 else (defender_reveal, ender_reveal)
        for reveal in reveals:
            lines.append(f"  seat {reveal.seat} shows {_describe_reveal(reveal)}")
    result = HandResult(
        hand_number=state.deals,
        end=end,
        ender=ender,
        winner=winner,
        points=points,
        hands=reveals,
        dealer=dealer,
        upcard=CARD_TEXT[upcard],
        knock_limit=state.knock_limit,
    )
    hand_wins, scores = state.hand_wins, state.points
    if winner is not None:
        hand_wins = _with(hand_wins, winner, hand_wins[winner] + 1)
        scores = _with(scores, winner, scores[winner] + points)
        how = {
            HandEnd.KNOCK: f"seat {ender} knocked",
            HandEnd.UNDERCUT: f"seat {winner} undercut seat {ender}'s knock",
            HandEnd.GIN: f"seat {ender} went gin",
            HandEnd.BIG_GIN: f"seat {ender} went big gin",
        }[end]
        lines.append(
            f"  {how}: seat {winner} wins hand {state.deals} and {points} points "
            f"(hands {hand_wins[0]}-{hand_wins[1]}, points {scores[0]}-{scores[1]})"
        )
    outcome: Outcome | None = None
    if winner is not None and hand_wins[winner] >= state.options.hands_to_win:
        loser = 1 - winner
        detail = (
            f"seat {winner} wins {hand_wins[winner]} hands to {hand_wins[loser]} "
            f"({scores[winner]} points to {scores[loser]})"
        )
        outcome = _match_win(Termination.HANDS_WON, winner, detail)
        lines.append(detail)
    next_dealer = dealer if end is HandEnd.VOID else 1 - dealer
    return replace(
        state,
        dealer=dealer if outcome is not None else next_dealer,
        phase=Phase.MATCH_OVER if outcome is not None else Phase.DEALING,
        to_act=None if outcome is not None else 1 - next_dealer,
        hands=(0, 0),
        stock=(),
        discard_pile=(),
        upcard=None,
        knock_limit=state.knock_limit if outcome is not None else _dealing_limit(state.options.variant),
        passes=0,
        stock_only=False,
        taken=None,
        known=(0, 0),
        hand_wins=hand_wins,
        points=scores,
        results=(*state.results, result),
        journal=(*state.journal, *lines),
        result=outcome,
    )


def _describe_reveal(reveal: HandReveal) -> str:
    melds = ", ".join(" ".join(meld) for meld in reveal.melds) or "none"
    parts = [f"melds {melds}"]
    if reveal.laid_off:
        parts.append(f"lays off {' '.join(reveal.laid_off)}")
    parts.append(f"deadwood {' '.join(reveal.deadwood) or 'none'} ({reveal.deadwood_points})")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------------------
# Helpers


def _check_seat(seat: object) -> None:
    if seat not in SEATS or isinstance(seat, bool):
        raise ValueError(f"gin has seats 0 and 1, not {seat!r}")


def _with(pair: tuple[int, int], seat: int, value: int) -> tuple[int, int]:
    return (value, pair[1]) if seat == 0 else (pair[0], value)


def _texts(cards: Sequence[Card]) -> str:
    return " ".join(CARD_TEXT[card] for card in cards)


def _match_win(termination: Termination, winner: int, detail: str) -> Outcome:
    return Outcome(
        termination=termination, winner=winner, detail=detail, score=(1.0, 0.0) if winner == 0 else (0.0, 1.0)
    )
