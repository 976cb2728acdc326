"""The stand-in for a gin rummy seat whose player is away (docs/match-runtime.md, "Stand-ins"): a plain,
deterministic player, so that a replayed log plays the same cards.

It declines the upcard offer, draws from the stock, and then ends the hand when it can (big gin, then
gin, then the knock with the least deadwood), otherwise discards the card that leaves the least deadwood
(the highest such card on a tie, then deck order).
"""

from __future__ import annotations

from libs.engines.gin.actions import BigGin, Discard, Gin, Knock, Pass, Stock
from libs.engines.gin.cards import CARD_TEXT, CARD_VALUE
from libs.engines.gin.engine import GIN, GinState, Phase
from libs.engines.gin.melds import discard_deadwood_mask


def stand_in_action(state: GinState, seat: int) -> str | None:
    """What the stand-in plays for ``seat`` now, in the family's notation; ``None`` when ``seat`` has
    nothing to do."""
    legal = GIN.legal_actions(state, seat)
    if not legal:
        return None
    if state.phase is Phase.UPCARD_OFFER:
        return Pass.notation
    if state.phase is Phase.DRAW:
        return Stock.notation
    if BigGin.notation in legal:
        return BigGin.notation
    choices = [
        (points, -CARD_VALUE[card], card)
        for card, points in discard_deadwood_mask(state.hands[seat])
        if card != state.taken
    ]
    *_, card = min(choices)
    text = CARD_TEXT[card]
    for verb in (Gin.verb, Knock.verb):
        if f"{verb} {text}" in legal:
            return f"{verb} {text}"
    return f"{Discard.verb} {text}"
