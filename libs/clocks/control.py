"""Time controls: how a seat spends time during its turn and what a completed move earns it.

One mechanism covers every kind of clock the platform runs. A seat holds *main time* and, for byo-yomi
style controls, a number of *periods* of fixed length. During a turn the seat spends its main time
first, then its periods one after the other: a period that runs out is used up (in Game of the Generals
that is a *strike*), and the seat flags when the last one runs out. A move completed in main time may
earn an *increment*, possibly only when the move was quick and never above a cap; a move completed in
the periods starts the next turn with a fresh period. The kinds are settings of that one mechanism:

=================  ===========================================================================
kind               settings
=================  ===========================================================================
sudden death       main time only (chess lobby tables, go "absolute")
Fischer            main time, increment after every move (tournaments, Skirmish Chess)
capped bonus       main time, increment only for a move within a limit, never above a cap
byo-yomi           main time, then N periods of P ms (Japanese byo-yomi)
per move           no main time, N periods of P ms (Game of the Generals: 3 strikes lose)
=================  ===========================================================================

Everything here is pure integer arithmetic on values; :mod:`libs.clocks.clock` adds the instants.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from libs.clocks._fields import check_count, int_field, optional_int_field
from libs.clocks.errors import (
    ClockError,
    ClockFormatError,
    ClockStateError,
    InvalidInstantError,
    InvalidTimeControlError,
)

__all__ = [
    "BACKGAMMON_QUICK",
    "BACKGAMMON_STANDARD",
    "CHESS_LOBBY_CONTROLS",
    "GENERALS_CONTROLS",
    "GENERALS_DEFAULT",
    "MINUTE_MS",
    "SECOND_MS",
    "ClockKind",
    "SeatStatus",
    "SeatTime",
    "TimeControl",
]

SECOND_MS: Final = 1_000
"""One second in milliseconds."""
MINUTE_MS: Final = 60 * SECOND_MS
"""One minute in milliseconds."""


class ClockKind(StrEnum):
    """The name of a time control, derived from its settings (see :attr:`TimeControl.kind`)."""

    SUDDEN_DEATH = "sudden_death"
    """Main time only; running out flags (go calls it *absolute*)."""
    FISCHER = "fischer"
    """Main time plus an increment after every move."""
    CAPPED_BONUS = "capped_bonus"
    """Main time plus an increment only for a quick move, never above a cap."""
    BYO_YOMI = "byo_yomi"
    """Main time, then periods that a move within resets and an overrun uses up."""
    PER_MOVE = "per_move"
    """A fresh clock each move; each overrun is a strike; the last allowed strike flags."""


@dataclass(frozen=True, slots=True)
class SeatTime:
    """What one seat has left between its turns (the only per-seat state a clock keeps)."""

    main_ms: int
    """Main time left, in milliseconds (0 once the seat plays on its periods)."""
    periods_left: int = 0
    """Periods left, each a fresh full period at the start of a turn (0 for kinds without periods)."""

    def __post_init__(self) -> None:
        check_count("main_ms", self.main_ms, ClockFormatError)
        check_count("periods_left", self.periods_left, ClockFormatError)

    def to_dict(self) -> dict[str, object]:
        """The JSON form: ``{"main_ms": int, "periods_left": int}``."""
        return {"main_ms": self.main_ms, "periods_left": self.periods_left}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> SeatTime:
        """Rebuild from :meth:`to_dict`; raises :class:`ClockFormatError`."""
        return cls(int_field(data, "main_ms"), int_field(data, "periods_left"))


@dataclass(frozen=True, slots=True)
class SeatStatus:
    """A seat's time as it stands at one instant: what a view shows. Never negative."""

    remaining_ms: int
    """What the seat's clock face shows: main time left, or in the periods the current period's time
    left (for a per-move clock: the current move's time left). 0 once flagged."""
    until_flag_ms: int
    """How long until the seat flags if its time runs without a move (main time plus every period)."""
    periods_left: int
    """Periods left including the one in progress (0 for kinds without periods, and once flagged)."""
    periods_used: int
    """Periods used up so far in the game; in Game of the Generals these are the *strikes*."""
    in_periods: bool
    """Main time is spent and the seat plays on its periods (always true for a per-move clock)."""

    @property
    def is_flagged(self) -> bool:
        """The seat's time has run out."""
        return self.until_flag_ms == 0

    def to_dict(self) -> dict[str, object]:
        """The JSON form of the status (plain ints and bools)."""
        return {
            "remaining_ms": self.remaining_ms,
            "until_flag_ms": self.until_flag_ms,
            "periods_left": self.periods_left,
            "periods_used": self.periods_used,
            "in_periods": self.in_periods,
            "flagged": self.is_flagged,
        }


