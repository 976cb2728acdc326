"""The rules of both rulesets, each with a position: game ends, the contest tiebreak, FIDE draws, time."""

from __future__ import annotations

import pytest

from libs.engines.base import ActionContext, IllegalActionError, InvalidOptionsError, Outcome, Termination
from libs.engines.chess import (
    CHESS,
    AcceptDraw,
    ChessOptions,
    ChessState,
    ClaimDraw,
    DeclineDraw,
    OfferDraw,
    Ruleset,
    break_tie,
    material,
    moves_played,
)
from tests.libs.engines.chess import CLOCKS, new, play, play_san

CONTEST, FIDE = Ruleset.CONTEST, Ruleset.FIDE

# Both knights out and back: the starting position recurs every four plies.
SHUFFLE = ("Nf3", "Nf6", "Ng1", "Ng8")


def clocks(white_ms: int, black_ms: int) -> ActionContext:
    return ActionContext(remaining_ms=(white_ms, black_ms))


def assert_tiebreak(outcome: Outcome | None, cause: Termination, step: str, winner: int) -> None:
    assert outcome is not None
    assert (outcome.termination, outcome.cause, outcome.tiebreak_step, outcome.winner) == (
        Termination.TIEBREAK,
        cause,
        step,
        winner,
    )
    assert outcome.score == ((1.0, 0.0) if winner == 0 else (0.0, 1.0))
    assert not outcome.is_draw


def assert_draw(outcome: Outcome | None, termination: Termination) -> None:
    assert outcome is not None
    assert (outcome.termination, outcome.winner, outcome.score) == (termination, None, (0.5, 0.5))
    assert outcome.is_draw


# -- options and turns ---------------------------------------------------------------------------------


def test_a_new_game_starts_with_white_to_move() -> None:
    state = CHESS.new_game(ChessOptions())
    assert state.options.ruleset is CONTEST
    assert CHESS.to_move(state) == 0
    assert CHESS.outcome(state) is None
    assert len(CHESS.legal_actions(state, 0)) == 20
    assert CHESS.legal_actions(state, 1) == []


def test_a_game_may_start_from_a_fen_with_black_to_move() -> None:
    state = new("4k3/8/8/8/8/8/4P3/4K3 b - - 3 40")
    assert CHESS.to_move(state) == 1
    assert state.first_mover == 1
    assert state.options.initial_fen == "4k3/8/8/8/8/8/4P3/4K3 b - - 3 40"


def test_the_usual_starting_fen_is_no_fen() -> None:
    assert (
        ChessOptions(initial_fen="rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1").initial_fen
        is None
    )
    assert ChessOptions(initial_fen="8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - -").initial_fen == (
        "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1"
    )


