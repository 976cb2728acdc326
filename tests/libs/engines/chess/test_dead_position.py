"""FIDE dead positions of locked pawns: hand-checked positions, near misses, and soundness against an
independent search over python-chess's own legal moves."""

from __future__ import annotations

import random
from collections import deque

import chess
import pytest

from libs.engines.base import ActionContext, InvalidOptionsError, Termination
from libs.engines.chess import CHESS, ChessOptions, ChessState, Ruleset, is_blocked_dead
from libs.engines.chess import dead as dead_module

CONTEXT = ActionContext(remaining_ms=(60_000, 60_000))

WALL = "4k3/8/8/1p1p1p1p/pPpPpPpP/P1P1P1P1/8/4K3 w - - 0 1"
"""White a3 b4 c3 d4 e3 f4 g3 h4 against Black a4 b5 c4 d5 e4 f5 g4 h5: every pawn stands behind a pawn,
and neighbouring files are one rank apart, so no pawn attacks another. The white king can never leave
ranks 1-2 (b3, d3, f3, h3 are attacked by the black pawns on a4, c4, e4, g4; a3, c3, e3, g3 are its own);
the black king can never go below rank 6 (a5, c5, e5, g5 are attacked by b4, d4, f4, h4). The nearest
enemy pawns are two ranks away from each king's area: nothing can ever be captured, nobody can ever be in
check. Dead."""

POCKET = "k7/4p2p/1p2p2P/1P2PpK1/3p1Pp1/2pP2P1/2P5/8 b - - 0 1"
"""The white king is shut in g5, h5, h4 (f6, g6 are attacked by e7 and h7; f5, g4 are defended black
pawns; h3 is attacked by g4). The black king can reach g6, next to the undefended h6 pawn, only while the
white king stands on h4; and then White, to move, has no move at all (g5 and h5 touch g6; h3 and g4 are
barred): stalemate, before h6 can be taken. Every other white pawn and every black pawn is out of reach
or defended by a pawn. Dead, with either side to move; the cheap flood fill cannot see it (without the
other king, h6 is within reach), the exact search of both kings proves it."""

EN_PASSANT_OPEN = "4k3/8/4p3/1p1pPp1p/pPpP1PpP/P1P3P1/8/4K3 w - d6 0 2"
"""Black has just played d7-d5 into a locked structure (White a3 b4 c3 d4 e5 f4 g3 h4, Black a4 b5 c4 d5
e6 f5 g4 h5): every pawn is blocked and none attacks another, but exd6 en passant is legal. Not dead."""
EN_PASSANT_GONE = "4k3/8/4p3/1p1pPp1p/pPpP1PpP/P1P3P1/4K3/8 b - - 1 2"
"""The same after Ke2: the en-passant chance has passed. The white king can reach e3 (nothing attacks it)
but d4 and f4 are its own and e4 is attacked by d5 and f5; the black king cannot pass d6 and f6 (attacked
by e5) or a5, c5, g5; e5 is the only white pawn it could come near, and d4 and f4 defend it. Dead."""


def oracle_is_dead(board: chess.Board) -> bool:
    """Independent of the detector: walk every legal move sequence with python-chess; the position is
    dead if none ever reaches a capture, a pawn move or a check (there is no checkmate without check)."""
    if board.is_check():
        return False
    start = board.copy(stack=False)
    seen = {(start.board_fen(), start.turn)}
    queue = deque([start])
    while queue:
        position = queue.popleft()
        for move in position.legal_moves:
            if position.is_capture(move) or position.piece_type_at(move.from_square) == chess.PAWN:
                return False
            following = position.copy(stack=False)
            following.push(move)
            if following.is_check():
                return False
            key = (following.board_fen(), following.turn)
            if key not in seen:
                seen.add(key)
                queue.append(following)
    return True


