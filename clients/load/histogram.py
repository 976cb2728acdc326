"""An HDR-style latency histogram: log-bucketed, constant memory, mergeable.

The layout is HdrHistogram's. Values are whole numbers of a unit (the load harness records
microseconds). With ``significant_figures`` *s*, every value up to ``highest`` is kept with a relative
error of at most ``1 / 2**(k-1)``, where ``2**k`` is the first power of two at least ``2 * 10**s``
(*s* = 3: 2048 sub-buckets, error under 0.1 %; *s* = 2: 256, under 0.8 %):

* bucket 0 counts the values ``0 .. 2**k - 1`` one by one;
* bucket *b* > 0 covers ``2**(k+b-1) .. 2**(k+b) - 1`` with ``2**(k-1)`` sub-buckets of width ``2**b``.

The counts live in one flat array whose length depends only on the settings (about 23,600 entries,
184 KiB, for 3 figures up to an hour in microseconds), so recording is O(1) and memory never grows with
the number of samples. Two histograms with the same settings merge by adding their counts, which is how
per-family figures add up to the whole run and how reports from several load generators combine
(:meth:`Histogram.to_dict` / :meth:`Histogram.from_dict`).

Values above ``highest`` are counted at ``highest`` (and :attr:`Histogram.clamped` says how many), and
the exact minimum, maximum and sum are kept beside the buckets, so ``max`` and ``mean`` are exact.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping
from typing import Any, Final

__all__ = ["HOUR_US", "Histogram"]

HOUR_US: Final = 3_600_000_000
"""An hour in microseconds: the default highest trackable value."""


class Histogram:
    """Counts of whole-number values in log-spaced buckets of bounded relative width."""

    __slots__ = (
        "_counts",
        "_sub_bits",
        "_sub_half",
        "clamped",
        "highest",
        "maximum",
        "minimum",
        "significant_figures",
        "total",
        "total_value",
    )

    def __init__(self, highest: int = HOUR_US, significant_figures: int = 3) -> None:
        if not 1 <= significant_figures <= 5:
            raise ValueError("significant_figures must be 1 to 5")
        if highest < 2:
            raise ValueError("highest must be at least 2")
        self.significant_figures = significant_figures
        self.highest = highest
        self._sub_bits = math.ceil(math.log2(2 * 10**significant_figures))
        self._sub_half = 1 << (self._sub_bits - 1)
        self._counts = array("Q", bytes(8 * (self._index(highest) + 1)))
        self.total = 0
        """How many values were recorded."""
        self.total_value = 0
        """Their sum (exact)."""
        self.minimum = 0
        self.maximum = 0
        self.clamped = 0
        """How many values were above :attr:`highest` (counted at :attr:`highest`)."""

    # -- layout ------------------------------------------------------------------------------------------

    def _index(self, value: int) -> int:
        bucket = max(0, value.bit_length() - self._sub_bits)
        return bucket * self._sub_half + (value >> bucket)

    def _bounds(self, index: int) -> tuple[int, int]:
        """The lowest and highest value counted at ``index``."""
        if index < 2 * self._sub_half:
            return index, index
        bucket = index // self._sub_half - 1
        sub = index - bucket * self._sub_half
        low = sub << bucket
        return low, low + (1 << bucket) - 1

    @property
    def relative_precision(self) -> float:
        """The largest relative error of a reported value (half a sub-bucket's share, at worst)."""
        return 1 / self._sub_half

    def equivalent_range(self, value: int) -> tuple[int, int]:
        """The values indistinguishable from ``value`` (the bucket it is counted in)."""
        return self._bounds(self._index(min(max(0, value), self.highest)))

    @property
    def memory_bytes(self) -> int:
        """The size of the counts array (fixed at construction)."""
        return self._counts.itemsize * len(self._counts)

    # -- recording ---------------------------------------------------------------------------------------

    def record(self, value: int, count: int = 1) -> None:
        """Count ``value`` (negative values count as 0) ``count`` times."""
        if count <= 0:
            return
        value = max(0, int(value))
        if self.total == 0 or value < self.minimum:
            self.minimum = value
        if value > self.maximum:
            self.maximum = value
        self.total += count
        self.total_value += value * count
        if value > self.highest:
            self.clamped += count
            value = self.highest
        self._counts[self._index(value)] += count

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s counts to this histogram (same settings required)."""
        self._check_compatible(other)
        if other.total == 0:
            return
        if self.total == 0 or other.minimum < self.minimum:
            self.minimum = other.minimum
        self.maximum = max(self.maximum, other.maximum)
        self.total += other.total
        self.total_value += other.total_value
        self.clamped += other.clamped
        counts = self._counts
        for index, count in enumerate(other._counts):
            if count:
                counts[index] += count

    def copy(self) -> Histogram:
        twin = self.empty_like()
        twin.merge(self)
        return twin

    def empty_like(self) -> Histogram:
        """A new empty histogram with the same settings."""
        return Histogram(self.highest, self.significant_figures)

    def reset(self) -> None:
        self._counts = array(self._counts.typecode, bytes(self._counts.itemsize * len(self._counts)))
        self.total = self.total_value = self.minimum = self.maximum = self.clamped = 0

    def _check_compatible(self, other: Histogram) -> None:
        if (other.highest, other.significant_figures) != (self.highest, self.significant_figures):
            raise ValueError(
                "cannot merge histograms with different settings: "
                f"highest {self.highest} / {other.highest}, "
                f"significant figures {self.significant_figures} / {other.significant_figures}"
            )

    # -- reading -----------------------------------------------------------------------------------------

    @property
    def mean(self) -> float:
        return self.total_value / self.total if self.total else 0.0

    def _reported(self, index: int) -> int:
        """The value a percentile that falls in bucket ``index`` is reported as: the bucket's highest
        value, within the exact minimum and maximum; the maximum for the bucket of :attr:`highest` when
        values were clamped into it (their true values are unknown: err on the high side)."""
        if self.clamped and index == len(self._counts) - 1:
            return self.maximum
        return min(max(self._bounds(index)[1], self.minimum), self.maximum)

    def value_at_percentile(self, percentile: float) -> int:
        """The smallest value that ``percentile`` % of the recorded values are at or below, to the
        histogram's precision: the highest value of the bucket holding the sample of rank
        ``ceil(percentile / 100 * total)``, but never above the exact maximum nor below the exact
        minimum. 0 when empty."""
        return self.percentiles((percentile,))[percentile]

    def percentiles(self, wanted: tuple[float, ...]) -> dict[float, int]:
        """:meth:`value_at_percentile` of several percentiles in one pass over the counts."""
        if self.total == 0:
            return dict.fromkeys(wanted, 0)
        ordered = sorted(set(wanted))
        ranks = [max(1, math.ceil(min(max(p, 0.0), 100.0) / 100 * self.total - 1e-9)) for p in ordered]
        found: dict[float, int] = {}
        position = 0
        seen = 0
        for index, count in enumerate(self._counts):
            if not count:
                continue
            seen += count
            while position < len(ordered) and seen >= ranks[position]:
                found[ordered[position]] = self._reported(index)
                position += 1
            if position == len(ordered):
                break
        for p in ordered[position:]:
            found[p] = self.maximum
        return {p: found[p] for p in wanted}

    def buckets(self) -> Iterator[tuple[int, int, int]]:
        """The non-empty buckets in order: (lowest value, highest value, count)."""
        for index, count in enumerate(self._counts):
            if count:
                low, high = self._bounds(index)
                yield low, high, count

    def distribution(self, ticks_per_half: int = 5) -> list[tuple[float, int]]:
        """(percentile, value) points for an HDR plot, as HdrHistogram prints its percentile
        distribution: ``ticks_per_half`` points for each halving of the distance to 100 % (0, 10, ... 50,
        55, ... 75, 77.5, ...), until a step stands for less than one sample; then (100, maximum)."""
        if self.total == 0:
            return []
        points: list[float] = []
        percentile = 0.0
        while (100.0 - percentile) / 100 * self.total >= 1 and 100.0 - percentile > 1e-9:
            points.append(percentile)
            halvings = math.floor(math.log2(100.0 / (100.0 - percentile)))
            percentile += 100.0 / (ticks_per_half * 2 ** (halvings + 1))
        values = self.percentiles(tuple(points))
        return [*((p, values[p]) for p in points), (100.0, self.maximum)]

    # -- serialising -------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form that :meth:`from_dict` reads back exactly (sparse counts)."""
        return {
            "highest": self.highest,
            "significant_figures": self.significant_figures,
            "total": self.total,
            "total_value": self.total_value,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "clamped": self.clamped,
            "counts": [[index, count] for index, count in enumerate(self._counts) if count],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Histogram:
        histogram = cls(int(data["highest"]), int(data["significant_figures"]))
        size = len(histogram._counts)
        total = 0
        for index, count in data["counts"]:
            if not 0 <= int(index) < size or int(count) < 0:
                raise ValueError(f"bad histogram bucket {index}: {count}")
            histogram._counts[int(index)] = int(count)
            total += int(count)
        if total != int(data["total"]):
            raise ValueError(f"histogram counts add up to {total}, not the total {data['total']}")
        histogram.total = total
        histogram.total_value = int(data["total_value"])
        histogram.minimum = int(data["minimum"])
        histogram.maximum = int(data["maximum"])
        histogram.clamped = int(data.get("clamped", 0))
        return histogram

    def __repr__(self) -> str:
        return (
            f"Histogram(total={self.total}, min={self.minimum}, max={self.maximum}, "
            f"significant_figures={self.significant_figures})"
        )
