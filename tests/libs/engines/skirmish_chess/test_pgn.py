"""Skirmish Chess PGN: python-chess's PGN reader reads every part without an error, each part replays
to the position the engine had, and every duel is in its comment."""

from __future__ import annotations

import io

import chess
import chess.pgn

from libs.engines.base import Outcome, Termination
from libs.engines.chess.skirmish_pgn import export_skirmish_pgn
from tests.libs.engines.skirmish_chess.support import ATTACKER, DEFENDER, DRAW, DrawRule, capture, game, move


def _parts(text: str) -> list[chess.pgn.Game]:
    stream = io.StringIO(text)
    games = []
    while (found := chess.pgn.read_game(stream)) is not None:
        games.append(found)
    return games


def test_parts_replay_to_the_engines_positions() -> None:
    state = move(game(draw_rule=DrawRule.BOTH_REMOVED), "e4", "d5")
    state = capture(state, "exd5", ATTACKER)  # ordinary: stays in part 1
    state = capture(state, "Qxd5", DEFENDER)  # Black's queen takes and loses: a new part begins
    fen_after_failed = state.fen
    state = move(state, "Nc3", "e5", "Nf3", "e4")
    state = capture(state, "Nxe4", DRAW)  # both removed: another part
    text = export_skirmish_pgn(state, {"White": "ann", "Black": "bob"}, [60_000] * state.ply_count)
    parts = _parts(text)
    assert len(parts) == 3
    for index, part in enumerate(parts, start=1):
        assert part.errors == []
        assert part.headers["Rules"] == "Skirmish Chess"
        assert part.headers["Part"] == f"{index}/3"
        assert part.headers["White"] == "ann"
    assert parts[1].headers["FEN"] == fen_after_failed
    assert parts[2].end().board().fen() == state.fen
    assert parts[0].headers["Result"] == "*"
    assert "[%duel exd5+ preset=classic" in text
    assert "Qxd5-" in text
    assert "Nxe4=" in text
    # Every main-board move carries its clock; python-chess reads them.
    assert parts[0].mainline()
    assert all(node.clock() == 60.0 for node in parts[0].mainline())


def test_the_last_part_carries_the_result_and_a_king_lost_in_a_duel() -> None:
    state = capture(game("4k3/8/8/8/8/8/3p4/4K3 w - - 0 1"), "Kxd2", DEFENDER)
    text = export_skirmish_pgn(state, {}, [1_000])
    parts = _parts(text)
    assert len(parts) == 2
    assert parts[0].headers["SetUp"] == "1"
    assert parts[-1].headers["Result"] == "0-1"
    assert "king" in parts[-1].headers["Termination"]
    assert all(part.errors == [] for part in parts)


def test_a_game_ended_during_a_duel_says_so() -> None:
    state = move(game(), "e4", "d5", "exd5")
    text = export_skirmish_pgn(state, {}, [], Outcome(Termination.RESIGNATION, 0, score=(1.0, 0.0)))
    parts = _parts(text)
    assert len(parts) == 1
    assert parts[0].headers["Result"] == "1-0"
    assert "was being decided by a duel when the game ended" in text
