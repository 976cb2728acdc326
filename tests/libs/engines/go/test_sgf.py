"""SGF export, read back with sgfmill and replayed to the engine's final position."""

from __future__ import annotations

import random

import pytest
from sgfmill import boards, sgf, sgf_moves  # type: ignore[import-untyped]

from libs.engines.base import Outcome, Termination
from libs.engines.go import (
    ACCEPT,
    GO,
    PASS,
    GoOptions,
    GoState,
    Phase,
    Scoring,
    export_sgf,
    sgf_point,
)
from tests.libs.engines.go.helpers import CONTEXT, play


def replayed_rows(text: str) -> tuple[tuple[str, ...], sgf.Sgf_game, list[tuple[str, object]]]:
    """The final position of an SGF as rows (top first, X Black, O White), with the game and plays."""
    game = sgf.Sgf_game.from_bytes(text.encode())
    board, plays = sgf_moves.get_setup_and_moves(game)
    for colour, move in plays:
        if move is not None:
            row, col = move
            board.play(row, col, colour)
    return rows_of(board), game, plays


def rows_of(board: boards.Board) -> tuple[str, ...]:
    symbols = {None: ".", "b": "X", "w": "O"}
    return tuple(
        "".join(symbols[board.get(row, col)] for col in range(board.side))
        for row in range(board.side - 1, -1, -1)
    )


def handicap_game() -> GoState:
    """A 9x9 game with 2 handicap stones, a capture, passes (and a resumed count), territory scoring."""
    options = GoOptions(size=9, handicap=2, scoring=Scoring.TERRITORY)
    state = play(["A2", "A1", "J9", "B1", PASS, PASS, "resume", "E5", PASS, PASS, ACCEPT, ACCEPT], options)
    assert state.result is not None
    return state


def test_a_finished_handicap_game_reads_back_in_sgfmill() -> None:
    state = handicap_game()
    text = export_sgf(state, black="Ann", white="Bo [the second]", date="2026-12-02")
    assert text.startswith("(;FF[4]GM[1]")
    rows, game, plays = replayed_rows(text)
    assert rows == state.board.rows()
    root = game.get_root()
    assert game.get_size() == 9
    assert game.get_komi() == 0.5
    assert game.get_handicap() == 2
    assert root.get("RU") == "Japanese"
    assert root.get("PB") == "Ann"
    assert root.get("PW") == "Bo [the second]"
    assert state.score is not None
    assert root.get("RE") == state.score.result()
    assert game.get_winner() == ("b" if state.score.winner == 0 else "w")
    assert set(root.get("AB")) == {(2, 2), (6, 6)}  # C3 and G7 as (row, column)
    assert plays[0][0] == "w"  # White moves first in a handicap game
    assert [move for _, move in plays].count(None) == 4  # passes, written B[] / W[]
    assert "W[]" in text or "B[]" in text
    assert "tt" not in text
    assert len(plays) == len(state.moves)


def test_area_rules_komi_and_a_draw() -> None:
    moves = []
    for row in range(1, 10):
        moves += [f"D{row}", f"F{row}"]
    state = play([*moves, PASS, PASS, ACCEPT, ACCEPT], GoOptions(size=9, komi=0))
    text = export_sgf(state)
    rows, game, _ = replayed_rows(text)
    assert rows == state.board.rows()
    assert game.get_root().get("RU") == "Chinese"
    assert game.get_root().get("RE") == "0"
    assert game.get_komi() == 0
    assert not game.get_root().has_property("HA")


@pytest.mark.parametrize(
    ("outcome", "result"),
    [
        (Outcome(Termination.RESIGNATION, 1), "W+R"),
        (Outcome(Termination.RESIGNATION, 0), "B+R"),
        (Outcome(Termination.TIMEOUT, 0), "B+T"),
        (Outcome(Termination.DISCONNECT, 1), "W+F"),
        (Outcome(Termination.ABORTED, None), "Void"),
    ],
)
def test_results_from_the_runtime(outcome: Outcome, result: str) -> None:
    text = export_sgf(play(["D4", "E5"]), outcome=outcome)
    assert sgf.Sgf_game.from_bytes(text.encode()).get_root().get("RE") == result


def test_a_game_in_progress_has_no_result_and_clock_comments() -> None:
    state = play(["D4", "E5", PASS])
    text = export_sgf(state, clocks=[(59_000, 60_000), (59_000, 58_500), None])
    game = sgf.Sgf_game.from_bytes(text.encode())
    assert not game.get_root().has_property("RE")
    nodes = game.get_main_sequence()
    assert nodes[1].get("C") == "Black 59000 ms, White 60000 ms"
    assert nodes[1].get("BL") == 59
    assert nodes[2].get("WL") == 58.5
    assert not nodes[3].has_property("C")
    assert nodes[3].get_move() == ("b", None)


def test_sgf_points() -> None:
    assert sgf_point(19, 3 * 19 + 3) == "dp"  # D4
    assert sgf_point(9, 0) == "ai"  # A1
    assert sgf_point(9, 80) == "ia"  # J9


@pytest.mark.parametrize("size", [9, 13, 19])
def test_random_games_read_back_in_sgfmill(size: int) -> None:
    rng = random.Random(size)
    for _ in range(3):
        state = GO.new_game(GoOptions(size=size, handicap=rng.choice([0, 0, 3, 9])))
        while state.phase is Phase.PLAY and len(state.moves) < 3 * size * size:
            actions = GO.legal_actions(state, state.turn)
            action = rng.choice(actions) if rng.random() > 0.02 else PASS
            state = GO.apply(state, state.turn, action, CONTEXT)
        rows, _, plays = replayed_rows(export_sgf(state))
        assert rows == state.board.rows()
        assert len(plays) == len(state.moves)
