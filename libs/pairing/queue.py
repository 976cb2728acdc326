"""Quick-match pairing by rating, with a window that widens while a seeker waits.

A :class:`Seeker` waits in a *pool* (a game family plus a time control key); only seekers in the same
pool are ever paired. Each seeker accepts opponents within a rating window that starts narrow and
widens with every whole second of waiting (the platform's numbers):

==========================  =====  ===============================================================
constant                    value  meaning
==========================  =====  ===============================================================
:data:`BASE_WINDOW`         50     the window on entering the queue
:data:`WIDEN_PER_SECOND`    10     points added per whole second waited
:data:`MAX_WINDOW`          400    the cap, reached after 35 s: then anyone within 400 points pairs
==========================  =====  ===============================================================

Two seekers are *compatible* when they are in the same pool, are different players and their rating
gap is within *both* windows (``gap <= min(window(a), window(b))``): a newcomer is not thrown at a much
stronger player just because that player has been waiting long.

:func:`pair` is a deterministic greedy matching that favours those who waited longest: seekers are
taken in order of ``entered_at_ms`` (ties: ``player_id``), and each one that is still free takes the
free compatible seeker with the smallest rating gap (ties: the longest waiting, then ``player_id``, then
the lower rating). A player is put in at most one pair per call even when seeking in several pools at
once (or twice in one pool): one call never starts two games for the same player. The result is
*maximal*: no two players left out have compatible seeks.

Complexity. Each pool is sorted once by rating into groups of equal rating, each group ordered by
waiting time (O(n log n)). Within a group the longest-waiting free seeker has the widest window, so if
it is incompatible, the whole group is: the search only looks at each group's first free seeker and
walks outward from the seeker's own rating, group by group, skipping emptied groups through
path-compressed links (amortised near O(1)), and stops beyond the seeker's window. Anyone within
``BASE_WINDOW`` is always compatible, so a seeker with a free neighbour within 50 points stops after
one or two groups; only seekers with nobody within 50 points walk further, at most over the
``2 * MAX_WINDOW + 1`` distinct ratings of their window, and such seekers are more than 50 points apart
from each other. Overall: O(n log n) plus at most ``(rating span / 51 + 1) * 801`` group visits per
pool; 10,000 seekers in one pool pair in a few tens of milliseconds.

Everything here is pure (no I/O, no clock: the caller passes ``now_ms``, integer milliseconds).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BASE_WINDOW",
    "MAX_WINDOW",
    "WIDEN_PER_SECOND",
    "Seeker",
    "compatible",
    "pair",
    "window",
]

BASE_WINDOW: Final = 50
"""The rating window (in points, either side) of a seeker who has just entered the queue."""
WIDEN_PER_SECOND: Final = 10
"""Points the window widens by for each whole second waited."""
MAX_WINDOW: Final = 400
"""The widest window, reached after ``(MAX_WINDOW - BASE_WINDOW) / WIDEN_PER_SECOND`` = 35 seconds."""

_SECOND_MS: Final = 1_000


@dataclass(frozen=True, slots=True)
class Seeker:
    """A player waiting for a quick match.

    ``pool`` is the game family plus the time control key; ``rating`` is the player's rating in that
    family; ``entered_at_ms`` is when the seek entered the queue (integer milliseconds, same clock as the
    ``now_ms`` given to :func:`window` and :func:`pair`).
    """

    player_id: str
    rating: int
    entered_at_ms: int
    pool: str


def window(seeker: Seeker, now_ms: int) -> int:
    """The rating gap ``seeker`` accepts at ``now_ms``: ``BASE_WINDOW`` plus ``WIDEN_PER_SECOND`` per
    whole second waited, at most ``MAX_WINDOW``. A ``now_ms`` before the seek entered counts as no wait.
    """
    seconds = max(0, now_ms - seeker.entered_at_ms) // _SECOND_MS
    return min(MAX_WINDOW, BASE_WINDOW + WIDEN_PER_SECOND * seconds)


def compatible(a: Seeker, b: Seeker, now_ms: int) -> bool:
    """Whether ``a`` and ``b`` may be paired at ``now_ms``: same pool, different players, and a rating gap
    within both windows."""
    return (
        a.pool == b.pool
        and a.player_id != b.player_id
        and abs(a.rating - b.rating) <= min(window(a, now_ms), window(b, now_ms))
    )


def pair(seekers: Iterable[Seeker], now_ms: int) -> list[tuple[Seeker, Seeker]]:
    """Pair the seekers that can be paired at ``now_ms`` (see the module documentation for the rules).

    Each pair holds the longer-waiting seeker first (earlier ``entered_at_ms``, then ``player_id``); the
    pairs come in the order they were made, that is by their first seeker. The result depends only on
    the seekers and ``now_ms``, not on the order of ``seekers``. Seekers left out stay in the queue.
    """
    # Global processing order: longest waiting first. The rank of a seeker in this order is its index
    # everywhere below, so comparing ranks compares (entered_at_ms, player_id, rating, pool).
    order = sorted(seekers, key=lambda s: (s.entered_at_ms, s.player_id, s.rating, s.pool))
    count = len(order)
    windows = [window(s, now_ms) for s in order]
    free = [True] * count
    ranks_of_player: dict[str, list[int]] = defaultdict(list)
    ranks_of_group: dict[tuple[str, int], list[int]] = defaultdict(list)
    for rank, seeker in enumerate(order):
        ranks_of_player[seeker.player_id].append(rank)
        ranks_of_group[seeker.pool, seeker.rating].append(rank)  # so each group is in rank order

    pools: dict[str, _Pool] = {}
    group_at: dict[tuple[str, int], tuple[_Pool, int]] = {}
    for (pool_key, rating), ranks in sorted(ranks_of_group.items()):  # ascending ratings within a pool
        pool = pools.get(pool_key)
        if pool is None:
            pool = pools[pool_key] = _Pool()
        group_at[pool_key, rating] = (pool, pool.add_group(rating, ranks))

    pairs: list[tuple[Seeker, Seeker]] = []
    for rank, seeker in enumerate(order):
        if not free[rank]:
            continue
        free[rank] = False  # taken or not, a seeker never becomes a partner once it has had its turn
        pool, index = group_at[seeker.pool, seeker.rating]
        partner = pool.best_partner(index, seeker.player_id, windows[rank], order, windows, free)
        if partner is None:
            continue
        pairs.append((seeker, order[partner]))
        for player in (seeker.player_id, order[partner].player_id):
            for other in ranks_of_player[player]:
                free[other] = False
    return pairs


class _Pool:
    """The seekers of one pool in groups of equal rating, ascending, each group in rank order.

    Seekers leave by having their ``free`` flag cleared; each group's ``heads`` skips its leading
    non-free seekers lazily, and an emptied group is unlinked from ``_left`` / ``_right``: union-find
    style links to the nearest group on each side that may still hold free seekers.
    """

    __slots__ = ("_left", "_right", "groups", "heads", "ratings")

    def __init__(self) -> None:
        self.ratings: list[int] = []
        self.groups: list[list[int]] = []
        self.heads: list[int] = []
        self._left: list[int] = []
        self._right: list[int] = []

    def add_group(self, rating: int, ranks: list[int]) -> int:
        """Append the group of ``rating`` (groups must be added in ascending rating) and return its index."""
        index = len(self.groups)
        self.ratings.append(rating)
        self.groups.append(ranks)
        self.heads.append(0)
        self._left.append(index)
        self._right.append(index)
        return index

    def best_partner(
        self,
        index: int,
        player_id: str,
        seeker_window: int,
        order: list[Seeker],
        windows: list[int],
        free: list[bool],
    ) -> int | None:
        """The rank of the best free partner for the seeker of ``player_id`` in group ``index``, if any."""
        rating = self.ratings[index]
        own = self._candidate(index, player_id, order, free)
        if own is not None:
            return own  # a gap of 0 is within every window, and the group's first candidate waited longest
        left = self._find_left(index - 1)
        right = self._find_right(index + 1)
        while True:
            left_gap = rating - self.ratings[left] if left >= 0 else None
            right_gap = self.ratings[right] - rating if right < len(self.groups) else None
            gaps = [gap for gap in (left_gap, right_gap) if gap is not None]
            if not gaps or min(gaps) > seeker_window:
                return None
            gap = min(gaps)
            found: list[int] = []
            if left_gap == gap:
                candidate = self._candidate(left, player_id, order, free)
                if candidate is not None and gap <= windows[candidate]:
                    found.append(candidate)
                left = self._find_left(left - 1)
            if right_gap == gap:
                candidate = self._candidate(right, player_id, order, free)
                if candidate is not None and gap <= windows[candidate]:
                    found.append(candidate)
                right = self._find_right(right + 1)
            if found:
                return min(found)  # the longest waiting; on a full tie the lower rating (the left group)

    def _candidate(self, index: int, player_id: str, order: list[Seeker], free: list[bool]) -> int | None:
        """The first free seeker of group ``index`` other than ``player_id`` (it has the widest window)."""
        group = self.groups[index]
        head = self.heads[index]
        while head < len(group) and not free[group[head]]:
            head += 1
        self.heads[index] = head
        if head == len(group):
            self._unlink(index)
            return None
        for position in range(head, len(group)):  # past the head only when the seeker's own player is there
            rank = group[position]
            if free[rank] and order[rank].player_id != player_id:
                return rank
        return None

    def _unlink(self, index: int) -> None:
        self._left[index] = index - 1
        self._right[index] = index + 1

    def _find_left(self, index: int) -> int:
        """The nearest group at or left of ``index`` not known to be empty, or -1."""
        return _find(self._left, index, -1)

    def _find_right(self, index: int) -> int:
        """The nearest group at or right of ``index`` not known to be empty, or ``len(groups)``."""
        return _find(self._right, index, len(self._right))


def _find(links: list[int], index: int, end: int) -> int:
    root = index
    while root != end and links[root] != root:
        root = links[root]
    while index != root:  # path compression: point the whole walk at the root
        following = links[index]
        links[index] = root
        index = following
    return root
