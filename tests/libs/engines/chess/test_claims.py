"""FIDE draw claims (threefold repetition, fifty moves): on the position as it stands (``claim_draw``), or
naming the move the claimant is about to make (``claim_draw <move>``; FIDE 9.2.1.1 and 9.3.1). A claim
with a move that holds draws without playing it; one that does not hold plays the move, exactly as if no
claim had been made. Positions are checked by hand, and against python-chess on scratch boards."""

from __future__ import annotations

import chess
import pytest

from libs.engines.base import IllegalActionError, MalformedActionError, Termination
from libs.engines.chess import (
    CHESS,
    CLAIM_DRAW,
    DRAW_ACTIONS,
    ChessState,
    ClaimDraw,
    Move,
    Ruleset,
    parse_action,
)
from tests.libs.engines.chess import CLOCKS, new, play

CONTEST, FIDE = Ruleset.CONTEST, Ruleset.FIDE

# Both knights out and back: the starting position recurs every four plies.
SHUFFLE = ("Nf3", "Nf6", "Ng1", "Ng8")
# Seven plies in: Black's Ng8 would make the starting position occur a third time.
BEFORE_THIRD = (SHUFFLE * 2)[:-1]
# A rook and kings, 99 half-moves without a capture or pawn move: White's next quiet move is the 100th.
ROOK_99 = "4k3/8/8/8/8/8/8/R3K3 w - - 99 80"


def reference_board(state: ChessState) -> chess.Board:
    """The game's board rebuilt by python-chess alone, with its whole history."""
    board = state.options.initial_board()
    for uci in state.moves_uci:
        board.push_uci(uci)
    return board


def reference_claim_with(state: ChessState, uci: str) -> Termination | None:
    """What python-chess says of a claim naming ``uci``: the position after it occurred three times
    (``is_repetition(3)``), or the fifty moves are complete (``is_fifty_moves``, which needs a legal move)."""
    board = reference_board(state)
    board.push_uci(uci)
    if board.is_repetition(3):
        return Termination.THREEFOLD_REPETITION
    if board.is_fifty_moves():
        return Termination.FIFTY_MOVES
    return None


def claim(state: ChessState, text: str) -> ChessState:
    seat = CHESS.to_move(state)
    assert seat is not None
    return CHESS.apply(state, seat, text, CLOCKS)


def assert_claimed(state: ChessState, claimed: ChessState, termination: Termination) -> None:
    """``claimed`` is ``state`` drawn by ``termination``, no move played."""
    outcome = CHESS.outcome(claimed)
    assert outcome is not None
    assert (outcome.termination, outcome.winner, outcome.score) == (termination, None, (0.5, 0.5))
    assert (claimed.moves_uci, claimed.moves_san, claimed.fen) == (
        state.moves_uci,
        state.moves_san,
        state.fen,
    )
    assert CHESS.to_move(claimed) is None
    assert CHESS.legal_actions(claimed, 0) == CHESS.legal_actions(claimed, 1) == []


def assert_played(state: ChessState, claimed: ChessState, move: str) -> None:
    """``claimed`` is exactly ``state`` after ``move``, as if no claim had been made."""
    seat = CHESS.to_move(state)
    assert seat is not None
    played = CHESS.apply(state, seat, move, CLOCKS)
    assert claimed == played
    assert (claimed.fen, claimed.moves_uci, claimed.moves_san) == (
        played.fen,
        played.moves_uci,
        played.moves_san,
    )
    assert claimed.board().move_stack == played.board().move_stack
    assert CHESS.view(claimed, None) == CHESS.view(played, None)


# -- threefold repetition --------------------------------------------------------------------------------


@pytest.mark.parametrize("named", ["Ng8", "f6g8", "Nf6g8"])
def test_a_claim_with_the_move_that_makes_the_third_occurrence_draws_and_the_move_is_not_played(
    named: str,
) -> None:
    state = play(new(ruleset=FIDE), *BEFORE_THIRD)
    assert reference_claim_with(state, "f6g8") is Termination.THREEFOLD_REPETITION
    claimed = claim(state, f"claim_draw {named}")
    assert_claimed(state, claimed, Termination.THREEFOLD_REPETITION)
    assert len(claimed.moves_san) == 7
    assert CHESS.outcome(claimed).detail == (  # type: ignore[union-attr]
        "Black claimed a draw by threefold repetition with Ng8, which would repeat the position a third "
        "time (not played)"
    )


def test_the_view_names_the_moves_a_claim_may_name() -> None:
    state = play(new(ruleset=FIDE), *BEFORE_THIRD)
    view = CHESS.view(state, None)
    assert view.claim_moves == ("f6g8",)
    assert not view.can_claim_draw  # the position itself has occurred twice only
    assert "claim_draw" not in CHESS.legal_actions(state, 1)
    reference = [uci for uci in view.legal_moves_uci if reference_claim_with(state, uci) is not None]
    assert reference == ["f6g8"]


