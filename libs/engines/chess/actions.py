"""The actions a chess player can take: a move, and (FIDE ruleset only) the draw actions.

Every action has a ``notation``, and :func:`parse_action` reads it back: ``parse_action(a.notation) == a``.
Moves are written in UCI or SAN (see :mod:`libs.engines.chess.notation`); the draw actions are the
words ``offer_draw``, ``accept_draw``, ``decline_draw`` and ``claim_draw``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from libs.engines.base import MalformedActionError
from libs.engines.chess.notation import NOTATION_HINT, is_move_notation


@dataclass(frozen=True, slots=True)
class Move:
    """A move in UCI (``e2e4``, ``e7e8q``) or SAN (``Nf3``, ``exd5``, ``O-O``, ``e8=Q+``).

    Only the syntax is checked here (:class:`MalformedActionError`); whether the move is legal depends on
    the position and is decided by the engine.
    """

    notation: str

    def __post_init__(self) -> None:
        if not is_move_notation(self.notation):
            raise MalformedActionError(f"cannot read {self.notation!r} as a move: {NOTATION_HINT}")


@dataclass(frozen=True, slots=True)
class OfferDraw:
    """Offer a draw (FIDE ruleset; allowed on either player's turn, one pending offer at a time)."""

    notation: ClassVar[str] = "offer_draw"


@dataclass(frozen=True, slots=True)
class AcceptDraw:
    """Accept the opponent's pending draw offer: the game is drawn by agreement."""

    notation: ClassVar[str] = "accept_draw"


@dataclass(frozen=True, slots=True)
class DeclineDraw:
    """Decline the opponent's pending draw offer (making a move declines it too)."""

    notation: ClassVar[str] = "decline_draw"


@dataclass(frozen=True, slots=True)
class ClaimDraw:
    """Claim a draw by threefold repetition or the fifty-move rule (the player to move only)."""

    notation: ClassVar[str] = "claim_draw"


DrawAction = OfferDraw | AcceptDraw | DeclineDraw | ClaimDraw
"""The draw actions, all refused in the contest ruleset."""

ChessAction = Move | DrawAction
"""Anything a chess player can do through the engine (resignation is the runtime's business)."""

DRAW_ACTIONS: dict[str, DrawAction] = {
    action.notation: action for action in (OfferDraw(), AcceptDraw(), DeclineDraw(), ClaimDraw())
}
"""The draw actions by notation."""


def parse_action(text: str) -> ChessAction:
    """The action ``text`` names: a draw word, or a move in UCI or SAN. Surrounding spaces are ignored.

    >>> parse_action(" e2e4 "), parse_action("offer_draw")
    (Move(notation='e2e4'), OfferDraw())

    :raises MalformedActionError: ``text`` is neither a draw word nor a move's notation.
    """
    stripped = text.strip()
    draw = DRAW_ACTIONS.get(stripped)
    if draw is not None:
        return draw
    return Move(stripped)
