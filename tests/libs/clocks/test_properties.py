"""Property tests over every kind of clock: random games of presses, pauses and resumes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libs.clocks import (
    Clock,
    ClockAction,
    ClockEvent,
    ClockStateError,
    FlagFallenError,
    PressResult,
    TimeControl,
)

# Usual clocks (so that games last) and any time at all (so that flags fall early too).
TIMES = st.one_of(st.sampled_from((10_000, 30_000, 60_000, 180_000)), st.integers(1, 60_000))
PERIODS = st.one_of(st.integers(500, 5_000), TIMES)  # short periods get used up
CONTROLS = st.one_of(
    st.builds(TimeControl.sudden_death, TIMES),
    st.builds(TimeControl.fischer, TIMES, st.integers(0, 10_000)),
    TIMES.flatmap(
        lambda base: st.builds(
            TimeControl.capped_bonus,
            st.just(base),
            st.integers(1, 10_000),
            st.integers(0, 5_000),
            st.integers(base, 2 * base),
        )
    ),
    st.builds(TimeControl.byo_yomi, st.integers(0, 20_000), st.integers(1, 5), PERIODS),
    st.builds(TimeControl.per_move, PERIODS, st.integers(1, 5)),
)
QUICK = st.integers(0, 3_000)
DELAYS = st.one_of(QUICK, QUICK, QUICK, st.integers(0, 25_000))  # mostly quick, so that games last
PAUSES = st.one_of(st.none(), st.none(), st.tuples(st.integers(0, 10**6), DELAYS))
TURNS = st.tuples(DELAYS, PAUSES)
"""A turn: think for a while, maybe pause (for how long, then think on), then press."""
GAME_TURNS = st.integers(0, 30).flatmap(lambda n: st.lists(TURNS, min_size=n, max_size=n))


@dataclass
class Game:
    """A clock driven through random turns, with everything the properties check against."""

    clock: Clock
    events: list[ClockEvent]
    presses: list[PressResult] = field(default_factory=list)
    running_ms: int = 0
    """Time the clock was running between the start and its last event."""

    def record(self, clock: Clock, action: ClockAction, now: int) -> None:
        if self.clock.is_running:
            assert self.clock.since_ms is not None
            self.running_ms += now - self.clock.since_ms
        self.clock = clock
        self.events.append(ClockEvent(action, now))


def play(
    control: TimeControl,
    start_ms: int,
    first: int,
    turns: list[tuple[int, tuple[int, int] | None]],
    pause_at_end: int | None,
) -> Game:
    """Play ``turns`` until they run out or a flag falls, checking the invariants at every instant;
    then maybe pause ``pause_at_end`` ms later."""
    game = Game(Clock.new(control).start(start_ms, first), [ClockEvent(ClockAction.START, start_ms, first)])
    now = start_ms
    for think_ms, pause in turns:
        now += think_ms
        check_statuses(game.clock, now)
        if pause is not None:
            with pytest.raises(ClockStateError):
                game.clock.resume(now)
            game.record(game.clock.pause(now), ClockAction.PAUSE, now)
            with pytest.raises(ClockStateError):
                game.clock.press(now)
            pause_ms, more_ms = pause
            now += pause_ms
            check_statuses(game.clock, now)
            game.record(game.clock.resume(now), ClockAction.RESUME, now)
            now += more_ms
            check_statuses(game.clock, now)
        if game.clock.is_flagged(now):
            with pytest.raises(FlagFallenError):
                game.clock.press(now)
            break
        result = game.clock.press(now)
        game.presses.append(result)
        game.record(result.clock, ClockAction.PRESS, now)
    if pause_at_end is not None:
        now += pause_at_end
        game.record(game.clock.pause(now), ClockAction.PAUSE, now)
    return game


def check_statuses(clock: Clock, now: int) -> None:
    for seat in range(len(clock.seats)):
        status = clock.status(seat, now)
        assert 0 <= status.remaining_ms <= status.until_flag_ms
        assert 0 <= status.periods_left <= clock.control.periods
        assert status.periods_used + status.periods_left == clock.control.periods


def running(game: Game) -> Clock:
    """The game's clock, resumed at once if the game ended paused."""
    clock = game.clock
    return clock.resume(clock.since_ms or 0) if clock.paused else clock


GAMES = st.builds(play, CONTROLS, st.integers(0, 10**12), st.integers(0, 1), GAME_TURNS, st.none() | DELAYS)


@given(GAMES)
def test_charges_add_up_to_the_running_time(game: Game) -> None:
    """Every millisecond the clock ran is charged to exactly one move (or to the turn in progress)."""
    clock = game.clock
    assert clock.since_ms is not None
    in_progress = clock.elapsed_ms(clock.since_ms)
    assert sum(result.charged_ms for result in game.presses) + in_progress == game.running_ms


@given(GAMES)
def test_each_seat_time_is_accounted_for(game: Game) -> None:
    """Main time = base - charges + credits (bank kinds); main time then periods (period kinds)."""
    control = game.clock.control
    for seat in (0, 1):
        moves = [result for result in game.presses if result.seat == seat]
        charged = sum(result.charged_ms for result in moves)
        credited = sum(result.credited_ms for result in moves)
        used = sum(result.periods_used for result in moves)
        time = game.clock.seats[seat]
        if control.periods:
            assert credited == 0
            assert time.main_ms == max(0, control.base_ms - charged)
            assert time.periods_left == control.periods - used
        else:
            assert used == 0
            assert time.main_ms == control.base_ms - charged + credited
            if control.cap_ms is not None:
                assert time.main_ms <= control.cap_ms


