"""``legal_moves_san`` and ``move_san`` against python-chess's own ``Board.san``, move by move.

Hand-picked positions exercise every branch (each lists some of the SAN it must produce, so that the
position is known to reach that branch); random games from several starts check everything else.
"""

from __future__ import annotations

import random

import chess
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libs.engines.chess import CHESS
from libs.engines.chess.san import legal_moves_san, move_san
from tests.libs.engines.chess import new, play_san


def check(board: chess.Board, moves: list[chess.Move] | None = None) -> list[str]:
    """``legal_moves_san`` of ``board`` (for ``moves``, default all legal moves) equals python-chess's SAN
    of each move, and leaves the board as it was. Returns the SAN."""
    moves = list(board.legal_moves) if moves is None else moves
    fen, stack = board.fen(), list(board.move_stack)
    sans = legal_moves_san(board, moves)
    assert board.fen() == fen
    assert board.move_stack == stack
    assert sans == [board.san(move) for move in moves]
    # One move at a time, told whether it checks or mates (as the engine knows after making it), with all
    # the legal moves or with none (then python-chess generates those to the same square).
    assert len(set(moves)) == board.legal_moves.count()  # all of them: they give the disambiguation
    for move, san in zip(moves, sans, strict=True):
        after = board.copy(stack=False)
        after.push(move)
        check = after.is_check()
        mate = check and after.is_checkmate()
        assert move_san(board, move, moves, check=check, mate=mate) == san
        assert move_san(board, move, None, check=check, mate=mate) == san
    assert board.fen() == fen
    return sans


POSITIONS = {
    "start": (chess.STARTING_FEN, {"e4", "Nf3", "a3"}),
    "knights by file": ("4k3/8/8/8/8/8/8/1N2KN2 w - - 0 1", {"Nbd2", "Nfd2", "Nc3"}),
    "knights by rank": ("4k3/8/8/8/8/1N6/8/1N2K3 w - - 0 1", {"N1d2", "N3d2", "Nc3"}),
    "rooks by rank": ("4k3/R7/8/8/8/8/8/R3K3 w - - 0 1", {"R1a4", "R7a4", "Ra8+", "Re7+"}),
    "three queens": ("8/8/k7/8/4Q2Q/8/8/K6Q w - - 0 1", {"Qh4e1", "Q1e1", "Qee1", "Qeb1", "Q4h3", "Qb7+"}),
    "promotions that mate": (
        "r6k/1P4pp/8/8/8/8/8/2K5 w - - 0 1",
        {"b8=Q+", "b8=R+", "b8=N", "b8=B", "bxa8=Q#", "bxa8=R#", "bxa8=N"},
    ),
    "promotions that check": ("r6k/1P1n2pp/8/8/8/8/8/2K5 w - - 0 1", {"b8=Q+", "bxa8=Q+", "bxa8=B"}),
    "black promotes": ("8/8/8/8/8/3k4/p7/1N2K3 b - - 0 1", {"a1=Q", "axb1=Q+", "axb1=N"}),
    "en passant": ("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", {"exd6", "e6"}),
    "en passant discovers check": ("6k1/8/8/3pP3/8/8/B7/4K3 w - d6 0 2", {"exd6+", "e6", "Bxd5+"}),
    "en passant is the only move": ("1RB5/8/8/k7/1Pp5/8/2B5/7K b - b3 0 1", {"cxb3"}),
    "black en passant": ("4k3/8/8/8/3Pp3/8/8/4K3 b - d3 0 1", {"exd3", "e3"}),
    "kingside castling checks": ("5k2/8/8/8/8/8/8/4K2R w K - 0 1", {"O-O+", "Rf1+", "Rg1"}),
    "queenside castling checks": ("3k4/8/8/8/8/8/8/R3K3 w Q - 0 1", {"O-O-O+", "Rd1+", "Rc1"}),
    "black queenside castling checks": ("r3k3/8/8/8/8/8/8/3K4 b q - 0 1", {"O-O-O+", "Ra1+"}),
    "castling both ways": ("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", {"O-O", "O-O-O", "Rxa8+", "Rxh8+"}),
    "pawn discovers check": ("7k/8/8/8/3P4/8/1B6/4K3 w - - 0 1", {"d5+", "Bc3"}),
    "knight discovers check (and double check)": (
        "4k3/8/8/8/4N3/8/8/4RK2 w - - 0 1",
        {"Nc3+", "Nf6+", "Nd6+", "Re2", "Kg1"},
    ),
    "king discovers check": ("7k/8/8/8/3K4/8/8/B7 w - - 0 1", {"Kc4+", "Kd3+", "Ke5", "Bc3"}),
    "queen behind the king": ("7k/8/8/8/8/2K5/8/Q7 w - - 0 1", {"Kc2+", "Kb2", "Kd4", "Qh1+", "Qa2"}),
    "a pawn pushed along the line discovers nothing": ("4k3/8/8/8/8/8/4P3/4RK2 w - - 0 1", {"e3", "e4"}),
    "a move mates": (
        "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4",
        {"Qxf7#", "Bxf7+", "Qxe5+"},
    ),
    "in check": (
        "rnbqkbnr/ppp2ppp/3p4/1B2p3/4P3/8/PPPP1PPP/RNBQK1NR b KQkq - 1 3",
        {"c6", "Nc6", "Bd7", "Ke7"},
    ),
    "checkmated": ("rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3", set()),
    "stalemate": ("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", set()),
    "kiwipete": ("r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1", {"O-O", "O-O-O"}),
    "kiwipete, Black": (
        "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R b KQkq - 0 1",
        {"O-O", "O-O-O", "hxg2"},
    ),
    "perft position 3": ("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", {"Rxf4+", "e4", "g3+"}),
    "perft position 4": ("r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1", {"Kh1"}),
    "perft position 4, mirrored": (
        "r2q1rk1/pP1p2pp/Q4n2/bbp1p3/Np6/1B3NBn/pPPP1PPP/R3K2R b KQ - 0 1",
        {"Kh8"},
    ),
    "perft position 5": (
        "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8",
        {"dxc8=Q", "dxc8=N", "Nbc3", "Nec3", "O-O"},
    ),
    "perft position 6": (
        "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
        {"Rab1", "Rfb1", "Bxf7+"},
    ),
}


