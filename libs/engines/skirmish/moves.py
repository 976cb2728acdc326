"""Moves of the 5x5 skirmish: generation, application, SAN, reading a move, perft.

The rules (docs/skirmish-duel.md): pieces move as in chess; there are no check rules at all, so every
pseudo-legal move is legal (a king may move into attack, a move may leave its own king attacked, a king
may capture the other king). Pawns step one square straight ahead onto an empty square and capture one
square diagonally forward; there is no double step and no en passant; a pawn reaching the last rank
(rank 5 for White, rank 1 for Black) becomes a queen at once. There is no castling.

Speed: every square's knight and king targets, pawn steps and captures, and bishop and rook rays are
computed once at import, each target paired with the move's sort key (the order of UCI text), so listing
moves is a few table walks and one sort of small integers; every :class:`Move` is made once at import
and shared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeAlias

from libs.engines.base import IllegalActionError, MalformedActionError
from libs.engines.skirmish.board import (
    BLACK_PIECES,
    BY_NAME,
    EMPTY,
    FILES,
    NAMES,
    PIECE_NAMES,
    SIZE,
    SQUARES,
    WHITE_PIECES,
    Position,
    side_name,
)


@dataclass(frozen=True, slots=True, order=True)
class Move:
    """A move from one square to another. Promotion needs no mark: it is always to a queen, and
    automatic (a pawn reaching the last rank becomes a queen)."""

    from_sq: int
    to_sq: int

    @property
    def uci(self) -> str:
        """The move in UCI, without a promotion suffix (``b2b3``, ``b4b5``)."""
        return NAMES[self.from_sq] + NAMES[self.to_sq]


# ---------------------------------------------------------------------------------------------------------
# Tables, computed once


Target: TypeAlias = tuple[int, int]
"""A target square and the sort key of the move to it."""

_NAME_ORDER = tuple((sq % SIZE) * SIZE + sq // SIZE for sq in range(SQUARES))
"""The rank of each square in the order of names (a1 a2 ... a5 b1 ...): UCI text sorts this way."""


def _key(from_sq: int, to_sq: int) -> int:
    return _NAME_ORDER[from_sq] * SQUARES + _NAME_ORDER[to_sq]


_MOVE_BY_KEY: tuple[Move, ...] = tuple(
    Move(f, t) for _, f, t in sorted((_key(f, t), f, t) for f in range(SQUARES) for t in range(SQUARES))
)
"""Every (from, to) pair as a shared :class:`Move`, indexed by its sort key."""


def _on_board(file: int, rank: int) -> bool:
    return 0 <= file < SIZE and 0 <= rank < SIZE


def _leaps(offsets: tuple[tuple[int, int], ...]) -> tuple[tuple[Target, ...], ...]:
    table: list[tuple[Target, ...]] = []
    for sq in range(SQUARES):
        file, rank = sq % SIZE, sq // SIZE
        targets = [(rank + dr) * SIZE + file + df for df, dr in offsets if _on_board(file + df, rank + dr)]
        table.append(tuple((t, _key(sq, t)) for t in sorted(targets)))
    return tuple(table)


def _rays(directions: tuple[tuple[int, int], ...]) -> tuple[tuple[tuple[Target, ...], ...], ...]:
    table: list[tuple[tuple[Target, ...], ...]] = []
    for sq in range(SQUARES):
        file, rank = sq % SIZE, sq // SIZE
        rays: list[tuple[Target, ...]] = []
        for df, dr in directions:
            ray: list[Target] = []
            f, r = file + df, rank + dr
            while _on_board(f, r):
                t = r * SIZE + f
                ray.append((t, _key(sq, t)))
                f, r = f + df, r + dr
            if ray:
                rays.append(tuple(ray))
        table.append(tuple(rays))
    return tuple(table)


_KNIGHT_OFFSETS = ((1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2))
_KING_OFFSETS = ((0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1))
_DIAGONALS = ((1, 1), (1, -1), (-1, -1), (-1, 1))
_ORTHOGONALS = ((0, 1), (1, 0), (0, -1), (-1, 0))

KNIGHT_TARGETS = _leaps(_KNIGHT_OFFSETS)
KING_TARGETS = _leaps(_KING_OFFSETS)
DIAGONAL_RAYS = _rays(_DIAGONALS)
ORTHOGONAL_RAYS = _rays(_ORTHOGONALS)
QUEEN_RAYS = tuple(d + o for d, o in zip(DIAGONAL_RAYS, ORTHOGONAL_RAYS, strict=True))


def _pawn_tables(forward: int) -> tuple[tuple[Target | None, ...], tuple[tuple[Target, ...], ...]]:
    steps: list[Target | None] = []
    captures: list[tuple[Target, ...]] = []
    for sq in range(SQUARES):
        file, rank = sq % SIZE, sq // SIZE
        if not _on_board(file, rank + forward):
            steps.append(None)
            captures.append(())
            continue
        ahead = (rank + forward) * SIZE + file
        steps.append((ahead, _key(sq, ahead)))
        captures.append(
            tuple(
                (ahead + df, _key(sq, ahead + df)) for df in (-1, 1) if _on_board(file + df, rank + forward)
            )
        )
    return tuple(steps), tuple(captures)


_WHITE_STEPS, _WHITE_CAPTURES = _pawn_tables(1)
_BLACK_STEPS, _BLACK_CAPTURES = _pawn_tables(-1)

_LEAPERS = {"N": KNIGHT_TARGETS, "n": KNIGHT_TARGETS, "K": KING_TARGETS, "k": KING_TARGETS}
_SLIDERS = {
    "B": DIAGONAL_RAYS,
    "b": DIAGONAL_RAYS,
    "R": ORTHOGONAL_RAYS,
    "r": ORTHOGONAL_RAYS,
    "Q": QUEEN_RAYS,
    "q": QUEEN_RAYS,
}


# ---------------------------------------------------------------------------------------------------------
# Generation


def _move_keys(board: str, white: bool) -> list[int]:
    """The sort keys of every move of ``white`` (or Black) on ``board``, unsorted."""
    if white:
        own, steps, captures, pawn = WHITE_PIECES, _WHITE_STEPS, _WHITE_CAPTURES, "P"
    else:
        own, steps, captures, pawn = BLACK_PIECES, _BLACK_STEPS, _BLACK_CAPTURES, "p"
    out: list[int] = []
    append = out.append
    for sq, c in enumerate(board):
        if c == EMPTY or c not in own:
            continue
        if c == pawn:
            step = steps[sq]
            if step is not None and board[step[0]] == EMPTY:
                append(step[1])
            for t, key in captures[sq]:
                target = board[t]
                if target != EMPTY and target not in own:
                    append(key)
        elif c in _LEAPERS:
            for t, key in _LEAPERS[c][sq]:
                if board[t] not in own:
                    append(key)
        else:
            for ray in _SLIDERS[c][sq]:
                for t, key in ray:
                    target = board[t]
                    if target == EMPTY:
                        append(key)
                    else:
                        if target not in own:
                            append(key)
                        break
    return out


def _has_move(board: str, white: bool) -> bool:
    """Whether ``white`` (or Black) has any move on ``board`` (stops at the first one)."""
    if white:
        own, steps, captures, pawn = WHITE_PIECES, _WHITE_STEPS, _WHITE_CAPTURES, "P"
    else:
        own, steps, captures, pawn = BLACK_PIECES, _BLACK_STEPS, _BLACK_CAPTURES, "p"
    for sq, c in enumerate(board):
        if c == EMPTY or c not in own:
            continue
        if c == pawn:
            step = steps[sq]
            if step is not None and board[step[0]] == EMPTY:
                return True
            for t, _ in captures[sq]:
                target = board[t]
                if target != EMPTY and target not in own:
                    return True
        elif c in _LEAPERS:
            for t, _ in _LEAPERS[c][sq]:
                if board[t] not in own:
                    return True
        else:
            # A slider can move exactly when the nearest square of one of its rays is not its side's.
            for ray in _SLIDERS[c][sq]:
                if board[ray[0][0]] not in own:
                    return True
    return False


def legal_moves(position: Position) -> tuple[Move, ...]:
    """Every legal move of the side to move, sorted by UCI text.

    Pseudo-legal is legal: no check rules (see the module docstring). A position where a king is
    missing still lists its moves: ending the duel is :mod:`~libs.engines.skirmish.duel`'s business.
    """
    keys = _move_keys(position.board, position.white_to_move)
    keys.sort()
    by_key = _MOVE_BY_KEY
    return tuple([by_key[k] for k in keys])


def has_legal_move(position: Position) -> bool:
    """Whether the side to move has any legal move (faster than listing them)."""
    return _has_move(position.board, position.white_to_move)


def _apply(board: str, from_sq: int, to_sq: int) -> str:
    piece = board[from_sq]
    if piece == "P" and to_sq >= SQUARES - SIZE:
        piece = "Q"
    elif piece == "p" and to_sq < SIZE:
        piece = "q"
    cells = list(board)
    cells[from_sq] = EMPTY
    cells[to_sq] = piece
    return "".join(cells)


def apply_move(position: Position, move: Move) -> Position:
    """The position after ``move`` (promoting a pawn that reaches the last rank to a queen), the other
    side to move. Legality is not checked: call it with a move of :func:`legal_moves`."""
    return Position(_apply(position.board, move.from_sq, move.to_sq), not position.white_to_move)


def is_promotion(position: Position, move: Move) -> bool:
    """Whether ``move`` is a pawn reaching its last rank (and so becomes a queen)."""
    piece = position.board[move.from_sq]
    return (piece == "P" and move.to_sq >= SQUARES - SIZE) or (piece == "p" and move.to_sq < SIZE)


def captures_king(position: Position, move: Move) -> bool:
    """Whether ``move`` captures a king (which ends the duel)."""
    return position.board[move.to_sq] in "Kk"


# ---------------------------------------------------------------------------------------------------------
# Why a move is not legal


def _between_squares(from_sq: int, to_sq: int) -> tuple[int, ...]:
    df = to_sq % SIZE - from_sq % SIZE
    dr = to_sq // SIZE - from_sq // SIZE
    if not (df == 0 or dr == 0 or abs(df) == abs(dr)):
        return ()
    steps = max(abs(df), abs(dr))
    sf = (df > 0) - (df < 0)
    sr = (dr > 0) - (dr < 0)
    return tuple(from_sq + i * (sr * SIZE + sf) for i in range(1, steps))


_BETWEEN: tuple[tuple[int, ...], ...] = tuple(
    _between_squares(f, t) for f in range(SQUARES) for t in range(SQUARES)
)
"""The squares strictly between two squares on a line (rank, file or diagonal), by ``from * 25 + to``."""


_PIECE_RULES = {
    "N": "a knight jumps two squares one way and one square the other",
    "B": "a bishop moves diagonally",
    "R": "a rook moves along a rank or a file",
    "Q": "a queen moves along a rank, a file or a diagonal",
    "K": "a king moves one square in any direction (there is no castling)",
}


def _piece_reason(board: str, from_sq: int, to_sq: int, white: bool) -> str | None:
    """Why the piece on ``from_sq`` (of side ``white``) cannot go to ``to_sq``, or ``None`` if it can.
    The squares differ and ``to_sq`` holds no piece of that side."""
    piece = board[from_sq]
    kind = piece.upper()
    name = PIECE_NAMES[kind]
    df = to_sq % SIZE - from_sq % SIZE
    dr = to_sq // SIZE - from_sq // SIZE
    target = board[to_sq]
    if kind == "P":
        forward = dr if white else -dr
        if df == 0 and forward == 1:
            return None if target == EMPTY else "a pawn cannot capture straight ahead"
        if df == 0 and forward == 2:
            return "pawns step one square (no double step)"
        if abs(df) == 1 and forward == 1:
            if target != EMPTY:
                return None
            return "a pawn moves diagonally only to capture a piece (there is no en passant)"
        ahead = "up (toward rank 5)" if white else "down (toward rank 1)"
        return f"a pawn moves one square straight {ahead}, or one square diagonally forward to capture"
    if kind == "N":
        return None if {abs(df), abs(dr)} == {1, 2} else _PIECE_RULES["N"]
    if kind == "K":
        return None if max(abs(df), abs(dr)) == 1 else _PIECE_RULES["K"]
    diagonal = abs(df) == abs(dr)
    straight = df == 0 or dr == 0
    if (kind == "B" and not diagonal) or (kind == "R" and not straight) or not (diagonal or straight):
        return _PIECE_RULES[kind]
    for sq in _BETWEEN[from_sq * SQUARES + to_sq]:
        if board[sq] != EMPTY:
            return f"the {name}'s way is blocked on {NAMES[sq]}"
    return None


def _reason(board: str, white: bool, from_sq: int, to_sq: int) -> str | None:
    """Why moving from ``from_sq`` to ``to_sq`` is not legal for the side ``white``, or ``None``."""
    piece = board[from_sq]
    own = WHITE_PIECES if white else BLACK_PIECES
    if piece == EMPTY:
        return f"there is no piece on {NAMES[from_sq]}"
    if piece not in own:
        return (
            f"the {PIECE_NAMES[piece.upper()]} on {NAMES[from_sq]} is {side_name(not white)}'s, "
            f"and it is {side_name(white)}'s move"
        )
    if from_sq == to_sq:
        return "a move must go to another square"
    if board[to_sq] in own:
        return f"{side_name(white)}'s own {PIECE_NAMES[board[to_sq].upper()]} stands on {NAMES[to_sq]}"
    return _piece_reason(board, from_sq, to_sq, white)


def illegal_reason(position: Position, move: Move) -> str | None:
    """Why ``move`` is not legal in ``position``, in words a player understands; ``None`` when it is.

    Agrees with :func:`legal_moves`: ``None`` exactly for the listed moves.
    """
    if not (0 <= move.from_sq < SQUARES and 0 <= move.to_sq < SQUARES):
        return "a skirmish square is a1 to e5"
    return _reason(position.board, position.white_to_move, move.from_sq, move.to_sq)


def is_legal(position: Position, move: Move) -> bool:
    """Whether ``move`` is legal in ``position`` (without listing every move)."""
    return illegal_reason(position, move) is None


# ---------------------------------------------------------------------------------------------------------
# SAN


def san(position: Position, move: Move) -> str:
    """The move in SAN: ``Nc3``, ``bxc4``, ``b5=Q``, ``Rxe5``, ``Kxd4``; a piece letter with the file,
    the rank or both of its square when another piece of the same kind and side could also go there (as
    in chess); ``=Q`` for a promotion; ``#`` after a move that captures a king (it ends the duel). No
    ``+``: there is no check. ``move`` must be legal in ``position``.
    """
    board = position.board
    from_sq, to_sq = move.from_sq, move.to_sq
    piece = board[from_sq]
    if piece == EMPTY:
        raise ValueError(f"{move.uci}: there is no piece on {NAMES[from_sq]}")
    target = board[to_sq]
    capture = target != EMPTY
    kind = piece.upper()
    if kind == "P":
        text = f"{FILES[from_sq % SIZE]}x{NAMES[to_sq]}" if capture else NAMES[to_sq]
        if is_promotion(position, move):
            text += "=Q"
    else:
        white = piece in WHITE_PIECES
        rivals = (
            [
                sq
                for sq, c in enumerate(board)
                if c == piece and sq != from_sq and _piece_reason(board, sq, to_sq, white) is None
            ]
            if board.count(piece) > 1
            else ()
        )
        hint = ""
        if rivals:
            if all(sq % SIZE != from_sq % SIZE for sq in rivals):
                hint = FILES[from_sq % SIZE]
            elif all(sq // SIZE != from_sq // SIZE for sq in rivals):
                hint = str(from_sq // SIZE + 1)
            else:
                hint = NAMES[from_sq]
        text = f"{kind}{hint}{'x' if capture else ''}{NAMES[to_sq]}"
    if target in "Kk":
        text += "#"
    return text


# ---------------------------------------------------------------------------------------------------------
# Reading a move

_MOVE_BY_UCI: dict[str, Move] = {move.uci: move for move in _MOVE_BY_KEY}
_UCI = re.compile(r"([a-e][1-5])[-x]?([a-e][1-5])(?:=?([qrbn]))?")
_SAN = re.compile(
    r"(?P<piece>[PNBRQK])?(?P<file>[a-e])?(?P<rank>[1-5])?[-x:]?(?P<to>[a-e][1-5])(?:=?(?P<promo>[QRBNqrbn]))?"
)
_CHESS_SQUARE = re.compile(r"[a-h][1-8]")
_HOW = "write it in UCI (b2b3) or SAN (Nc3, bxc4, b5=Q)"


def _not_legal(text: str, reason: str) -> IllegalActionError:
    return IllegalActionError(f"{text} is not a legal skirmish move: {reason}")


def _check_promotion(position: Position, move: Move, text: str, promo: str | None) -> None:
    if promo is None:
        return
    if not is_promotion(position, move):
        raise _not_legal(text, "only a pawn reaching the last rank promotes")
    if promo.upper() != "Q":
        raise _not_legal(text, "a pawn always promotes to a queen")


def parse_move(position: Position, text: str) -> Move:
    """The move ``text`` names in ``position``: UCI (``b2b3``, ``b4b5``, ``b4b5q``) or SAN (``Nc3``,
    ``bxc4``, ``bc4``, ``b5=Q``, ``Nbd2``), with or without ``x``, ``=Q``, ``#``, ``+``.

    :raises MalformedActionError: the text is no move at all, or names a square off the 5x5 board.
    :raises IllegalActionError: the move is not legal here; the message says why (for example
        ``b2b4 is not a legal skirmish move: pawns step one square (no double step)``), or that it is
        ambiguous and how to write it.
    """
    if not isinstance(text, str):
        raise MalformedActionError(f"a skirmish move is text: {_HOW}")
    exact = _MOVE_BY_UCI.get(text)
    if exact is not None:  # the common case, plain UCI: no need for the patterns
        reason = _reason(position.board, position.white_to_move, exact.from_sq, exact.to_sq)
        if reason is not None:
            raise _not_legal(text, reason)
        return exact
    written = text.strip()
    if not written:
        raise MalformedActionError(f"the move is empty: {_HOW}")
    if written in ("O-O", "O-O-O", "0-0", "0-0-0"):
        raise _not_legal(written, "there is no castling in a skirmish")
    bare = written.rstrip("#+!?")
    if not bare:
        raise MalformedActionError(f"{written!r} is not a skirmish move: {_HOW}")
    board = position.board
    white = position.white_to_move
    # UCI is lower case; upper case is read too when the whole text is (``B2B3``), never a mix, which
    # is SAN (``B3c4`` is a bishop from rank 3).
    uci = _UCI.fullmatch(bare.lower()) if bare[0].islower() or bare.isupper() else None
    if uci is not None:
        from_sq, to_sq = BY_NAME[uci.group(1)], BY_NAME[uci.group(2)]
        move = _MOVE_BY_KEY[_key(from_sq, to_sq)]
        name = move.uci
        reason = _reason(board, white, from_sq, to_sq)
        if reason is not None:
            raise _not_legal(name, reason)
        _check_promotion(position, move, name, uci.group(3))
        return move
    found = _SAN.fullmatch(bare)
    if found is None:
        if any(sq not in BY_NAME for sq in _CHESS_SQUARE.findall(bare.lower())):
            raise MalformedActionError(
                f"{written!r} names a square off the skirmish board: files a-e, ranks 1-5"
            )
        raise MalformedActionError(f"{written!r} is not a skirmish move: {_HOW}")
    letter = found.group("piece") or "P"
    piece = letter if white else letter.lower()
    to_sq = BY_NAME[found.group("to")]
    file_hint, rank_hint = found.group("file"), found.group("rank")
    if letter == "P":
        if rank_hint is not None and file_hint is None:
            raise MalformedActionError(f"{written!r} is not a skirmish move: {_HOW}")
        if file_hint is None:
            file_hint = FILES[to_sq % SIZE]
    candidates = [
        sq
        for sq, c in enumerate(board)
        if c == piece
        and (file_hint is None or FILES[sq % SIZE] == file_hint)
        and (rank_hint is None or str(sq // SIZE + 1) == rank_hint)
    ]
    # A pawn written without a file is looked for on the target's file: it steps (``b3``); a pawn
    # written with another file captures (``bxc3``).
    legal = [sq for sq in candidates if _reason(board, white, sq, to_sq) is None]
    name = PIECE_NAMES[letter]
    side = side_name(white)
    if not legal:
        if len(candidates) == 1 and (reason := _reason(board, white, candidates[0], to_sq)) is not None:
            raise _not_legal(written, reason)
        if not any(c == piece for c in board):
            raise _not_legal(written, f"{side} has no {name}")
        raise _not_legal(written, f"no {side} {name} can go to {NAMES[to_sq]}")
    if len(legal) > 1:
        options = [san(position, _MOVE_BY_KEY[_key(sq, to_sq)]) for sq in legal]
        squares = " and ".join(NAMES[sq] for sq in legal)
        raise IllegalActionError(
            f"{written} is ambiguous: the {name}s on {squares} can each go to {NAMES[to_sq]} "
            f"(write {' or '.join(options)})"
        )
    move = _MOVE_BY_KEY[_key(legal[0], to_sq)]
    _check_promotion(position, move, written, found.group("promo"))
    return move


def move_from_uci(text: str) -> Move:
    """The :class:`Move` a UCI text names, whatever the position (``b2b3``; a ``q`` suffix is allowed).

    :raises MalformedActionError: not UCI on the 5x5 board.
    """
    found = _UCI.fullmatch(text.strip().lower()) if isinstance(text, str) else None
    if found is None or found.group(3) not in (None, "q"):
        raise MalformedActionError(f"{text!r} is not a skirmish move in UCI (like b2b3)")
    return _MOVE_BY_KEY[_key(BY_NAME[found.group(1)], BY_NAME[found.group(2)])]


# ---------------------------------------------------------------------------------------------------------
# perft


def _perft(board: str, white: bool, depth: int) -> int:
    if "K" not in board or "k" not in board:
        return 0
    keys = _move_keys(board, white)
    if depth == 1:
        return len(keys)
    total = 0
    by_key = _MOVE_BY_KEY
    for key in keys:
        move = by_key[key]
        total += _perft(_apply(board, move.from_sq, move.to_sq), not white, depth - 1)
    return total


def perft(position: Position, depth: int) -> int:
    """The number of move sequences of exactly ``depth`` plies from ``position`` (its leaf count).

    A position where a king is missing (it was captured: the duel is over) has no moves: a sequence
    that captures a king on its last ply counts as one leaf, one that captures a king earlier counts
    nothing. Nothing else ends a sequence early: repetition and the 16-ply cap are ignored, a side
    without moves simply has no children. ``perft(p, 0)`` is 1.
    """
    if depth < 0:
        raise ValueError(f"perft depth must be 0 or more, not {depth}")
    if depth == 0:
        return 1
    return _perft(position.board, position.white_to_move, depth)


def can_capture_king(position: Position, white: bool) -> bool:
    """Whether ``white`` (or Black), were it to move in ``position``, would have a move capturing the
    other side's king."""
    king = "k" if white else "K"
    board = position.board
    if king not in board:
        return False
    by_key = _MOVE_BY_KEY
    return any(board[by_key[key].to_sq] == king for key in _move_keys(board, white))