@pytest.mark.parametrize(
    "fen",
    [
        WALL,
        WALL.replace(" w ", " b "),
        POCKET,
        POCKET.replace(" b ", " w "),
        EN_PASSANT_GONE,
        # The wall with the d-pawns gone: the black king may reach d5, but d4 is attacked by c3 and e3,
        # and no white pawn is next to d5. Still sealed.
        "4k3/8/8/1p3p1p/pPp1pPpP/P1P1P1P1/8/4K3 w - - 0 1",
    ],
)
def test_dead_positions_are_found(fen: str) -> None:
    board = chess.Board(fen)
    assert board.is_valid()
    assert any(board.legal_moves)  # not a stalemate: the dead position is its own reason
    assert oracle_is_dead(board)
    assert is_blocked_dead(board)


@pytest.mark.parametrize(
    ("fen", "why"),
    [
        ("4k3/8/8/4p3/4P3/8/8/4K3 w - - 0 1", "one locked pair: either king can walk round and take a pawn"),
        (
            "8/8/8/1p1p1p1p/pPpPpPpP/P1P1P1P1/7k/K7 w - - 0 1",
            "the black king is on White's side of the wall, next to the undefended g3",
        ),
        (
            "4k3/8/8/1p1p1p2/pPpPpPpp/P1P1P1PP/8/4K3 w - - 0 1",
            "g3 and h4 touch diagonally: a pawn can capture",
        ),
        (
            "4k3/8/8/1p3p1p/pPp2PpP/P1P3P1/8/4K3 w - - 0 1",
            "no d- and e-pawns: the white king walks e3, d4, d5, e6 and takes f5",
        ),
        (EN_PASSANT_OPEN, "exd6 en passant is legal"),
        (
            "4k3/8/8/1p1p1p1p/pPpPpPpP/P1P1P1P1/8/3BK3 w - - 0 1",
            "a light-squared bishop gets through the wall (Bc2, Bb3xc4)",
        ),
        (
            "4k3/8/8/1p1p1p1p/pPpPpPpP/P1P1P3/6P1/4K3 w - - 0 1",
            "g2 can still step to g3, and g4 to g3",
        ),
    ],
)
def test_near_misses_are_not_called_dead(fen: str, why: str) -> None:
    board = chess.Board(fen)
    assert board.is_valid(), why
    assert not oracle_is_dead(board), why
    assert not is_blocked_dead(board), why


ISSUE_EXAMPLE = "4k3/8/1p1p1p1p/pPpPpPp1/P1P1P1PP/8/8/3BK3 w - - 0 1"
"""The position of the issue that asked for pieces: after h5 every pawn is blocked, White's bishop is on
the light squares behind its own wall while every black pawn stands on a dark square, and neither king
can come near a pawn it could take. No capture, pawn move or check is ever reachable."""


def test_a_locked_bishop_is_proved_dead() -> None:
    """The wall with White's dark-squared bishop on c1, locked behind a3, c3, e3, g3."""
    board = chess.Board("4k3/8/8/1p1p1p1p/pPpPpPpP/P1P1P1P1/8/2B1K3 w - - 0 1")
    assert oracle_is_dead(board)
    assert is_blocked_dead(board)


def test_the_issue_example_ends_the_game_once_it_is_locked() -> None:
    state = CHESS.new_game(ChessOptions(Ruleset.FIDE, ISSUE_EXAMPLE))
    assert state.result is None  # h4-h5 is still to come
    state = CHESS.apply(state, 0, "h5", CONTEXT)
    assert state.result is not None
    assert state.result.termination is Termination.DEAD_POSITION
    board = state.board()
    assert oracle_is_dead(board)
    assert dead_module.cannot_mate(board, chess.WHITE)
    assert dead_module.cannot_mate(board, chess.BLACK)


