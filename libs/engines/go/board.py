"""The go board: coordinates, stones, groups and liberties, captures, suicide and simple ko.

Points are numbered ``row * size + column`` from 0, row 0 the bottom row ("1") and column 0 the left
column ("A"). People name them in GTP style: a column letter ``A``-``T`` without ``I`` (``A``-``J`` on
9x9, ``A``-``N`` on 13x13), then the row number 1..size counted from the bottom: ``D4``, ``Q16``. Names
are read case-insensitively (:func:`parse_point`) and written upper case (:func:`point_name`).

:class:`Board` tracks its groups incrementally: every point knows its group's id, every group its
stones and liberties (frozensets). A move touches only the groups next to it (merge, liberty lost,
capture, liberties gained from the captured stones), never the whole board. A board never changes once
built: :meth:`Board.play` returns a new board that shares the untouched groups with the old one, so a
game state may keep its current board without copying it, and older boards are freed as soon as nobody
holds them.

Simple ko: a move may not recreate the position before the opponent's last move. On a board with one
point per stone that can only happen one way: the last move captured exactly one stone and left its own
stone alone with that single point as its only liberty; taking back at once at that point (capturing
exactly that one stone) would restore the previous position. :attr:`Board.ko` is that point (else
``None``); a recapture there that takes more than the one stone changes the position and is legal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache

from libs.engines.base import IllegalActionError, MalformedActionError

EMPTY = 0
BLACK = 1
WHITE = 2
"""Point contents; a seat's colour is ``seat + 1`` (seat 0 Black, seat 1 White)."""
SIZES = (9, 13, 19)
COLUMNS = "ABCDEFGHJKLMNOPQRST"
"""Column letters, left to right: no ``I`` (GTP)."""
COLOR_NAMES = {BLACK: "Black", WHITE: "White"}
SYMBOLS = {EMPTY: ".", BLACK: "X", WHITE: "O"}


class Geometry:
    """The fixed facts of one board size: neighbours and names of every point (built once per size)."""

    __slots__ = ("by_name", "names", "neighbors", "points", "size", "sorted_points")

    def __init__(self, size: int) -> None:
        self.size = size
        self.points = size * size
        neighbors: list[tuple[int, ...]] = []
        for p in range(self.points):
            row, col = divmod(p, size)
            around = []
            if row > 0:
                around.append(p - size)
            if col > 0:
                around.append(p - 1)
            if col < size - 1:
                around.append(p + 1)
            if row < size - 1:
                around.append(p + size)
            neighbors.append(tuple(around))
        self.neighbors: tuple[tuple[int, ...], ...] = tuple(neighbors)
        self.names: tuple[str, ...] = tuple(f"{COLUMNS[p % size]}{p // size + 1}" for p in range(self.points))
        self.by_name: dict[str, int] = {name: p for p, name in enumerate(self.names)}
        self.sorted_points: tuple[int, ...] = tuple(sorted(range(self.points), key=lambda p: self.names[p]))
        """The points in the order of their names as strings (``A1``, ``A10``, ``A11``, ..., ``A2``)."""


@cache
def geometry(size: int) -> Geometry:
    """The :class:`Geometry` of a board size (9, 13 or 19)."""
    if size not in SIZES:
        raise ValueError(f"a go board is 9x9, 13x13 or 19x19, not {size!r}")
    return Geometry(size)


def point_name(size: int, point: int) -> str:
    """The GTP name of ``point`` (``D4``)."""
    return geometry(size).names[point]


def parse_point(size: int, text: str) -> int:
    """The point a GTP name stands for, case-insensitively (``d4``, ``D4``).

    :raises MalformedActionError: not a point name, or not a point of this board.
    """
    name = text.strip().upper()
    point = geometry(size).by_name.get(name)
    if point is not None:
        return point
    if len(name) < 2 or not name[0].isalpha() or not name[1:].isdigit():
        raise MalformedActionError(f"{text!r} is not a point: write a column letter and a row, like D4")
    if name[0] == "I":
        raise MalformedActionError(f"{text!r}: there is no column I on a go board (H is followed by J)")
    last = COLUMNS[size - 1]
    raise MalformedActionError(
        f"{text!r} is not on the {size}x{size} board (columns A-{last}, rows 1-{size})"
    )