@pytest.mark.parametrize(("fen", "expected"), POSITIONS.values(), ids=POSITIONS.keys())
def test_positions(fen: str, expected: set[str]) -> None:
    board = chess.Board(fen)
    assert board.is_valid()
    sans = check(board)
    assert expected <= set(sans)
    assert bool(sans) == bool(expected)


def test_the_order_of_the_moves_is_kept() -> None:
    board = chess.Board(POSITIONS["three queens"][0])
    moves = list(board.legal_moves)
    for order in (sorted(moves, key=chess.Move.uci), sorted(moves, key=chess.Move.uci, reverse=True)):
        check(board, order)


def test_the_board_history_is_kept() -> None:
    board = chess.Board()
    for san in ("e4", "e5", "Nf3", "Nc6", "Bb5"):
        board.push_san(san)
    assert check(board)


CHESS960 = {
    "kingside and queenside, one checks": ("3k4/8/8/8/8/8/8/1R2K1R1 w GB - 0 1", {"O-O", "O-O-O+"}),
    "the king next to its rook": ("3k4/8/8/8/8/8/8/RK6 w A - 0 1", {"O-O-O+"}),
    "the king does not move": ("5k2/8/8/8/8/8/8/6KR w H - 0 1", {"O-O+"}),
}


@pytest.mark.parametrize(("fen", "expected"), CHESS960.values(), ids=CHESS960.keys())
def test_chess960_castling(fen: str, expected: set[str]) -> None:
    """The engine only builds standard boards, but castling follows the board's own ``is_castling``,
    which in chess960 mode sees the king taking its own rook."""
    board = chess.Board(fen, chess960=True)
    assert board.is_valid()
    assert expected <= set(check(board))


def test_the_engine_view_lists_python_chess_san() -> None:
    state = play_san(new(), "1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6")
    view = CHESS.view(state, None)
    board = state.board()
    expected = tuple(board.san(chess.Move.from_uci(uci)) for uci in view.legal_moves_uci)
    assert view.legal_moves_san == expected
    assert "Qxf7#" in expected


STARTS = [
    chess.STARTING_FEN,
    POSITIONS["kiwipete"][0],
    POSITIONS["perft position 3"][0],
    POSITIONS["perft position 4"][0],
    POSITIONS["perft position 5"][0],
    POSITIONS["perft position 6"][0],
    "8/PPP4k/8/8/8/8/4Kppp/8 w - - 0 1",  # promotions on both sides
    "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",  # castling, rooks and kings
]


def random_game(rng: random.Random, board: chess.Board, plies: int) -> None:
    """Plays up to ``plies`` random legal moves on ``board``, checking the SAN in every position reached
    (with the legal moves in a random order)."""
    for _ in range(plies + 1):
        moves = list(board.legal_moves)
        rng.shuffle(moves)
        check(board, moves)
        if not moves:
            return
        board.push(rng.choice(moves))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rng=st.randoms(use_true_random=True),
    start=st.sampled_from(STARTS),
    plies=st.integers(min_value=0, max_value=200),
)
def test_random_games(rng: random.Random, start: str, plies: int) -> None:
    random_game(rng, chess.Board(start), plies)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rng=st.randoms(use_true_random=True),
    scharnagl=st.integers(min_value=0, max_value=959),
    plies=st.integers(min_value=0, max_value=200),
)
def test_random_chess960_games(rng: random.Random, scharnagl: int, plies: int) -> None:
    random_game(rng, chess.Board.from_chess960_pos(scharnagl), plies)