@pytest.mark.parametrize(
    ("fen", "reason"),
    [
        ("not a fen", "invalid FEN"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x KQkq - 0 1", "invalid FEN"),
        ("8/8/8/8/8/8/8/8 w - - 0 1", "not a legal chess position: no white king"),
        ("4k3/8/8/8/8/8/4Q3/4K3 w - - 0 1", "not a legal chess position: opposite check"),
        ("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", "no legal move"),
        ("k7/8/8/8/8/8/8/K7 w - - 0 1", "insufficient material"),
        ("4k3/8/8/8/8/8/8/R3K3 w - - 150 90", "halfmove clock of 150"),
    ],
)
def test_bad_fens_are_invalid_options(fen: str, reason: str) -> None:
    with pytest.raises(InvalidOptionsError, match=reason):
        ChessOptions(initial_fen=fen)


def test_an_unknown_ruleset_is_an_invalid_option() -> None:
    with pytest.raises(InvalidOptionsError, match="unknown chess ruleset 'blitz'"):
        ChessOptions(ruleset="blitz")  # type: ignore[arg-type]
    assert ChessOptions(ruleset="fide").ruleset is FIDE  # type: ignore[arg-type]


def test_moving_out_of_turn_is_refused() -> None:
    with pytest.raises(IllegalActionError, match="it is White's turn"):
        CHESS.apply(new(), 1, "e7e5", CLOCKS)
    with pytest.raises(IllegalActionError, match="it is Black's turn"):
        CHESS.apply(play(new(), "e4"), 0, "d4", CLOCKS)


@pytest.mark.parametrize("seat", [-1, 2, True, None])
def test_seats_other_than_0_and_1_are_programming_errors(seat: object) -> None:
    with pytest.raises(ValueError, match="chess has seats 0"):
        CHESS.apply(new(), seat, "e2e4", CLOCKS)  # type: ignore[arg-type]


def test_a_context_needs_both_clocks() -> None:
    with pytest.raises(ValueError, match="two clocks"):
        CHESS.apply(new(), 0, "e2e4", ActionContext(remaining_ms=(1000,)))


def test_states_are_values() -> None:
    start = new()
    after = play(start, "e4")
    assert start.moves_uci == ()
    assert CHESS.to_move(start) == 0
    assert play(new(), "e2e4") == after  # UCI and SAN give the same state
    assert hash(play(new(), "e4")) == hash(after)
    board = after.board()
    board.push_san("e5")  # a copy: the state does not change
    assert after.fen == "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"


# -- checkmate, and nothing after the end -------------------------------------------------------------


@pytest.mark.parametrize("ruleset", [CONTEST, FIDE])
def test_fools_mate(ruleset: Ruleset) -> None:
    state = play_san(new(ruleset=ruleset), "1. f3 e5 2. g4 Qh4#")
    outcome = CHESS.outcome(state)
    assert outcome == Outcome(
        Termination.CHECKMATE, winner=1, detail="checkmate; Black wins", score=(0.0, 1.0)
    )
    assert CHESS.to_move(state) is None
    assert CHESS.is_over(state)
    assert CHESS.legal_actions(state, 0) == CHESS.legal_actions(state, 1) == []


@pytest.mark.parametrize("action", ["Kf2", "e2e4", OfferDraw(), ClaimDraw()])
def test_actions_after_the_end_are_refused(action: object) -> None:
    state = play_san(new(ruleset=FIDE), "1. f3 e5 2. g4 Qh4#")
    with pytest.raises(IllegalActionError, match=r"the game is over \(checkmate; Black wins\)"):
        CHESS.apply(state, 0, action, CLOCKS)  # type: ignore[arg-type]


def test_checkmate_beats_the_seventy_five_move_rule() -> None:
    state = play(new("k7/8/1K6/8/8/8/8/7R w - - 149 100"), "Rh8#")
    assert CHESS.outcome(state) == Outcome(
        Termination.CHECKMATE, winner=0, detail="checkmate; White wins", score=(1.0, 0.0)
    )


# -- repetition ------------------------------------------------------------------------------------------


def test_fivefold_repetition_does_not_end_a_contest_game() -> None:
    state = play(new(), *SHUFFLE * 4)  # the starting position, a fifth time
    assert CHESS.outcome(state) is None
    state = play(state, *SHUFFLE * 6)  # and a fifteenth
    assert CHESS.outcome(state) is None
    assert CHESS.to_move(state) == 0
    assert len(CHESS.legal_actions(state, 0)) == 20
    assert not CHESS.view(state, 0).can_claim_draw


def test_fivefold_repetition_draws_a_fide_game() -> None:
    state = play(new(ruleset=FIDE), *SHUFFLE * 4)
    assert_draw(CHESS.outcome(state), Termination.FIVEFOLD_REPETITION)
    before = play(new(ruleset=FIDE), *(SHUFFLE * 4)[:-1])  # fourth occurrence only: play on
    assert CHESS.outcome(before) is None


# -- seventy-five moves ------------------------------------------------------------------------------------

SEVENTY_FIVE_FEN = "4k3/8/8/8/8/8/8/R3K3 w - - 149 100"
"""A rook up, 149 half-moves without capture or pawn move: one more quiet move reaches 150."""


def test_seventy_five_moves_in_contest_go_to_the_tiebreak() -> None:
    state = play(new(SEVENTY_FIVE_FEN), "Ra2")
    assert_tiebreak(CHESS.outcome(state), Termination.SEVENTYFIVE_MOVES, "material", winner=0)
    assert CHESS.outcome(state).detail == (  # type: ignore[union-attr]
        "seventy-five-move rule; White wins the tiebreak on material, 5 to 0"
    )


def test_seventy_five_moves_draw_a_fide_game() -> None:
    assert_draw(CHESS.outcome(play(new(SEVENTY_FIVE_FEN, FIDE), "Ra2")), Termination.SEVENTYFIVE_MOVES)


def test_a_capture_on_the_150th_half_move_resets_the_count() -> None:
    state = play(new("1k6/8/8/8/8/8/7p/4K2R w - - 149 100"), "Rxh2")
    assert CHESS.outcome(state) is None
    assert CHESS.view(state, None).halfmove_clock == 0


# -- stalemate and insufficient material -----------------------------------------------------------------

WHITE_STALEMATES = "k7/8/8/2Q5/8/8/8/7K w - - 0 1"
"""Qc7 stalemates the lone black king on a8."""
BLACK_STALEMATES = "7k/8/8/8/8/3q4/8/K7 b - - 0 1"
"""Qc2 stalemates the lone white king on a1."""
KING_TAKES_ROOK = "4k3/8/8/8/8/8/3r4/3NK3 w - - 0 1"
"""Kxd2 leaves king and knight against king: insufficient material."""


def test_stalemate_tiebreak_white_wins_on_material() -> None:
    outcome = CHESS.outcome(play(new(WHITE_STALEMATES), "Qc7"))
    assert_tiebreak(outcome, Termination.STALEMATE, "material", winner=0)
    assert outcome.detail == "stalemate; White wins the tiebreak on material, 9 to 0"  # type: ignore[union-attr]


def test_stalemate_tiebreak_black_wins_on_material() -> None:
    outcome = CHESS.outcome(play(new(BLACK_STALEMATES), "Qc2"))
    assert_tiebreak(outcome, Termination.STALEMATE, "material", winner=1)
    assert outcome.detail == "stalemate; Black wins the tiebreak on material, 9 to 0"  # type: ignore[union-attr]


def test_insufficient_material_tiebreak() -> None:
    outcome = CHESS.outcome(play(new(KING_TAKES_ROOK), "Kxd2"))
    assert_tiebreak(outcome, Termination.INSUFFICIENT_MATERIAL, "material", winner=0)


def test_stalemate_draws_a_fide_game() -> None:
    outcome = CHESS.outcome(play(new(WHITE_STALEMATES, FIDE), "Qc7"))
    assert_draw(outcome, Termination.STALEMATE)
    assert outcome.detail == "stalemate: Black has no legal move and is not in check"  # type: ignore[union-attr]


def test_insufficient_material_is_a_dead_position_in_fide() -> None:
    assert_draw(CHESS.outcome(play(new(KING_TAKES_ROOK, FIDE), "Kxd2")), Termination.DEAD_POSITION)


# -- each tiebreak step --------------------------------------------------------------------------------------

BISHOP_TAKES_KNIGHT = "2b4k/8/8/1n6/8/8/8/4KB2 w - - 0 41"
"""Bxb5 leaves light-squared bishops on both sides: insufficient material, 3 against 3."""
KNIGHT_EN_PRISE = "2b4k/8/8/5N2/8/8/8/4KB2 w - - 0 41"
"""After a quiet white move, ...Bxf5 leaves light-squared bishops on both sides, 3 against 3."""


def test_white_made_the_last_move_so_black_wins_on_move_count() -> None:
    """Moves are counted in this game only (the FEN's move 41 does not count): White has made one move,
    Black none, so Black wins the tiebreak however the clocks stand."""
    state = play(new(BISHOP_TAKES_KNIGHT), "Bxb5", context=clocks(90_000, 1_000))
    outcome = CHESS.outcome(state)
    assert_tiebreak(outcome, Termination.INSUFFICIENT_MATERIAL, "moves", winner=1)
    assert outcome.detail == (  # type: ignore[union-attr]
        "insufficient material; material is equal (3 each) and Black wins the tiebreak having made fewer "
        "moves, 0 to 1"
    )


def test_equal_material_and_moves_go_to_time_left() -> None:
    state = play(new(KNIGHT_EN_PRISE), "Ke2", context=clocks(30_000, 60_000))
    state = play(state, "Bxf5", context=clocks(30_000, 45_500))  # the clocks of the drawing move count
    outcome = CHESS.outcome(state)
    assert_tiebreak(outcome, Termination.INSUFFICIENT_MATERIAL, "time", winner=1)
    assert outcome.detail.endswith("Black wins the tiebreak on time left, 45.500 s to 30.000 s")  # type: ignore[union-attr]
    assert state.remaining_ms == (30_000, 45_500)

    white_ahead = play(play(new(KNIGHT_EN_PRISE), "Ke2"), "Bxf5", context=clocks(30_001, 30_000))
    assert_tiebreak(CHESS.outcome(white_ahead), Termination.INSUFFICIENT_MATERIAL, "time", winner=0)


def test_all_else_equal_white_wins() -> None:
    state = play(new(KNIGHT_EN_PRISE), "Ke2", "Bxf5", context=clocks(30_000, 30_000))
    outcome = CHESS.outcome(state)
    assert_tiebreak(outcome, Termination.INSUFFICIENT_MATERIAL, "white", winner=0)
    assert outcome.detail == (  # type: ignore[union-attr]
        "insufficient material; material, moves and time left are all equal, so White wins the tiebreak"
    )


def test_moves_played_from_the_usual_start() -> None:
    assert moves_played(0, first_mover=0) == (0, 0)
    assert moves_played(81, first_mover=0) == (41, 40)  # White made the last move
    assert moves_played(82, first_mover=0) == (41, 41)
    assert moves_played(1, first_mover=1) == (0, 1)  # a FEN with Black to move


def test_material_counts_p1_n3_b3_r5_q9_and_no_king() -> None:
    assert material(new().board()) == (39, 39)
    assert material(new("4k3/8/8/8/8/8/PN6/BRQ1K3 w - - 0 1").board()) == (21, 0)


def test_break_tie_refuses_what_is_not_a_drawn_position() -> None:
    with pytest.raises(ValueError, match="not a drawn position"):
        break_tie(Termination.CHECKMATE, new().board(), 0, 0, (0, 0))


# -- draw offers and claims -------------------------------------------------------------------------------


@pytest.mark.parametrize("action", [OfferDraw(), AcceptDraw(), DeclineDraw(), ClaimDraw(), "offer_draw"])
@pytest.mark.parametrize("seat", [0, 1])
def test_contest_refuses_every_draw_action(action: object, seat: int) -> None:
    state = play(new(), *SHUFFLE * 2)  # even where FIDE would allow a threefold claim
    with pytest.raises(IllegalActionError, match="draw offers and claims are not allowed in contest games"):
        CHESS.apply(state, seat, action, CLOCKS)  # type: ignore[arg-type]
    assert all("draw" not in action for action in CHESS.legal_actions(state, seat))


def offer(state: ChessState, seat: int) -> ChessState:
    return CHESS.apply(state, seat, OfferDraw(), CLOCKS)


def test_fide_offer_then_accept() -> None:
    state = offer(new(ruleset=FIDE), 0)
    assert state.draw_offer == 0
    assert CHESS.view(state, 1).draw_offer == 0
    assert CHESS.to_move(state) == 0  # an offer is not a move
    assert "accept_draw" in CHESS.legal_actions(state, 1)
    assert "decline_draw" in CHESS.legal_actions(state, 1)
    assert not {"offer_draw", "accept_draw"} & set(CHESS.legal_actions(state, 0))
    state = play(state, "e4")  # the offerer's own move does not cancel the offer
    assert state.draw_offer == 0
    state = CHESS.apply(state, 1, "accept_draw", CLOCKS)
    assert_draw(CHESS.outcome(state), Termination.DRAW_AGREED)
    assert CHESS.outcome(state).detail == "Black accepted White's draw offer"  # type: ignore[union-attr]
    assert CHESS.to_move(state) is None


def test_fide_offer_on_the_opponents_turn() -> None:
    state = offer(new(ruleset=FIDE), 1)  # Black offers while White is thinking
    state = CHESS.apply(state, 0, AcceptDraw(), CLOCKS)
    assert_draw(CHESS.outcome(state), Termination.DRAW_AGREED)


def test_fide_decline() -> None:
    state = CHESS.apply(offer(new(ruleset=FIDE), 0), 1, DeclineDraw(), CLOCKS)
    assert state.draw_offer is None
    assert CHESS.outcome(state) is None
    assert offer(state, 0).draw_offer == 0  # a new offer may follow


def test_fide_a_move_by_the_offerers_opponent_declines() -> None:
    state = play(offer(play(new(ruleset=FIDE), "e4"), 0), "e5")
    assert state.draw_offer is None
    with pytest.raises(IllegalActionError, match="there is no draw offer from White to accept"):
        CHESS.apply(state, 1, AcceptDraw(), CLOCKS)


def test_fide_one_pending_offer_at_a_time() -> None:
    state = offer(new(ruleset=FIDE), 0)
    with pytest.raises(IllegalActionError, match="you have already offered a draw"):
        offer(state, 0)
    with pytest.raises(IllegalActionError, match="White has offered a draw: accept or decline it"):
        offer(state, 1)
    with pytest.raises(IllegalActionError, match="there is no draw offer from Black to accept"):
        CHESS.apply(state, 0, AcceptDraw(), CLOCKS)
    with pytest.raises(IllegalActionError, match="there is no draw offer from White to decline"):
        CHESS.apply(new(ruleset=FIDE), 1, DeclineDraw(), CLOCKS)


def test_fide_threefold_claim_on_the_third_occurrence() -> None:
    state = play(new(ruleset=FIDE), *SHUFFLE * 2)  # the starting position, a third time
    assert state.claimable_draw is Termination.THREEFOLD_REPETITION
    assert "claim_draw" in CHESS.legal_actions(state, 0)
    assert CHESS.view(state, 1).can_claim_draw
    with pytest.raises(IllegalActionError, match="only the player to move can claim a draw"):
        CHESS.apply(state, 1, ClaimDraw(), CLOCKS)
    claimed = CHESS.apply(state, 0, ClaimDraw(), CLOCKS)
    assert_draw(CHESS.outcome(claimed), Termination.THREEFOLD_REPETITION)
    assert CHESS.outcome(claimed).detail == "White claimed a draw by threefold repetition"  # type: ignore[union-attr]


def test_fide_threefold_claim_before_the_move_that_repeats_names_the_move() -> None:
    """FIDE 9.2.1.1: a player may claim when their next move would make the third occurrence, naming that
    move, which is then not played. Without the move the claim is refused (tests/.../test_claims.py has
    more)."""
    state = play(new(ruleset=FIDE), *(SHUFFLE * 2)[:-1])  # ...Ng8 would repeat the start a third time
    assert CHESS.to_move(state) == 1
    with pytest.raises(IllegalActionError, match="name it"):
        CHESS.apply(state, 1, ClaimDraw(), CLOCKS)
    claimed = CHESS.apply(state, 1, ClaimDraw("Ng8"), CLOCKS)
    assert_draw(CHESS.outcome(claimed), Termination.THREEFOLD_REPETITION)
    assert claimed.moves_san == state.moves_san


def test_fide_claim_refused_without_repetition_or_fifty_moves() -> None:
    state = play(new(ruleset=FIDE), *SHUFFLE)  # only a second occurrence
    assert "claim_draw" not in CHESS.legal_actions(state, 0)
    with pytest.raises(IllegalActionError, match="no draw can be claimed"):
        CHESS.apply(state, 0, ClaimDraw(), CLOCKS)


@pytest.mark.parametrize(
    ("fen", "claimable"),
    [
        ("4k3/8/8/8/8/8/8/R3K3 b - - 100 80", True),  # fifty moves each have passed
        ("4k3/8/8/8/8/8/8/R3K3 w - - 99 80", False),  # the next quiet move would: a claim names it
        ("4k3/8/8/8/8/8/8/R3K3 w - - 98 80", False),
    ],
)
def test_fide_fifty_move_claim(fen: str, claimable: bool) -> None:
    state = new(fen, FIDE)
    seat = CHESS.to_move(state)
    assert seat is not None
    if not claimable:
        with pytest.raises(IllegalActionError, match="no draw can be claimed"):
            CHESS.apply(state, seat, ClaimDraw(), CLOCKS)
        return
    claimed = CHESS.apply(state, seat, ClaimDraw(), CLOCKS)
    assert_draw(CHESS.outcome(claimed), Termination.FIFTY_MOVES)


# -- running out of time ---------------------------------------------------------------------------------

PAWN_AGAINST_LONE_KING = "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"


def test_contest_timeout_is_a_loss_even_against_a_lone_king() -> None:
    outcome = CHESS.timeout_outcome(new(PAWN_AGAINST_LONE_KING), 0)
    assert (outcome.termination, outcome.winner, outcome.score) == (Termination.TIMEOUT, 1, (0.0, 1.0))
    assert outcome.detail == "White ran out of time; Black wins"


def test_fide_timeout_against_a_lone_king_is_a_draw() -> None:
    state = new(PAWN_AGAINST_LONE_KING, FIDE)
    assert_draw(CHESS.timeout_outcome(state, 0), Termination.TIMEOUT_VS_INSUFFICIENT_MATERIAL)
    black_flags = CHESS.timeout_outcome(state, 1)  # White's pawn can still mate
    assert (black_flags.termination, black_flags.winner, black_flags.score) == (
        Termination.TIMEOUT,
        0,
        (1.0, 0.0),
    )


@pytest.mark.parametrize(
    ("fen", "draw"),
    [
        ("q3k3/8/8/8/8/8/8/4KN2 b - - 0 1", True),  # king and knight cannot mate a king and queen
        ("4k3/p7/8/8/8/8/8/4KN2 b - - 0 1", False),  # but can mate a king that a pawn hems in
        ("q3k3/8/8/8/8/8/8/3BKB2 b - - 0 1", True),  # nor can bishops all on light squares
        ("q3k3/8/8/8/8/8/8/2B1KB2 b - - 0 1", False),  # bishops on both colours can
        ("4k3/p7/8/8/8/8/8/R3K3 b - - 0 1", False),
    ],
)
def test_fide_timeout_reads_the_opponents_mating_material(fen: str, draw: bool) -> None:
    outcome = CHESS.timeout_outcome(new(fen, FIDE), 1)
    assert outcome.is_draw is draw


def test_resignation_loses_except_against_a_side_that_cannot_mate_in_fide() -> None:
    contest = CHESS.new_game(ChessOptions(Ruleset.CONTEST, "8/8/8/4k3/8/8/8/3QK3 w - - 0 1"))
    lost = CHESS.resignation_outcome(contest, 1)
    assert lost.termination is Termination.RESIGNATION
    assert lost.winner == 0
    # In FIDE, White resigning against a lone king is a draw: Black could never checkmate.
    fide = CHESS.new_game(ChessOptions(Ruleset.FIDE, "8/8/8/4k3/8/8/8/3QK3 w - - 0 1"))
    drawn = CHESS.resignation_outcome(fide, 0)
    assert drawn.winner is None
    assert drawn.score == (0.5, 0.5)
    assert CHESS.resignation_outcome(fide, 1).winner == 0
