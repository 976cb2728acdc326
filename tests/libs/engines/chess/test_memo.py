"""A position's legal moves are listed at most once per state, and everything made from them is what
python-chess itself says: the legal actions and the view's legal moves (sorted UCI, SAN with check
marks), the SAN ``apply`` records, the end of the game and the FIDE draw claims.

Random games (both rulesets; the usual start, positions with promotions, castling and en passant, sparse
ones where positions recur, chess960 starts) are replayed on an independent python-chess board that keeps
its whole history, and every step is compared with python-chess's own functions on that board.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import random
from collections.abc import Callable, Iterator, Sequence

import chess
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libs.engines.base import (
    ActionContext,
    IllegalActionError,
    InvalidOptionsError,
    MalformedActionError,
    Termination,
)
from libs.engines.chess import (
    CHESS,
    DRAW_ACTIONS,
    ChessOptions,
    ChessState,
    Ruleset,
    break_tie,
    is_blocked_dead,
    resolve_move,
)
from libs.engines.chess.notation import seat_of
from libs.engines.chess.san import legal_moves_san
from tests.libs.engines.chess import CLOCKS, new, play

STARTS = [
    None,
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",  # Kiwipete
    "8/PPP4k/8/8/8/8/4Kppp/8 w - - 0 1",  # promotions on both sides
    "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",  # castling both ways for both sides
    "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2",  # en passant at once
    "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",  # en passant, and many moves
    "5k2/8/8/8/8/8/8/K5RR w - - 0 1",  # rooks: mates, and positions that recur
    "4k3/8/8/8/8/8/8/4K1NN w - - 0 1",  # knights: long shuffles, repetitions
    "4k3/8/8/8/8/8/8/R3K3 w - - 140 100",  # nine quiet half-moves from the seventy-five-move rule
    "4k3/8/8/8/8/8/8/R3K3 w - - 97 80",  # the fifty-move claim comes up
]


def chess960_start(number: int) -> str:
    """Chess960 start position ``number`` as the engine takes it: with castling when the king and rooks
    stand where standard chess castles from, without it otherwise (the engine plays standard castling)."""
    board = chess.Board.from_chess960_pos(number)
    try:
        ChessOptions(initial_fen=board.fen())
    except InvalidOptionsError:
        board.set_castling_fen("-")
    return board.fen()


def test_chess960_starts_include_castling_and_not() -> None:
    with_castling = [n for n in range(960) if chess960_start(n).split()[2] != "-"]
    assert 518 in with_castling  # the standard position
    assert 0 < len(with_castling) < 960


# -- what python-chess says --------------------------------------------------------------------------------


def sorted_legal(board: chess.Board) -> dict[str, chess.Move]:
    return {move.uci(): move for move in sorted(board.legal_moves, key=chess.Move.uci)}


def reference_claim(board: chess.Board) -> Termination | None:
    """The FIDE claim on the position as it stands (``claim_draw``), by python-chess alone on a board with
    the whole history: the position occurred three times, or fifty moves each have passed."""
    if board.is_repetition(3):
        return Termination.THREEFOLD_REPETITION
    if board.is_fifty_moves():
        return Termination.FIFTY_MOVES
    return None


def reference_claim_moves(board: chess.Board) -> dict[str, Termination]:
    """The legal moves (UCI) a claim may name and succeed with, and the draw it claims: those after which
    the position as it stands would be claimable. Every legal move is tried, and ``board`` is restored."""
    claims = {}
    for uci, move in sorted_legal(board).items():
        board.push(move)
        try:
            claim = reference_claim(board)
        finally:
            board.pop()
        if claim is not None:
            claims[uci] = claim
    return claims


def reference_outcome(
    board: chess.Board, ruleset: Ruleset, plies: int, first_mover: int, clocks: tuple[int, ...]
) -> tuple[object, ...] | None:
    """(termination, winner, cause, tiebreak step, score) of the game just after a move, decided with
    python-chess's own predicates (``is_checkmate``, ``is_stalemate``, ``is_insufficient_material``,
    ``is_seventyfive_moves``, ``is_fivefold_repetition``) on a board with the whole history (the locked
    pawns of ``is_blocked_dead`` and the contest tiebreak have no python-chess counterpart)."""
    fide = ruleset is Ruleset.FIDE
    draw = (0.5, 0.5)
    if board.is_checkmate():
        winner = 1 - seat_of(board.turn)
        return (Termination.CHECKMATE, winner, None, None, (1.0, 0.0) if winner == 0 else (0.0, 1.0))
    if board.is_stalemate():
        cause = Termination.STALEMATE
    elif board.is_insufficient_material():
        cause = Termination.INSUFFICIENT_MATERIAL
    elif fide and is_blocked_dead(board):
        return (Termination.DEAD_POSITION, None, None, None, draw)
    elif board.is_seventyfive_moves():
        cause = Termination.SEVENTYFIVE_MOVES
    elif fide and board.is_fivefold_repetition():
        return (Termination.FIVEFOLD_REPETITION, None, None, None, draw)
    else:
        return None
    if not fide:
        tie = break_tie(cause, board, plies, first_mover, clocks)
        return (tie.termination, tie.winner, tie.cause, tie.tiebreak_step, tie.score)
    # FIDE: stalemate and the seventy-five-move rule draw as such; insufficient material is a dead position.
    dead = cause is Termination.INSUFFICIENT_MATERIAL
    return (Termination.DEAD_POSITION if dead else cause, None, None, None, draw)


def summary(state: ChessState) -> tuple[object, ...] | None:
    outcome = CHESS.outcome(state)
    if outcome is None:
        return None
    return (outcome.termination, outcome.winner, outcome.cause, outcome.tiebreak_step, outcome.score)


# -- random games against python-chess ---------------------------------------------------------------------


def notation_for(rng: random.Random, uci: str, board: chess.Board) -> str:
    """How a player might write the move: UCI, UCI with an upper-case promotion letter, or SAN."""
    roll = rng.random()
    if roll < 0.2:
        return board.san(chess.Move.from_uci(uci))
    if roll < 0.4 and len(uci) == 5:
        return uci[:4] + uci[4].upper()
    return uci


def pick_move(rng: random.Random, legal: list[str], history: list[str], back: float = 0.4) -> str:
    """A random move; with probability ``back`` the reverse of the mover's last move, so positions recur."""
    if len(history) >= 2 and rng.random() < back:
        last = history[-2]
        reverse = last[2:4] + last[:2]
        if reverse in legal:
            return reverse
    return rng.choice(legal)


