"""Blocked dead positions: kings and pawns locked so that no sequence of legal moves can ever mate.

Seed 001 (FIDE laws, "Dead position"): besides the basic material cases (python-chess's
``is_insufficient_material``), "blocked positions can arise in which progress is impossible for either
side; these too are dead positions". :func:`is_blocked_dead` detects the pawn-wall kind, soundly: it
says ``True`` only when it has proved that no checkmate is reachable, and ``False`` whenever it cannot
tell (then the game goes on to the seventy-five-move rule, a repetition, a claim or an agreement).

The proof, for a position with kings and pawns only:

1. every pawn's square ahead holds a pawn, no pawn attacks an enemy pawn, no pawn gives check, and no
   en-passant capture is open. Pawns only ever move forward or capture, and a king never steps onto a
   square an enemy pawn attacks, so as long as no pawn is captured, no pawn can ever move or capture;
2. then only the kings move. A king never gives check, and the pawns attack only squares no king may
   enter, so nobody is ever in check again, and there is no checkmate without check. What could change
   that is a king capturing a pawn that no pawn defends. First, cheaply: where could each king go if the
   other king were not on the board (a superset of where it can go)? If no such pawn is next to any of
   those squares, no capture is ever possible: dead. Otherwise the positions of both kings are searched
   exactly (White king, Black king, side to move; legal king moves only, a side with no move is
   stalemated and the game ends there), and the position is dead exactly when none of them lets the side
   to move capture a pawn. The search gives up after :data:`MAX_KING_STATES` positions and answers "not
   dead".

If a capture is reachable the position is not called dead, even if the capture would lead nowhere.
Positions with any other piece are never called dead here: a bishop locked behind its own pawns is a dead
position this does not try to prove. The cost per move is a few bitboard operations for almost every
position; the flood fill runs only in fully blocked king-and-pawn positions, the search only when a
king could reach an undefended pawn.
"""

from __future__ import annotations

from collections import deque

import chess

MAX_KING_STATES = 1024
"""The bound of the exact search: more (White king, Black king, side to move) than this and the position is
answered "not dead". The search only runs when a king could reach a capture if the other king were not
there, and then it proves "dead" in the positions that need it (a king shut in a small pocket beside its
own weak pawn) well within the bound; at a few hundred states per millisecond the bound keeps a move
under about five milliseconds."""


def is_blocked_dead(board: chess.Board) -> bool:
    """Whether ``board`` is a dead position of kings and blocked pawns (see the module docstring).

    ``True`` is a proof that no sequence of legal moves can checkmate either side; ``False`` means only
    that this function could not prove it.
    """
    pawns = board.pawns
    if board.occupied != pawns | board.kings:
        locked = _locked(board)
        return locked is not None and not locked.can_mate(chess.WHITE) and not locked.can_mate(chess.BLACK)
    white_pawns = pawns & board.occupied_co[chess.WHITE]
    black_pawns = pawns & board.occupied_co[chess.BLACK]
    # Every pawn stands right behind a pawn (of either colour): none can step forward, now or later.
    if (white_pawns << 8) & chess.BB_ALL & ~pawns or (black_pawns >> 8) & ~pawns:
        return False
    white_king = board.king(chess.WHITE)
    black_king = board.king(chess.BLACK)
    if white_king is None or black_king is None:
        return False
    white_attacks = _pawn_attacks(white_pawns, chess.WHITE)
    black_attacks = _pawn_attacks(black_pawns, chess.BLACK)
    if white_attacks & (black_pawns | chess.BB_SQUARES[black_king]):
        return False  # a pawn can capture (or gives check)
    if black_attacks & (white_pawns | chess.BB_SQUARES[white_king]):
        return False
    if board.ep_square is not None and board.has_legal_en_passant():
        return False
    # A king may never stand on its own pawns or on squares the enemy pawns attack; the enemy pawns it
    # could capture are the ones no pawn defends.
    white_barred = white_pawns | black_attacks
    black_barred = black_pawns | white_attacks
    white_prey = black_pawns & ~black_attacks
    black_prey = white_pawns & ~white_attacks
    # Where each king could ever go if the other king were not there: a superset of where it can go. If
    # no prey is next to it, no capture is ever possible: dead.
    white_area = _flood(chess.BB_SQUARES[white_king], white_barred | white_prey)
    black_area = _flood(chess.BB_SQUARES[black_king], black_barred | black_prey)
    if not (_king_spread(white_area) & white_prey or _king_spread(black_area) & black_prey):
        return True
    # Some prey is within reach but for the other king: search the positions of both kings exactly.
    return not _king_can_ever_capture(
        white_king, black_king, board.turn, white_barred, black_barred, white_prey, black_prey
    )


