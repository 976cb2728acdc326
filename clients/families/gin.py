"""Gin rummy for the clients: the hand, melds and discard pile as text, typed actions, and two bots.

Actions are the family's notation (``protos/skillclassics/gin/v1/gin.proto``): ``stock``, ``take``,
``pass``, ``discard 7H``, ``knock 7H``, ``gin 7H``, ``biggin``. Typed input may abbreviate the verbs
(``s``, ``t``, ``p``, ``d 7H``, ``k 7H``, ``g 7H``), write the ten as ``10`` and use suit symbols
(``7♥``); a card alone means discarding it.

Bots: ``random`` takes any legal action; ``greedy`` goes gin (or big gin) or knocks whenever it may,
takes the discard when that lowers its deadwood (else draws from the stock) and discards the card that
leaves the least deadwood.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from skillclassics.gin.v1 import gin_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import FamilyClient, InputError, Strategy
from libs.engines.gin import best_arrangement

__all__ = [
    "FAMILY",
    "RANKS",
    "SUITS",
    "Arrangement",
    "GinClient",
    "arrange",
    "card_points",
    "greedy_action",
    "parse_card",
    "show_card",
]

RANKS = "A23456789TJQK"
SUITS = "CDHS"
_SUIT_SYMBOLS = {"C": "♣", "D": "♦", "H": "♥", "S": "♠"}
_SYMBOL_SUITS = {
    **{symbol: suit for suit, symbol in _SUIT_SYMBOLS.items()},
    "♧": "C",
    "♢": "D",
    "♡": "H",
    "♤": "S",
}
_CARD = re.compile(r"(?P<rank>10|[A2-9TJQK])(?P<suit>[CDHS♣♦♥♠♧♢♡♤])", re.IGNORECASE)
_VERBS = {
    "stock": "stock",
    "s": "stock",
    "draw": "stock",
    "take": "take",
    "t": "take",
    "pass": "pass",
    "p": "pass",
    "biggin": "biggin",
    "big": "biggin",
    "discard": "discard",
    "d": "discard",
    "knock": "knock",
    "k": "knock",
    "gin": "gin",
    "g": "gin",
}
_WITH_CARD = ("discard", "knock", "gin")
_VARIANTS = {
    "standard": gin_pb2.VARIANT_STANDARD,
    "straight": gin_pb2.VARIANT_STRAIGHT,
    "oklahoma": gin_pb2.VARIANT_OKLAHOMA,
}
_VARIANT_NAMES = {value: name for name, value in _VARIANTS.items()}
_PHASES = {
    gin_pb2.PHASE_DEALING: "dealing",
    gin_pb2.PHASE_UPCARD_OFFER: "upcard offer: take or pass",
    gin_pb2.PHASE_DRAW: "draw: stock or take",
    gin_pb2.PHASE_DISCARD: "discard (or knock, gin)",
    gin_pb2.PHASE_MATCH_OVER: "match over",
}
_HAND_ENDS = {
    gin_pb2.HAND_END_KNOCK: "knock",
    gin_pb2.HAND_END_UNDERCUT: "undercut",
    gin_pb2.HAND_END_GIN: "gin",
    gin_pb2.HAND_END_BIG_GIN: "big gin",
    gin_pb2.HAND_END_VOID: "void (the stock ran out; dealt again)",
}


# -- cards -----------------------------------------------------------------------------------------------


def parse_card(text: str) -> str:
    """A card in the protocol's notation (``7H``, ``TD``) from typed text (``7h``, ``10♦``, ``TD``)."""
    found = _CARD.fullmatch(text.strip())
    if found is None:
        raise InputError(
            f"{text.strip()!r} is not a card: rank A 2-9 T J Q K (or 10), suit C D H S (e.g. 7H, TD, 10♦)"
        )
    rank = found["rank"].upper()
    rank = "T" if rank == "10" else rank
    suit = found["suit"]
    suit = _SYMBOL_SUITS.get(suit, suit.upper())
    return rank + suit


def show_card(card: str, *, ascii: bool = False) -> str:
    """A card for people: ``7♥``, ``10♦`` (``7H``, ``TD`` in ASCII)."""
    if ascii or len(card) != 2 or card[1] not in _SUIT_SYMBOLS:
        return card
    rank = "10" if card[0] == "T" else card[0]
    return rank + _SUIT_SYMBOLS[card[1]]


def _show(cards: Iterable[str], ascii: bool) -> str:
    return " ".join(show_card(card, ascii=ascii) for card in cards) or "-"


def _rank(card: str) -> int:
    return RANKS.index(card[0]) + 1


def card_points(card: str) -> int:
    """Deadwood points: ace 1, two to nine their pips, ten and faces 10."""
    return min(_rank(card), 10)


@dataclass(frozen=True, slots=True)
class Arrangement:
    """A hand's best arrangement: melds and the deadwood left, with its points (the fewest possible)."""

    melds: tuple[tuple[str, ...], ...]
    deadwood: tuple[str, ...]
    points: int