def check_position(state: ChessState, reference: chess.Board, legal: dict[str, chess.Move]) -> list[str]:
    """The view and the legal actions of ``state`` are python-chess's; returns the legal actions."""
    seat = seat_of(reference.turn)
    view = CHESS.view(state, None)
    assert view.legal_moves_uci == tuple(legal)
    assert view.legal_moves_san == tuple(reference.san(move) for move in legal.values())
    actions = CHESS.legal_actions(state, seat)
    assert [a for a in actions if a not in DRAW_ACTIONS] == list(legal)
    assert actions == sorted(actions)
    assert all(a in DRAW_ACTIONS for a in CHESS.legal_actions(state, 1 - seat))
    if state.options.ruleset is Ruleset.FIDE:
        claim = reference_claim(reference)
        assert state.claimable_draw is claim
        assert view.can_claim_draw == (claim is not None)
        assert ("claim_draw" in actions) == (claim is not None)
        assert view.claim_moves == tuple(reference_claim_moves(reference))
    else:
        assert not DRAW_ACTIONS.keys() & set(actions)
        assert view.claim_moves == ()
    return actions


def check_game(rng: random.Random, ruleset: Ruleset, start: str | None, max_plies: int) -> ChessState:
    state = new(start, ruleset)
    reference = state.options.initial_board()
    back = rng.choice((0.0, 0.1, 0.5))  # how often a move goes back: from never to often
    while (seat := CHESS.to_move(state)) is not None and state.ply_count < max_plies:
        assert seat == seat_of(reference.turn)
        legal = sorted_legal(reference)
        assert state._legal.board is state._board
        # Before the move the position was viewed (its SAN list is made), or only its legal actions were
        # asked for (the moves are listed), or nothing was (as when a log is replayed): the move is read
        # and its SAN written from what there is.
        served = rng.choice(("viewed", "listed", "untouched"))
        if served == "viewed":
            check_position(state, reference, legal)
        elif served == "listed":
            CHESS.legal_actions(state, seat)
        claim = state.claimable_draw
        if claim is not None and rng.random() < 0.05:
            claimed = CHESS.apply(state, seat, "claim_draw", CLOCKS)
            assert claimed._legal is state._legal  # the same position keeps its list
            assert CHESS.outcome(claimed) is not None
            assert CHESS.outcome(claimed).termination is claim  # type: ignore[union-attr]
            check_position(state, reference, legal)
            return claimed
        uci = pick_move(rng, list(legal), [move.uci() for move in reference.move_stack], back)
        move = legal[uci]
        san = reference.san(move)
        context = ActionContext(remaining_ms=(rng.choice((0, 1_000)), rng.choice((0, 1_000))))
        notation = notation_for(rng, uci, reference)
        # Now and then the move comes with a draw claim (FIDE): right, it ends the game and the move is not
        # played; wrong, the move is played as if no claim had been made.
        claims_with = state.options.ruleset is Ruleset.FIDE and rng.random() < 0.25
        if claims_with:
            with_move = reference_claim_moves(reference).get(uci)
            claimed = CHESS.apply(state, seat, f"claim_draw {notation}", context)
            if with_move is not None:
                assert (claimed.moves_uci, claimed._legal) == (state.moves_uci, state._legal)
                assert summary(claimed) == (with_move, None, None, None, (0.5, 0.5))
                if served != "viewed":
                    check_position(state, reference, legal)
                return claimed
            played = CHESS.apply(state, seat, notation, context)
            assert (claimed, claimed.fen, claimed.moves_san) == (played, played.fen, played.moves_san)
        after = CHESS.apply(state, seat, notation, context)
        assert after.moves_uci[-1] == uci
        assert after.moves_san[-1] == san
        if served != "viewed":
            check_position(state, reference, legal)  # afterwards: the state is as good as before the move
        reference.push(move)
        assert after.fen == reference.fen()
        assert after._legal is not state._legal
        expected = reference_outcome(
            reference, ruleset, after.ply_count, state.first_mover, context.remaining_ms
        )
        assert summary(after) == expected
        state = after
    if CHESS.to_move(state) is None:
        view = CHESS.view(state, None)
        assert view.legal_moves_uci == view.legal_moves_san == ()
        assert CHESS.legal_actions(state, 0) == CHESS.legal_actions(state, 1) == []
        assert not view.can_claim_draw
    return state


SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=40, deadline=None, suppress_health_check=SLOW)
@given(
    rng=st.randoms(use_true_random=True),
    ruleset=st.sampled_from(Ruleset),
    start=st.sampled_from(STARTS),
)
def test_random_games_agree_with_python_chess(
    rng: random.Random, ruleset: Ruleset, start: str | None
) -> None:
    check_game(rng, ruleset, start, max_plies=400)


@settings(max_examples=15, deadline=None, suppress_health_check=SLOW)
@given(
    rng=st.randoms(use_true_random=True),
    ruleset=st.sampled_from(Ruleset),
    number=st.integers(min_value=0, max_value=959),
)
def test_random_chess960_games_agree_with_python_chess(
    rng: random.Random, ruleset: Ruleset, number: int
) -> None:
    check_game(rng, ruleset, chess960_start(number), max_plies=120)


def test_the_random_games_reach_every_kind_of_end_and_claim() -> None:
    """The games above are not all alike: over fixed seeds they end in every way each ruleset has, FIDE
    claims included (so the comparisons of outcomes and claims compare something)."""
    ends: set[tuple[Ruleset, Termination]] = set()
    claims: set[tuple[Termination, bool]] = set()  # (draw claimed, whether with a move)
    for seed in range(60):
        ruleset = (Ruleset.CONTEST, Ruleset.FIDE)[seed % 2]
        state = check_game(random.Random(seed), ruleset, STARTS[seed % len(STARTS)], max_plies=400)
        outcome = CHESS.outcome(state)
        if outcome is not None:
            ends.add((ruleset, outcome.cause or outcome.termination))
            if "claimed" in outcome.detail:
                claims.add((outcome.termination, "(not played)" in outcome.detail))
    contest = {Termination.CHECKMATE, Termination.STALEMATE, Termination.INSUFFICIENT_MATERIAL}
    contest.add(Termination.SEVENTYFIVE_MOVES)
    fide = {Termination.CHECKMATE, Termination.STALEMATE, Termination.DEAD_POSITION}
    fide |= {Termination.FIVEFOLD_REPETITION, Termination.THREEFOLD_REPETITION, Termination.FIFTY_MOVES}
    assert ends == {(Ruleset.CONTEST, end) for end in contest} | {(Ruleset.FIDE, end) for end in fide}
    both = {Termination.THREEFOLD_REPETITION, Termination.FIFTY_MOVES}
    assert claims == {(claim, with_move) for claim in both for with_move in (True, False)}