def _pawn_attacks(pawns: chess.Bitboard, color: chess.Color) -> chess.Bitboard:
    attacks = 0
    for square in chess.scan_forward(pawns):
        attacks |= chess.BB_PAWN_ATTACKS[color][square]
    return attacks


def _king_spread(squares: chess.Bitboard) -> chess.Bitboard:
    """``squares`` and every square a king on one of them attacks."""
    row = squares | ((squares << 1) & ~chess.BB_FILE_A) | ((squares >> 1) & ~chess.BB_FILE_H)
    return (row | (row << 8) | (row >> 8)) & chess.BB_ALL


def _flood(start: chess.Bitboard, barred: chess.Bitboard) -> chess.Bitboard:
    """The squares a lone king on ``start`` can reach without ever entering ``barred``."""
    area = start
    while True:
        grown = _king_spread(area) & ~barred
        if grown | area == area:
            return area
        area |= grown


def _king_can_ever_capture(
    white_king: chess.Square,
    black_king: chess.Square,
    white_to_move: bool,
    white_barred: chess.Bitboard,
    black_barred: chess.Bitboard,
    white_prey: chess.Bitboard,
    black_prey: chess.Bitboard,
) -> bool:
    """Whether some sequence of legal king moves reaches a position where the side to move's king can
    capture a pawn (or the search bound is exceeded, which counts as "yes")."""
    kings = chess.BB_KING_ATTACKS
    # A state is white king | black king << 6 | White to move << 12.
    start = white_king | black_king << 6 | white_to_move << 12
    seen = bytearray(1 << 13)
    seen[start] = 1
    visited = 1
    frontier = deque([start])  # breadth first: a reachable capture is usually a few moves away
    while frontier:
        state = frontier.popleft()
        white, black = state & 63, (state >> 6) & 63
        if state >> 12:
            targets = kings[white] & ~white_barred & ~kings[black]
            if targets & white_prey:
                return True
            successors = [square | black << 6 for square in chess.scan_forward(targets)]
        else:
            targets = kings[black] & ~black_barred & ~kings[white]
            if targets & black_prey:
                return True
            successors = [white | square << 6 | 1 << 12 for square in chess.scan_forward(targets)]
        for successor in successors:
            if not seen[successor]:
                if visited >= MAX_KING_STATES:
                    return True
                seen[successor] = 1
                visited += 1
                frontier.append(successor)
    return False


def cannot_mate(board: chess.Board, color: chess.Color) -> bool:
    """Whether ``color`` can be proved never to checkmate in ``board``, whatever both sides play: it has
    insufficient material (python-chess), or the position is locked (:func:`_locked`) so that no capture
    is ever possible and no piece or pawn of ``color`` can ever attack a square the enemy king can reach.
    FIDE: a player whose opponent runs out of time (or resigns) in such a position only draws.
    ``False`` means only that it could not be proved."""
    if board.has_insufficient_material(color):
        return True
    locked = _locked(board)
    return locked is not None and not locked.can_mate(color)


class _Locked:
    """A position whose pawns can never move, and where each side's pieces can reach only the squares of
    :attr:`reach` and attack only those of :attr:`attacks` (supersets: every other piece ignored, only
    the pawns block)."""

    __slots__ = ("attacks", "king_reach", "reach")

    def __init__(
        self,
        reach: tuple[chess.Bitboard, chess.Bitboard],
        attacks: tuple[chess.Bitboard, chess.Bitboard],
        king_reach: tuple[chess.Bitboard, chess.Bitboard],
    ) -> None:
        self.reach = reach
        self.attacks = attacks
        self.king_reach = king_reach

    def can_mate(self, color: chess.Color) -> bool:
        """Whether ``color`` could ever give check (no check, no mate)."""
        return bool(self.attacks[color] & self.king_reach[not color])


