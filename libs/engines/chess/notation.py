"""Chess move notation: reading UCI and SAN against a position, and naming seats, colours and clocks.

Two notations are accepted, as players type them:

- UCI (``e2e4``, ``e1g1``, ``e7e8q``): origin square, target square, promotion piece. Castling is the
  king's two-square move (``e1g1``; the Chess960 form ``e1h1`` is refused as illegal). A promotion
  letter may be given in either case; ``e7e8Q`` reads as ``e7e8q``. Null moves (``0000``) are malformed.
- SAN (``Nf3``, ``exd5``, ``O-O``, ``0-0-0``, ``e8=Q+``, ``e8Q``), read by python-chess's SAN parser.
  Check and mate marks are optional and not verified; over-specified moves (``Ng1f3``) are accepted.

:func:`is_move_notation` checks the syntax alone (no position needed); :func:`resolve_move` finds the move
in a position or says, in words, why it is not legal there.

A pawn move to the last rank that does not name its piece (``e7e8``, ``e8``) is refused with
:class:`~libs.engines.base.IllegalActionError`, not as malformed: the same text is a well-formed move
for a king or rook on e7, so whether a piece must be named depends on the position.
"""

from __future__ import annotations

import re

import chess

from libs.engines.base import IllegalActionError, MalformedActionError

UCI_MOVE_REGEX = re.compile(r"^([a-h][1-8])([a-h][1-8])([qrbnQRBN])?\Z")
"""UCI move syntax: origin, target and an optional promotion letter (null moves are not accepted)."""

KINGSIDE_CASTLING = frozenset({"O-O", "O-O+", "O-O#", "0-0", "0-0+", "0-0#"})
QUEENSIDE_CASTLING = frozenset({"O-O-O", "O-O-O+", "O-O-O#", "0-0-0", "0-0-0+", "0-0-0#"})

COLOR_NAMES = ("White", "Black")
"""The name of each seat's colour: seat 0 is White, seat 1 is Black."""

NOTATION_HINT = "use UCI (e2e4, e7e8q) or SAN (Nf3, exd5, O-O, e8=Q)"


def seat_of(color: chess.Color) -> int:
    """The seat playing ``color``: 0 for White, 1 for Black."""
    return 0 if color == chess.WHITE else 1


def color_of(seat: int) -> chess.Color:
    """The colour of ``seat``: White for 0, Black for 1."""
    return chess.WHITE if seat == 0 else chess.BLACK


def is_uci_notation(text: str) -> bool:
    """Whether ``text`` has the syntax of a UCI move (``e2e4``, ``e7e8q``)."""
    return UCI_MOVE_REGEX.match(text) is not None


def is_san_notation(text: str) -> bool:
    """Whether ``text`` has the syntax of a SAN move (``Nf3``, ``exd5``, ``O-O``, ``e8=Q+``)."""
    return text in KINGSIDE_CASTLING or text in QUEENSIDE_CASTLING or chess.SAN_REGEX.match(text) is not None


def is_move_notation(text: str) -> bool:
    """Whether ``text`` is a move in UCI or SAN syntax, whatever the position."""
    return is_uci_notation(text) or is_san_notation(text)


def resolve_move(board: chess.Board, text: str) -> chess.Move:
    """The legal move ``text`` names in ``board``'s position.

    ``board`` is only read, never changed (a shared board stays intact).

    :raises MalformedActionError: ``text`` is neither UCI nor SAN.
    :raises IllegalActionError: no legal move matches, the SAN is ambiguous, or a promotion does not name
        its piece.
    """
    if is_uci_notation(text):
        return _resolve_uci(board, text)
    if is_san_notation(text):
        return _resolve_san(board, text)
    raise MalformedActionError(f"cannot read {text!r} as a move: {NOTATION_HINT}")


