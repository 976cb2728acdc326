"""The game clock: an immutable value whose every operation takes ``now_ms`` and returns a new clock.

The clock never reads time. The caller passes ``now_ms``, an instant in milliseconds on a monotonic
time line of its choosing, which must never go backwards for one clock. The clock keeps the per-seat
:class:`~libs.clocks.control.SeatTime`, the seat to move, the time already charged to the current
turn and the instant of its last event; everything else (remaining time, flag instant, periods and
strikes) is derived from those and an instant. Because every operation is a pure function of the
clock and its arguments, replaying the logged events with their recorded instants rebuilds exactly the
same clock (:meth:`Clock.replay`).

Lifecycle: :meth:`Clock.new` (not started) -> :meth:`Clock.start` (running) -> :meth:`Clock.press` (the
mover completed a move; the next seat runs) and :meth:`Clock.pause` / :meth:`Clock.resume` (nothing is
charged while paused).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from libs.clocks._fields import check_count, int_field, mapping_field
from libs.clocks.control import ClockKind, SeatStatus, SeatTime, TimeControl
from libs.clocks.errors import (
    ClockError,
    ClockFormatError,
    ClockStateError,
    FlagFallenError,
    InvalidInstantError,
    InvalidSeatError,
)

__all__ = ["CLOCK_FORMAT", "Clock", "ClockAction", "ClockEvent", "ClockView", "PressResult"]

CLOCK_FORMAT: Final = "skillclassics.clock/1"
"""The ``format`` tag of :meth:`Clock.to_dict`."""


class ClockAction(StrEnum):
    """What happened to a clock, for event logs replayed with :meth:`Clock.apply`."""

    START = "start"
    PRESS = "press"
    PAUSE = "pause"
    RESUME = "resume"


@dataclass(frozen=True, slots=True)
class ClockEvent:
    """One logged clock operation and the instant it happened."""

    action: ClockAction
    """The operation."""
    at_ms: int
    """The instant passed as ``now_ms``."""
    seat: int | None = None
    """``START``: the seat to move (``None`` = seat 0); ``PRESS``: the next seat (``None`` = the
    following seat in order); unused otherwise."""


@dataclass(frozen=True, slots=True)
class PressResult:
    """The outcome of a press in time: the new clock and what the move cost and earned."""

    clock: Clock
    """The clock after the move, running for the next seat."""
    seat: int
    """The seat that moved."""
    charged_ms: int
    """The move's time: from the turn passing to the seat until the press, paused time excluded."""
    credited_ms: int
    """Increment or bonus added to the seat's main time (after the cap)."""
    periods_used: int
    """Periods used up during this move (Game of the Generals: strikes taken on this move)."""


@dataclass(frozen=True, slots=True)
class ClockView:
    """A serialisable snapshot of a clock at one instant, for views and the tiebreak."""

    at_ms: int
    """The instant of the snapshot."""
    kind: ClockKind
    """The time control's kind."""
    seats: tuple[SeatStatus, ...]
    """Each seat's time at ``at_ms``, by seat number."""
    to_move: int | None
    """The seat whose turn it is (``None`` before the start)."""
    paused: bool
    """The clock is paused: nobody's time is running."""

    @property
    def running_seat(self) -> int | None:
        """The seat whose time is running (``None`` before the start and while paused)."""
        return None if self.paused else self.to_move

    @property
    def is_flagged(self) -> bool:
        """The seat to move has run out of time."""
        return self.to_move is not None and self.seats[self.to_move].is_flagged

    def to_dict(self) -> dict[str, object]:
        """The JSON form of the snapshot (plain JSON types only)."""
        return {
            "at_ms": self.at_ms,
            "kind": self.kind.value,
            "to_move": self.to_move,
            "running_seat": self.running_seat,
            "paused": self.paused,
            "flagged": self.is_flagged,
            "seats": [status.to_dict() for status in self.seats],
        }


