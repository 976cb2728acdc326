"""The clock value: lifecycle, errors, pauses, snapshots, persistence and replay."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import pytest

from libs.clocks import (
    BACKGAMMON_QUICK,
    CLOCK_FORMAT,
    SECOND_MS,
    Clock,
    ClockAction,
    ClockError,
    ClockEvent,
    ClockFormatError,
    ClockKind,
    ClockStateError,
    FlagFallenError,
    InvalidInstantError,
    InvalidSeatError,
    SeatTime,
    TimeControl,
)

S = SECOND_MS
BLITZ = TimeControl.fischer(60 * S, 1 * S)


def test_new_clock_has_not_started() -> None:
    clock = Clock.new(BLITZ)
    assert clock.seats == (SeatTime(60 * S), SeatTime(60 * S))
    assert not clock.is_started
    assert not clock.is_running
    assert clock.flag_at_ms() is None
    assert clock.next_event_at_ms(5) is None
    assert not clock.is_flagged(10**9)
    assert clock.elapsed_ms(10**9) == 0
    assert clock.remaining_ms(0, 10**9) == 60 * S


def test_operations_return_new_clocks_and_leave_the_old_one_alone() -> None:
    clock = Clock.new(BLITZ)
    started = clock.start(100)
    assert started is not clock
    assert not clock.is_started
    pressed = started.press(2_100).clock
    assert started.to_move == 0
    assert started.seats == clock.seats
    assert pressed.to_move == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        pressed.to_move = 0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("clock", "operation", "error"),
    [
        (Clock.new(BLITZ), lambda c: c.press(0), ClockStateError),
        (Clock.new(BLITZ), lambda c: c.pause(0), ClockStateError),
        (Clock.new(BLITZ), lambda c: c.resume(0), ClockStateError),
        (Clock.new(BLITZ).start(0), lambda c: c.start(1), ClockStateError),
        (Clock.new(BLITZ).start(0), lambda c: c.resume(1), ClockStateError),
        (Clock.new(BLITZ).start(0).pause(5), lambda c: c.press(6), ClockStateError),
        (Clock.new(BLITZ).start(0).pause(5), lambda c: c.pause(6), ClockStateError),
        (Clock.new(BLITZ), lambda c: c.start(-1), InvalidInstantError),
        (Clock.new(BLITZ).start(10), lambda c: c.press(9), InvalidInstantError),
        (Clock.new(BLITZ).start(10), lambda c: c.remaining_ms(0, 9), InvalidInstantError),
        (Clock.new(BLITZ).start(10), lambda c: c.remaining_ms(1, 9), InvalidInstantError),
        (Clock.new(BLITZ).start(10), lambda c: c.view(9), InvalidInstantError),
        (Clock.new(BLITZ).start(10), lambda c: c.is_flagged(9), InvalidInstantError),
        (Clock.new(BLITZ).start(10), lambda c: c.next_event_at_ms(9), InvalidInstantError),
        (Clock.new(BLITZ).start(10).pause(20), lambda c: c.resume(19), InvalidInstantError),
        (Clock.new(BLITZ).start(10).pause(20), lambda c: c.next_event_at_ms(19), InvalidInstantError),
        (Clock.new(BLITZ), lambda c: c.start(0, to_move=2), InvalidSeatError),
        (Clock.new(BLITZ), lambda c: c.start(0, to_move=-1), InvalidSeatError),
        (Clock.new(BLITZ).start(0), lambda c: c.press(1, to_move=2), InvalidSeatError),
        (Clock.new(BLITZ).start(0), lambda c: c.status(2, 1), InvalidSeatError),
        (Clock.new(BLITZ).start(0), lambda c: c.press(60 * S), FlagFallenError),
    ],
)
def test_misuse_raises_a_narrow_value_error(
    clock: Clock, operation: Callable[[Clock], object], error: type[ClockError]
) -> None:
    with pytest.raises(error) as raised:
        operation(clock)
    assert isinstance(raised.value, ValueError)


def test_press_charges_the_mover_and_passes_the_turn() -> None:
    clock = Clock.new(BLITZ).start(1_000)
    result = clock.press(4_500)
    assert (result.seat, result.charged_ms, result.credited_ms, result.periods_used) == (0, 3_500, S, 0)
    assert result.clock.to_move == 1
    assert result.clock.since_ms == 4_500
    assert result.clock.seats[0] == SeatTime(60 * S - 3_500 + S)
    assert result.clock.seats[1] == SeatTime(60 * S)
    assert result.clock.flag_at_ms() == 4_500 + 60 * S


def test_press_may_name_the_next_seat() -> None:
    clock = Clock.new(BLITZ).start(0).press(1_000, to_move=0).clock
    assert clock.to_move == 0
    assert clock.elapsed_ms(1_000) == 0


def test_a_passed_turn_is_charged_like_a_move_but_earns_nothing() -> None:
    # Fischer: a press after 3.5 s earns the 1 s increment; a passed turn (a roll with no legal play) not.
    result = Clock.new(BLITZ).start(1_000).pass_turn(4_500, to_move=1)
    assert (result.seat, result.charged_ms, result.credited_ms, result.periods_used) == (0, 3_500, 0, 0)
    assert result.clock.seats[0] == SeatTime(60 * S - 3_500)
    assert (result.clock.to_move, result.clock.since_ms) == (1, 4_500)
    # Seed 002's quick clock: the bonus for a move within 10 s is not earned by a turn that had no move.
    quick = Clock.new(BACKGAMMON_QUICK).start(0).press(20_000).clock  # seat 0 down to 10 s, no bonus
    assert quick.press(21_000).clock.seats[1] == SeatTime(30 * S)  # (seat 1 already at the 30 s cap)
    assert quick.press(21_000).clock.press(22_000).clock.seats[0] == SeatTime(19 * S)  # a move: +10 s
    assert quick.press(21_000).clock.pass_turn(22_000, to_move=1).clock.seats[0] == SeatTime(9 * S)
    # Byo-yomi: periods run out as in a move, and one passed within a period keeps the rest.
    byo = Clock.new(TimeControl.byo_yomi(10 * S, 3, 5 * S)).start(0)
    assert byo.pass_turn(17_000, to_move=1).clock.seats[0] == SeatTime(0, 2)
    with pytest.raises(FlagFallenError):
        byo.pass_turn(25_000, to_move=1)


def test_three_seats_take_turns_in_order() -> None:
    clock = Clock.new(TimeControl.sudden_death(10 * S), seat_count=3).start(0)
    movers = []
    for now in (1_000, 2_000, 3_000, 4_000):
        result = clock.press(now)
        movers.append(result.seat)
        clock = result.clock
    assert movers == [0, 1, 2, 0]
    assert [seat.main_ms for seat in clock.seats] == [8 * S, 9 * S, 9 * S]


def test_nothing_is_charged_while_paused() -> None:
    """Skirmish Chess: the main clocks stop during a skirmish and the turn goes on afterwards."""
    clock = Clock.new(BLITZ).start(0)
    paused = clock.pause(10 * S)
    assert paused.paused
    assert not paused.is_running
    assert paused.flag_at_ms() is None
    assert paused.next_event_at_ms(10 * S) is None
    assert paused.remaining_ms(0, 10 * S) == paused.remaining_ms(0, 500 * S) == 50 * S
    resumed = paused.resume(500 * S)
    assert resumed.remaining_ms(0, 505 * S) == 45 * S
    assert resumed.flag_at_ms() == 550 * S
    assert resumed.press(505 * S).charged_ms == 15 * S


def test_a_pause_after_the_flag_keeps_the_flag() -> None:
    clock = Clock.new(BLITZ).start(0)
    frozen = clock.pause(70 * S)
    assert frozen.is_flagged(70 * S)
    assert frozen.view(80 * S).is_flagged
    resumed = frozen.resume(90 * S)
    assert resumed.is_flagged(90 * S)
    assert resumed.flag_at_ms() == 80 * S  # it fell before the resume
    with pytest.raises(FlagFallenError) as raised:
        resumed.press(91 * S)
    assert raised.value.seat == 0


def test_view_snapshot_and_json() -> None:
    clock = Clock.new(TimeControl.per_move(30 * S)).start(0).press(40 * S).clock
    view = clock.view(45 * S)
    assert view.kind is ClockKind.PER_MOVE
    assert view.running_seat == 1
    assert not view.is_flagged
    assert view.to_dict() == {
        "at_ms": 45 * S,
        "kind": "per_move",
        "to_move": 1,
        "running_seat": 1,
        "paused": False,
        "flagged": False,
        "seats": [
            {
                "remaining_ms": 30 * S,
                "until_flag_ms": 60 * S,
                "periods_left": 2,
                "periods_used": 1,
                "in_periods": True,
                "flagged": False,
            },
            {
                "remaining_ms": 25 * S,
                "until_flag_ms": 85 * S,
                "periods_left": 3,
                "periods_used": 0,
                "in_periods": True,
                "flagged": False,
            },
        ],
    }
    paused = clock.pause(50 * S).view(60 * S)
    assert paused.running_seat is None
    assert paused.to_dict()["paused"] is True
    assert Clock.new(BLITZ).view(0).to_dict()["to_move"] is None


def test_next_event_walks_through_every_strike_to_the_flag() -> None:
    clock = Clock.new(TimeControl.per_move(10 * S)).start(3)
    instants = []
    now: int | None = 3
    while now is not None:
        instants.append(now)
        now = clock.next_event_at_ms(now)
    assert instants == [3, 10_003, 20_003, 30_003]
    assert clock.flag_at_ms() == 30_003


@pytest.mark.parametrize(
    "clock",
    [
        Clock.new(BLITZ),
        Clock.new(BLITZ).start(7, to_move=1),
        Clock.new(BACKGAMMON_QUICK).start(0).press(3 * S).clock.pause(9 * S),
        Clock.new(TimeControl.byo_yomi(5 * S, 3, 2 * S), seat_count=3).start(0).press(9 * S).clock,
    ],
)
def test_json_round_trip(clock: Clock) -> None:
    data = json.loads(json.dumps(clock.to_dict()))
    assert data["format"] == CLOCK_FORMAT
    assert Clock.from_dict(data) == clock


@pytest.mark.parametrize(
    "change",
    [
        {"format": "clock/0"},
        {"seats": []},
        {"seats": {"main_ms": 1}},
        {"seats": [1, 2]},
        {"seats": [{"main_ms": 1}]},
        {"seats": [{"main_ms": 1, "periods_left": 1}]},
        {"seats": [{"main_ms": 0, "periods_left": 0}]},
        {"to_move": 2},
        {"to_move": True},
        {"since_ms": None},
        {"since_ms": -1},
        {"turn_elapsed_ms": -1},
        {"paused": 0},
        {"control": None},
        {"control": {"base_ms": 0}},
    ],
)
def test_from_dict_refuses_bad_data(change: dict[str, object]) -> None:
    data = {**Clock.new(BLITZ).start(7).to_dict(), **change}
    with pytest.raises(ClockFormatError):
        Clock.from_dict(data)


def test_an_unstarted_clock_has_no_instant() -> None:
    data = {**Clock.new(BLITZ).to_dict(), "since_ms": 5}
    with pytest.raises(ClockFormatError):
        Clock.from_dict(data)
    with pytest.raises(ClockFormatError):
        Clock(BLITZ, ())
    with pytest.raises(ClockFormatError):
        Clock.new(BLITZ, seat_count=0)


def test_replay_rebuilds_the_clock_from_its_log() -> None:
    events = (
        ClockEvent(ClockAction.START, 1_000, seat=1),
        ClockEvent(ClockAction.PRESS, 3_000),
        ClockEvent(ClockAction.PAUSE, 4_000),
        ClockEvent(ClockAction.RESUME, 9_000),
        ClockEvent(ClockAction.PRESS, 9_500, seat=0),
    )
    live = (
        Clock.new(BLITZ)
        .start(1_000, to_move=1)
        .press(3_000)
        .clock.pause(4_000)
        .resume(9_000)
        .press(9_500, to_move=0)
    ).clock
    assert Clock.new(BLITZ).replay(events) == live
    assert live.to_move == 0
    assert live.seats == (SeatTime(60 * S - 1_500 + S), SeatTime(60 * S - 2_000 + S))
