"""Skirmish Chess's main board: what each duel outcome does, and the situations ordinary chess never
reaches (docs/skirmish.md draws each one). Positions are hand-made; duels are scripted to the outcome a
test needs (tests/libs/engines/skirmish_chess/lines.py)."""

from __future__ import annotations

import chess
import pytest

from libs.engines.base import GameOverError, IllegalActionError, NotYourTurnError, Termination
from tests.libs.engines.skirmish_chess.support import (
    ATTACKER,
    CONTEXT,
    DEFENDER,
    DRAW,
    ENGINE,
    DrawRule,
    capture,
    game,
    move,
)


def test_a_quiet_move_resolves_at_once_and_a_capture_starts_a_duel() -> None:
    state = move(game(), "e4", "d5")
    assert state.pending is None
    state = move(state, "exd5")
    assert state.pending is not None
    duel = ENGINE.view(state, None).duel
    assert duel is not None
    assert (duel.attacker, duel.defender, duel.white_seat, duel.black_seat) == ("P", "p", 0, 1)
    assert duel.fen == "rnbqk/ppppp/5/PPPPP/RNBQK w"  # pawn takes pawn: no odds
    assert ENGINE.legal_actions(state, 1) == []
    assert "a2a3" in ENGINE.legal_actions(state, 0)
    # The main board waits, unchanged, while the duel is played.
    assert ENGINE.view(state, None).fen == "rnbqkbnr/ppp1pppp/8/3p4/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2"
    assert ENGINE.view(state, None).legal_moves_uci == ()


def test_the_defenders_owner_plays_white_when_black_captures() -> None:
    state = move(game(), "e4", "d5", "Nf3", "dxe4")
    duel = ENGINE.view(state, None).duel
    assert duel is not None
    assert (duel.white_seat, duel.black_seat) == (1, 0)
    assert ENGINE.to_move(state) == 1
    with pytest.raises(NotYourTurnError):
        ENGINE.apply(state, 0, "a2a3", CONTEXT)


def test_attacker_win_makes_the_capture() -> None:
    state = capture(move(game(), "e4", "d5"), "exd5", ATTACKER)
    assert state.moves_san[-1] == "exd5+"
    assert state.fen == "rnbqkbnr/ppp1pppp/8/3P4/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2"
    assert state.duels[-1].outcome.value == "attacker_won"


def test_defender_win_removes_the_attacker() -> None:
    state = capture(move(game(), "e4", "d5"), "exd5", DEFENDER)
    assert state.moves_san[-1] == "exd5-"
    assert state.fen == "rnbqkbnr/ppp1pppp/8/3p4/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2"


@pytest.mark.parametrize(
    ("rule", "fen"),
    [
        (DrawRule.BOTH_REMOVED, "rnbqkbnr/ppp1pppp/8/8/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2"),
        (DrawRule.BOTH_STAY, "rnbqkbnr/ppp1pppp/8/3p4/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2"),
        (DrawRule.DEFENDER_WINS, "rnbqkbnr/ppp1pppp/8/3p4/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2"),
    ],
)
def test_each_draw_rule(rule: DrawRule, fen: str) -> None:
    state = capture(move(game(draw_rule=rule), "e4", "d5"), "exd5", DRAW)
    assert state.moves_san[-1] == "exd5="
    assert state.fen == fen
    assert state.duels[-1].outcome.value == "draw"


def test_odds_by_capture_pair() -> None:
    # Queen takes pawn: the defender (the pawn's side, Black in the duel) starts without three pawns.
    state = move(game("4k3/8/8/3p4/8/8/8/3QK3 w - - 0 1"), "Qxd5")
    duel = ENGINE.view(state, None).duel
    assert duel is not None
    assert duel.fen.split()[0].split("/")[1].count("p") == 2
    assert len(duel.odds_removed) == 3
    # Switched off: the preset as it is.
    state = move(game("4k3/8/8/3p4/8/8/8/3QK3 w - - 0 1", odds=False), "Qxd5")
    duel = ENGINE.view(state, None).duel
    assert duel is not None
    assert duel.fen == "rnbqk/ppppp/5/PPPPP/RNBQK w"
    assert duel.odds_removed == ()


def test_failed_en_passant_removes_only_the_capturing_pawn() -> None:
    start = "4k3/3p4/8/4P3/8/8/8/4K3 b - - 0 1"
    state = move(game(start), "d5")
    assert state.fen == "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2"
    failed = capture(state, "exd6", DEFENDER)
    assert failed.moves_san[-1] == "exd6-"
    assert failed.fen == "4k3/8/8/3p4/8/8/8/4K3 b - - 0 2"
    won = capture(state, "exd6", ATTACKER)
    assert won.fen == "4k3/8/3P4/8/8/8/8/4K3 b - - 0 2"


def test_failed_promotion_capture_promotes_nothing() -> None:
    start = "3rk3/4P3/8/8/8/8/8/K7 w - - 0 1"
    failed = capture(game(start), "exd8=N", DEFENDER)
    assert failed.moves_san[-1] == "exd8=N-"
    assert failed.fen == "3rk3/8/8/8/8/8/8/K7 b - - 0 1"
    won = capture(game(start), "exd8=N", ATTACKER)
    assert won.fen == "3Nk3/8/8/8/8/8/8/K7 b - - 0 1"


