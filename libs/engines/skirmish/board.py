"""Squares of the 5x5 skirmish board and a position on it.

Squares are numbered 0 to 24: ``index = (rank - 1) * 5 + file``, file ``a`` = 0; ``a1`` is 0, ``e1`` is 4,
``a2`` is 5, ``e5`` is 24. White (the attacker of the main-board capture) sets up on ranks 1-2 and moves up
the board; Black (the defender) on ranks 4-5 and moves down.

A :class:`Position` is the 25 squares as one string (index = square; ``.`` empty, ``PNBRQK`` White's
pieces, ``pnbrqk`` Black's) and the side to move. Nothing else belongs to a skirmish position: there is
no castling, no en passant and no move counter. Its text form is a FEN-like string, rank 5 first:
``rnbqk/ppppp/5/PPPPP/RNBQK w``.
"""

from __future__ import annotations

from dataclasses import dataclass

from libs.engines.base import MalformedActionError

SIZE = 5
SQUARES = SIZE * SIZE
FILES = "abcde"
EMPTY = "."
WHITE_PIECES = "PNBRQK"
BLACK_PIECES = "pnbrqk"
PIECE_NAMES = {"P": "pawn", "N": "knight", "B": "bishop", "R": "rook", "Q": "queen", "K": "king"}
"""The English name of each kind of piece, by its White letter."""

NAMES: tuple[str, ...] = tuple(f"{FILES[i % SIZE]}{i // SIZE + 1}" for i in range(SQUARES))
"""The name of every square, by index."""
BY_NAME: dict[str, int] = {name: i for i, name in enumerate(NAMES)}


def square_name(sq: int) -> str:
    """The name of square ``sq`` (``0`` -> ``a1``, ``24`` -> ``e5``)."""
    return NAMES[sq]


def parse_square(text: str) -> int:
    """The index of a square name (``a1`` -> 0; any case, surrounding spaces ignored).

    :raises MalformedActionError: not a square of the 5x5 board.
    """
    found = BY_NAME.get(text.strip().lower()) if isinstance(text, str) else None
    if found is None:
        raise MalformedActionError(f"{text!r} is not a skirmish square: files a-e, ranks 1-5 (like c3)")
    return found


def file_of(sq: int) -> int:
    """The file of ``sq``, 0 (``a``) to 4 (``e``)."""
    return sq % SIZE


def rank_of(sq: int) -> int:
    """The rank of ``sq``, 0 (rank 1) to 4 (rank 5)."""
    return sq // SIZE


def side_name(white: bool) -> str:
    return "White" if white else "Black"


@dataclass(frozen=True, slots=True)
class Position:
    """A skirmish position: the board and the side to move.

    ``board`` has 25 characters, index = square (``board[0]`` is a1): ``.`` for an empty square,
    ``PNBRQK`` for White's pieces, ``pnbrqk`` for Black's. The constructor does not check it (it is on
    the hot path of :func:`~libs.engines.skirmish.moves.apply_move`); :meth:`from_fen` does.
    """

    board: str
    white_to_move: bool = True

    @classmethod
    def from_fen(cls, fen: str) -> Position:
        """A position from its text: five ranks separated by ``/``, rank 5 first, each written with piece
        letters and digits for runs of empty squares (``rnbqk/ppppp/5/PPPPP/RNBQK``), optionally followed
        by `` w`` or `` b`` for the side to move (White when left out).

        :raises ValueError: not a 5x5 board in this form, an unknown piece letter, or a pawn on the rank
            where it would already have promoted (a White pawn on rank 5, a Black pawn on rank 1).
        """
        if not isinstance(fen, str):
            raise ValueError(f"a skirmish position is text like 'rnbqk/ppppp/5/PPPPP/RNBQK w', not {fen!r}")
        parts = fen.split()
        if not parts or len(parts) > 2:
            raise ValueError(
                f"{fen!r} is not a skirmish position: write it like 'rnbqk/ppppp/5/PPPPP/RNBQK w'"
            )
        white = True
        if len(parts) == 2:
            if parts[1] not in ("w", "b"):
                raise ValueError(f"{fen!r}: the side to move is 'w' or 'b', not {parts[1]!r}")
            white = parts[1] == "w"
        ranks = parts[0].split("/")
        if len(ranks) != SIZE:
            raise ValueError(f"{fen!r} is not a skirmish position: it needs 5 ranks separated by '/'")
        rows: list[str] = []
        for number, rank in zip(range(SIZE, 0, -1), ranks, strict=True):
            row = ""
            for char in rank:
                if char in "12345":
                    row += EMPTY * int(char)
                elif char in WHITE_PIECES or char in BLACK_PIECES:
                    row += char
                else:
                    raise ValueError(f"{fen!r}: {char!r} on rank {number} is not a piece (PNBRQK, pnbrqk)")
            if len(row) != SIZE:
                raise ValueError(f"{fen!r}: rank {number} has {len(row)} squares, not 5")
            rows.append(row)
        board = "".join(reversed(rows))
        if "P" in board[20:]:
            raise ValueError(f"{fen!r}: a White pawn on rank 5 would already have promoted")
        if "p" in board[:5]:
            raise ValueError(f"{fen!r}: a Black pawn on rank 1 would already have promoted")
        return cls(board, white)

    def fen(self) -> str:
        """The position's text (rank 5 first, `` w`` or `` b`` at the end); :meth:`from_fen` reads it."""
        ranks: list[str] = []
        for rank in range(SIZE - 1, -1, -1):
            text = ""
            run = 0
            for char in self.board[rank * SIZE : rank * SIZE + SIZE]:
                if char == EMPTY:
                    run += 1
                    continue
                if run:
                    text += str(run)
                    run = 0
                text += char
            if run:
                text += str(run)
            ranks.append(text)
        return "/".join(ranks) + (" w" if self.white_to_move else " b")

    def piece_at(self, sq: int) -> str | None:
        """The piece letter on ``sq`` (upper case White, lower case Black), or ``None`` when empty."""
        char = self.board[sq]
        return None if char == EMPTY else char

    def diagram(self) -> str:
        """The board as five lines of text, rank 5 on top, with rank numbers and files (for people)."""
        lines = [
            f"{rank + 1} {' '.join(self.board[rank * SIZE : rank * SIZE + SIZE])}"
            for rank in range(SIZE - 1, -1, -1)
        ]
        lines.append("  " + " ".join(FILES))
        return "\n".join(lines)

    @property
    def key(self) -> str:
        """The board and the side to move as one string: what threefold repetition compares."""
        return self.board + ("w" if self.white_to_move else "b")