# -- once per state --------------------------------------------------------------------------------------


STARTED, LISTED = "_test_generations_started", "_test_generations_listed"


def generations(board: chess.Board, kind: str = LISTED) -> int:
    """How often python-chess has generated all the legal moves of ``board`` (counted by the spy below):
    started at all (``STARTED``; ``any()`` stops at the first), or run to the end (``LISTED``). Masked
    generations (the moves from one square, or to one square) are not counted."""
    count: int = getattr(board, kind, 0)
    return count


@pytest.fixture
def spy_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts the generations of all legal moves on the board they run on (copies start from zero)."""
    original = chess.Board.generate_legal_moves

    def spy(
        self: chess.Board, from_mask: chess.Bitboard = chess.BB_ALL, to_mask: chess.Bitboard = chess.BB_ALL
    ) -> Iterator[chess.Move]:
        every = from_mask == to_mask == chess.BB_ALL
        if every:
            setattr(self, STARTED, generations(self, STARTED) + 1)
        yield from original(self, from_mask, to_mask)
        if every:
            setattr(self, LISTED, generations(self, LISTED) + 1)

    monkeypatch.setattr(chess.Board, "generate_legal_moves", spy)


@pytest.fixture
def san_lists(monkeypatch: pytest.MonkeyPatch) -> list[Sequence[chess.Move]]:
    """The lists of moves whose SAN the engine wrote, one entry per time."""
    calls: list[Sequence[chess.Move]] = []
    original = legal_moves_san

    def spy(board: chess.Board, moves: Sequence[chess.Move]) -> list[str]:
        calls.append(moves)
        return original(board, moves)

    monkeypatch.setattr("libs.engines.chess.engine.legal_moves_san", spy)
    return calls


def serve(state: ChessState, seat: int) -> None:
    """What the rules service asks of a position after a move, twice over, as a watcher would again."""
    for _ in range(2):
        view = CHESS.view(state, None)
        assert view.legal_moves_uci
        CHESS.legal_actions(state, seat)
        CHESS.legal_actions(state, 1 - seat)
        CHESS.move_san(state, view.legal_moves_uci[0])


@pytest.mark.usefixtures("spy_generation")
@pytest.mark.parametrize("ruleset", list(Ruleset))
def test_each_position_lists_its_legal_moves_once(
    ruleset: Ruleset, san_lists: list[Sequence[chess.Move]]
) -> None:
    rng = random.Random(7)
    state = new(ruleset=ruleset)
    states = [state]
    for _ in range(80):
        seat = CHESS.to_move(state)
        assert seat is not None
        # What the move that made the position generated there (in FIDE games its claim check too).
        made = generations(state._board, STARTED), generations(state._board, LISTED)
        serve(state, seat)
        moves = [a for a in CHESS.legal_actions(state, seat) if a not in DRAW_ACTIONS]
        state = CHESS.apply(state, seat, pick_move(rng, moves, list(state.moves_uci)), CLOCKS)
        states.append(state)
        served = states[-2]._board
        # Serving the position and the next move from it listed its moves once, and generated nothing else
        # there. (The move that made it asked only whether there is a legal move at all.)
        assert generations(served, STARTED) - made[0] == 1
        assert generations(served, LISTED) - made[1] == 1
        if ruleset is Ruleset.CONTEST:
            assert made == ((0, 0) if len(states) == 2 else (1, 0))  # the first position: made by new_game
        assert sum(moves is states[-2]._legal.moves for moves in san_lists) == 1  # its SAN written once
    assert len(san_lists) == len(states) - 1
    assert len({id(s._legal) for s in states}) == len({id(s._board) for s in states}) == len(states)


@pytest.mark.usefixtures("spy_generation")
def test_the_first_position_generates_lazily_and_once() -> None:
    state = new()
    assert generations(state._board, STARTED) == 0
    serve(state, 0)
    assert generations(state._board, STARTED) == generations(state._board, LISTED) == 1


@pytest.mark.usefixtures("spy_generation")
@pytest.mark.parametrize("ruleset", list(Ruleset))
def test_a_log_replayed_without_looking_lists_no_position(ruleset: Ruleset) -> None:
    """Applying moves without serving the positions (replaying a log) lists the legal moves of none: each
    new position is only asked whether it has a legal move (which stops at the first), and its moves are
    read and written as python-chess would (generating the few moves from or to one square)."""
    movetext = "1. e4 f5 2. Qh5+ g6 3. Qe2 Nf6 4. Nf3 Nc6 5. d3 Nb4 6. Nbd2 Nxc2+ 7. Kd1 Nxa1 8. exf5 Nc2"
    expected = [token for token in movetext.split() if not token.endswith(".")]
    board = chess.Board()
    ucis = [board.push_san(san).uci() for san in expected]
    texts = [san if i % 3 else uci for i, (uci, san) in enumerate(zip(ucis, expected, strict=True))]
    state = new(ruleset=ruleset)
    for text in texts:
        state = CHESS.apply(state, CHESS.to_move(state) or 0, text, CLOCKS)
        assert generations(state._board, STARTED) == 1
        assert generations(state._board, LISTED) == 0
        assert state._legal._listing is None
    assert list(state.moves_san) == expected
    mated = play(new(), "f3", "e5", "g4", "Qh4#")
    assert generations(mated._board, STARTED) == generations(mated._board, LISTED) == 1  # none to find
    assert mated.moves_san[-1] == "Qh4#"


def test_a_draw_action_keeps_the_positions_list() -> None:
    state = new(ruleset=Ruleset.FIDE)
    CHESS.view(state, None)
    offered = CHESS.apply(state, 1, "offer_draw", CLOCKS)
    assert offered._board is state._board
    assert offered._legal is state._legal
    declined = CHESS.apply(offered, 0, "decline_draw", CLOCKS)
    assert declined._legal is state._legal
    assert CHESS.view(declined, 0).legal_moves_uci == CHESS.view(state, 0).legal_moves_uci


# -- the memo is invisible from outside ------------------------------------------------------------------


def test_states_compare_hash_and_print_as_before_whether_or_not_the_list_was_made() -> None:
    fresh = play(new(), "e4", "e5", "Nf3")
    served = play(new(), "e4", "e5", "Nf3")
    CHESS.view(served, None)
    assert served._legal._sans is not None
    assert fresh._legal._sans is None
    assert served == fresh
    assert hash(served) == hash(fresh)
    assert repr(served) == repr(fresh)
    assert "_legal" not in repr(served)
    assert {field.name for field in dataclasses.fields(ChessState) if field.compare} == {
        "options",
        "moves_uci",
        "moves_san",
        "draw_offer",
        "result",
        "remaining_ms",
        "claimable_draw",
    }


def test_replace_with_another_board_gets_that_boards_moves() -> None:
    start = new()
    CHESS.view(start, None)
    moved = play(start, "e4")
    swapped = dataclasses.replace(start, _board=moved._board)
    assert swapped._legal is not start._legal
    assert swapped._legal.board is moved._board
    assert CHESS.legal_actions(swapped, 1) == CHESS.legal_actions(moved, 1)
    assert CHESS.view(swapped, None).legal_moves_san == CHESS.view(moved, None).legal_moves_san
    same = dataclasses.replace(start, remaining_ms=(1, 2))
    assert same._legal is start._legal  # the same board: its list is still right


@pytest.mark.parametrize("served", [False, True])
def test_pickle_and_copies_keep_each_state_with_its_own_positions_moves(served: bool) -> None:
    state = play(new(ruleset=Ruleset.FIDE), "e4", "d5")
    if served:
        CHESS.view(state, None)
    for clone in (pickle.loads(pickle.dumps(state)), copy.copy(state), copy.deepcopy(state)):
        assert clone == state
        assert hash(clone) == hash(state)
        assert clone._legal.board is clone._board
        assert CHESS.legal_actions(clone, 0) == CHESS.legal_actions(state, 0)
        assert CHESS.view(clone, None) == CHESS.view(state, None)
        after = CHESS.apply(clone, 0, "exd5", CLOCKS)
        assert after == CHESS.apply(state, 0, "exd5", CLOCKS)
        assert after.moves_san[-1] == "exd5"


# -- reading the incoming move ----------------------------------------------------------------------------

NOTATION_CASES = [
    (
        "8/PPP4k/8/8/8/8/4Kppp/8 w - - 0 1",
        ["a7a8q", "a7a8Q", "b7b8n", "a7a8", "a8=Q", "a8Q", "a8", "e2e4", "a7b8q"],
    ),
    ("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", ["e1g1", "e1c1", "e1h1", "O-O", "0-0-0", "O-O+", "Rb1", "e1e3"]),
    ("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", ["e5d6", "exd6", "e5e6", "e5d5", "Kd2", "Ke3", "d6"]),
    ("4k3/8/8/8/8/1N6/8/1N2K3 w - - 0 1", ["Nd2", "N1d2", "Nb1d2", "b1d2", "Na5", "Nc5+", "Qd1", "Zz9"]),
]


def result_of(read: Callable[[], object]) -> tuple[object, ...]:
    """What ``read`` gives, or the kind and message of the error it raises."""
    try:
        return ("ok", read())
    except (IllegalActionError, MalformedActionError) as error:
        return (type(error).__name__, str(error))


@pytest.mark.parametrize(("fen", "texts"), NOTATION_CASES)
def test_moves_are_read_and_refused_as_resolve_move_does(fen: str, texts: list[str]) -> None:
    for served in (False, True):
        state = new(fen)
        if served:
            CHESS.view(state, None)
        board = state.board()
        for text in texts:
            expected = result_of(lambda: board.san(resolve_move(board, text)))  # noqa: B023
            assert result_of(lambda: CHESS.move_san(state, text)) == expected  # noqa: B023
            applied = result_of(lambda: CHESS.apply(state, 0, text, CLOCKS))  # noqa: B023
            if expected[0] != "ok":
                assert applied == expected
                continue
            after = applied[1]
            assert isinstance(after, ChessState)
            assert after.moves_uci[-1] == resolve_move(board, text).uci()
            assert after.moves_san[-1] == expected[1]


@pytest.mark.parametrize(
    "fen",
    [
        "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4",  # Qxf7# and checks
        "r6k/1P4pp/8/8/8/8/8/2K5 w - - 0 1",  # promotions that mate and check
        "6k1/8/8/3pP3/8/8/B7/4K3 w - d6 0 2",  # en passant that discovers check
        "8/8/k7/8/4Q2Q/8/8/K6Q w - - 0 1",  # three queens: every kind of disambiguation
        "3k4/8/8/8/8/8/8/R3K3 w Q - 0 1",  # queenside castling with check
    ],
)
def test_the_recorded_san_of_every_move_is_python_chess_san(fen: str) -> None:
    for served in (False, True):
        state = new(fen)
        if served:
            CHESS.view(state, None)
        board = state.board()
        for uci in CHESS.legal_actions(state, 0):
            expected = board.san(chess.Move.from_uci(uci))
            assert CHESS.apply(state, 0, uci, CLOCKS).moves_san[-1] == expected