def arrange(cards: Iterable[str]) -> Arrangement:
    """The arrangement of ``cards`` into melds that leaves the least deadwood (the engine's optimiser,
    ``libs.engines.gin``: the same answer the server shows)."""
    best = best_arrangement(sorted(set(cards)))
    return Arrangement(melds=best.melds, deadwood=best.deadwood, points=best.deadwood_points)


def _without(cards: Sequence[str], card: str) -> list[str]:
    rest = list(cards)
    rest.remove(card)
    return rest


# -- the family ------------------------------------------------------------------------------------------


class GinClient(FamilyClient):
    """Gin rummy for two seats."""

    name = "gin"
    uses_chance = True
    option_names = ("variant", "hands")
    option_help: ClassVar[Mapping[str, str]] = {
        "variant": "gin: standard (default), straight or oklahoma",
        "hands": "gin: hands that win the match (default: 3)",
    }
    option_choices: ClassVar[Mapping[str, tuple[str, ...]]] = {"variant": tuple(_VARIANTS)}
    quick_minutes = 5

    def options(self, settings: Mapping[str, str]) -> rules_pb2.MatchOptions:
        unknown = sorted(set(settings) - set(self.option_names))
        if unknown:
            raise InputError(f"gin has no option {', '.join(unknown)} (options: variant, hands)")
        text = settings.get("variant", "standard").strip().lower()
        variant = _VARIANTS.get(text)
        if variant is None:
            raise InputError(f"gin variant must be standard, straight or oklahoma, not {text!r}")
        hands = settings.get("hands", "0").strip()
        if not hands.isdigit():
            raise InputError(f"gin hands to win must be a whole number, not {hands!r}")
        return rules_pb2.MatchOptions(gin=gin_pb2.GinOptions(variant=variant, hands_to_win=int(hands)))

    def describe_options(self, options: rules_pb2.MatchOptions) -> str:
        gin = options.gin
        variant = _VARIANT_NAMES.get(gin.variant, "standard")
        return f"{variant}, first to {gin.hands_to_win or 3} hands"

    # -- rendering ---------------------------------------------------------------------------------------

    def render(self, update: rules_pb2.MatchUpdate, seat: int | None, *, ascii: bool = False) -> str:
        view = update.view.gin

        def who(other: int) -> str:
            return f"{self.seat_label(other)} (you)" if other == seat else self.seat_label(other)

        variant = _VARIANT_NAMES.get(view.variant, "standard")
        limit = f"knock at {view.knock_limit} or less" if view.knock_limit else "gin only"
        lines = [
            f"gin rummy, hand {view.hand_number} ({variant}, {limit}); first to {view.hands_to_win} hands"
        ]
        scores = [
            f"{who(i)} {wins} hand{'s' if wins != 1 else ''} ({points} points)"
            for i, (wins, points) in enumerate(zip(view.hand_wins, view.points, strict=False))
        ]
        if scores:
            lines.append("score: " + ", ".join(scores))
        pile = list(view.discard_pile)
        shown = pile[-8:]
        top = f" [{show_card(shown[-1], ascii=ascii)}]" if shown else ""
        under = _show(shown[:-1], ascii) + " " if len(shown) > 1 else ""
        more = "... " if len(pile) > len(shown) else ""
        lines.append(
            f"stock {view.stock_count} cards; discard pile ({len(pile)}): {more}{under}{top}".rstrip()
        )
        for cards in view.seats:
            if cards.seat == seat:
                continue
            known = f"; known: {_show(cards.known_cards, ascii)}" if cards.known_cards else ""
            lines.append(f"{who(cards.seat)}: {cards.card_count} cards{known}")
        if view.hand:
            lines.append(f"your hand: {_show(view.hand, ascii)}")
            melds = " | ".join(_show(meld.cards, ascii) for meld in view.melds) or "none"
            lines.append(
                f"melds: {melds}; deadwood: {_show(view.deadwood, ascii)} ({view.deadwood_points} points)"
            )
        if view.taken_from_discard:
            lines.append(f"taken from the discard pile: {show_card(view.taken_from_discard, ascii=ascii)}")
        phase = _PHASES.get(view.phase, "")
        if phase and update.HasField("to_move"):
            phase = f"{who(update.to_move)} to play: {phase}"
        if phase:
            lines.append(phase)
        if view.hands:
            lines += self._hand_lines(view.hands[-1], seat, ascii)
        return "\n".join(lines)

    def _hand_lines(self, hand: gin_pb2.HandResult, seat: int | None, ascii: bool) -> list[str]:
        def who(other: int) -> str:
            return f"{self.seat_label(other)} (you)" if other == seat else self.seat_label(other)

        end = _HAND_ENDS.get(hand.end, "ended")
        if hand.end == gin_pb2.HAND_END_VOID:
            return [f"last hand ({hand.hand_number}): {end}"]
        ender = f" by {who(hand.ender)}" if hand.HasField("ender") else ""
        winner = f"; {who(hand.winner)} scored {hand.points}" if hand.HasField("winner") else ""
        lines = [f"last hand ({hand.hand_number}): {end}{ender}{winner}"]
        for reveal in hand.hands:
            melds = " | ".join(_show(meld.cards, ascii) for meld in reveal.melds) or "none"
            laid = f"; laid off {_show(reveal.laid_off, ascii)}" if reveal.laid_off else ""
            lines.append(
                f"  {who(reveal.seat)}: {melds}; deadwood {_show(reveal.deadwood, ascii)} "
                f"({reveal.deadwood_points} points){laid}"
            )
        return lines

    def describe_legal(self, update: rules_pb2.MatchUpdate) -> str:
        actions = list(update.legal_actions)
        if not actions:
            return "nothing to play now (not your turn)"
        plain = [action for action in actions if " " not in action]
        lines = [" ".join(plain)] if plain else []
        for verb in _WITH_CARD:
            cards = [action.split(" ", 1)[1] for action in actions if action.startswith(verb + " ")]
            if cards:
                lines.append(f"{verb}: {' '.join(cards)}")
        return "\n".join(lines)

    def input_help(self) -> str:
        return (
            "stock (s), take (t), pass (p), discard 7H (d 7H, or just 7H), knock 7H (k 7H), "
            "gin 7H (g 7H), biggin"
        )

    def parse(self, text: str, update: rules_pb2.MatchUpdate | None = None) -> rules_pb2.Action:
        words = text.strip().split()
        if not words:
            raise InputError(f"type an action: {self.input_help()}")
        if words[:2] == ["big", "gin"]:
            words = ["biggin", *words[2:]]
        verb = _VERBS.get(words[0].lower())
        if verb is None:
            if len(words) == 1 and _CARD.fullmatch(words[0]):
                verb, words = "discard", ["discard", words[0]]
            else:
                raise InputError(f"{text.strip()!r} is not a gin action: {self.input_help()}")
        if verb in _WITH_CARD:
            if len(words) != 2:
                raise InputError(f"{verb} needs one card, e.g. {verb} 7H")
            action = f"{verb} {parse_card(words[1])}"
        else:
            if len(words) != 1:
                raise InputError(f"{verb} takes no card")
            action = verb
        return rules_pb2.Action(gin=gin_pb2.GinAction(action=action))

    # -- bots --------------------------------------------------------------------------------------------

    def strategy(self, name: str, rng: random.Random) -> Strategy:
        if name == "random":
            return lambda update, seat: _gin(
                rng.choice(sorted(update.legal_actions)) if update.legal_actions else None
            )
        if name == "greedy":
            return lambda update, seat: _gin(greedy_action(update, rng))
        raise InputError(f"gin bots are {', '.join(self.strategies)}, not {name!r}")

    def advantage(self, update: rules_pb2.MatchUpdate, seat: int) -> float | None:
        """Hands won ahead, then points ahead."""
        view = update.view.gin
        wins, points = list(view.hand_wins), list(view.points)
        if len(wins) != 2 or len(points) != 2 or seat not in (0, 1):
            return None
        other = 1 - seat
        return float((wins[seat] - wins[other]) * 1000 + points[seat] - points[other])


