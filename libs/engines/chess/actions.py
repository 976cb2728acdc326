"""The actions a chess player can take: a move, and (FIDE ruleset only) the draw actions.

Every action has a ``notation``, and :func:`parse_action` reads it back: ``parse_action(a.notation) == a``.
Moves are written in UCI or SAN (see :mod:`libs.engines.chess.notation`); the draw actions are the
words ``offer_draw``, ``accept_draw``, ``decline_draw`` and ``claim_draw``, and a claim may name the move
the claimant is about to make: ``claim_draw Nf3`` or ``claim_draw g1f3`` (see :class:`ClaimDraw`).
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


CLAIM_DRAW = "claim_draw"
"""The word of a draw claim, alone (a claim on the position) or followed by a move."""


class _ClaimNotation:
    """``ClaimDraw.notation``: on the class, the word ``claim_draw`` (as each draw action's class has its
    word); on a claim, its own notation, with its move if it names one."""

    def __get__(self, claim: ClaimDraw | None, owner: type | None = None) -> str:
        if claim is None or claim.move is None:
            return CLAIM_DRAW
        return f"{CLAIM_DRAW} {claim.move}"


@dataclass(frozen=True, slots=True)
class ClaimDraw:
    """Claim a draw by threefold repetition or the fifty-move rule (the player to move only).

    Without ``move`` (``claim_draw``) the claim is on the position as it stands. With ``move``
    (``claim_draw Nf3``, ``claim_draw g1f3``) it is the FIDE claim with the move the player is about to
    make: judged on the position that move would make; if it is wrong, the move is played. ``move`` is
    kept as written, UCI or SAN, like :class:`Move`'s notation (only its syntax is checked here: naming
    it in UCI needs the position, which the engine has); :attr:`notation` reads back to the same claim.
    """

    move: str | None = None
    notation = _ClaimNotation()
    """``claim_draw``, or ``claim_draw <move>``; on the class, ``claim_draw``."""

    def __post_init__(self) -> None:
        if self.move is not None and not is_move_notation(self.move):
            raise MalformedActionError(
                f"cannot read {self.move!r} as the move of a draw claim: {NOTATION_HINT}"
            )


DrawAction = OfferDraw | AcceptDraw | DeclineDraw | ClaimDraw
"""The draw actions, all refused in the contest ruleset."""

ChessAction = Move | DrawAction
"""Anything a chess player can do through the engine (resignation is the runtime's business)."""

DRAW_ACTIONS: dict[str, DrawAction] = {
    action.notation: action for action in (OfferDraw(), AcceptDraw(), DeclineDraw(), ClaimDraw())
}
"""The draw actions that are a word alone, by notation (a claim naming a move is not among them: it is
written ``claim_draw <move>``). :meth:`ChessEngine.legal_actions` lists no other draw action."""


def parse_action(text: str) -> ChessAction:
    """The action ``text`` names: a draw word, a draw claim naming a move (``claim_draw`` and the move,
    separated by white space), or a move in UCI or SAN. Surrounding spaces are ignored.

    >>> parse_action(" e2e4 "), parse_action("offer_draw"), parse_action("claim_draw  Nf3")
    (Move(notation='e2e4'), OfferDraw(), ClaimDraw(move='Nf3'))

    :raises MalformedActionError: ``text`` is neither a draw word, nor a claim with a move's notation,
        nor a move's notation.
    """
    stripped = text.strip()
    draw = DRAW_ACTIONS.get(stripped)
    if draw is not None:
        return draw
    words = stripped.split(maxsplit=1)
    if len(words) == 2 and words[0] == CLAIM_DRAW:
        return ClaimDraw(words[1])
    return Move(stripped)
