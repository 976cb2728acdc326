"""Elo ratings, one rating per player and game family.

Every player starts at :data:`INITIAL_RATING` (1500) in each family. After a rated game each side moves
by ``K * (score - expected)`` where ``expected = 1 / (1 + 10 ** ((R_opponent - R_self) / 400))`` is the
usual logistic Elo expectation and ``score`` is 1 for a win, 0.5 for a draw and 0 for a loss.

K-factor (FIDE-like, each side uses its own, decided *before* the game):

==========  =====================================================================================
K           when
==========  =====================================================================================
40          provisional: the player has completed fewer than 30 rated games in the family
            (:data:`PROVISIONAL_GAMES`); this takes precedence over the 2400 rule
10          the player has ever held a rating of 2400 or more (:data:`SENIOR_RATING`); the
            :attr:`PlayerRating.peak` keeps that, so dropping back below 2400 keeps K = 10, as in FIDE
20          everyone else
==========  =====================================================================================

Because each side uses its own K, a game between a provisional and an established player is not
zero-sum: the newcomer's rating converges fast without shaking the established rating much.

Ratings are integers in the API and in storage; the arithmetic is done in floats and the *change* is
rounded half away from zero, so the new rating is the old integer rating plus an integer change. Rounding
the change rather than the new rating keeps the exchange symmetric: with equal K the winner gains exactly
what the loser drops (up to float noise at an exact half), whereas rounding the (positive) new ratings
half up would favour both players at every exact half and let the rating pool inflate. Exact halves are
rare anyway: with integer ratings the expectation is a "round" number only for equal ratings.

There is no rating floor: a rating can in principle go as low as the games take it.

Everything here is pure arithmetic on values (no I/O, no clock, no randomness).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Final

__all__ = [
    "DRAW",
    "INITIAL_RATING",
    "K_ESTABLISHED",
    "K_PROVISIONAL",
    "K_SENIOR",
    "LOSS",
    "PROVISIONAL_GAMES",
    "SENIOR_RATING",
    "WIN",
    "PlayerRating",
    "expected_score",
    "k_factor",
    "rate",
    "rating_change",
]

INITIAL_RATING: Final = 1500
"""The rating of a player who has not played a rated game in the family."""
PROVISIONAL_GAMES: Final = 30
"""A player with fewer completed rated games than this is provisional (K = 40)."""
SENIOR_RATING: Final = 2400
"""A player who has ever held this rating or more plays with K = 10 (once no longer provisional)."""
K_PROVISIONAL: Final = 40
K_ESTABLISHED: Final = 20
K_SENIOR: Final = 10

WIN: Final = 1.0
DRAW: Final = 0.5
LOSS: Final = 0.0
_SCORES: Final = (WIN, DRAW, LOSS)

_MAX_EXPONENT: Final = 300.0
"""``10 ** x`` overflows a float above ~308; beyond ±300 the expectation is 0 or 1 to 300 digits anyway."""


@dataclass(frozen=True, slots=True)
class PlayerRating:
    """A player's rating in one game family.

    ``games`` counts the completed rated games (before the one being rated). ``peak`` is the highest
    rating the player has held; it is never below ``rating`` (a smaller value, including the default,
    is raised to ``rating``), so ``PlayerRating(1500, 0)`` is a complete record of a new player.
    """

    rating: int = INITIAL_RATING
    games: int = 0
    peak: int = 0

    def __post_init__(self) -> None:
        if self.games < 0:
            raise ValueError(f"games must not be negative, not {self.games}")
        if self.peak < self.rating:
            object.__setattr__(self, "peak", self.rating)


def expected_score(rating: int, opponent_rating: int) -> float:
    """The expected score (0..1) of a player rated ``rating`` against one rated ``opponent_rating``.

    ``expected_score(a, b) + expected_score(b, a) == 1`` up to float rounding.
    """
    exponent = min(max((opponent_rating - rating) / 400, -_MAX_EXPONENT), _MAX_EXPONENT)
    return 1.0 / (1.0 + math.pow(10.0, exponent))


def k_factor(player: PlayerRating) -> int:
    """The K-factor ``player`` plays their next rated game with (see the module documentation)."""
    if player.games < PROVISIONAL_GAMES:
        return K_PROVISIONAL
    if player.peak >= SENIOR_RATING:
        return K_SENIOR
    return K_ESTABLISHED


def rating_change(player: PlayerRating, opponent_rating: int, score: float) -> int:
    """How many points ``player`` gains (or loses, when negative) by scoring ``score`` against
    ``opponent_rating``; the lobby can show it before the game ("win +8, draw 0, loss -8").

    ``score`` must be :data:`WIN`, :data:`DRAW` or :data:`LOSS`, else :class:`ValueError`.
    """
    _check_score(score)
    change = k_factor(player) * (score - expected_score(player.rating, opponent_rating))
    return _round_half_away_from_zero(change)


def rate(a: PlayerRating, b: PlayerRating, score_a: float) -> tuple[PlayerRating, PlayerRating]:
    """The ratings of ``a`` and ``b`` after a rated game in which ``a`` scored ``score_a``.

    ``score_a`` is :data:`WIN` (1.0), :data:`DRAW` (0.5) or :data:`LOSS` (0.0), else :class:`ValueError`;
    ``b`` scored ``1 - score_a``. Each side moves with its own K (decided from its record before the
    game), gets one more game counted and keeps its peak up to date.
    """
    _check_score(score_a)
    new_a = _after(a, rating_change(a, b.rating, score_a))
    new_b = _after(b, rating_change(b, a.rating, 1.0 - score_a))
    return new_a, new_b


def _after(player: PlayerRating, change: int) -> PlayerRating:
    rating = player.rating + change
    return replace(player, rating=rating, games=player.games + 1, peak=max(player.peak, rating))


def _check_score(score: float) -> None:
    if score not in _SCORES:
        raise ValueError(f"a score is 1.0 (win), 0.5 (draw) or 0.0 (loss), not {score!r}")


def _round_half_away_from_zero(value: float) -> int:
    whole = math.floor(abs(value))
    magnitude = whole + 1 if abs(value) - whole >= 0.5 else whole  # the subtraction is exact
    return magnitude if value >= 0 else -magnitude