def test_a_failed_capture_along_a_pin_leaves_the_king_attackable_and_taking_it_is_a_duel() -> None:
    # White's bishop on d2 is pinned by Black's bishop on b4 and captures it along the pin; it loses.
    start = "4k3/8/8/8/1b6/8/3B4/4K3 w - - 0 1"
    state = capture(game(start), "Bxb4", DEFENDER)
    assert state.fen == "4k3/8/8/8/1b6/8/8/4K3 b - - 0 1"
    assert state.result is None
    assert "b4e1" in ENGINE.legal_actions(state, 1)  # the king as the stake
    taken = capture(state, "Bxe1", ATTACKER)
    assert taken.result is not None
    assert (taken.result.termination, taken.result.winner) == (Termination.KING_CAPTURED, 1)
    assert taken.moves_san[-1] == "Bb4xe1+"
    # The king wins its duel: the bishop is gone, and White plays on.
    kept = capture(state, "Bxe1", DEFENDER)
    assert kept.result is not None  # two lone kings: nothing can ever be captured again
    assert kept.result.termination is Termination.DEAD_POSITION
    assert kept.fen.startswith("4k3/8/8/8/8/8/8/4K3 w")


def test_a_failed_capture_of_the_checking_piece_leaves_its_king_in_check() -> None:
    # Black's rook on f7 checks White's king on f1; White's rook takes it and loses. The king is still
    # attacked on Black's turn: Black may take it (a duel with the king as the stake) or play on.
    start = "4k3/R4r2/8/8/8/8/8/5K2 w - - 0 1"
    state = capture(game(start), "Rxf7", DEFENDER)
    assert state.fen == "4k3/5r2/8/8/8/8/8/5K2 b - - 0 1"
    actions = ENGINE.legal_actions(state, 1)
    assert "f7f1" in actions
    assert "e8d8" in actions  # not forced
    assert (
        ENGINE.view(state, None).legal_moves_san[ENGINE.view(state, None).legal_moves_uci.index("f7f1")]
        == "Rf7xf1"
    )
    won = capture(state, "f7f1", ATTACKER)
    assert won.result is not None
    assert (won.result.termination, won.result.winner) == (Termination.KING_CAPTURED, 1)


def test_a_king_that_attacks_and_loses_loses_the_game() -> None:
    state = capture(game("4k3/8/8/8/8/8/3p4/4K3 w - - 0 1"), "Kxd2", DEFENDER)
    assert state.result is not None
    assert (state.result.termination, state.result.winner) == (Termination.KING_CAPTURED, 1)
    assert state.moves_san[-1] == "Kxd2-"
    with pytest.raises(GameOverError):
        ENGINE.apply(state, 1, "e8e7", CONTEXT)
    assert ENGINE.legal_actions(state, 0) == []
    assert ENGINE.legal_actions(state, 1) == []


def test_a_drawn_duel_that_removes_both_removes_a_king_among_them() -> None:
    state = capture(game("4k3/8/8/8/8/8/3p4/4K3 w - - 0 1", draw_rule=DrawRule.BOTH_REMOVED), "Kxd2", DRAW)
    assert state.result is not None
    assert (state.result.termination, state.result.winner) == (Termination.KING_CAPTURED, 1)


def test_a_failed_capture_can_leave_the_opponent_stalemated() -> None:
    # Black: king a8 with no move (White's king c7 and bishop e3 cover a7, b7, b8), and a knight on h1.
    # White's rook takes the knight; the duel is drawn and both go: Black has no legal move, no check.
    start = "k7/2K5/8/8/8/4B3/7R/7n w - - 0 1"
    state = capture(game(start, draw_rule=DrawRule.BOTH_REMOVED), "Rxh1", DRAW)
    assert state.fen == "k7/2K5/8/8/8/4B3/8/8 b - - 0 1"
    assert state.result is not None
    assert state.result.termination is Termination.STALEMATE


def test_a_failed_capture_can_leave_the_opponent_mated() -> None:
    # Black's knight on b7 shields its king on a8 from White's bishop on h1. White's rook takes the
    # knight; the duel is drawn and both go: the bishop now checks the king, which has no square left.
    start = "k7/1nK5/8/8/8/4B3/8/1R5B w - - 0 1"
    state = capture(game(start, draw_rule=DrawRule.BOTH_REMOVED), "Rxb7", DRAW)
    assert state.fen == "k7/2K5/8/8/8/4B3/8/7B b - - 0 1"
    assert state.result is not None
    assert (state.result.termination, state.result.winner) == (Termination.CHECKMATE, 0)
    # Had the rook won, it would stand on b7, guarded by the king, and Black would be stalemated.
    won = capture(game(start), "Rxb7", ATTACKER)
    assert won.result is not None
    assert won.result.termination is Termination.STALEMATE


def test_castling_rights_go_with_a_rook_removed_by_a_duel() -> None:
    failed = capture(game("4k3/8/8/8/8/8/7p/4K2R w K - 0 1"), "Rxh2", DEFENDER)
    assert failed.board().castling_rights == chess.BB_EMPTY
    both = capture(game("r3k3/8/8/8/8/8/8/R3K3 w Qq - 0 1", draw_rule=DrawRule.BOTH_REMOVED), "Rxa8", DRAW)
    assert both.board().castling_rights == chess.BB_EMPTY
    stay = capture(game("r3k3/8/8/8/8/8/8/R3K3 w Qq - 0 1"), "Rxa8", DRAW)
    assert stay.board().castling_rights == chess.BB_A1 | chess.BB_A8


def test_no_draw_actions_during_a_duel() -> None:
    state = move(game(), "e4", "d5", "exd5")
    with pytest.raises(IllegalActionError):
        ENGINE.apply(state, 1, "offer_draw", CONTEXT)


def test_a_skirmish_resets_the_fifty_move_count_and_the_repetition_history() -> None:
    state = capture(move(game(), "e4", "d5"), "exd5", DRAW)
    assert state.board().halfmove_clock == 0
    assert state.board().move_stack == []