@dataclass(frozen=True, slots=True)
class Clock:
    """A game clock for ``len(seats)`` seats (usually 2). Build it with :meth:`new`.

    Every method that takes ``now_ms`` raises :class:`InvalidInstantError` if it is negative or earlier
    than :attr:`since_ms`, and every ``seat`` argument is checked (:class:`InvalidSeatError`). Direct
    construction validates the fields (:class:`ClockFormatError`).
    """

    control: TimeControl
    """The time control, the same for every seat."""
    seats: tuple[SeatTime, ...]
    """Each seat's time as of the start of the current turn."""
    to_move: int | None = None
    """The seat whose turn it is; ``None`` before :meth:`start`."""
    turn_elapsed_ms: int = 0
    """Time charged to the current turn before :attr:`since_ms` (the turn's running time before a
    pause); 0 when a turn starts."""
    since_ms: int | None = None
    """The instant of the last start, press, pause or resume; ``None`` before :meth:`start`."""
    paused: bool = False
    """Nobody's time is running until :meth:`resume`."""

    def __post_init__(self) -> None:
        if not isinstance(self.control, TimeControl):
            raise ClockFormatError("control must be a TimeControl")
        if not isinstance(self.seats, tuple) or not self.seats:
            raise ClockFormatError("seats must be a non-empty tuple")
        for seat in self.seats:
            if not isinstance(seat, SeatTime):
                raise ClockFormatError("seats must hold SeatTime values")
            if seat.periods_left > self.control.periods:
                raise ClockFormatError(f"a seat has more periods than the control's {self.control.periods}")
            if self.control.limit_ms(seat) == 0:
                raise ClockFormatError("a seat between turns cannot be out of time")
        check_count("turn_elapsed_ms", self.turn_elapsed_ms, ClockFormatError)
        if self.to_move is None:
            if self.since_ms is not None or self.turn_elapsed_ms or self.paused:
                raise ClockFormatError("a clock that has not started has no instant, elapsed time or pause")
            return
        check_count("to_move", self.to_move, ClockFormatError)
        if self.to_move >= len(self.seats):
            raise ClockFormatError(f"to_move {self.to_move} is not one of the {len(self.seats)} seats")
        if self.since_ms is None:
            raise ClockFormatError("a started clock needs since_ms")
        check_count("since_ms", self.since_ms, ClockFormatError)

    @classmethod
    def new(cls, control: TimeControl, seat_count: int = 2) -> Clock:
        """A clock that has not started, every seat with the control's initial time."""
        check_count("seat_count", seat_count, ClockFormatError, minimum=1)
        return cls(control, (control.initial_seat(),) * seat_count)

    # -- state -------------------------------------------------------------------------------------

    @property
    def is_started(self) -> bool:
        """:meth:`start` has been called."""
        return self.to_move is not None

    @property
    def is_running(self) -> bool:
        """The mover's time is running (started and not paused)."""
        return self.is_started and not self.paused

    # -- operations --------------------------------------------------------------------------------

    def start(self, now_ms: int, to_move: int = 0) -> Clock:
        """Start timing the turn of ``to_move`` at ``now_ms``.

        Raises :class:`ClockStateError` if the clock has already started.
        """
        self._check_now(now_ms)
        if self.is_started:
            raise ClockStateError("the clock has already started")
        return Clock(self.control, self.seats, self._check_seat(to_move), 0, now_ms)

    def press(self, now_ms: int, *, to_move: int | None = None) -> PressResult:
        """The mover completed a move at ``now_ms``: charge it, credit it, and run ``to_move``'s turn.

        ``to_move`` defaults to the next seat in order. Raises :class:`ClockStateError` unless the clock
        is running, and :class:`FlagFallenError` (the clock unchanged) if ``now_ms`` is at or after
        :meth:`flag_at_ms`: a late move never counts silently.
        """
        return self._end_turn(now_ms, to_move, "press", earns_increment=True)

    def pass_turn(self, now_ms: int, *, to_move: int) -> PressResult:
        """The mover's turn ended at ``now_ms`` without a move of theirs (a backgammon roll with no legal
        play forfeits the turn): charge it as a move, with no increment or bonus (nothing was played),
        and run ``to_move``'s turn. Raises as :meth:`press` does."""
        return self._end_turn(now_ms, to_move, "pass the turn", earns_increment=False)

    def _end_turn(
        self, now_ms: int, to_move: int | None, action: str, *, earns_increment: bool
    ) -> PressResult:
        self._check_now(now_ms)
        mover = self._require_running(action)
        following = (mover + 1) % len(self.seats) if to_move is None else self._check_seat(to_move)
        charged = self.elapsed_ms(now_ms)
        before = self.seats[mover]
        if charged >= self.control.limit_ms(before):
            raise FlagFallenError(mover, self._flag_instant(mover))
        after = self.control.after_move(before, charged, earns_increment=earns_increment)
        clock = Clock(self.control, self._with_seat(mover, after), following, 0, now_ms)
        return PressResult(
            clock=clock,
            seat=mover,
            charged_ms=charged,
            credited_ms=after.main_ms - max(0, before.main_ms - charged),
            periods_used=before.periods_left - after.periods_left,
        )

    def pause(self, now_ms: int) -> Clock:
        """Stop the mover's time at ``now_ms``, keeping what the turn has used so far.

        Allowed even after the flag (to freeze a finished game's clock); the flag stays fallen.
        Raises :class:`ClockStateError` unless the clock is running.
        """
        self._check_now(now_ms)
        mover = self._require_running("pause")
        return Clock(self.control, self.seats, mover, self.elapsed_ms(now_ms), now_ms, paused=True)

    def resume(self, now_ms: int) -> Clock:
        """Restart the paused mover's time at ``now_ms``; the turn goes on where it stopped.

        Raises :class:`ClockStateError` unless the clock is paused.
        """
        self._check_now(now_ms)
        if not self.paused:
            raise ClockStateError("cannot resume: the clock is not paused")
        return Clock(self.control, self.seats, self.to_move, self.turn_elapsed_ms, now_ms)

    def hand_over(self, now_ms: int, to_move: int) -> Clock:
        """Restart a paused clock at ``now_ms`` with ``to_move``'s turn, charging and crediting nobody:
        the end of a phase no clock timed (a pause between the games of a match), after which the
        game's next mover may be either seat.

        Raises :class:`ClockStateError` unless the clock is paused.
        """
        self._check_now(now_ms)
        if not self.paused:
            raise ClockStateError("cannot hand over: the clock is not paused")
        return Clock(self.control, self.seats, self._check_seat(to_move), 0, now_ms)

    def apply(self, event: ClockEvent) -> Clock:
        """The clock after one logged event (a press's :class:`PressResult` is reduced to its clock)."""
        match event.action:
            case ClockAction.START:
                return self.start(event.at_ms, 0 if event.seat is None else event.seat)
            case ClockAction.PRESS:
                return self.press(event.at_ms, to_move=event.seat).clock
            case ClockAction.PAUSE:
                return self.pause(event.at_ms)
            case ClockAction.RESUME:
                return self.resume(event.at_ms)
        raise ClockStateError(f"unknown clock action {event.action!r}")  # pragma: no cover

    def replay(self, events: Iterable[ClockEvent]) -> Clock:
        """The clock after applying ``events`` in order (how a service rebuilds a clock from its log)."""
        clock = self
        for event in events:
            clock = clock.apply(event)
        return clock

    # -- queries -----------------------------------------------------------------------------------

    def elapsed_ms(self, now_ms: int) -> int:
        """Time charged to the current turn by ``now_ms``, paused time excluded (0 before the start)."""
        self._check_now(now_ms)
        if self.since_ms is None:
            return 0
        return self.turn_elapsed_ms + (0 if self.paused else now_ms - self.since_ms)

    def status(self, seat: int, now_ms: int) -> SeatStatus:
        """``seat``'s time at ``now_ms``: remaining, periods or strikes, whether it flagged."""
        elapsed = self.elapsed_ms(now_ms)  # checks now_ms whichever seat is asked about
        own_turn = self._check_seat(seat) == self.to_move
        return self.control.status(self.seats[seat], elapsed if own_turn else 0)

    def remaining_ms(self, seat: int, now_ms: int) -> int:
        """What ``seat``'s clock face shows at ``now_ms`` (see :attr:`SeatStatus.remaining_ms`); >= 0."""
        return self.status(seat, now_ms).remaining_ms

    def is_flagged(self, now_ms: int) -> bool:
        """The seat to move has run out of time by ``now_ms`` (checked also while paused)."""
        return self.to_move is not None and self.status(self.to_move, now_ms).is_flagged

    def flag_at_ms(self) -> int | None:
        """The instant the mover flags if no move comes first; ``None`` before the start or while paused.

        It may lie before :attr:`since_ms` for a clock resumed after its flag fell.
        """
        if self.to_move is None or self.paused:
            return None
        return self._flag_instant(self.to_move)

    def next_event_at_ms(self, now_ms: int) -> int | None:
        """The first instant after ``now_ms`` at which the mover's status changes by itself.

        That is the flag, the end of main time (entering byo-yomi), or the end of the current period
        (a used period; in Game of the Generals the next strike). ``None`` before the start, while
        paused, or once flagged. A service arms its deadline timer here.
        """
        if self.to_move is None or self.paused:
            self._check_now(now_ms)
            return None
        status = self.status(self.to_move, now_ms)
        return None if status.is_flagged else now_ms + status.remaining_ms

    def view(self, now_ms: int) -> ClockView:
        """A snapshot of every seat at ``now_ms``."""
        statuses = tuple(self.status(seat, now_ms) for seat in range(len(self.seats)))
        return ClockView(now_ms, self.control.kind, statuses, self.to_move, self.paused)

    # -- persistence -------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, object]:
        """The JSON form (plain JSON types only); :meth:`from_dict` rebuilds an equal clock."""
        return {
            "format": CLOCK_FORMAT,
            "control": self.control.to_dict(),
            "seats": [seat.to_dict() for seat in self.seats],
            "to_move": self.to_move,
            "turn_elapsed_ms": self.turn_elapsed_ms,
            "since_ms": self.since_ms,
            "paused": self.paused,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Clock:
        """Rebuild a clock from :meth:`to_dict`; raises :class:`ClockFormatError`."""
        if data.get("format") != CLOCK_FORMAT:
            raise ClockFormatError(f"format must be {CLOCK_FORMAT!r}, got {data.get('format')!r}")
        seats = data.get("seats")
        if not isinstance(seats, list) or not all(isinstance(seat, Mapping) for seat in seats):
            raise ClockFormatError("seats must be a list of objects")
        paused = data.get("paused")
        if not isinstance(paused, bool):
            raise ClockFormatError("paused must be a boolean")
        try:
            return cls(
                TimeControl.from_dict(mapping_field(data, "control")),
                tuple(SeatTime.from_dict(seat) for seat in seats),
                None if data.get("to_move") is None else int_field(data, "to_move"),
                int_field(data, "turn_elapsed_ms"),
                None if data.get("since_ms") is None else int_field(data, "since_ms"),
                paused,
            )
        except ClockFormatError:
            raise
        except ClockError as error:
            raise ClockFormatError(str(error)) from error

    # -- helpers -----------------------------------------------------------------------------------

    def _check_now(self, now_ms: int) -> None:
        check_count("now_ms", now_ms, InvalidInstantError)
        if self.since_ms is not None and now_ms < self.since_ms:
            raise InvalidInstantError(f"now_ms {now_ms} is before the clock's last event at {self.since_ms}")

    def _check_seat(self, seat: int) -> int:
        check_count("seat", seat, InvalidSeatError)
        if seat >= len(self.seats):
            raise InvalidSeatError(f"seat {seat} is not one of the {len(self.seats)} seats")
        return seat

    def _require_running(self, action: str) -> int:
        if self.to_move is None:
            raise ClockStateError(f"cannot {action}: the clock has not started")
        if self.paused:
            raise ClockStateError(f"cannot {action}: the clock is paused")
        return self.to_move

    def _flag_instant(self, seat: int) -> int:
        assert self.since_ms is not None  # only called for a started clock
        return self.since_ms + self.control.limit_ms(self.seats[seat]) - self.turn_elapsed_ms

    def _with_seat(self, index: int, seat: SeatTime) -> tuple[SeatTime, ...]:
        return (*self.seats[:index], seat, *self.seats[index + 1 :])
