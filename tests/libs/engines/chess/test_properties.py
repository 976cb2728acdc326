"""Random playouts under both rulesets, checking the engine's invariants at every step.

Hypothesis supplies the randomness: ``st.randoms(use_true_random=True)``, a ``random.Random`` seeded by
Hypothesis, so a failing game replays from its seed. (Hypothesis's own generated randoms favour edge
values such as ``random() == 0.0``, which would turn every rare draw offer into a frequent one.)
"""

from __future__ import annotations

import random

import chess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libs.engines.base import ActionContext, Termination
from libs.engines.chess import (
    CHESS,
    DRAW_ACTIONS,
    ChessOptions,
    ChessState,
    Ruleset,
    is_blocked_dead,
    material,
    moves_played,
)

MAX_ZEROING_MOVES = 30 + 16 * 6
"""Captures (30 pieces besides the kings) plus pawn steps (16 pawns, 6 steps each) bound the moves that
reset the halfmove clock."""
CONTEST_PLY_BOUND = MAX_ZEROING_MOVES + (MAX_ZEROING_MOVES + 1) * 149
"""At most 149 other half-moves can come between two of those before the seventy-five-move rule ends
the game, so no contest game is longer than this (repetition never ends one)."""

STARTS = [
    None,
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R b KQkq - 0 1",  # Kiwipete, Black to move
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8",
    "4k3/8/8/8/8/8/8/R3K3 w - - 140 100",  # nine quiet half-moves from the seventy-five-move rule
]

VIEW_EVERY = 16
"""Views and full legal-action sweeps are costly (SAN for every move); check them every so many plies."""


def random_context(rng: random.Random) -> ActionContext:
    # Few distinct values, so that equal clocks (the last tiebreak step) do happen.
    return ActionContext(remaining_ms=(rng.choice((0, 1_000, 30_000)), rng.choice((0, 1_000, 30_000))))


def check_view(state: ChessState) -> None:
    view = CHESS.view(state, None)
    assert CHESS.view(state, 0) == view == CHESS.view(state, 1)
    assert view.fen == state.fen
    assert view.to_move == CHESS.to_move(state)
    assert view.outcome == CHESS.outcome(state)
    assert view.moves_uci == state.moves_uci
    assert len(view.moves_san) == view.ply_count == state.ply_count
    assert len(view.legal_moves_san) == len(view.legal_moves_uci)
    assert view.legal_moves_uci == tuple(sorted(view.legal_moves_uci))
    assert view.draw_offer == state.draw_offer
    if view.to_move is None:
        assert view.legal_moves_uci == ()
    else:
        moves = [a for a in CHESS.legal_actions(state, view.to_move) if a not in DRAW_ACTIONS]
        assert tuple(moves) == view.legal_moves_uci
        assert view.can_claim_draw == ("claim_draw" in CHESS.legal_actions(state, view.to_move))


def check_every_action_applies(state: ChessState, seat: int, context: ActionContext) -> None:
    for action in CHESS.legal_actions(state, seat):
        CHESS.apply(state, seat, action, context)


def check_final(state: ChessState) -> None:
    """The end of the game agrees with the board, replayed independently with python-chess."""
    outcome = CHESS.outcome(state)
    assert outcome is not None
    assert CHESS.to_move(state) is None
    assert CHESS.legal_actions(state, 0) == CHESS.legal_actions(state, 1) == []
    assert sum(outcome.score) == 1.0

    board = state.options.initial_board()
    for uci, san in zip(state.moves_uci, state.moves_san, strict=True):
        move = chess.Move.from_uci(uci)
        assert board.san(move) == san
        board.push(move)
    assert board.fen() == state.fen

    if state.options.ruleset is Ruleset.CONTEST:
        assert outcome.winner in (0, 1)
        assert outcome.termination in (Termination.CHECKMATE, Termination.TIEBREAK)
        if outcome.termination is Termination.CHECKMATE:
            assert board.is_checkmate()
            return
        assert outcome.cause in (
            Termination.STALEMATE,
            Termination.INSUFFICIENT_MATERIAL,
            Termination.SEVENTYFIVE_MOVES,
        )
        assert board.is_stalemate() or board.is_insufficient_material() or board.is_seventyfive_moves()
        check_tiebreak_step(state, outcome.tiebreak_step, outcome.winner, board)
    else:
        assert outcome.termination is not Termination.TIEBREAK
        if outcome.winner is not None:
            assert outcome.termination is Termination.CHECKMATE
            assert board.is_checkmate()
        elif outcome.termination is Termination.FIVEFOLD_REPETITION:
            assert board.is_fivefold_repetition()
        elif outcome.termination is Termination.DEAD_POSITION:
            assert board.is_insufficient_material() or is_blocked_dead(board)