class Group:
    """A chain of stones of one colour and its liberties (never changed once built). The stones are a
    tuple (a one-stone tuple is a fifth of the memory of a one-stone frozenset; they are only iterated
    and counted), the liberties a frozenset."""

    __slots__ = ("color", "liberties", "stones")

    def __init__(self, color: int, stones: tuple[int, ...], liberties: frozenset[int]) -> None:
        self.color = color
        self.stones = stones
        self.liberties = liberties

    def __repr__(self) -> str:
        return f"Group({self.color}, {sorted(self.stones)}, liberties={sorted(self.liberties)})"


class Board:
    """A go position: stones, groups with their liberties, and the simple-ko point.

    Build one with :meth:`empty`, :meth:`from_rows` or :meth:`with_stones`, then :meth:`play`; a board is
    never changed (its attributes are read-only by convention: nothing in the package writes them after
    construction). Two boards are equal when they have the same size, stones and ko point.
    """

    __slots__ = ("_gid", "_groups", "captured", "cells", "geometry", "ko", "size")

    size: int
    geometry: Geometry
    cells: bytes
    """One byte per point: :data:`EMPTY`, :data:`BLACK` or :data:`WHITE`."""
    ko: int | None
    """The point the next player may not take back at once (simple ko), or ``None``."""
    captured: tuple[int, ...]
    """The points whose stones the move that made this board captured (sorted)."""
    _gid: list[int]
    """The group id of every point (-1: empty). Never mutated after construction."""
    _groups: dict[int, Group]
    """Group id -> group. Never mutated after construction."""

    def __init__(
        self,
        geometry: Geometry,
        cells: bytes,
        gid: list[int],
        groups: dict[int, Group],
        ko: int | None,
        captured: tuple[int, ...],
    ) -> None:
        self.size = geometry.size
        self.geometry = geometry
        self.cells = cells
        self._gid = gid
        self._groups = groups
        self.ko = ko
        self.captured = captured

    # -----------------------------------------------------------------------------------------------
    # Construction

    @classmethod
    def empty(cls, size: int) -> Board:
        """An empty board of ``size`` (9, 13 or 19)."""
        geo = geometry(size)
        return cls(geo, bytes(geo.points), [-1] * geo.points, {}, None, ())

    @classmethod
    def from_rows(cls, rows: Sequence[str]) -> Board:
        """A board drawn as rows, top row first: ``X`` (or ``B``/``#``) Black, ``O`` (or ``W``) White,
        ``.`` (or ``+``, ``-``) empty; spaces are ignored. No stone may be without liberties.

        :raises ValueError: not a square 9, 13 or 19 board, an unknown character, or a dead group.
        """
        cleaned = [row.replace(" ", "") for row in rows]
        size = len(cleaned)
        geo = geometry(size)
        cells = bytearray(geo.points)
        codes = {
            "X": BLACK,
            "B": BLACK,
            "#": BLACK,
            "O": WHITE,
            "W": WHITE,
            ".": EMPTY,
            "+": EMPTY,
            "-": EMPTY,
        }
        for index, row in enumerate(cleaned):
            if len(row) != size:
                raise ValueError(f"row {size - index} has {len(row)} points, not {size}")
            for col, char in enumerate(row.upper()):
                if char not in codes:
                    raise ValueError(f"unknown point {char!r} in row {size - index}")
                cells[(size - 1 - index) * size + col] = codes[char]
        return cls._from_cells(geo, bytes(cells))

    def with_stones(self, points: Iterable[int], color: int) -> Board:
        """This board with stones of ``color`` added on empty ``points``, no capture and no ko (setup:
        handicap stones).

        :raises ValueError: a point is occupied, or a group would be left without liberties.
        """
        cells = bytearray(self.cells)
        for point in points:
            if cells[point] != EMPTY:
                raise ValueError(f"{self.geometry.names[point]} is occupied")
            cells[point] = color
        return Board._from_cells(self.geometry, bytes(cells))

    @classmethod
    def _from_cells(cls, geo: Geometry, cells: bytes) -> Board:
        gid = [-1] * geo.points
        groups: dict[int, Group] = {}
        neighbors = geo.neighbors
        for start in range(geo.points):
            color = cells[start]
            if color == EMPTY or gid[start] != -1:
                continue
            stones = {start}
            liberties: set[int] = set()
            frontier = [start]
            while frontier:
                p = frontier.pop()
                for q in neighbors[p]:
                    v = cells[q]
                    if v == EMPTY:
                        liberties.add(q)
                    elif v == color and q not in stones:
                        stones.add(q)
                        frontier.append(q)
            if not liberties:
                raise ValueError(f"the group at {geo.names[start]} has no liberties")
            for s in stones:
                gid[s] = start
            groups[start] = Group(color, tuple(sorted(stones)), frozenset(liberties))
        return cls(geo, cells, gid, groups, None, ())

    # -----------------------------------------------------------------------------------------------
    # Reading

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Board):
            return NotImplemented
        return self.size == other.size and self.cells == other.cells and self.ko == other.ko

    def __hash__(self) -> int:
        return hash((self.size, self.cells, self.ko))

    def __repr__(self) -> str:
        return "Board.from_rows([\n" + "".join(f"    {row!r},\n" for row in self.rows()) + "])"

    def __getitem__(self, point: int) -> int:
        """The content of ``point``: :data:`EMPTY`, :data:`BLACK` or :data:`WHITE`."""
        return self.cells[point]

    def at(self, name: str) -> int:
        """The content of the point named ``name`` (``"D4"``)."""
        return self.cells[parse_point(self.size, name)]

    def rows(self) -> tuple[str, ...]:
        """The board as text, top row first: ``X`` Black, ``O`` White, ``.`` empty."""
        size = self.size
        text = self.cells.translate(_SYMBOL_TABLE).decode("ascii")
        return tuple(text[row * size : (row + 1) * size] for row in range(size - 1, -1, -1))

    def count(self, color: int) -> int:
        """How many stones of ``color`` are on the board."""
        return self.cells.count(color)

    def group(self, point: int) -> Group | None:
        """The group of the stone on ``point`` (``None``: the point is empty)."""
        gid = self._gid[point]
        return None if gid < 0 else self._groups[gid]

    def groups(self) -> list[Group]:
        """Every group on the board."""
        return list(self._groups.values())

    def liberties(self, point: int) -> int:
        """The number of liberties of the group on ``point`` (0 for an empty point)."""
        group = self.group(point)
        return 0 if group is None else len(group.liberties)

    # -----------------------------------------------------------------------------------------------
    # Moves

    def is_legal(self, point: int, color: int) -> bool:
        """Whether ``color`` may play on ``point``: empty, not suicide, not an immediate ko retake."""
        cells = self.cells
        if cells[point] != EMPTY:
            return False
        gid = self._gid
        groups = self._groups
        safe = False
        taken: list[int] = []
        for q in self.geometry.neighbors[point]:
            v = cells[q]
            if v == EMPTY:
                return True
            group = groups[gid[q]]
            if v == color:
                if len(group.liberties) > 1:
                    safe = True
            elif len(group.liberties) == 1 and gid[q] not in taken:
                taken.append(gid[q])
        if taken:
            return point != self.ko or len(taken) > 1 or len(groups[taken[0]].stones) > 1
        return safe

    def legal_points(self, color: int) -> list[int]:
        """Every point ``color`` may play on, in the order of their names as strings."""
        cells = self.cells
        gid = self._gid
        groups = self._groups
        neighbors = self.geometry.neighbors
        ko = self.ko
        legal: list[int] = []
        for point in self.geometry.sorted_points:
            if cells[point]:
                continue
            around = neighbors[point]
            for q in around:
                if not cells[q]:
                    legal.append(point)
                    break
            else:
                safe = False
                taken: list[int] = []
                for q in around:
                    g = gid[q]
                    group = groups[g]
                    if cells[q] == color:
                        if len(group.liberties) > 1:
                            safe = True
                    elif len(group.liberties) == 1 and g not in taken:
                        taken.append(g)
                if taken:
                    if point != ko or len(taken) > 1 or len(groups[taken[0]].stones) > 1:
                        legal.append(point)
                elif safe:
                    legal.append(point)
        return legal

    def passed(self) -> Board:
        """The board after a pass: the same stones, the ko point cleared."""
        if self.ko is None and not self.captured:
            return self
        return Board(self.geometry, self.cells, self._gid, self._groups, None, ())

    def play(self, point: int, color: int) -> Board:
        """The board after ``color`` plays on ``point``, with the captured stones removed.

        :raises IllegalActionError: the point is occupied, the move is suicide (it captures nothing and
            leaves its own group without liberties), or it retakes the ko at once.
        """
        cells = self.cells
        names = self.geometry.names
        if cells[point] != EMPTY:
            raise IllegalActionError(f"{names[point]} is occupied")
        gid = self._gid
        groups = self._groups
        neighbors = self.geometry.neighbors
        empties: list[int] = []
        friends: list[int] = []
        enemies: list[int] = []
        for q in neighbors[point]:
            v = cells[q]
            if v == EMPTY:
                empties.append(q)
            elif v == color:
                if gid[q] not in friends:
                    friends.append(gid[q])
            elif gid[q] not in enemies:
                enemies.append(gid[q])
        taken = [e for e in enemies if len(groups[e].liberties) == 1]
        if not taken:
            if not empties and all(len(groups[f].liberties) == 1 for f in friends):
                raise IllegalActionError(f"{names[point]} would be suicide")
        elif point == self.ko and len(taken) == 1 and len(groups[taken[0]].stones) == 1:
            raise IllegalActionError(f"{names[point]} retakes the ko at once; play elsewhere first")

        new_cells = bytearray(cells)
        new_cells[point] = color
        new_gid = gid.copy()
        new_groups = groups.copy()

        # The new stone's group: merged into the largest friendly group, the others relabelled.
        if friends:
            keeper = friends[0]
            for f in friends[1:]:
                if len(groups[f].stones) > len(groups[keeper].stones):
                    keeper = f
            kept = groups[keeper]
            stones: tuple[int, ...] = kept.stones
            liberties = set(kept.liberties)
            for f in friends:
                if f == keeper:
                    continue
                other = groups[f]
                stones += other.stones
                liberties |= other.liberties
                for s in other.stones:
                    new_gid[s] = keeper
                del new_groups[f]
            stones += (point,)
            liberties.discard(point)
            liberties.update(empties)
            own = keeper
        else:
            stones = (point,)
            liberties = set(empties)
            own = point
        new_gid[point] = own

        # Enemy groups next to the stone: each loses a liberty, or is captured.
        captured: list[int] = []
        for e in enemies:
            group = groups[e]
            del new_groups[e]
            if len(group.liberties) == 1:
                for s in group.stones:
                    new_cells[s] = EMPTY
                    new_gid[s] = -1
                captured.extend(group.stones)
            else:
                new_groups[e] = Group(group.color, group.stones, group.liberties - {point})

        # Captured stones become liberties of the mover's groups around them.
        if captured:
            gained: dict[int, list[int]] = {}
            for s in captured:
                for q in neighbors[s]:
                    if new_cells[q] == color:
                        g = new_gid[q]
                        if g == own:
                            liberties.add(s)
                        else:
                            gained.setdefault(g, []).append(s)
            for g, points in gained.items():
                group = new_groups[g]
                new_groups[g] = Group(color, group.stones, group.liberties.union(points))
            captured.sort()

        new_groups[own] = Group(color, stones, frozenset(liberties))
        ko = captured[0] if len(captured) == 1 and len(stones) == 1 and len(liberties) == 1 else None
        return Board(self.geometry, bytes(new_cells), new_gid, new_groups, ko, tuple(captured))

    def play_name(self, name: str, color: int) -> Board:
        """:meth:`play` with the point given by name (``"D4"``)."""
        return self.play(parse_point(self.size, name), color)


_SYMBOL_TABLE = bytes.maketrans(bytes([EMPTY, BLACK, WHITE]), b".XO")