def test_a_claim_on_the_position_alone_is_refused_when_only_a_move_would_complete_it() -> None:
    state = play(new(ruleset=FIDE), *BEFORE_THIRD)
    assert reference_board(state).can_claim_threefold_repetition()  # python-chess's older, looser claim
    with pytest.raises(IllegalActionError) as refused:
        claim(state, "claim_draw")
    assert str(refused.value) == (
        "no draw can be claimed on this position: it has not occurred three times, and fifty moves have "
        "not passed without a capture or pawn move; to claim with the move you are about to make, name it "
        "(e.g. claim_draw f6g8): if the claim is wrong, the move is played"
    )
    assert CHESS.outcome(state) is None  # nothing happened: states never change
    assert_claimed(state, claim(state, "claim_draw Ng8"), Termination.THREEFOLD_REPETITION)


def test_the_same_claim_one_repetition_too_early_is_wrong_and_the_move_is_played() -> None:
    state = play(new(ruleset=FIDE), *SHUFFLE[:3])  # Ng8 would make the start occur a second time only
    assert reference_claim_with(state, "f6g8") is None
    assert CHESS.view(state, None).claim_moves == ()
    claimed = claim(state, "claim_draw Ng8")
    assert_played(state, claimed, "Ng8")
    assert CHESS.outcome(claimed) is None
    assert claimed.moves_san == SHUFFLE
    assert CHESS.to_move(claimed) == 0  # the game goes on


@pytest.mark.parametrize("named", ["Nc6", "h7h6", "Nh5"])
def test_a_claim_naming_a_move_that_does_not_repeat_is_wrong_even_when_another_would(named: str) -> None:
    state = play(new(ruleset=FIDE), *BEFORE_THIRD)
    claimed = claim(state, f"claim_draw {named}")
    assert_played(state, claimed, named)
    assert CHESS.outcome(claimed) is None
    assert len(claimed.moves_san) == 8


def test_a_claim_on_the_position_that_has_occurred_three_times() -> None:
    state = play(new(ruleset=FIDE), *SHUFFLE * 2)  # the starting position, a third time
    assert reference_board(state).is_repetition(3)
    assert state.claimable_draw is Termination.THREEFOLD_REPETITION
    assert CLAIM_DRAW in CHESS.legal_actions(state, 0)
    view = CHESS.view(state, None)
    assert view.can_claim_draw
    assert view.claim_moves == ("g1f3",)  # Nf3 would make its own position occur a third time too
    assert_claimed(state, claim(state, "claim_draw"), Termination.THREEFOLD_REPETITION)
    assert_claimed(state, claim(state, "claim_draw Nf3"), Termination.THREEFOLD_REPETITION)


def test_a_claim_with_a_move_is_judged_on_the_position_that_move_makes() -> None:
    """The position as it stands is claimable, but the claim names a move after which it would not be:
    the claim is wrong and the move is played (a claim on the position alone is the one to make)."""
    state = play(new(ruleset=FIDE), *SHUFFLE * 2)
    assert state.claimable_draw is Termination.THREEFOLD_REPETITION
    claimed = claim(state, "claim_draw e4")
    assert_played(state, claimed, "e4")
    assert CHESS.outcome(claimed) is None


def test_positions_with_other_castling_rights_are_not_repetitions() -> None:
    """After 1. e4 e5 the kings walk out and back: the same pieces recur, but only once both sides have
    lost their castling rights does the position count (FIDE 9.2.2), so Ke8 is a third occurrence only at
    the 14th ply, not at the 10th."""
    opened = play(new(ruleset=FIDE), "e4", "e5")
    walk = ("Ke2", "Ke7", "Ke1", "Ke8")
    early = play(opened, *walk, *walk[:3])
    assert reference_claim_with(early, "e7e8") is None  # the third by pieces, the second by rights
    assert_played(early, claim(early, "claim_draw Ke8"), "Ke8")
    late = play(opened, *walk * 2, *walk[:3])
    assert reference_claim_with(late, "e7e8") is Termination.THREEFOLD_REPETITION
    assert CHESS.view(late, None).claim_moves == ("e7e8",)
    assert_claimed(late, claim(late, "claim_draw Ke8"), Termination.THREEFOLD_REPETITION)


def test_a_claim_whose_move_would_be_a_fifth_occurrence_is_a_threefold_claim() -> None:
    state = play(new(ruleset=FIDE), *(SHUFFLE * 4)[:-1])  # Ng8 would be the fifth: an automatic draw
    assert reference_board(state).is_repetition(4)  # not over yet: only Ng8 makes the fifth
    played = play(state, "Ng8")
    assert CHESS.outcome(played).termination is Termination.FIVEFOLD_REPETITION  # type: ignore[union-attr]
    assert_claimed(state, claim(state, "claim_draw Ng8"), Termination.THREEFOLD_REPETITION)