def check_tiebreak_step(state: ChessState, step: str | None, winner: int | None, board: chess.Board) -> None:
    white, black = material(board)
    moves = moves_played(state.ply_count, state.first_mover)
    assert state.remaining_ms is not None
    clocks = state.remaining_ms
    if step == "material":
        assert white != black
        assert winner == (0 if white > black else 1)
    elif step == "moves":
        assert white == black
        assert moves[0] != moves[1]
        assert winner == (0 if moves[0] < moves[1] else 1)
    elif step == "time":
        assert white == black
        assert moves[0] == moves[1]
        assert clocks[0] != clocks[1]
        assert winner == (0 if clocks[0] > clocks[1] else 1)
    else:
        assert step == "white"
        assert white == black
        assert moves[0] == moves[1]
        assert clocks[0] == clocks[1]
        assert winner == 0


def choose(rng: random.Random, seat: int, actions: list[str], others: list[str]) -> tuple[int, str]:
    """Who acts and how: mostly a move by the side to move; in FIDE games, now and then a draw action by
    either player (claims when available are often taken, offers are rare and mostly declined)."""
    if "claim_draw" in actions and rng.random() < 0.5:
        return seat, "claim_draw"
    if "accept_draw" in actions:
        answer = rng.random()
        if answer < 0.1:
            return seat, "accept_draw"
        if answer < 0.3:
            return seat, "decline_draw"
    for actor, options in ((seat, actions), (1 - seat, others)):
        if "offer_draw" in options and rng.random() < 0.005:
            return actor, "offer_draw"
    return seat, rng.choice([action for action in actions if action not in DRAW_ACTIONS])


def playout(rng: random.Random, ruleset: Ruleset, start: str | None) -> ChessState:
    state = CHESS.new_game(ChessOptions(ruleset=ruleset, initial_fen=start))
    bound = CONTEST_PLY_BOUND
    steps = 0
    while (seat := CHESS.to_move(state)) is not None:
        steps += 1
        assert state.ply_count <= bound, "a contest game outlived the seventy-five-move rule"
        assert steps <= 2 * bound, "a game did not end"
        context = random_context(rng)
        actions = CHESS.legal_actions(state, seat)
        assert actions
        assert actions == sorted(actions)
        others = CHESS.legal_actions(state, 1 - seat)
        assert all(action in DRAW_ACTIONS for action in others)
        if ruleset is Ruleset.CONTEST:
            assert not DRAW_ACTIONS.keys() & {*actions, *others}
        if state.ply_count % VIEW_EVERY == 0:
            check_view(state)
            check_every_action_applies(state, seat, context)
        actor, action = choose(rng, seat, actions, others)
        before = state
        state = CHESS.apply(state, actor, action, context)
        if action in DRAW_ACTIONS:
            assert state.moves_uci == before.moves_uci
        else:
            assert state.moves_uci == (*before.moves_uci, action)
            assert state.draw_offer in (None, seat)
            assert before.draw_offer != seat or state.draw_offer == seat
    check_view(state)
    check_final(state)
    return state


SLOW_EXAMPLES = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=150, deadline=None, suppress_health_check=SLOW_EXAMPLES)
@given(rng=st.randoms(use_true_random=True), start=st.sampled_from(STARTS))
def test_random_contest_games_end_with_a_winner(rng: random.Random, start: str | None) -> None:
    playout(rng, Ruleset.CONTEST, start)


@settings(max_examples=50, deadline=None, suppress_health_check=SLOW_EXAMPLES)
@given(rng=st.randoms(use_true_random=True), start=st.sampled_from(STARTS))
def test_random_fide_games_keep_the_invariants(rng: random.Random, start: str | None) -> None:
    playout(rng, Ruleset.FIDE, start)