@pytest.mark.parametrize(
    ("fen", "why"),
    [
        ("4k3/8/1p1p1p1p/pPpPpPpP/P1P1P1P1/8/8/2B1K3 w - - 0 1", "a dark bishop can reach the black pawns"),
        ("4k3/8/1p1p1p1p/pPpPpPpP/P1P1P1P1/8/8/3NK3 w - - 0 1", "a knight jumps the wall"),
        ("4k3/8/1p1p1p1p/pPpPpPpP/P1P1P1P1/8/8/3RK3 w - - 0 1", "a rook on b4 can be taken by a5 or c5"),
    ],
)
def test_pieces_that_can_reach_a_capture_are_not_locked(fen: str, why: str) -> None:
    board = chess.Board(fen)
    assert not oracle_is_dead(board), why
    assert not is_blocked_dead(board), why
    assert not dead_module.cannot_mate(board, chess.WHITE), why


def test_a_timeout_in_a_locked_position_is_a_draw() -> None:
    """FIDE: a player whose opponent cannot mate by any series of legal moves only draws on time. The
    engine ends such a position as dead at once; the timeout rule reads the same proof (a state is made
    from the position just before the lock, then judged as if it were locked: the proof is the rule)."""
    board = chess.Board(ISSUE_EXAMPLE)
    board.push_san("h5")
    assert dead_module.cannot_mate(board, chess.WHITE)
    state = CHESS.new_game(ChessOptions(Ruleset.FIDE, ISSUE_EXAMPLE))
    locked = CHESS.apply(state, 0, "h5", CONTEXT)
    timeout = CHESS.timeout_outcome(locked, 1)
    assert timeout.termination is Termination.TIMEOUT_VS_INSUFFICIENT_MATERIAL
    assert timeout.winner is None
    resigned = CHESS.resignation_outcome(locked, 1)
    assert resigned.winner is None


def test_the_search_bound_answers_not_dead(monkeypatch: pytest.MonkeyPatch) -> None:
    board = chess.Board(POCKET)
    monkeypatch.setattr(dead_module, "MAX_KING_STATES", 10)
    assert not is_blocked_dead(board)
    monkeypatch.setattr(dead_module, "MAX_KING_STATES", 1024)
    assert is_blocked_dead(board)


def _play(state: ChessState, *moves: str) -> ChessState:
    for notation in moves:
        seat = CHESS.to_move(state)
        assert seat is not None, f"the game ended before {notation}"
        state = CHESS.apply(state, seat, notation, CONTEXT)
    return state


def test_locking_the_last_pawn_ends_a_fide_game_as_a_dead_position() -> None:
    before_lock = "4k3/8/8/1p1p1p1p/pPpPpPpP/P1P1P3/6P1/4K3 w - - 0 1"  # g2 and g4 can still move
    fide = _play(CHESS.new_game(ChessOptions(Ruleset.FIDE, before_lock)), "g3")
    outcome = CHESS.outcome(fide)
    assert outcome is not None
    assert outcome.termination is Termination.DEAD_POSITION
    assert outcome.winner is None
    assert outcome.score == (0.5, 0.5)
    assert "locked" in outcome.detail
    assert CHESS.to_move(fide) is None
    # Contest games know no dead position beyond insufficient material: play goes on.
    contest = _play(CHESS.new_game(ChessOptions(Ruleset.CONTEST, before_lock)), "g3")
    assert CHESS.outcome(contest) is None
    assert CHESS.to_move(contest) == 1


def test_an_open_en_passant_keeps_the_game_going_until_it_lapses() -> None:
    start = "4k3/3p4/4p3/1p2Pp1p/pPpP1PpP/P1P3P1/8/4K3 b - - 0 1"
    pushed = _play(CHESS.new_game(ChessOptions(Ruleset.FIDE, start)), "d5")
    assert pushed.fen == EN_PASSANT_OPEN
    assert CHESS.outcome(pushed) is None
    assert "e5d6" in CHESS.legal_actions(pushed, 0)
    declined = _play(pushed, "Ke2")
    outcome = CHESS.outcome(declined)
    assert outcome is not None
    assert outcome.termination is Termination.DEAD_POSITION
    taken = _play(pushed, "exd6")
    assert CHESS.outcome(taken) is None


def test_a_fide_table_cannot_start_from_a_dead_position() -> None:
    with pytest.raises(InvalidOptionsError, match="dead position"):
        ChessOptions(Ruleset.FIDE, WALL)
    assert ChessOptions(Ruleset.CONTEST, WALL).initial_fen == WALL


