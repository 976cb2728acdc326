"""Pure Elo ratings for SkillClassics, one rating per player and game family.

:mod:`libs.ratings.elo` holds the arithmetic: :func:`rate` turns two :class:`PlayerRating` values and a
result into the two new values, with FIDE-like K-factors (40 provisional, 20, 10 from 2400). Integer
ratings in, integer ratings out; no I/O, no clock, no randomness.
"""

from libs.ratings.elo import (
    DRAW,
    INITIAL_RATING,
    K_ESTABLISHED,
    K_PROVISIONAL,
    K_SENIOR,
    LOSS,
    PROVISIONAL_GAMES,
    SENIOR_RATING,
    WIN,
    PlayerRating,
    expected_score,
    k_factor,
    rate,
    rating_change,
)

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
