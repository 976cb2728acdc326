"""Fixed handicap: the points GNU Go's ``fixed_handicap`` (GTP) gives Black's 2 to 9 handicap stones.

GNU Go (``engine/handicap.c``, ``place_fixed_handicap``) uses the star points on the third line on 9x9
and on the fourth line on 13x13 and 19x19, in this order: the upper-right and lower-left corners, the
upper-left, the lower-right, the left and right side points, the top and bottom side points, tengen. For
5 and 7 stones tengen is placed first, then the first 4 or 6 of that order; 9 stones take all nine.

=====  ===========================  ===========================  ===========================
count  9x9                          13x13                        19x19
=====  ===========================  ===========================  ===========================
2      G7 C3                        K10 D4                       Q16 D4
3      + C7                         + D10                        + D16
4      + G3                         + K4                         + Q4
5      4 + E5                       4 + G7                       4 + K10
6      4 + C5 G5                    4 + D7 K7                    4 + D10 Q10
7      6 + E5                       6 + G7                       6 + K10
8      6 + E7 E3                    6 + G10 G4                   6 + K16 K4
9      8 + E5                       8 + G7                       8 + K10
=====  ===========================  ===========================  ===========================
"""

from __future__ import annotations

from libs.engines.go.board import geometry

MIN_HANDICAP = 2
MAX_HANDICAP = 9

_PLACES = ((2, -2), (-2, 2), (2, 2), (-2, -2), (0, 2), (0, -2), (2, 0), (-2, 0), (0, 0))
"""GNU Go's table: (row from the top, column), 2 = the star line, -2 = the opposite one, 0 = the middle."""


def handicap_points(size: int, count: int) -> tuple[int, ...]:
    """The points of ``count`` (2-9) handicap stones on a ``size`` board, in GNU Go's placing order.

    :raises ValueError: an unsupported size or count.
    """
    geo = geometry(size)
    if not MIN_HANDICAP <= count <= MAX_HANDICAP:
        raise ValueError(f"a handicap is 2 to 9 stones, not {count!r}")
    line = 3 if size > 11 else 2
    mid = size // 2

    def coordinate(code: int) -> int:
        return line if code == 2 else mid if code == 0 else size - 1 - line

    def point(row_from_top: int, col: int) -> int:
        return (size - 1 - row_from_top) * size + col

    points: list[int] = []
    remaining = count
    if count in (5, 7):
        points.append(point(mid, mid))
        remaining -= 1
    for code_row, code_col in _PLACES[:remaining]:
        points.append(point(coordinate(code_row), coordinate(code_col)))
    assert all(0 <= p < geo.points for p in points)
    return tuple(points)


def handicap_names(size: int, count: int) -> tuple[str, ...]:
    """:func:`handicap_points` as GTP names (``("Q16", "D4")``)."""
    names = geometry(size).names
    return tuple(names[p] for p in handicap_points(size, count))