# -- the fifty-move rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("named", "uci"), [("Ra2", "a1a2"), ("a1a7", "a1a7"), ("Ra8+", "a1a8"), ("Kd2", "e1d2")]
)
def test_a_fifty_move_claim_naming_the_hundredth_half_move(named: str, uci: str) -> None:
    state = new(ROOK_99, FIDE)
    assert not CHESS.view(state, None).can_claim_draw
    assert CLAIM_DRAW not in CHESS.legal_actions(state, 0)
    with pytest.raises(IllegalActionError, match="no draw can be claimed on this position"):
        claim(state, "claim_draw")
    assert reference_claim_with(state, uci) is Termination.FIFTY_MOVES
    claimed = claim(state, f"claim_draw {named}")
    assert_claimed(state, claimed, Termination.FIFTY_MOVES)
    assert CHESS.outcome(claimed).detail.startswith("White claimed a draw by the fifty-move rule with ")  # type: ignore[union-attr]


def test_every_quiet_move_at_99_may_be_named() -> None:
    state = new(ROOK_99, FIDE)
    view = CHESS.view(state, None)
    assert view.claim_moves == view.legal_moves_uci  # no capture or pawn move is possible
    assert all(reference_claim_with(state, uci) is Termination.FIFTY_MOVES for uci in view.claim_moves)


def test_a_fifty_move_claim_one_move_too_early_plays_it_and_the_next_claim_holds() -> None:
    state = new("4k3/8/8/8/8/8/8/R3K3 w - - 98 80", FIDE)
    assert CHESS.view(state, None).claim_moves == ()
    claimed = claim(state, "claim_draw Ra2")
    assert_played(state, claimed, "Ra2")
    assert CHESS.view(claimed, None).halfmove_clock == 99
    assert CHESS.outcome(claimed) is None
    with pytest.raises(IllegalActionError, match="no draw can be claimed on this position"):
        claim(claimed, "claim_draw")
    assert_claimed(claimed, claim(claimed, "claim_draw Kd7"), Termination.FIFTY_MOVES)


def test_a_fifty_move_claim_naming_a_capture_or_pawn_move_is_wrong() -> None:
    state = new("4k3/4p3/8/8/8/8/4P3/R3K3 w - - 99 80", FIDE)
    view = CHESS.view(state, None)
    assert "e2e4" not in view.claim_moves
    assert "a1a2" in view.claim_moves
    assert_played(state, claim(state, "claim_draw e4"), "e4")
    assert CHESS.view(claim(state, "claim_draw e4"), None).halfmove_clock == 0


def test_a_fifty_move_claim_at_100_on_the_position() -> None:
    state = new("4k3/8/8/8/8/8/8/R3K3 b - - 100 80", FIDE)
    assert reference_board(state).is_fifty_moves()
    assert CHESS.view(state, None).can_claim_draw
    assert CLAIM_DRAW in CHESS.legal_actions(state, 1)
    assert_claimed(state, claim(state, "claim_draw"), Termination.FIFTY_MOVES)
    assert_claimed(state, claim(state, "claim_draw Kd7"), Termination.FIFTY_MOVES)


def test_a_claim_naming_the_150th_half_move_is_a_fifty_move_claim() -> None:
    state = new("4k3/8/8/8/8/8/8/R3K3 w - - 149 120", FIDE)
    assert CHESS.outcome(play(state, "Ra2")).termination is Termination.SEVENTYFIVE_MOVES  # type: ignore[union-attr]
    assert_claimed(state, claim(state, "claim_draw Ra2"), Termination.FIFTY_MOVES)


# -- wrong claims play the move, with all it brings ------------------------------------------------------


def test_a_wrong_claim_whose_move_mates_is_checkmate() -> None:
    state = play(new(ruleset=FIDE), "f3", "e5", "g4")
    claimed = claim(state, "claim_draw Qh4")
    assert_played(state, claimed, "Qh4")
    outcome = CHESS.outcome(claimed)
    assert outcome is not None
    assert (outcome.termination, outcome.winner) == (Termination.CHECKMATE, 1)
    assert claimed.moves_san[-1] == "Qh4#"


def test_a_fifty_move_claim_whose_hundredth_half_move_mates_is_checkmate() -> None:
    """python-chess's ``is_fifty_moves`` needs a legal move: a mate at the 100th half-move is a mate."""
    state = new("k7/8/1K6/8/8/8/8/7R w - - 99 80", FIDE)
    assert reference_claim_with(state, "h1h8") is None
    assert "h1h8" not in CHESS.view(state, None).claim_moves
    assert "h1h2" in CHESS.view(state, None).claim_moves
    claimed = claim(state, "claim_draw Rh8")
    assert_played(state, claimed, "Rh8")
    assert (CHESS.outcome(claimed).termination, CHESS.outcome(claimed).winner) == (  # type: ignore[union-attr]
        Termination.CHECKMATE,
        0,
    )