def _random_locked_position(rng: random.Random) -> chess.Board | None:
    """Kings and locked pawn pairs (a white pawn right below a black one): half the time a zigzag wall
    like :data:`WALL` with a file or two left out, else pairs on random files and ranks, neighbours
    usually a rank apart (no contact); some files get a second pawn behind the first."""
    board = chess.Board(None)
    ranks: dict[int, int] = {}
    if rng.random() < 0.5:
        low, parity = rng.randint(1, 4), rng.randint(0, 1)
        files = sorted(rng.sample(range(8), rng.choice([8, 8, 7, 6])))
        ranks = {file: low + (file + parity) % 2 for file in files}
    else:
        for file in sorted(rng.sample(range(8), rng.randint(1, 8))):
            choices = [r for r in range(1, 6) if ranks.get(file - 1) != r or rng.random() < 0.1]
            ranks[file] = rng.choice(choices)
    for file, rank in ranks.items():
        board.set_piece_at(chess.square(file, rank), chess.Piece(chess.PAWN, chess.WHITE))
        board.set_piece_at(chess.square(file, rank + 1), chess.Piece(chess.PAWN, chess.BLACK))
        if rank > 1 and rng.random() < 0.2:
            board.set_piece_at(chess.square(file, rank - 1), chess.Piece(chess.PAWN, chess.WHITE))
        if rank + 2 < 7 and rng.random() < 0.2:
            board.set_piece_at(chess.square(file, rank + 2), chess.Piece(chess.PAWN, chess.BLACK))
    empty = [square for square in chess.SQUARES if board.piece_at(square) is None]
    white_king, black_king = rng.sample(empty, 2)
    if rng.random() < 0.7:  # mostly each king on its own side, where walls tend to shut it in
        white_king = rng.choice([s for s in empty if chess.square_rank(s) < 2])
        black_king = rng.choice([s for s in empty if chess.square_rank(s) > 5])
    board.set_piece_at(white_king, chess.Piece(chess.KING, chess.WHITE))
    board.set_piece_at(black_king, chess.Piece(chess.KING, chess.BLACK))
    board.turn = rng.choice([chess.WHITE, chess.BLACK])
    return board if board.is_valid() else None


def test_never_calls_a_position_dead_that_is_not() -> None:
    """Random locked positions (a fixed seed: the same ones every run): each one called dead is checked
    against the independent search, until a dozen have been."""
    rng = random.Random(20240611)
    checked = 0
    for _ in range(5_000):
        board = _random_locked_position(rng)
        if board is not None and is_blocked_dead(board):
            assert oracle_is_dead(board), board.fen()
            checked += 1
            if checked == 12:
                return
    pytest.fail(f"only {checked} dead positions among 5,000 random ones: the generator changed?")


def test_never_calls_a_position_with_pieces_dead_that_is_not() -> None:
    """Random locked positions with a bishop, knight or rook added for either side (a fixed seed): each one
    called dead is checked against the independent search, until three have been (the search walks every
    position the pieces can reach: seconds each). The same with 40 was run once (2026-12-02): all sound."""
    rng = random.Random(20261202)
    checked = 0
    for _ in range(20_000):
        board = _random_locked_position(rng)
        if board is None:
            continue
        empty = [square for square in chess.SQUARES if board.piece_at(square) is None]
        square = rng.choice(empty)
        piece = chess.Piece(
            rng.choice([chess.BISHOP, chess.BISHOP, chess.KNIGHT, chess.ROOK]), rng.random() < 0.5
        )
        board.set_piece_at(square, piece)
        if not board.is_valid() or not is_blocked_dead(board):
            continue
        assert oracle_is_dead(board), board.fen()
        checked += 1
        if checked == WANTED_WITH_PIECES:
            return
    pytest.fail(f"only {checked} dead positions with a piece among 20,000 random ones")


WANTED_WITH_PIECES = 3
