"""The actions a gin rummy player can take, and their notation.

========== ============================================================================================
notation   meaning
========== ============================================================================================
``take``   in the first-turn offer: take the upcard; in a normal turn: take the top of the discard pile
``pass``   decline the upcard (first-turn offer only)
``stock``  draw the top card of the stock
``discard XX`` discard ``XX``, ending the turn
``knock XX``   discard ``XX`` and knock with the other ten cards
``gin XX``     discard ``XX`` and go gin with the other ten cards
``biggin`` all eleven cards melded: end the hand without discarding
========== ============================================================================================

Words and cards are read case-insensitively, surrounding and repeated spaces are ignored, and ``10`` is
read as ``T``; the canonical notation (:attr:`notation`) is lower-case words and upper-case cards
(``discard TH``), and ``parse_action(a.notation) == a``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from libs.engines.base import MalformedActionError
from libs.engines.gin.cards import canonical_card


@dataclass(frozen=True, slots=True)
class Take:
    """Take the upcard (first-turn offer) or the top card of the discard pile."""

    notation: ClassVar[str] = "take"


@dataclass(frozen=True, slots=True)
class Pass:
    """Decline the upcard in the first-turn offer."""

    notation: ClassVar[str] = "pass"


@dataclass(frozen=True, slots=True)
class Stock:
    """Draw the top card of the stock."""

    notation: ClassVar[str] = "stock"


@dataclass(frozen=True, slots=True)
class BigGin:
    """End the hand with all eleven cards melded, without discarding."""

    notation: ClassVar[str] = "biggin"


@dataclass(frozen=True, slots=True)
class _CardAction:
    card: str
    """The card discarded, in canonical text (normalised on construction: ``"th"`` becomes ``"TH"``)."""

    verb: ClassVar[str] = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "card", canonical_card(self.card))

    @property
    def notation(self) -> str:
        return f"{self.verb} {self.card}"


@dataclass(frozen=True, slots=True)
class Discard(_CardAction):
    """Discard a card, ending the turn."""

    verb: ClassVar[str] = "discard"


@dataclass(frozen=True, slots=True)
class Knock(_CardAction):
    """Discard a card and knock: the other ten cards' deadwood must be within the hand's knock limit."""

    verb: ClassVar[str] = "knock"


@dataclass(frozen=True, slots=True)
class Gin(_CardAction):
    """Discard a card and go gin: the other ten cards must all be melded."""

    verb: ClassVar[str] = "gin"


GinAction = Take | Pass | Stock | Discard | Knock | Gin | BigGin
"""Anything a gin rummy player can do through the engine (resignation is the runtime's business)."""

DiscardAction = Discard | Knock | Gin
"""The actions that discard a card."""

_WORDS: dict[str, GinAction] = {action.notation: action for action in (Take(), Pass(), Stock(), BigGin())}
_CARD_VERBS: dict[str, type[Discard] | type[Knock] | type[Gin]] = {
    Discard.verb: Discard,
    Knock.verb: Knock,
    Gin.verb: Gin,
}

NOTATION_HINT = (
    "expected take, pass, stock, biggin, or discard/knock/gin followed by a card (for example 'discard 7H')"
)


def parse_action(text: str) -> GinAction:
    """The action ``text`` names (see the module docstring).

    >>> parse_action("take"), parse_action(" Knock  th ")
    (Take(), Knock(card='TH'))

    :raises MalformedActionError: ``text`` is not an action's notation.
    """
    if not isinstance(text, str):
        raise MalformedActionError(f"a gin action is text, not {type(text).__name__}: {NOTATION_HINT}")
    words = text.lower().split()
    if len(words) == 1 and words[0] in _WORDS:
        return _WORDS[words[0]]
    if len(words) == 2 and words[0] in _CARD_VERBS:
        return _CARD_VERBS[words[0]](words[1])
    if len(words) == 1 and words[0] in _CARD_VERBS:
        raise MalformedActionError(f"{words[0]!r} needs a card, for example '{words[0]} 7H'")
    raise MalformedActionError(f"cannot read {text!r} as a gin action: {NOTATION_HINT}")