def test_a_wrong_claim_declines_a_pending_offer_as_the_move_would() -> None:
    state = play(new(ruleset=FIDE), *SHUFFLE[:3])
    offered = CHESS.apply(state, 0, "offer_draw", CLOCKS)
    claimed = claim(offered, "claim_draw Ng8")
    assert_played(offered, claimed, "Ng8")
    assert claimed.draw_offer is None


def test_a_right_claim_ends_a_pending_offer_with_the_game() -> None:
    state = play(new(ruleset=FIDE), *BEFORE_THIRD)
    offered = CHESS.apply(state, 1, "offer_draw", CLOCKS)
    claimed = claim(offered, "claim_draw Ng8")
    assert_claimed(offered, claimed, Termination.THREEFOLD_REPETITION)
    assert claimed.draw_offer is None


# -- refused claims change nothing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("claim_draw Nf5", IllegalActionError, "Nf5 is not a legal move in this position"),
        ("claim_draw e2e5", IllegalActionError, "e2e5 is not a legal move in this position"),
        ("claim_draw g1f3", IllegalActionError, "g1f3 is not a legal move in this position"),  # White's
        ("claim_draw xyz", MalformedActionError, "cannot read 'xyz' as the move of a draw claim"),
        ("claim_draw Ng8 Nf3", MalformedActionError, "cannot read 'Ng8 Nf3' as the move of a draw claim"),
        ("claim_drawNg8", MalformedActionError, "cannot read 'claim_drawNg8' as a move"),
    ],
)
def test_a_claim_naming_an_illegal_or_unreadable_move_is_refused(
    text: str, error: type[Exception], message: str
) -> None:
    state = play(new(ruleset=FIDE), *BEFORE_THIRD)
    before = (state, state.fen, CHESS.view(state, None))
    with pytest.raises(error, match=message):
        claim(state, text)
    assert (state, state.fen, CHESS.view(state, None)) == before
    assert_claimed(state, claim(state, "claim_draw Ng8"), Termination.THREEFOLD_REPETITION)  # still open


def test_only_the_player_to_move_may_claim_with_a_move() -> None:
    state = play(new(ruleset=FIDE), *BEFORE_THIRD)
    with pytest.raises(IllegalActionError, match="only the player to move can claim a draw"):
        CHESS.apply(state, 0, "claim_draw Ng1", CLOCKS)


@pytest.mark.parametrize("text", ["claim_draw", "claim_draw Ng8", "claim_draw Nc6"])
def test_contest_refuses_every_claim(text: str) -> None:
    state = play(new(ruleset=CONTEST), *BEFORE_THIRD)
    with pytest.raises(IllegalActionError, match="draw offers and claims are not allowed in contest games"):
        claim(state, text)
    view = CHESS.view(state, None)
    assert (view.can_claim_draw, view.claim_moves) == (False, ())


def test_a_claim_after_the_game_is_over_is_refused() -> None:
    state = play(new(ruleset=FIDE), *BEFORE_THIRD)
    over = claim(state, "claim_draw Ng8")
    with pytest.raises(IllegalActionError, match="the game is over"):
        CHESS.apply(over, 1, "claim_draw Ng8", CLOCKS)
    assert CHESS.view(over, None).claim_moves == ()


# -- notation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("claim_draw", ClaimDraw()),
        (" claim_draw ", ClaimDraw()),
        ("claim_draw Nf3", ClaimDraw("Nf3")),
        ("claim_draw g1f3", ClaimDraw("g1f3")),
        ("  claim_draw \t e7e8Q ", ClaimDraw("e7e8Q")),
        ("claim_draw O-O", ClaimDraw("O-O")),
    ],
)
def test_claims_parse_and_their_notation_reads_back(text: str, action: ClaimDraw) -> None:
    assert parse_action(text) == action
    assert parse_action(action.notation) == action
    assert action.notation == text.strip().replace(" \t ", " ")


def test_the_claim_notation() -> None:
    assert ClaimDraw.notation == ClaimDraw().notation == CLAIM_DRAW == "claim_draw"
    assert ClaimDraw("Nf3").notation == "claim_draw Nf3"
    assert DRAW_ACTIONS[CLAIM_DRAW] == ClaimDraw()
    assert ClaimDraw("Nf3") != ClaimDraw("g1f3") != ClaimDraw()
    assert "claim_draw Nf3" not in DRAW_ACTIONS  # the words alone: a claim with a move is not listed
    with pytest.raises(MalformedActionError):
        ClaimDraw("0000")
    assert not isinstance(parse_action("claim_draw Nf3"), Move)
