"""The errors of the clock library: every one is a :class:`ClockError`, itself a :class:`ValueError`."""

from __future__ import annotations

__all__ = [
    "ClockError",
    "ClockFormatError",
    "ClockStateError",
    "FlagFallenError",
    "InvalidInstantError",
    "InvalidSeatError",
    "InvalidTimeControlError",
]


class ClockError(ValueError):
    """Base class of every error raised by :mod:`libs.clocks`."""


class InvalidTimeControlError(ClockError):
    """The parameters do not describe a time control (negative time, periods without a length, ...)."""


class ClockFormatError(ClockError):
    """The data do not describe a valid clock (bad JSON shape or inconsistent fields)."""


class InvalidSeatError(ClockError):
    """A seat number outside ``0 <= seat < seat_count``."""


class InvalidInstantError(ClockError):
    """``now_ms`` is negative or earlier than the clock's last event: time never runs backwards."""


class ClockStateError(ClockError):
    """The operation is not allowed in the clock's state (pressing a paused clock, starting twice, ...)."""


class FlagFallenError(ClockError):
    """A press at or after the instant the mover's time ran out: the move does not count.

    Pressing exactly at the flag instant is a flag; one millisecond earlier is not. The clock is left
    unchanged; the caller decides what the flag means (loss, draw against a lone king, lost skirmish).
    """

    seat: int
    """The seat whose time ran out."""
    flag_at_ms: int
    """The instant the flag fell."""

    def __init__(self, seat: int, flag_at_ms: int) -> None:
        super().__init__(f"seat {seat} flagged at {flag_at_ms} ms")
        self.seat = seat
        self.flag_at_ms = flag_at_ms
