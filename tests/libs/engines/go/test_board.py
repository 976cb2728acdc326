"""The board: coordinates, captures, suicide, simple ko."""

from __future__ import annotations

import pytest

from libs.engines.base import IllegalActionError, MalformedActionError
from libs.engines.go import BLACK, EMPTY, GO, WHITE, Board, parse_point, point_name
from tests.libs.engines.go.helpers import CONTEXT, play


def names(state_or_board: Board, points: tuple[int, ...]) -> list[str]:
    return sorted(state_or_board.geometry.names[p] for p in points)


# ---------------------------------------------------------------------------------------------------------
# Coordinates


def test_gtp_coordinates_skip_i_and_count_rows_from_the_bottom() -> None:
    assert point_name(19, 0) == "A1"
    assert point_name(19, 8) == "J1"
    assert point_name(19, 18) == "T1"
    assert point_name(19, 19 * 19 - 1) == "T19"
    assert point_name(9, 9 * 3 + 3) == "D4"
    assert parse_point(19, "q16") == 15 * 19 + 15
    assert parse_point(9, " e5 ") == 4 * 9 + 4


@pytest.mark.parametrize(
    ("size", "text"), [(9, "K1"), (9, "A10"), (13, "O1"), (19, "U1"), (19, "A20"), (19, "A0")]
)
def test_points_off_the_board_are_refused(size: int, text: str) -> None:
    with pytest.raises(MalformedActionError, match="not on the"):
        parse_point(size, text)


@pytest.mark.parametrize("text", ["", "4D", "DD", "D", "hello", "D-4"])
def test_unreadable_points_are_refused(text: str) -> None:
    with pytest.raises(MalformedActionError):
        parse_point(19, text)


def test_there_is_no_column_i() -> None:
    with pytest.raises(MalformedActionError, match="no column I"):
        parse_point(19, "I5")


def test_from_rows_draws_top_row_first() -> None:
    rows = ["X........", *(["........."] * 7), "........O"]
    board = Board.from_rows(rows)
    assert board.at("A9") == BLACK
    assert board.at("J1") == WHITE
    assert board.at("A1") == EMPTY
    assert board.rows() == tuple(rows)


def test_from_rows_refuses_groups_without_liberties() -> None:
    with pytest.raises(ValueError, match="no liberties"):
        Board.from_rows(["XO.......", "O........", *(["........."] * 7)])


# ---------------------------------------------------------------------------------------------------------
# Captures


def test_a_single_stone_in_the_corner_is_captured() -> None:
    state = play(["A2", "A1", "B1"])
    assert state.board.at("A1") == EMPTY
    assert names(state.board, state.board.captured) == ["A1"]
    assert state.prisoners == (1, 0)
    view = GO.view(state, 0)
    assert view.last_captured == ("A1",)
    assert view.prisoners == (1, 0)
    assert "capturing 1 stone" in view.message


def test_a_group_is_captured_in_the_middle() -> None:
    state = play(["D5", "E5", "D6", "E6", "F5", "J9", "F6", "J8", "E4", "J7", "E7"])
    assert names(state.board, state.board.captured) == ["E5", "E6"]
    assert state.board.at("E5") == EMPTY
    assert state.board.at("E6") == EMPTY
    assert state.prisoners == (2, 0)
    # The capturing stones got their liberties back.
    assert state.board.liberties(parse_point(9, "E7")) == 4
    assert state.board.liberties(parse_point(9, "D5")) == 6  # D5-D6: C5 C6 D4 D7 and E5 E6 again


def test_a_group_on_the_edge_is_captured() -> None:
    # White A1-B1-C1 on the first line; Black closes with D1 after A2, B2, C2.
    state = play(["A2", "A1", "B2", "B1", "C2", "C1", "D1"])
    assert names(state.board, state.board.captured) == ["A1", "B1", "C1"]
    assert state.prisoners == (3, 0)


def test_several_groups_are_captured_at_once() -> None:
    state = play(["A2", "A1", "C2", "C1", "D1", "J9", "B1"])
    assert names(state.board, state.board.captured) == ["A1", "C1"]
    assert state.prisoners == (2, 0)
    assert state.board.liberties(parse_point(9, "B1")) == 3


