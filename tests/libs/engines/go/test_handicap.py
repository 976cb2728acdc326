"""Handicap stones on GNU Go's fixed_handicap points, White first, komi 0.5."""

from __future__ import annotations

import pytest

from libs.engines.base import IllegalActionError, InvalidOptionsError, NotYourTurnError
from libs.engines.go import BLACK, GO, GoOptions, handicap_names
from tests.libs.engines.go.helpers import CONTEXT

# Written by hand from GNU Go's handicap diagrams (engine/handicap.c): third line on 9x9, fourth line on
# 13x13 and 19x19; 5, 7, 9 add tengen; 6 and 7 the left and right side points; 8 and 9 also top and bottom.
EXPECTED = {
    9: {
        2: {"C3", "G7"},
        3: {"C3", "G7", "C7"},
        4: {"C3", "G7", "C7", "G3"},
        5: {"C3", "G7", "C7", "G3", "E5"},
        6: {"C3", "G7", "C7", "G3", "C5", "G5"},
        7: {"C3", "G7", "C7", "G3", "C5", "G5", "E5"},
        8: {"C3", "G7", "C7", "G3", "C5", "G5", "E3", "E7"},
        9: {"C3", "G7", "C7", "G3", "C5", "G5", "E3", "E7", "E5"},
    },
    13: {
        2: {"D4", "K10"},
        3: {"D4", "K10", "D10"},
        4: {"D4", "K10", "D10", "K4"},
        5: {"D4", "K10", "D10", "K4", "G7"},
        6: {"D4", "K10", "D10", "K4", "D7", "K7"},
        7: {"D4", "K10", "D10", "K4", "D7", "K7", "G7"},
        8: {"D4", "K10", "D10", "K4", "D7", "K7", "G4", "G10"},
        9: {"D4", "K10", "D10", "K4", "D7", "K7", "G4", "G10", "G7"},
    },
    19: {
        2: {"D4", "Q16"},
        3: {"D4", "Q16", "D16"},
        4: {"D4", "Q16", "D16", "Q4"},
        5: {"D4", "Q16", "D16", "Q4", "K10"},
        6: {"D4", "Q16", "D16", "Q4", "D10", "Q10"},
        7: {"D4", "Q16", "D16", "Q4", "D10", "Q10", "K10"},
        8: {"D4", "Q16", "D16", "Q4", "D10", "Q10", "K4", "K16"},
        9: {"D4", "Q16", "D16", "Q4", "D10", "Q10", "K4", "K16", "K10"},
    },
}
CASES = [(size, count) for size in (9, 13, 19) for count in range(2, 10)]


@pytest.mark.parametrize(("size", "count"), CASES)
def test_handicap_points_are_gnu_gos(size: int, count: int) -> None:
    assert set(handicap_names(size, count)) == EXPECTED[size][count]
    assert len(handicap_names(size, count)) == count


@pytest.mark.parametrize(("size", "count"), CASES)
def test_a_handicap_game_starts_with_the_stones_and_white_to_move(size: int, count: int) -> None:
    state = GO.new_game(GoOptions(size=size, handicap=count))
    board = state.board
    black = {board.geometry.names[p] for p in range(size * size) if board[p] == BLACK}
    assert black == EXPECTED[size][count]
    assert board.count(2) == 0
    assert GO.to_move(state) == 1
    assert state.options.komi == 0.5
    view = GO.view(state, None)
    assert view.handicap == count
    assert view.turn == 1
    assert view.move_number == 0
    assert "White to play" in view.message
    assert GO.legal_actions(state, 0) == []
    with pytest.raises(NotYourTurnError):
        GO.apply(state, 0, "A1", CONTEXT)
    point = next(iter(EXPECTED[size][count]))
    with pytest.raises(IllegalActionError, match=f"{point} is occupied"):
        GO.apply(state, 1, point, CONTEXT)
    after = GO.apply(state, 1, "A1", CONTEXT)
    assert GO.to_move(after) == 0


def test_handicap_komi_can_be_set() -> None:
    assert GoOptions(size=19, handicap=3, komi=0).komi == 0.0
    assert GoOptions(size=19, handicap=3, komi=-2.5).komi == -2.5


@pytest.mark.parametrize("handicap", [1, 10, -1, True, 2.0])
def test_unsupported_handicaps_are_refused(handicap: object) -> None:
    with pytest.raises(InvalidOptionsError, match="handicap"):
        GoOptions(size=19, handicap=handicap)  # type: ignore[arg-type]
