"""Counting hand-made final positions, area and territory, with every stone alive."""

from __future__ import annotations

import pytest

from libs.engines.go import Board, Scoring, score_board

WALLS = [
    "..X.O....",
    "..X.O....",
    "..X.O....",
    "..X.O....",
    "..X.O....",
    "..X.O....",
    "..X.O....",
    "..X.O....",
    "..X.O....",
]
"""Black wall on C, White wall on E, column D between them is dame."""

SEKI = [
    "X.OX.....",
    "X.OX.....",
    "XXOX.....",
    "OOOX.....",
    "XXXX.....",
    ".........",
    ".........",
    ".........",
    ".........",
]
"""A seki in the upper-left corner: Black A9-A8-A7-B7 and White A6-B6-C6-C7-C8-C9 share the liberties B9
and B8 (whoever fills one is captured), every stone counts as alive; Black's wall owns the rest."""


def test_area_counts_stones_and_surrounded_points() -> None:
    score = score_board(Board.from_rows(WALLS), komi=5.5, scoring=Scoring.AREA, prisoners=(3, 1))
    assert (score.black.stones, score.black.territory) == (9, 18)
    assert (score.white.stones, score.white.territory) == (9, 36)
    assert score.neutral == 9
    assert score.black.total == 27
    assert score.white.total == 45 + 5.5
    assert score.winner == 1
    assert score.margin == -23.5
    assert score.result() == "W+23.5"
    assert score.detail() == "White wins by 23.5 (area: Black 27, White 45 + 5.5 komi)"


def test_territory_counts_surrounded_points_and_prisoners() -> None:
    score = score_board(Board.from_rows(WALLS), komi=5.5, scoring=Scoring.TERRITORY, prisoners=(3, 1))
    assert (score.black.territory, score.black.prisoners, score.black.total) == (18, 3, 21)
    assert (score.white.territory, score.white.prisoners, score.white.total) == (36, 1, 42.5)
    assert score.black.komi == 0
    assert score.white.komi == 5.5
    assert score.result() == "W+21.5"
    assert score.detail() == (
        "White wins by 21.5 (territory: Black 18 + 3 prisoners, White 36 + 1 prisoner + 5.5 komi)"
    )


@pytest.mark.parametrize("scoring", list(Scoring))
def test_a_seki_counts_every_stone_alive_and_its_shared_liberties_as_neutral(scoring: Scoring) -> None:
    score = score_board(Board.from_rows(SEKI), komi=6.5, scoring=scoring)
    assert score.neutral == 2
    assert (score.black.stones, score.white.stones) == (12, 6)
    assert (score.black.territory, score.white.territory) == (61, 0)
    if scoring is Scoring.AREA:
        assert (score.black.total, score.white.total) == (73, 6 + 6.5)
    else:
        assert (score.black.total, score.white.total) == (61, 6.5)


@pytest.mark.parametrize("scoring", list(Scoring))
@pytest.mark.parametrize("size", [9, 13, 19])
def test_an_empty_board_is_all_neutral_and_white_wins_by_komi(scoring: Scoring, size: int) -> None:
    score = score_board(Board.empty(size), komi=7.5, scoring=scoring)
    assert score.neutral == size * size
    assert score.black.total == 0
    assert score.white.total == 7.5
    assert score.result() == "W+7.5"


@pytest.mark.parametrize("scoring", list(Scoring))
def test_equal_totals_with_a_whole_komi_are_a_draw(scoring: Scoring) -> None:
    # Black C wall owns A-B (18) with 9 stones; White E wall owns F-J (36) with 9: White leads by 18.
    score = score_board(Board.from_rows(WALLS), komi=-18, scoring=scoring)
    assert score.margin == 0
    assert score.winner is None
    assert score.result() == "0"
    assert score.detail().startswith("a draw")


def test_a_lone_stone_owns_the_whole_board() -> None:
    board = Board.empty(9).play(40, 1)
    score = score_board(board, komi=0.5)
    assert (score.black.stones, score.black.territory, score.neutral) == (1, 80, 0)
    assert score.result() == "B+80.5"