def test_groups_merge_and_share_liberties() -> None:
    state = play(["D4", "J9", "F4", "J8", "E4"])
    group = state.board.group(parse_point(9, "E4"))
    assert group is not None
    assert sorted(point_name(9, p) for p in group.stones) == ["D4", "E4", "F4"]
    assert state.board.liberties(parse_point(9, "D4")) == 8


# ---------------------------------------------------------------------------------------------------------
# Suicide


def test_suicide_is_refused() -> None:
    state = play(["A2", "J9", "B1"])
    with pytest.raises(IllegalActionError, match="A1 would be suicide"):
        GO.apply(state, 1, "A1", CONTEXT)
    assert "A1" not in GO.legal_actions(state, 1)


def test_suicide_of_a_group_is_refused() -> None:
    # White A1 with Black A2, B2 and C1 around: White B1 would leave A1-B1 without liberties.
    state = play(["A2", "A1", "B2", "J9", "C1"])
    with pytest.raises(IllegalActionError, match="B1 would be suicide"):
        GO.apply(state, 1, "B1", CONTEXT)
    assert "B1" not in GO.legal_actions(state, 1)


def test_a_move_without_liberties_that_captures_is_allowed() -> None:
    # Black A2 and B1 are each in atari at A1; White A1 has no liberty of its own but captures both.
    state = play(["A2", "A3", "B1", "B2", "J9", "C1", "J8"])
    assert "A1" in GO.legal_actions(state, 1)
    after = GO.apply(state, 1, "A1", CONTEXT)
    assert names(after.board, after.board.captured) == ["A2", "B1"]
    assert after.prisoners == (0, 2)
    assert after.board.at("A1") == WHITE


def test_occupied_points_are_refused() -> None:
    state = play(["D4"])
    with pytest.raises(IllegalActionError, match="D4 is occupied"):
        GO.apply(state, 1, "d4", CONTEXT)


# ---------------------------------------------------------------------------------------------------------
# Ko

KO = ["D4", "E4", "C5", "F5", "D6", "E6", "J9", "D5", "E5"]
"""Black takes the ko at E5 (capturing White D5): White may not take back at D5 at once."""


def test_ko_cannot_be_retaken_at_once() -> None:
    state = play(KO)
    assert names(state.board, state.board.captured) == ["D5"]
    view = GO.view(state, 1)
    assert view.ko == "D5"
    assert "D5" not in view.legal_points
    assert "D5" not in GO.legal_actions(state, 1)
    with pytest.raises(IllegalActionError, match="D5 retakes the ko at once; play elsewhere first"):
        GO.apply(state, 1, "D5", CONTEXT)


def test_ko_can_be_retaken_after_a_move_elsewhere_by_both_sides() -> None:
    state = play([*KO, "J1", "A1"])  # White plays elsewhere (a ko threat), Black answers elsewhere
    assert GO.view(state, 1).ko is None
    state = GO.apply(state, 1, "D5", CONTEXT)  # White retakes
    assert names(state.board, state.board.captured) == ["E5"]
    assert GO.view(state, 0).ko == "E5"
    with pytest.raises(IllegalActionError, match="E5 retakes the ko"):
        GO.apply(state, 0, "E5", CONTEXT)
    state = play(["A9", "B9", "E5"], state=state)  # Black elsewhere, White elsewhere, Black retakes
    assert names(state.board, state.board.captured) == ["D5"]
    assert GO.view(state, 1).ko == "D5"


def test_a_pass_clears_the_ko() -> None:
    state = play([*KO, "pass"])
    assert GO.view(state, 0).ko is None
    state = play(["pass"], state=state)
    # after two passes the game is counted; resume and White may retake
    state = GO.apply(state, 1, "resume", CONTEXT)
    assert state.turn == 1
    assert "D5" in GO.legal_actions(state, 1)


def test_the_ko_point_is_cleared_after_the_next_move() -> None:
    state = play([*KO, "J1"])
    assert GO.view(state, 0).ko is None


def test_a_capture_that_leaves_the_capturing_stone_more_than_one_liberty_is_no_ko() -> None:
    state = play(["A2", "A1", "B1"])
    assert state.board.ko is None
    assert GO.view(state, 1).ko is None


def test_boards_never_change() -> None:
    before = play(["A2", "A1"]).board
    rows = before.rows()
    after = before.play(parse_point(9, "B1"), BLACK)
    assert before.rows() == rows
    assert before.at("A1") == WHITE
    assert after.at("A1") == EMPTY
    assert before != after
