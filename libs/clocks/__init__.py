"""Pure game clocks for SkillClassics (documentation: ``docs/clocks.md``).

Clocks are immutable values in integer milliseconds that never read the time: every operation takes
``now_ms`` from the caller and returns a new clock or raises a :class:`ClockError`.
:mod:`libs.clocks.control` holds the time controls (sudden death, Fischer, capped bonus, byo-yomi,
per move with strikes) as one mechanism; :mod:`libs.clocks.clock` holds the :class:`Clock` value with
its start / press / pause / resume operations, snapshots and JSON form.
"""

from libs.clocks.clock import CLOCK_FORMAT, Clock, ClockAction, ClockEvent, ClockView, PressResult
from libs.clocks.control import (
    BACKGAMMON_QUICK,
    BACKGAMMON_STANDARD,
    CHESS_LOBBY_CONTROLS,
    GENERALS_CONTROLS,
    GENERALS_DEFAULT,
    MINUTE_MS,
    SECOND_MS,
    ClockKind,
    SeatStatus,
    SeatTime,
    TimeControl,
)
from libs.clocks.errors import (
    ClockError,
    ClockFormatError,
    ClockStateError,
    FlagFallenError,
    InvalidInstantError,
    InvalidSeatError,
    InvalidTimeControlError,
)

__all__ = [
    "BACKGAMMON_QUICK",
    "BACKGAMMON_STANDARD",
    "CHESS_LOBBY_CONTROLS",
    "CLOCK_FORMAT",
    "GENERALS_CONTROLS",
    "GENERALS_DEFAULT",
    "MINUTE_MS",
    "SECOND_MS",
    "Clock",
    "ClockAction",
    "ClockError",
    "ClockEvent",
    "ClockFormatError",
    "ClockKind",
    "ClockStateError",
    "ClockView",
    "FlagFallenError",
    "InvalidInstantError",
    "InvalidSeatError",
    "InvalidTimeControlError",
    "PressResult",
    "SeatStatus",
    "SeatTime",
    "TimeControl",
]