def _locked(board: chess.Board) -> _Locked | None:
    """The reach of a locked position, or ``None`` when it is not one this can prove locked.

    Locked: every pawn stands right behind a pawn and no pawn can capture anything, now or ever, and no
    piece of either side can ever capture anything. Then the pawns never move, the board only changes by
    pieces moving between empty squares, and where a piece can ever be is within the squares it reaches
    moving freely among the pawns (a flood fill over at most 64 squares per piece: the bound of this
    search). Each side's pieces can then only ever attack the squares attacked from those; if none of
    them is a square the other side's pieces (or pawns) can reach, no capture is ever possible."""
    pawns = board.pawns
    white_pawns = pawns & board.occupied_co[chess.WHITE]
    black_pawns = pawns & board.occupied_co[chess.BLACK]
    if (white_pawns << 8) & chess.BB_ALL & ~pawns or (black_pawns >> 8) & ~pawns:
        return None
    if board.ep_square is not None and board.has_legal_en_passant():
        return None
    if board.castling_rights:
        return None  # (castling moves a rook past squares a flood of its own would not cross)
    pawn_attacks = (_pawn_attacks(black_pawns, chess.BLACK), _pawn_attacks(white_pawns, chess.WHITE))
    # (indexed by colour: chess.BLACK is 0, chess.WHITE 1)
    reach = [0, 0]
    attacks = [0, 0]
    king_reach = [0, 0]
    king_attacks = [0, 0]
    for color in (chess.BLACK, chess.WHITE):
        for square in chess.scan_forward(board.occupied_co[color] & ~pawns):
            piece_type = board.piece_type_at(square)
            assert piece_type is not None
            if piece_type == chess.KING:
                # A king never steps onto a square an enemy pawn attacks (pawns that never move).
                area = _piece_flood(square, piece_type, pawns | pawn_attacks[not color])
                king_reach[color] = area
                king_attacks[color] = _king_spread(area)
                continue
            area = _piece_flood(square, piece_type, pawns)
            reach[color] |= area
            for spot in chess.scan_forward(area):
                attacks[color] |= _attacks_from(spot, piece_type, pawns)
    for color in (chess.WHITE, chess.BLACK):
        other = not color
        enemy_pawns = board.occupied_co[other] & pawns
        enemy_pieces = reach[other]
        # No capture ever: by a piece or a pawn (of a piece or a pawn), nor by the king (of a piece, or of
        # a pawn no pawn defends).
        if (attacks[color] | pawn_attacks[color]) & (enemy_pieces | enemy_pawns):
            return None
        if king_attacks[color] & (enemy_pieces | (enemy_pawns & ~pawn_attacks[other])):
            return None
        attacks[color] |= pawn_attacks[color]
    return _Locked((reach[0], reach[1]), (attacks[0], attacks[1]), (king_reach[0], king_reach[1]))


def _attacks_from(
    square: chess.Square, piece_type: chess.PieceType, occupied: chess.Bitboard
) -> chess.Bitboard:
    if piece_type == chess.KNIGHT:
        return chess.BB_KNIGHT_ATTACKS[square]
    if piece_type == chess.KING:
        return chess.BB_KING_ATTACKS[square]
    found = 0
    if piece_type in (chess.BISHOP, chess.QUEEN):
        found |= chess.BB_DIAG_ATTACKS[square][chess.BB_DIAG_MASKS[square] & occupied]
    if piece_type in (chess.ROOK, chess.QUEEN):
        found |= chess.BB_RANK_ATTACKS[square][chess.BB_RANK_MASKS[square] & occupied]
        found |= chess.BB_FILE_ATTACKS[square][chess.BB_FILE_MASKS[square] & occupied]
    return found


def _piece_flood(square: chess.Square, piece_type: chess.PieceType, pawns: chess.Bitboard) -> chess.Bitboard:
    """The squares a piece of ``piece_type`` on ``square`` could reach moving among ``pawns`` alone."""
    area = chess.BB_SQUARES[square]
    frontier = area
    while frontier:
        grown = 0
        for spot in chess.scan_forward(frontier):
            grown |= _attacks_from(spot, piece_type, pawns)
        grown &= ~pawns & ~area
        area |= grown
        frontier = grown
    return area
