"""Elo ratings: hand-checked games, K-factors, rounding, validation and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libs.ratings import (
    DRAW,
    INITIAL_RATING,
    LOSS,
    WIN,
    PlayerRating,
    expected_score,
    k_factor,
    rate,
    rating_change,
)
from libs.ratings.elo import _round_half_away_from_zero

NEW = PlayerRating()
"""A new player: 1500, no games (K = 40)."""


def established(rating: int, games: int = 100) -> PlayerRating:
    return PlayerRating(rating, games)


# --- hand-checked games -------------------------------------------------------------------------------


def test_new_player_starts_at_1500() -> None:
    assert (NEW.rating, NEW.games, NEW.peak) == (INITIAL_RATING, 0, INITIAL_RATING)


def test_equal_new_players_win() -> None:
    # E = 0.5 each, K = 40: 40 * (1 - 0.5) = 20.
    assert rate(NEW, NEW, WIN) == (PlayerRating(1520, 1), PlayerRating(1480, 1, 1500))


def test_equal_new_players_loss_is_the_mirror_image() -> None:
    assert rate(NEW, NEW, LOSS) == (PlayerRating(1480, 1, 1500), PlayerRating(1520, 1))


def test_favourite_draws() -> None:
    # E(1600 v 1400) = 1 / (1 + 10^-0.5) = 0.75975; K = 20: 20 * (0.5 - 0.75975) = -5.19 -> -5.
    assert expected_score(1600, 1400) == pytest.approx(0.759747, abs=1e-6)
    a, b = rate(established(1600), established(1400), DRAW)
    assert (a.rating, b.rating) == (1595, 1405)
    assert (a.games, b.games) == (101, 101)


def test_upset() -> None:
    # The 1400 underdog wins: 20 * (1 - 0.24025) = 15.19 -> +15, and the favourite drops 15.
    underdog, favourite = rate(established(1400), established(1600), WIN)
    assert (underdog.rating, favourite.rating) == (1415, 1585)
    assert favourite.peak == 1600


def test_favourite_wins_gains_little() -> None:
    # 20 * (1 - 0.75975) = 4.80 -> +5.
    favourite, underdog = rate(established(1600), established(1400), WIN)
    assert (favourite.rating, underdog.rating) == (1605, 1395)


def test_each_side_uses_its_own_k() -> None:
    # The newcomer (K = 40) gains 20, the established player (K = 20) loses only 10.
    newcomer, veteran = rate(NEW, established(1500), WIN)
    assert (newcomer.rating, veteran.rating) == (1520, 1490)


def test_senior_player_moves_with_k_10() -> None:
    # E(2400 v 2000) = 1 / (1 + 10^-1) = 0.90909. The 2400 loses 10 * 0.909 = 9.09 -> 9;
    # the 2000 (K = 20) gains 20 * 0.909 = 18.18 -> 18.
    senior, challenger = rate(established(2400), established(2000), LOSS)
    assert (senior.rating, challenger.rating) == (2391, 2018)
    assert senior.peak == 2400
    assert k_factor(senior) == 10  # still 10 below 2400: the peak counts


def test_draw_between_equals_changes_nothing_but_the_count() -> None:
    a, b = rate(PlayerRating(1700, 3), PlayerRating(1700, 300), DRAW)
    assert a == PlayerRating(1700, 4)
    assert b == PlayerRating(1700, 301)


def test_peak_follows_new_highs() -> None:
    a, _ = rate(PlayerRating(1500, 0, 1600), NEW, WIN)
    assert a.peak == 1600
    # 40 * (1 - E(1590 v 1500)) = 40 * (1 - 0.6279) = 14.88 -> +15.
    a, _ = rate(PlayerRating(1590, 0, 1600), NEW, WIN)
    assert a.rating == 1605
    assert a.peak == a.rating


def test_rating_change_is_what_rate_applies() -> None:
    player = established(1550, 40)
    for score in (WIN, DRAW, LOSS):
        new, _ = rate(player, established(1480), score)
        assert new.rating - player.rating == rating_change(player, 1480, score)
    assert [rating_change(NEW, 1500, score) for score in (WIN, DRAW, LOSS)] == [20, 0, -20]


# --- K-factor -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("player", "k"),
    [
        (PlayerRating(1500, 0), 40),
        (PlayerRating(1500, 29), 40),
        (PlayerRating(1500, 30), 20),
        (PlayerRating(2399, 30), 20),
        (PlayerRating(2400, 30), 10),
        (PlayerRating(2100, 500, 2400), 10),
        (PlayerRating(2100, 500, 2399), 20),
        (PlayerRating(2450, 10), 40),  # provisional takes precedence
    ],
)
def test_k_factor(player: PlayerRating, k: int) -> None:
    assert k_factor(player) == k


def test_thirtieth_game_is_the_last_with_k_40() -> None:
    a, b = PlayerRating(1500, 29), established(1500)
    a, b = rate(a, b, WIN)
    assert a.rating == 1520
    a, _ = rate(a, b, WIN)
    assert a.games == 31
    assert k_factor(PlayerRating(1500, 30)) == 20


# --- rounding and validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "rounded"),
    [(0.0, 0), (0.4, 0), (0.5, 1), (1.5, 2), (2.5, 3), (-0.5, -1), (-2.5, -3), (-2.4, -2), (5.19, 5)],
)
def test_changes_round_half_away_from_zero(value: float, rounded: int) -> None:
    assert _round_half_away_from_zero(value) == rounded


@pytest.mark.parametrize("score", [0.25, 2.0, -1.0, 0.75, math.nan])
def test_scores_other_than_win_draw_loss_are_refused(score: float) -> None:
    with pytest.raises(ValueError, match="score"):
        rate(NEW, NEW, score)
    with pytest.raises(ValueError, match="score"):
        rating_change(NEW, 1500, score)


def test_negative_game_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="games"):
        PlayerRating(1500, -1)


def test_peak_is_never_below_the_rating() -> None:
    assert PlayerRating(1800, 40, 1700).peak == 1800
    assert PlayerRating(1800, 40).peak == 1800


def test_expected_score_survives_absurd_gaps() -> None:
    assert expected_score(10**7, 0) == pytest.approx(1.0)
    assert expected_score(0, 10**7) == pytest.approx(0.0)


# --- properties ---------------------------------------------------------------------------------------

RATINGS = st.integers(100, 3200)
PLAYERS = st.builds(PlayerRating, RATINGS, st.integers(0, 200), st.integers(0, 3200))
SCORES = st.sampled_from((WIN, DRAW, LOSS))


@given(RATINGS, RATINGS)
def test_expected_scores_sum_to_one(ra: int, rb: int) -> None:
    assert expected_score(ra, rb) + expected_score(rb, ra) == pytest.approx(1.0, abs=1e-12)
    assert 0.0 <= expected_score(ra, rb) <= 1.0


@given(RATINGS, RATINGS, RATINGS)
def test_expected_score_grows_with_the_rating(ra: int, rb: int, opponent: int) -> None:
    low, high = sorted((ra, rb))
    assert expected_score(low, opponent) <= expected_score(high, opponent)


@given(PLAYERS, PLAYERS, SCORES)
def test_rating_is_symmetric(a: PlayerRating, b: PlayerRating, score: float) -> None:
    new_a, new_b = rate(a, b, score)
    assert rate(b, a, 1.0 - score) == (new_b, new_a)


@given(PLAYERS, PLAYERS, SCORES)
def test_games_count_and_peak(a: PlayerRating, b: PlayerRating, score: float) -> None:
    for old, new in zip((a, b), rate(a, b, score), strict=True):
        assert new.games == old.games + 1
        assert new.peak == max(old.peak, new.rating)


@given(st.data(), SCORES)
def test_equal_k_conserves_the_rating_sum(data: st.DataObject, score: float) -> None:
    # Same K on both sides: both provisional, both established below 2400, or both senior.
    games, rating_range = data.draw(
        st.sampled_from(((st.integers(0, 29), RATINGS), (st.integers(30, 500), st.integers(100, 2399)))),
    )
    a = PlayerRating(data.draw(rating_range), data.draw(games))
    b = PlayerRating(data.draw(rating_range), data.draw(games))
    if data.draw(st.booleans()):
        a = PlayerRating(a.rating, max(a.games, 30), 2400)
        b = PlayerRating(b.rating, max(b.games, 30), 2400)
    assert k_factor(a) == k_factor(b)
    new_a, new_b = rate(a, b, score)
    assert abs((new_a.rating + new_b.rating) - (a.rating + b.rating)) <= 1


@given(PLAYERS, PLAYERS)
def test_a_win_never_lowers_the_winner_nor_raises_the_loser(a: PlayerRating, b: PlayerRating) -> None:
    winner, loser = rate(a, b, WIN)
    assert winner.rating >= a.rating
    assert loser.rating <= b.rating


@given(PLAYERS, PLAYERS)
def test_the_change_never_exceeds_k(a: PlayerRating, b: PlayerRating) -> None:
    for score in (WIN, DRAW, LOSS):
        new_a, new_b = rate(a, b, score)
        assert abs(new_a.rating - a.rating) <= k_factor(a)
        assert abs(new_b.rating - b.rating) <= k_factor(b)


@given(PLAYERS, st.integers(0, 200), SCORES)
def test_equals_draw_changes_nothing(a: PlayerRating, games: int, score: float) -> None:
    b = PlayerRating(a.rating, games)
    new_a, new_b = rate(a, b, DRAW)
    assert (new_a.rating, new_b.rating) == (a.rating, b.rating)
    # Between equals a result is worth exactly half of K: +K/2, 0 or -K/2.
    assert rating_change(a, a.rating, score) == round(k_factor(a) * (score - 0.5))