@dataclass(frozen=True, slots=True)
class TimeControl:
    """The rules of a clock, the same for every seat. Build one with the named constructors.

    Raises :class:`InvalidTimeControlError` for settings that describe no clock: a negative time, a
    clock with no time at all, periods without a length (or the reverse), an increment condition or a
    cap without an increment, a cap below the main time, or an increment combined with periods.
    """

    base_ms: int
    """Main time each seat starts with."""
    increment_ms: int = 0
    """Added to main time after every move completed in time (Fischer), subject to the two below."""
    increment_within_ms: int | None = None
    """If set, the increment is earned only by a move that took at most this long (capped bonus)."""
    cap_ms: int | None = None
    """If set, an increment never takes main time above this."""
    periods: int = 0
    """Number of byo-yomi periods (per-move clock: the strikes that lose)."""
    period_ms: int = 0
    """Length of one period (per-move clock: the time for one move)."""

    def __post_init__(self) -> None:
        error = InvalidTimeControlError
        for name in ("base_ms", "increment_ms", "periods", "period_ms"):
            check_count(name, getattr(self, name), error)
        for name in ("increment_within_ms", "cap_ms"):
            if getattr(self, name) is not None:
                check_count(name, getattr(self, name), error)
                if self.increment_ms == 0:
                    raise error(f"{name} needs an increment")
        if (self.periods == 0) != (self.period_ms == 0):
            raise error("periods and period_ms must both be zero or both be positive")
        if self.increment_ms and self.periods:
            raise error("an increment cannot be combined with byo-yomi periods")
        if self.cap_ms is not None and self.cap_ms < self.base_ms:
            raise error(f"cap_ms {self.cap_ms} is below base_ms {self.base_ms}")
        if self.base_ms + self.periods * self.period_ms == 0:
            raise error("a time control needs some time")

    @classmethod
    def sudden_death(cls, base_ms: int) -> TimeControl:
        """``base_ms`` for the whole game, no increment (chess lobby tables; go "absolute")."""
        return cls(base_ms)

    @classmethod
    def fischer(cls, base_ms: int, increment_ms: int) -> TimeControl:
        """``base_ms`` plus ``increment_ms`` after every move completed in time, the first included."""
        return cls(base_ms, increment_ms)

    @classmethod
    def capped_bonus(
        cls, base_ms: int, bonus_ms: int, within_ms: int, cap_ms: int | None = None
    ) -> TimeControl:
        """``base_ms``; a move that took at most ``within_ms`` earns ``bonus_ms``, never above ``cap_ms``.

        ``cap_ms`` defaults to ``base_ms`` (the backgammon clocks of seed 002).
        """
        return cls(base_ms, bonus_ms, within_ms, base_ms if cap_ms is None else cap_ms)

    @classmethod
    def byo_yomi(cls, main_ms: int, periods: int, period_ms: int) -> TimeControl:
        """Japanese byo-yomi: ``main_ms``, then ``periods`` periods of ``period_ms``.

        A move within a period resets it; a period that runs out is used up; the last one flags.
        """
        return cls(main_ms, periods=periods, period_ms=period_ms)

    @classmethod
    def per_move(cls, move_ms: int, strikes_to_lose: int = 3) -> TimeControl:
        """A fresh ``move_ms`` each move; running out is a strike and a fresh ``move_ms`` for the same
        move; strike number ``strikes_to_lose`` flags (Game of the Generals: 30/60/120 s, 3 strikes)."""
        return cls(0, periods=strikes_to_lose, period_ms=move_ms)

    @property
    def kind(self) -> ClockKind:
        """Which kind of clock the settings describe."""
        if self.periods:
            return ClockKind.BYO_YOMI if self.base_ms else ClockKind.PER_MOVE
        if self.increment_within_ms is not None or self.cap_ms is not None:
            return ClockKind.CAPPED_BONUS
        return ClockKind.FISCHER if self.increment_ms else ClockKind.SUDDEN_DEATH

    def initial_seat(self) -> SeatTime:
        """A seat's time before its first move."""
        return SeatTime(self.base_ms, self.periods)

    def limit_ms(self, seat: SeatTime) -> int:
        """How long a turn of ``seat`` can last: it flags once the turn's elapsed time reaches this."""
        return seat.main_ms + seat.periods_left * self.period_ms

    def status(self, seat: SeatTime, elapsed_ms: int) -> SeatStatus:
        """``seat``'s time after ``elapsed_ms`` of its turn (0 for a seat not on move)."""
        limit = self.limit_ms(seat)
        elapsed = min(check_count("elapsed_ms", elapsed_ms, InvalidInstantError), limit)
        if elapsed < seat.main_ms:
            remaining, periods_left, in_periods = seat.main_ms - elapsed, seat.periods_left, False
        else:
            overtime = elapsed - seat.main_ms
            periods_left = seat.periods_left - (overtime // self.period_ms if self.period_ms else 0)
            remaining = self.period_ms - overtime % self.period_ms if periods_left else 0
            in_periods = self.periods > 0
        return SeatStatus(remaining, limit - elapsed, periods_left, self.periods - periods_left, in_periods)

    def after_move(self, seat: SeatTime, elapsed_ms: int, *, earns_increment: bool = True) -> SeatTime:
        """``seat``'s time after a move that took ``elapsed_ms``, which must be below :meth:`limit_ms`.

        A move completed in main time is charged and earns the increment it qualifies for (none when
        ``earns_increment`` is false: a turn that ended without a move of the seat's own); a move
        completed in the periods uses up the periods that ran out and leaves main time at 0.
        """
        check_count("elapsed_ms", elapsed_ms, InvalidInstantError)
        if elapsed_ms >= self.limit_ms(seat):
            raise ClockStateError(f"a move that took {elapsed_ms} ms completed after the flag")
        if elapsed_ms < seat.main_ms:
            left = seat.main_ms - elapsed_ms
            return SeatTime(self._credit(left, elapsed_ms) if earns_increment else left, seat.periods_left)
        return SeatTime(0, self.status(seat, elapsed_ms).periods_left)

    def _credit(self, left_ms: int, elapsed_ms: int) -> int:
        """Main time after the increment a move of ``elapsed_ms`` leaving ``left_ms`` earns."""
        if self.increment_within_ms is not None and elapsed_ms > self.increment_within_ms:
            return left_ms
        earned = left_ms + self.increment_ms
        # The cap limits what the increment adds; it never takes away time a seat already has.
        return earned if self.cap_ms is None else max(left_ms, min(earned, self.cap_ms))

    def to_dict(self) -> dict[str, object]:
        """The JSON form (``kind`` is informative; :meth:`from_dict` derives it again)."""
        return {
            "kind": self.kind.value,
            "base_ms": self.base_ms,
            "increment_ms": self.increment_ms,
            "increment_within_ms": self.increment_within_ms,
            "cap_ms": self.cap_ms,
            "periods": self.periods,
            "period_ms": self.period_ms,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> TimeControl:
        """Rebuild from :meth:`to_dict`; raises :class:`ClockFormatError`."""
        try:
            control = cls(
                int_field(data, "base_ms"),
                int_field(data, "increment_ms"),
                optional_int_field(data, "increment_within_ms"),
                optional_int_field(data, "cap_ms"),
                int_field(data, "periods"),
                int_field(data, "period_ms"),
            )
        except ClockFormatError:
            raise
        except ClockError as error:
            raise ClockFormatError(str(error)) from error
        if "kind" in data and data["kind"] != control.kind.value:
            raise ClockFormatError(f"kind {data['kind']!r} does not match the settings ({control.kind})")
        return control


BACKGAMMON_QUICK: Final = TimeControl.capped_bonus(30 * SECOND_MS, 10 * SECOND_MS, 10 * SECOND_MS)
"""Seed 002 "Quick Game": 30 s, +10 s for a move within 10 s, capped at 30 s."""
BACKGAMMON_STANDARD: Final = TimeControl.capped_bonus(2 * MINUTE_MS, 20 * SECOND_MS, 20 * SECOND_MS)
"""Seed 002 "Single Game" and "Match": 2 min, +20 s for a move within 20 s, capped at 2 min."""
CHESS_LOBBY_CONTROLS: Final = tuple(
    TimeControl.sudden_death(minutes * MINUTE_MS) for minutes in (3, 5, 10, 20, 30)
)
"""Seed 000, chess head-to-head tables: 3, 5, 10, 20 or 30 minutes per player, no increment."""
GENERALS_CONTROLS: Final = tuple(TimeControl.per_move(seconds * SECOND_MS) for seconds in (30, 60, 120))
"""Seed 004, Game of the Generals: 30 s, 1 min or 2 min per move, fresh each move; the third strike loses."""
GENERALS_DEFAULT: Final = GENERALS_CONTROLS[1]
"""Seed 004: "1 minute (the default)"."""
