"""The C legal-play generator (``_native.c``), when it was built: the same plays as ``moves._generate``.

Build it in place with ``.venv/bin/python setup.py build_ext --inplace``. Without it ``available``
is False and callers use the pure-Python generator.

Two ways to the same plays:

- :func:`generate`: ``_native.play_objects`` does the search, the notation, the sort, and builds the
  finished ``Play``, ``Position`` and tuple objects in C (the slots filled directly, as the dataclasses'
  ``__init__`` would: they only store their fields); the ``Move`` objects are ``moves._MOVES``'s;
- :func:`raw_plays` + :func:`decode`: ``_native.plays`` returns plain entries (notation, steps, own board
  after) and Python builds the objects, about five times slower than building them in C, but the entries
  are what a lazy ``Play`` would keep (see ``benchmarks/backgammon_native.py`` for the figures).
"""

from __future__ import annotations

import struct
from operator import neg
from types import ModuleType

from libs.engines.backgammon.board import WHITE, Position
from libs.engines.backgammon.moves import _MOVES, Move, Play

_native: ModuleType | None
try:
    from libs.engines.backgammon import _native
except ImportError:  # not built
    _native = None

available = _native is not None
"""Whether the C extension was built (``setup.py``)."""

_BOARD = struct.Struct("26b").unpack
"""The own board of an entry (26 signed bytes) as ints."""

Entry = tuple[str, bytes, bytes]
"""(notation, steps: 4 bytes a move (start, end, hit, die) in the order played, own board after)."""


def own_board(position: Position, seat: int) -> list[int]:
    """``seat``'s own board (``moves._own_board``): off, points 1..24 in own numbering, bar."""
    points = position.points
    if seat == WHITE:
        return [position.off[0], *points[24:0:-1], position.bar[0]]
    return [position.off[1], *map(neg, points[1:25]), position.bar[1]]


def raw_plays(position: Position, seat: int, high: int, low: int) -> list[Entry]:
    """The C generator's entries for ``position``, ``seat`` and the roll ``high`` >= ``low``, sorted by
    notation. Raises ``RuntimeError`` if the extension was not built."""
    if _native is None:
        raise RuntimeError("the C generator was not built: python setup.py build_ext --inplace")
    result: list[Entry] = _native.plays(own_board(position, seat), high, low)
    return result


def _move_table() -> tuple[Move | None, ...]:
    table: list[Move | None] = [None] * (26 * 26 * 2)
    for (start, end, hit), move in _MOVES.items():
        table[(start * 26 + end) * 2 + hit] = move
    return tuple(table)


_KINDS = (Play, Position, _move_table())
"""What ``_native.play_objects`` builds: the classes, and the ``Move`` of each (start, end, hit)."""


def generate(position: Position, seat: int, high: int, low: int) -> tuple[Play, ...]:
    """Exactly ``moves._generate(position, seat, high, low)``, from the C generator (``high`` >= ``low``,
    both 1..6; ``seat`` 0 or 1, unchecked as there). Raises ``RuntimeError`` if it was not built."""
    if _native is None:
        raise RuntimeError("the C generator was not built: python setup.py build_ext --inplace")
    other = 1 - seat
    result: tuple[Play, ...] = _native.play_objects(
        own_board(position, seat), high, low, seat == WHITE, position.bar[other], position.off[other], _KINDS
    )
    return result


def decode(position: Position, seat: int, entries: list[Entry]) -> tuple[Play, ...]:
    """The ``Play`` objects of :func:`raw_plays`'s entries for ``position`` and ``seat``, built in Python
    (the same as :func:`generate`, slower)."""
    moves_of, make_play, make_position, board_of = _MOVES, Play, Position, _BOARD
    bar_white, bar_black = position.bar
    off_white, off_black = position.off
    white = seat == WHITE
    plays: list[Play] = []
    append = plays.append
    moves: tuple[Move, ...]
    used: tuple[int, ...]
    for notation, steps, after in entries:
        count = len(steps)
        if count == 8:
            s0, e0, h0, d0, s1, e1, h1, d1 = steps
            moves = (moves_of[s0, e0, h0 == 1], moves_of[s1, e1, h1 == 1])
            used = (d0, d1)
            hits = h0 + h1
        elif count == 16:
            s0, e0, h0, d0, s1, e1, h1, _, s2, e2, h2, _, s3, e3, h3, _ = steps
            moves = (
                moves_of[s0, e0, h0 == 1],
                moves_of[s1, e1, h1 == 1],
                moves_of[s2, e2, h2 == 1],
                moves_of[s3, e3, h3 == 1],
            )
            used = (d0, d0, d0, d0)
            hits = h0 + h1 + h2 + h3
        else:
            moves = tuple(moves_of[steps[i], steps[i + 1], steps[i + 2] == 1] for i in range(0, count, 4))
            used = tuple(steps[3::4])
            hits = sum(steps[2::4])
        board = board_of(after)
        if white:
            result = make_position((0, *board[24:0:-1]), (board[25], bar_black + hits), (board[0], off_black))
        else:
            result = make_position(
                (0, *map(neg, board[1:25])), (bar_white + hits, board[25]), (off_white, board[0])
            )
        append(make_play(moves, notation, result, used))
    return tuple(plays)
