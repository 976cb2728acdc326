"""SAN of every legal move of a position in one pass, exactly as python-chess writes each one.

:meth:`ChessEngine.view <libs.engines.chess.engine.ChessEngine.view>` lists the SAN of every legal move.
Calling python-chess's ``Board.san`` once per move took about 20 % of the whole chess rules service's CPU
in profiles: for every piece move it generates legal moves again to find the other pieces that could go
to the same square (disambiguation), and for every move it pushes the move, tests for check (and mate)
and pops it again. Here the legal moves, which the caller has already generated, give the disambiguation
candidates directly, and a cheap test on the enemy king's square rules out most moves that cannot give
check, so only the remaining few are pushed and popped.

The result is meant to be identical to ``[board.san(move) for move in moves]`` (python-chess 1.11.2,
``Board._algebraic_and_push`` and ``Board._algebraic_without_suffix``); the tests check that against
python-chess itself, in hand-picked positions and along random games.
"""

from __future__ import annotations

from collections.abc import Sequence

import chess


def legal_moves_san(board: chess.Board, moves: Sequence[chess.Move]) -> list[str]:
    """The SAN of each of ``moves``, in the same order, with ``+``/``#`` as ``board.san`` writes them.

    ``moves`` must be all the legal moves of ``board`` (in any order): the other moves to the same square
    decide the disambiguation. Moves that may give check are pushed and popped on ``board``, which is left
    as it was; pass a board that no other thread reads meanwhile (such as a scratch copy).
    """
    # Disambiguation: for each (piece type, destination), the squares whose pieces can move there.
    origins: dict[tuple[chess.PieceType, chess.Square], chess.Bitboard] = {}
    piece_types: list[chess.PieceType] = []
    for move in moves:
        piece_type = board.piece_type_at(move.from_square)
        assert piece_type is not None, f"not a legal move: {move} in {board.fen()}"
        piece_types.append(piece_type)
        key = (piece_type, move.to_square)
        origins[key] = origins.get(key, chess.BB_EMPTY) | chess.BB_SQUARES[move.from_square]

    checks = _CheckFilter(board)
    sans: list[str] = []
    for move, piece_type in zip(moves, piece_types, strict=True):
        others = origins[piece_type, move.to_square] & ~chess.BB_SQUARES[move.from_square]
        san = _without_suffix(board, move, piece_type, others)
        if checks.may_give_check(move, piece_type):
            san += _check_suffix(board, move)
        sans.append(san)
    return sans


def move_san(
    board: chess.Board, move: chess.Move, moves: Sequence[chess.Move] | None, *, check: bool, mate: bool
) -> str:
    """The SAN of the legal ``move``, as ``board.san`` writes it when the move gives check (``check``) or
    mate (``check`` and ``mate``): the caller has made the move on a copy and looked, so nothing is pushed
    here and ``board`` is only read.

    ``moves`` are all the legal moves of ``board``, if they are known: the other moves to the same square
    decide the disambiguation. With ``None``, python-chess generates just those, as ``board.san`` does.
    """
    piece_type = board.piece_type_at(move.from_square)
    assert piece_type is not None, f"not a legal move: {move} in {board.fen()}"
    others = chess.BB_EMPTY
    if moves is not None:
        for other in moves:
            if (
                other.to_square == move.to_square
                and other.from_square != move.from_square
                and board.piece_type_at(other.from_square) == piece_type
            ):
                others |= chess.BB_SQUARES[other.from_square]
    elif piece_type not in (chess.PAWN, chess.KING):  # a pawn's SAN never names its rank; there is one king
        from_mask = board.pieces_mask(piece_type, board.turn) & ~chess.BB_SQUARES[move.from_square]
        for other in board.generate_legal_moves(from_mask, chess.BB_SQUARES[move.to_square]):
            others |= chess.BB_SQUARES[other.from_square]
    san = _without_suffix(board, move, piece_type, others)
    if check:
        san += "#" if mate else "+"
    return san


