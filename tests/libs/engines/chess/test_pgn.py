"""PGN export, read back with python-chess's own PGN parser."""

from __future__ import annotations

import io

import chess.pgn
import pytest

from libs.engines.base import Outcome, Termination
from libs.engines.chess import CHESS, ChessState, Ruleset, export_pgn, result_token, termination_text
from tests.libs.engines.chess import new, play, play_san

HEADERS = {
    "Event": "SkillClassics lobby",
    "Site": "https://skillclassics.example",
    "Date": "2025.01.31",
    "Round": "1",
    "White": 'Ann "the Rook" Smith',
    "Black": "Bob\\Jones",
    "TimeControl": "180",
}


def unescape(value: str) -> str:
    return value.replace('\\"', '"').replace("\\\\", "\\")


def read(pgn: str) -> chess.pgn.Game:
    game = chess.pgn.read_game(io.StringIO(pgn))
    assert game is not None
    assert game.errors == []
    return game


def assert_round_trip(pgn: str, state: ChessState, clocks_ms: list[int]) -> chess.pgn.Game:
    game = read(pgn)
    nodes = list(game.mainline())
    assert [node.move.uci() for node in nodes] == list(state.moves_uci)
    assert [node.san() for node in nodes] == list(state.moves_san)
    assert game.end().board().fen() == state.fen
    for node, ms in zip(nodes, clocks_ms, strict=False):
        clock = node.clock()
        assert clock is not None
        assert ms / 1000 - 0.1 < clock <= ms / 1000  # tenths, truncated
    for node in nodes[len(clocks_ms) :]:
        assert node.clock() is None
    return game


def test_a_finished_game_round_trips() -> None:
    state = play_san(new(), "1. f3 e5 2. g4 Qh4#")
    clocks_ms = [179_000, 178_250, 170_999, 175_000]
    pgn = export_pgn(state, HEADERS, clocks_ms, None)
    game = assert_round_trip(pgn, state, clocks_ms)
    assert [node.clock() for node in game.mainline()] == [179.0, 178.2, 170.9, 175.0]
    # PGN escapes quotes and backslashes in tag values; python-chess hands them back still escaped.
    assert '[White "Ann \\"the Rook\\" Smith"]' in pgn
    assert '[Black "Bob\\\\Jones"]' in pgn
    assert {name: unescape(value) for name, value in game.headers.items()} == {
        **HEADERS,
        "Result": "0-1",
        "Termination": "checkmate, Black wins",
    }
    assert list(game.headers)[:7] == ["Event", "Site", "Date", "Round", "White", "Black", "Result"]
    assert game.headers.get("Result") == "0-1"
    assert pgn.endswith("0-1\n")
    assert "1. f3 { [%clk 0:02:59] } 1... e5 { [%clk 0:02:58.2] } 2. g4" in pgn


def test_the_tiebreak_reason_goes_in_the_termination_tag() -> None:
    state = play(new("7k/8/8/8/8/3q4/8/K7 b - - 0 1"), "Qc2")
    pgn = export_pgn(state, {}, [61_500], None)
    game = assert_round_trip(pgn, state, [61_500])
    assert game.headers["Termination"] == "tiebreak: stalemate, Black wins on material"
    assert game.headers["Result"] == "0-1"
    assert game.headers["SetUp"] == "1"
    assert game.headers["FEN"] == "7k/8/8/8/8/3q4/8/K7 b - - 0 1"
    assert pgn.splitlines()[-1] == "1... Qc2 { [%clk 0:01:01.5] } 0-1"


def test_missing_tags_are_unknown() -> None:
    game = read(export_pgn(new(), {}, [], None))
    assert dict(game.headers) == {
        "Event": "?",
        "Site": "?",
        "Date": "????.??.??",
        "Round": "?",
        "White": "?",
        "Black": "?",
        "Result": "*",
    }


@pytest.mark.parametrize(
    ("outcome", "result", "termination"),
    [
        (Outcome(Termination.TIMEOUT, 0, score=(1.0, 0.0)), "1-0", "timeout, White wins"),
        (Outcome(Termination.RESIGNATION, 1, score=(0.0, 1.0)), "0-1", "resignation, Black wins"),
        (Outcome(Termination.DISCONNECT, 0, score=(1.0, 0.0)), "1-0", "disconnect forfeit, White wins"),
        (Outcome(Termination.ABORTED, None), "*", "aborted"),
        (
            Outcome(Termination.TIMEOUT_VS_INSUFFICIENT_MATERIAL, None, score=(0.5, 0.5)),
            "1/2-1/2",
            "timeout vs insufficient material, draw",
        ),
        (Outcome(Termination.DRAW_AGREED, None, score=(0.5, 0.5)), "1/2-1/2", "draw agreed"),
    ],
)
def test_outcomes_from_outside_the_board_are_passed_in(
    outcome: Outcome, result: str, termination: str
) -> None:
    state = play_san(new(), "1. e4 e5 2. Nf3")
    game = assert_round_trip(
        export_pgn(state, HEADERS, [1_000, 2_000, 3_000], outcome), state, [1_000, 2_000, 3_000]
    )
    assert game.headers["Result"] == result
    assert game.headers["Termination"] == termination


def test_a_long_game_wraps_at_80_columns_and_round_trips() -> None:
    state = play(new(ruleset=Ruleset.FIDE), *("Nf3", "Nf6", "Ng1", "Ng8") * 3, "e4", "e5")
    clocks_ms = [300_000 - 1_234 * ply for ply in range(state.ply_count)]
    pgn = export_pgn(state, HEADERS, clocks_ms, None)
    assert all(len(line) <= 80 for line in pgn.splitlines())
    assert_round_trip(pgn, state, clocks_ms)


def test_exporter_tags_are_not_taken_from_the_caller() -> None:
    pgn = export_pgn(play(new(), "e4"), {"Result": "1-0", "Termination": "made up", "FEN": "x"}, [], None)
    game = read(pgn)
    assert game.headers["Result"] == "*"
    assert "Termination" not in game.headers
    assert "FEN" not in game.headers


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="2 clocks for 1 moves"):
        export_pgn(play(new(), "e4"), {}, [1, 2], None)
    with pytest.raises(ValueError, match="not a PGN tag name"):
        export_pgn(new(), {"Bad Tag": "x"}, [], None)


def test_result_tokens_and_termination_texts() -> None:
    assert result_token(None) == "*"
    tiebreak = Outcome(Termination.TIEBREAK, 0, Termination.SEVENTYFIVE_MOVES, "white", score=(1.0, 0.0))
    assert (
        termination_text(tiebreak)
        == "tiebreak: seventy-five-move rule, White wins as White, all else being equal"
    )
    stalemate = CHESS.outcome(play(new("k7/8/8/2Q5/8/8/8/7K w - - 0 1", Ruleset.FIDE), "Qc7"))
    assert stalemate is not None
    assert (result_token(stalemate), termination_text(stalemate)) == ("1/2-1/2", "stalemate, draw")