@given(GAMES)
def test_every_press_follows_the_rules_of_its_kind(game: Game) -> None:
    control = game.clock.control
    seats = {0: control.initial_seat(), 1: control.initial_seat()}
    for result in game.presses:
        before = seats[result.seat]
        assert result.charged_ms < control.limit_ms(before)
        if control.periods:
            assert result.periods_used == max(0, result.charged_ms - before.main_ms) // control.period_ms
        elif control.increment_within_ms is None or result.charged_ms <= control.increment_within_ms:
            left = before.main_ms - result.charged_ms
            cap = control.cap_ms
            assert result.credited_ms == (
                control.increment_ms if cap is None else max(0, min(cap - left, control.increment_ms))
            )
        else:
            assert result.credited_ms == 0
        seats[result.seat] = result.clock.seats[result.seat]


@given(GAMES, st.integers(0, 10**6))
def test_periods_and_strikes_follow_the_turn_time(game: Game, elapsed_ms: int) -> None:
    """At ``elapsed_ms`` into a turn, periods used = those before + one per period past main time."""
    clock = running(game)
    assert clock.to_move is not None
    assert clock.since_ms is not None
    control, seat = clock.control, clock.seats[clock.to_move]
    status = clock.status(clock.to_move, clock.since_ms + elapsed_ms)
    elapsed = clock.elapsed_ms(clock.since_ms + elapsed_ms)
    overruns = max(0, elapsed - seat.main_ms) // control.period_ms if control.periods else 0
    assert status.periods_used == min(control.periods, control.periods - seat.periods_left + overruns)
    assert status.until_flag_ms == max(0, control.limit_ms(seat) - elapsed)


@given(GAMES)
def test_a_press_at_the_flag_instant_is_a_flag_and_one_millisecond_earlier_is_not(game: Game) -> None:
    clock = running(game)
    flag_at = clock.flag_at_ms()
    assert flag_at is not None
    assert clock.since_ms is not None
    assert clock.to_move is not None
    if flag_at < clock.since_ms:  # resumed after the flag fell during a pause
        assert clock.is_flagged(clock.since_ms)
        return
    assert clock.is_flagged(flag_at)
    with pytest.raises(FlagFallenError) as raised:
        clock.press(flag_at)
    assert (raised.value.seat, raised.value.flag_at_ms) == (clock.to_move, flag_at)
    if flag_at - 1 >= clock.since_ms:
        assert not clock.is_flagged(flag_at - 1)
        assert clock.press(flag_at - 1).charged_ms == clock.elapsed_ms(flag_at - 1)
        assert clock.remaining_ms(clock.to_move, flag_at - 1) >= 1


@given(GAMES)
def test_next_events_lead_to_the_flag(game: Game) -> None:
    clock = game.clock
    assert clock.since_ms is not None
    if not clock.is_running:
        assert clock.next_event_at_ms(clock.since_ms) is None
        return
    instants = [clock.since_ms]
    while (following := clock.next_event_at_ms(instants[-1])) is not None:
        assert following > instants[-1]
        instants.append(following)
        assert len(instants) <= clock.control.periods + 3
    flag_at = clock.flag_at_ms()
    assert flag_at is not None
    assert instants[-1] == max(flag_at, clock.since_ms)


@given(GAMES)
def test_replay_and_json_rebuild_the_same_clock(game: Game) -> None:
    clock = game.clock
    assert Clock.new(clock.control).replay(game.events) == clock
    assert Clock.from_dict(json.loads(json.dumps(clock.to_dict()))) == clock
    assert clock.since_ms is not None
    at = clock.since_ms + 12_345
    assert Clock.new(clock.control).replay(game.events).view(at) == clock.view(at)


@given(GAMES, st.integers(0, 30_000), st.integers(0, 10**6), st.integers(0, 30_000))
def test_a_pause_charges_nothing(game: Game, before_ms: int, pause_ms: int, after_ms: int) -> None:
    """Pausing for ``pause_ms`` shifts the turn by exactly that: the same statuses, the same press."""
    clock = running(game)
    assert clock.since_ms is not None
    paused_at = clock.since_ms + before_ms
    paused = clock.pause(paused_at)
    frozen = paused.view(paused_at)
    assert paused.view(paused_at + pause_ms).seats == frozen.seats
    resumed = paused.resume(paused_at + pause_ms)
    assert resumed.view(paused_at + pause_ms).seats == frozen.seats
    later, unpaused_at = paused_at + pause_ms + after_ms, paused_at + after_ms
    assert resumed.view(later).seats == clock.view(unpaused_at).seats
    if clock.is_flagged(unpaused_at):
        assert resumed.is_flagged(later)
        return
    with_pause, without = resumed.press(later), clock.press(unpaused_at)
    assert with_pause.charged_ms == without.charged_ms
    assert with_pause.clock.seats == without.clock.seats
