"""Time controls: the named constructors, their kinds, validation, status arithmetic and JSON form."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from libs.clocks import (
    BACKGAMMON_QUICK,
    BACKGAMMON_STANDARD,
    SECOND_MS,
    ClockError,
    ClockFormatError,
    ClockKind,
    ClockStateError,
    InvalidInstantError,
    InvalidTimeControlError,
    SeatStatus,
    SeatTime,
    TimeControl,
)

S = SECOND_MS


@pytest.mark.parametrize(
    ("control", "kind"),
    [
        (TimeControl.sudden_death(180 * S), ClockKind.SUDDEN_DEATH),
        (TimeControl.fischer(180 * S, 2 * S), ClockKind.FISCHER),
        (TimeControl.fischer(180 * S, 0), ClockKind.SUDDEN_DEATH),
        (BACKGAMMON_QUICK, ClockKind.CAPPED_BONUS),
        (TimeControl.byo_yomi(600 * S, 5, 30 * S), ClockKind.BYO_YOMI),
        (TimeControl.byo_yomi(0, 5, 30 * S), ClockKind.PER_MOVE),
        (TimeControl.per_move(60 * S), ClockKind.PER_MOVE),
    ],
)
def test_kind_is_derived_from_the_settings(control: TimeControl, kind: ClockKind) -> None:
    assert control.kind is kind


def test_presets_follow_seed_002() -> None:
    assert TimeControl(30 * S, 10 * S, increment_within_ms=10 * S, cap_ms=30 * S) == BACKGAMMON_QUICK
    assert TimeControl(120 * S, 20 * S, increment_within_ms=20 * S, cap_ms=120 * S) == BACKGAMMON_STANDARD


def test_per_move_is_periods_without_main_time() -> None:
    control = TimeControl.per_move(30 * S, strikes_to_lose=3)
    assert (control.base_ms, control.periods, control.period_ms) == (0, 3, 30 * S)
    assert control.initial_seat() == SeatTime(0, 3)
    assert control.limit_ms(SeatTime(0, 2)) == 60 * S


@pytest.mark.parametrize(
    "build",
    [
        lambda: TimeControl(-1),
        lambda: TimeControl(0),
        lambda: TimeControl(True),
        lambda: TimeControl(1.5),  # type: ignore[arg-type]
        lambda: TimeControl(60 * S, -1),
        lambda: TimeControl(60 * S, periods=3),
        lambda: TimeControl(60 * S, period_ms=30 * S),
        lambda: TimeControl(60 * S, 1 * S, periods=3, period_ms=30 * S),
        lambda: TimeControl(60 * S, increment_within_ms=10 * S),
        lambda: TimeControl(60 * S, cap_ms=60 * S),
        lambda: TimeControl(60 * S, 10 * S, cap_ms=30 * S),
        lambda: TimeControl.capped_bonus(30 * S, 10 * S, -1),
        lambda: TimeControl.per_move(0),
        lambda: TimeControl.per_move(30 * S, strikes_to_lose=0),
    ],
)
def test_invalid_settings_are_refused(build: Callable[[], object]) -> None:
    with pytest.raises(InvalidTimeControlError):
        build()


def test_errors_are_value_errors() -> None:
    assert issubclass(InvalidTimeControlError, ClockError)
    assert issubclass(ClockError, ValueError)


def test_status_in_main_time_then_periods() -> None:
    control = TimeControl.byo_yomi(10 * S, 2, 5 * S)
    seat = control.initial_seat()
    assert control.status(seat, 0) == SeatStatus(10 * S, 20 * S, 2, 0, False)
    assert control.status(seat, 10 * S) == SeatStatus(5 * S, 10 * S, 2, 0, True)
    assert control.status(seat, 15 * S) == SeatStatus(5 * S, 5 * S, 1, 1, True)
    assert control.status(seat, 19_999) == SeatStatus(1, 1, 1, 1, True)
    flagged = SeatStatus(0, 0, 0, 2, True)
    assert control.status(seat, 20 * S) == flagged
    assert control.status(seat, 10**9) == flagged
    assert flagged.is_flagged


def test_status_without_periods_stops_at_zero() -> None:
    control = TimeControl.sudden_death(10 * S)
    assert control.status(control.initial_seat(), 11 * S) == SeatStatus(0, 0, 0, 0, False)


def test_after_move_refuses_a_move_after_the_flag_and_negative_time() -> None:
    control = TimeControl.sudden_death(10 * S)
    with pytest.raises(ClockStateError):
        control.after_move(control.initial_seat(), 10 * S)
    with pytest.raises(InvalidInstantError):
        control.after_move(control.initial_seat(), -1)
    with pytest.raises(InvalidInstantError):
        control.status(control.initial_seat(), -1)


def test_cap_never_takes_time_away() -> None:
    """A seat above the cap (only possible through a hand-built SeatTime) keeps its time on a bonus."""
    control = TimeControl.capped_bonus(30 * S, 10 * S, 10 * S)
    assert control.after_move(SeatTime(50 * S), 1 * S) == SeatTime(49 * S)


@pytest.mark.parametrize(
    "control",
    [
        TimeControl.sudden_death(1),
        TimeControl.fischer(5 * S, 3 * S),
        BACKGAMMON_QUICK,
        TimeControl.capped_bonus(30 * S, 5 * S, 7 * S, 45 * S),
        TimeControl.byo_yomi(60 * S, 5, 30 * S),
        TimeControl.per_move(120 * S),
    ],
)
def test_json_round_trip(control: TimeControl) -> None:
    data = json.loads(json.dumps(control.to_dict()))
    assert data["kind"] == control.kind.value
    assert TimeControl.from_dict(data) == control


@pytest.mark.parametrize(
    "change",
    [
        {"base_ms": -5},
        {"base_ms": "60000"},
        {"base_ms": None},
        {"increment_ms": True},
        {"periods": 2},
        {"kind": "fischer"},
        {"cap_ms": 1},
    ],
)
def test_from_dict_refuses_bad_data(change: dict[str, object]) -> None:
    data = {**BACKGAMMON_QUICK.to_dict(), **change}
    with pytest.raises(ClockFormatError):
        TimeControl.from_dict(data)


def test_from_dict_needs_every_field() -> None:
    data = TimeControl.sudden_death(S).to_dict()
    del data["period_ms"]
    with pytest.raises(ClockFormatError):
        TimeControl.from_dict(data)


def test_seat_time_is_checked() -> None:
    with pytest.raises(ClockFormatError):
        SeatTime(-1)
    with pytest.raises(ClockFormatError):
        SeatTime(0, -1)
    assert SeatTime.from_dict({"main_ms": 5, "periods_left": 1}) == SeatTime(5, 1)