def _gin(action: str | None) -> rules_pb2.Action | None:
    return None if action is None else rules_pb2.Action(gin=gin_pb2.GinAction(action=action))


def _least_deadwood(hand: Sequence[str], candidates: Iterable[str], rng: random.Random) -> tuple[str, int]:
    """The card of ``candidates`` whose discard leaves the least deadwood (then the highest card, then at
    random), with that deadwood."""
    scored = [(arrange(_without(hand, card)).points, -card_points(card), card) for card in candidates]
    low = min((points, value) for points, value, _ in scored)
    ties = [card for points, value, card in scored if (points, value) == low]
    return rng.choice(sorted(ties)), low[0]


def greedy_action(update: rules_pb2.MatchUpdate, rng: random.Random) -> str | None:
    """The greedy bot's action in the family's notation (``None`` when there is none)."""
    legal = set(update.legal_actions)
    if not legal:
        return None
    view = update.view.gin
    hand = list(view.hand)
    if "biggin" in legal:
        return "biggin"
    for verb in ("gin", "knock", "discard"):
        cards = [action.split(" ", 1)[1] for action in legal if action.startswith(verb + " ")]
        if cards and all(card in hand for card in cards):
            card, _ = _least_deadwood(hand, cards, rng)
            return f"{verb} {card}"
    if "take" in legal and view.discard_pile:
        top = view.discard_pile[-1]
        if top not in hand:
            now = arrange(hand).points
            after = min(arrange(_without([*hand, top], card)).points for card in hand) if hand else now
            if after < now:
                return "take"
    for fallback in ("stock", "pass"):
        if fallback in legal:
            return fallback
    return rng.choice(sorted(legal))


FAMILY = GinClient()
