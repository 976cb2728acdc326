"""Views (chess hides nothing: every seat sees the same), legal actions, and the engine protocol."""

from __future__ import annotations

from libs.engines.base import Engine, Termination
from libs.engines.chess import CHESS, ChessEngine, ChessOptions, ChessState, ChessView, OfferDraw, Ruleset
from tests.libs.engines.chess import CLOCKS, new, play, play_san


def test_the_engine_implements_the_protocol() -> None:
    engine: Engine[ChessState, ChessOptions, ChessView] = ChessEngine()
    assert engine.family == "chess"
    assert engine.to_move(engine.new_game(ChessOptions())) == 0


def test_every_seat_and_spectators_see_the_same() -> None:
    state = play_san(new(ruleset=Ruleset.FIDE), "1. e4 e5 2. Nf3")
    state = CHESS.apply(state, 1, OfferDraw(), CLOCKS)
    assert CHESS.view(state, 0) == CHESS.view(state, 1) == CHESS.view(state, None)


def test_view_of_a_game_in_progress() -> None:
    state = play_san(new(), "1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6")
    view = CHESS.view(state, None)
    assert view.fen == "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4"
    assert view.initial_fen is None
    assert view.ruleset is Ruleset.CONTEST
    assert view.moves_san == ("e4", "e5", "Qh5", "Nc6", "Bc4", "Nf6")
    assert view.moves_uci == ("e2e4", "e7e5", "d1h5", "b8c6", "f1c4", "g8f6")
    assert view.last_move == "g8f6"
    assert not view.is_check
    assert view.material == (39, 39)
    assert view.to_move == 0
    assert view.legal_moves_uci == tuple(sorted(view.legal_moves_uci))
    assert view.legal_moves_uci == tuple(CHESS.legal_actions(state, 0))
    assert dict(zip(view.legal_moves_uci, view.legal_moves_san, strict=True))["h5f7"] == "Qxf7#"
    assert view.draw_offer is None
    assert not view.can_claim_draw
    assert view.ply_count == 6
    assert view.halfmove_clock == 4
    assert view.outcome is None


def test_view_after_mate() -> None:
    state = play(play_san(new(), "1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6"), "Qxf7#")
    view = CHESS.view(state, 1)
    assert view.is_check
    assert view.material == (39, 38)
    assert view.to_move is None
    assert view.legal_moves_uci == view.legal_moves_san == ()
    assert view.outcome is not None
    assert view.outcome.termination is Termination.CHECKMATE
    assert view.outcome.winner == 0


def test_fide_legal_actions_include_the_draw_actions_open_to_each_seat() -> None:
    state = new(ruleset=Ruleset.FIDE)
    assert "offer_draw" in CHESS.legal_actions(state, 0)
    assert CHESS.legal_actions(state, 1) == ["offer_draw"]  # either turn
    offered = CHESS.apply(state, 0, OfferDraw(), CLOCKS)
    assert CHESS.legal_actions(offered, 1) == ["accept_draw", "decline_draw"]
    assert "offer_draw" not in CHESS.legal_actions(offered, 0)
    assert CHESS.legal_actions(offered, 0) == sorted(CHESS.legal_actions(offered, 0))


def test_contest_legal_actions_are_moves_only() -> None:
    state = new()
    assert CHESS.legal_actions(state, 0) == sorted(CHESS.view(state, 0).legal_moves_uci)
    assert CHESS.legal_actions(state, 1) == []