def _without_suffix(board: chess.Board, move: chess.Move, piece_type: chess.PieceType, others: int) -> str:
    """The SAN of ``move`` without the check mark, as ``Board._algebraic_without_suffix`` writes it;
    ``others`` are the squares of the other pieces of the same type that can legally go to the same square.
    """
    if board.is_castling(move):
        # In chess960 mode python-chess writes castling as the king taking its own rook: compare files.
        return "O-O-O" if chess.square_file(move.to_square) < chess.square_file(move.from_square) else "O-O"
    capture = board.is_capture(move)  # en passant included
    from_file = chess.square_file(move.from_square)
    from_rank = chess.square_rank(move.from_square)
    if piece_type == chess.PAWN:
        san = chess.FILE_NAMES[from_file] if capture else ""
    else:
        san = chess.piece_symbol(piece_type).upper()
        if others:
            # python-chess's rule: the file unless another piece is on the same file, then the rank, and
            # both when other pieces share the rank and the file.
            on_file = bool(others & chess.BB_FILES[from_file])
            on_rank = bool(others & chess.BB_RANKS[from_rank])
            if on_rank or not on_file:
                san += chess.FILE_NAMES[from_file]
            if on_file:
                san += chess.RANK_NAMES[from_rank]
    if capture:
        san += "x"
    san += chess.SQUARE_NAMES[move.to_square]
    if move.promotion:
        san += "=" + chess.piece_symbol(move.promotion).upper()
    return san


def _check_suffix(board: chess.Board, move: chess.Move) -> str:
    """``"#"`` if ``move`` mates, ``"+"`` if it checks, else ``""``: the move is pushed and popped."""
    board.push(move)
    try:
        if not board.is_check():
            return ""
        return "#" if board.is_checkmate() else "+"
    finally:
        board.pop()


class _CheckFilter:
    """A sound pre-filter for checks: a move that fails it cannot give check (one that passes may).

    After a move the enemy king can only be attacked by the piece that now stands on the destination
    (direct check: it must attack the king's square on an empty board), or by a rook, bishop or queen
    of the mover whose line to the king ran through the square the move left (discovered check: that
    square lies between the king and such a piece aligned with it on a rank, file or diagonal it moves
    along). Castling (the rook moves too) and en passant (the captured pawn leaves a third square) are
    always confirmed, and so is every move when the enemy does not have exactly one king.
    """

    def __init__(self, board: chess.Board) -> None:
        self._board = board
        kings = board.kings & board.occupied_co[not board.turn]
        self._confirm_all = chess.popcount(kings) != 1
        king = chess.msb(kings) if kings else chess.A1
        orthogonal = chess.BB_RANK_ATTACKS[king][0] | chess.BB_FILE_ATTACKS[king][0]
        diagonal = chess.BB_DIAG_ATTACKS[king][0]
        # A discovered check opens the line between the king and a rook, bishop or queen of the side to
        # move that is aligned with it in a direction it moves in.
        ours = board.occupied_co[board.turn]
        line_pieces = orthogonal & (board.rooks | board.queens) & ours
        line_pieces |= diagonal & (board.bishops | board.queens) & ours
        self._discovery_origins = chess.BB_EMPTY
        for square in chess.scan_forward(line_pieces):
            self._discovery_origins |= chess.between(king, square)
        # For each piece type, the squares from which such a piece of the side to move attacks the king.
        self._checking_squares: dict[chess.PieceType, chess.Bitboard] = {
            chess.PAWN: chess.BB_PAWN_ATTACKS[not board.turn][king],
            chess.KNIGHT: chess.BB_KNIGHT_ATTACKS[king],
            chess.BISHOP: diagonal,
            chess.ROOK: orthogonal,
            chess.QUEEN: orthogonal | diagonal,
            chess.KING: chess.BB_KING_ATTACKS[king],
        }

    def may_give_check(self, move: chess.Move, piece_type: chess.PieceType) -> bool:
        if self._confirm_all:
            return True
        arriving = move.promotion or piece_type
        if chess.BB_SQUARES[move.to_square] & self._checking_squares[arriving]:
            return True
        if chess.BB_SQUARES[move.from_square] & self._discovery_origins:
            return True
        return self._board.is_castling(move) or self._board.is_en_passant(move)