def _resolve_uci(board: chess.Board, text: str) -> chess.Move:
    match = UCI_MOVE_REGEX.match(text)
    assert match is not None
    from_square = chess.parse_square(match.group(1))
    to_square = chess.parse_square(match.group(2))
    letter = match.group(3)
    promotion = chess.PIECE_SYMBOLS.index(letter.lower()) if letter else None
    # Filter on the target here: python-chess's own target mask would drop castling (king takes rook).
    candidates = [
        move
        for move in board.generate_legal_moves(chess.BB_SQUARES[from_square])
        if move.to_square == to_square
    ]
    for move in candidates:
        if move.promotion == promotion:
            return move
    if promotion is None and candidates:
        # Every legal move between these squares is a promotion: the piece is missing.
        raise IllegalActionError(_missing_promotion_message(text, f"{text}q"))
    raise IllegalActionError(f"{text} is not a legal move in this position")


def _resolve_san(board: chess.Board, text: str) -> chess.Move:
    try:
        return board.parse_san(text)
    except chess.AmbiguousMoveError:
        raise IllegalActionError(_ambiguous_message(board, text)) from None
    except chess.IllegalMoveError:
        pass
    except chess.InvalidMoveError:  # pragma: no cover - the syntax was checked above
        raise MalformedActionError(f"cannot read {text!r} as a move: {NOTATION_HINT}") from None
    match = chess.SAN_REGEX.match(text)
    if match is not None and match.group(1) is None and match.group(5) is None:
        queened = f"{text.rstrip('+#')}=Q"
        try:
            board.parse_san(queened)
        except ValueError:
            pass
        else:
            raise IllegalActionError(_missing_promotion_message(text, queened))
    raise IllegalActionError(f"{text} is not a legal move in this position")


def _missing_promotion_message(text: str, example: str) -> str:
    return (
        f"{text} does not name a promotion piece: a pawn reaching the last rank must be promoted to a "
        f"queen, rook, bishop or knight, named in the move (e.g. {example})"
    )


def _ambiguous_message(board: chess.Board, text: str) -> str:
    match = chess.SAN_REGEX.match(text)
    assert match is not None
    to_square = chess.parse_square(match.group(4))
    letter = match.group(1)
    piece_type = chess.PIECE_SYMBOLS.index(letter.lower()) if letter else chess.PAWN
    scratch = board.copy(stack=False)  # san() pushes and pops: never on a shared board
    from_mask = board.pieces_mask(piece_type, board.turn)
    options = sorted(
        scratch.san(move) for move in board.generate_legal_moves(from_mask, chess.BB_SQUARES[to_square])
    )
    return f"{text} is ambiguous in this position: it could be {' or '.join(options)}"


def format_clock(ms: int) -> str:
    """A clock reading as PGN's ``[%clk]`` writes it: ``h:mm:ss``, or ``h:mm:ss.s`` when there are
    sub-second digits (tenths, truncated, so a clock never shows more time than was left).

    >>> format_clock(180_000), format_clock(59_950), format_clock(3_723_400)
    ('0:03:00', '0:00:59.9', '1:02:03.4')
    """
    if ms < 0:
        raise ValueError(f"a clock reading cannot be negative: {ms} ms")
    seconds, millis = divmod(ms, 1000)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    text = f"{hours}:{minutes:02d}:{seconds:02d}"
    return f"{text}.{millis // 100}" if millis else text


def parse_clock(text: str) -> int:
    """Milliseconds from a ``h:mm:ss`` or ``h:mm:ss.s`` clock reading (the inverse of :func:`format_clock`
    up to its truncation to tenths).

    >>> parse_clock("0:03:00"), parse_clock("1:02:03.4")
    (180000, 3723400)
    """
    match = re.fullmatch(r"(\d+):([0-5]\d):([0-5]\d)(?:\.(\d{1,3}))?", text)
    if match is None:
        raise ValueError(f"not a clock reading: {text!r}")
    hours, minutes, seconds, fraction = match.groups()
    millis = int((fraction or "0").ljust(3, "0"))
    return ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 1000 + millis
