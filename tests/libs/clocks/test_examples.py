"""Worked examples from the seed texts and hand-checked games for every kind of clock."""

from __future__ import annotations

import pytest

from libs.clocks import (
    BACKGAMMON_QUICK,
    BACKGAMMON_STANDARD,
    MINUTE_MS,
    SECOND_MS,
    Clock,
    ClockKind,
    FlagFallenError,
    TimeControl,
)

S = SECOND_MS


def play(clock: Clock, *durations_ms: int, start_ms: int = 0) -> tuple[Clock, int]:
    """Start ``clock`` at ``start_ms`` and press after each duration in turn; return the clock and now."""
    now = start_ms
    clock = clock.start(now)
    for duration in durations_ms:
        now += duration
        clock = clock.press(now).clock
    return clock, now


# -- seed 002: the capped-bonus backgammon clocks -------------------------------------------------


def test_quick_game_worked_example() -> None:
    """Seed 002, Quick Game: "if a player needs 15 seconds for his first move, he shall then have just
    15 seconds for his next move. However, should he manage to complete his next move in just 5
    seconds, he shall have 20 seconds for the next move, not 10 seconds"."""
    assert BACKGAMMON_QUICK.kind is ClockKind.CAPPED_BONUS
    clock = Clock.new(BACKGAMMON_QUICK).start(0)
    assert clock.remaining_ms(0, 0) == 30 * S  # "30 seconds for their first move"

    first = clock.press(15 * S)
    assert (first.charged_ms, first.credited_ms) == (15 * S, 0)
    assert first.clock.remaining_ms(0, 15 * S) == 15 * S

    opponent = first.clock.press(20 * S).clock  # the opponent's turn takes 5 s
    second = opponent.press(25 * S)  # "complete his next move in just 5 seconds"
    assert (second.charged_ms, second.credited_ms) == (5 * S, 10 * S)
    assert second.clock.remaining_ms(0, 25 * S) == 20 * S


def test_standard_game_worked_example() -> None:
    """Seed 002, Single Game: "if a player needs 30 seconds for his first move, he shall then have 1
    minute and 30 seconds for his next move. However, should he manage to complete his next move in just
    5 seconds, he shall have 1 minute and 45 seconds for the next move, not 1 minute and 25 seconds"."""
    clock = Clock.new(BACKGAMMON_STANDARD).start(0)
    assert clock.remaining_ms(0, 0) == 2 * MINUTE_MS

    first = clock.press(30 * S)
    assert first.clock.remaining_ms(0, 30 * S) == MINUTE_MS + 30 * S

    opponent = first.clock.press(40 * S).clock
    second = opponent.press(45 * S)
    assert second.credited_ms == 20 * S
    assert second.clock.remaining_ms(0, 45 * S) == MINUTE_MS + 45 * S


@pytest.mark.parametrize(
    ("control", "first_ms", "within_ms", "bonus_ms"),
    [(BACKGAMMON_QUICK, 15 * S, 10 * S, 10 * S), (BACKGAMMON_STANDARD, 50 * S, 20 * S, 20 * S)],
)
def test_bonus_is_earned_within_the_limit_inclusive(
    control: TimeControl, first_ms: int, within_ms: int, bonus_ms: int
) -> None:
    """We read "within 10 seconds" as at most 10 000 ms: exactly 10 s earns the bonus, 1 ms more not."""
    clock, now = play(Clock.new(control), first_ms, 0)  # the first move leaves room below the cap
    left = control.base_ms - first_ms
    on_time = clock.press(now + within_ms)
    assert on_time.credited_ms == bonus_ms
    assert on_time.clock.seats[0].main_ms == left - within_ms + bonus_ms
    late = clock.press(now + within_ms + 1)
    assert late.credited_ms == 0
    assert late.clock.seats[0].main_ms == left - within_ms - 1


def test_quick_first_move_bonus_is_capped() -> None:
    """A 5 s first move earns the 10 s bonus, but the clock never shows more than 30 s."""
    result = Clock.new(BACKGAMMON_QUICK).start(0).press(5 * S)
    assert result.credited_ms == 5 * S
    assert result.clock.remaining_ms(0, 5 * S) == 30 * S


def test_quick_game_flags_at_zero() -> None:
    clock = Clock.new(BACKGAMMON_QUICK).start(1_000)
    assert clock.flag_at_ms() == 31_000
    assert not clock.is_flagged(30_999)
    assert clock.is_flagged(31_000)
    with pytest.raises(FlagFallenError):
        clock.press(31_000)


# -- chess: sudden death and Fischer --------------------------------------------------------------


def test_chess_sudden_death_three_minutes() -> None:
    """A 3-minute lobby table: each side's moves are charged to its own clock, nothing is added."""
    control = TimeControl.sudden_death(3 * MINUTE_MS)
    assert control.kind is ClockKind.SUDDEN_DEATH
    clock, now = play(Clock.new(control), 10 * S, 20 * S, 30 * S, 5 * S)
    assert now == 65 * S
    assert clock.to_move == 0
    assert clock.remaining_ms(0, now) == 3 * MINUTE_MS - 40 * S
    assert clock.remaining_ms(1, now) == 3 * MINUTE_MS - 25 * S
    # White thinks for the rest of their time: the flag falls at 65 s + 140 s.
    assert clock.flag_at_ms() == now + 140 * S
    assert clock.remaining_ms(0, now + 100 * S) == 40 * S
    assert clock.remaining_ms(0, now + 500 * S) == 0  # never negative
    assert clock.remaining_ms(1, now + 500 * S) == 155 * S  # the waiting side is not charged


def test_fischer_increment_after_every_move_including_the_first() -> None:
    """3+2: a 5 s first move leaves 3:00 - 0:05 + 0:02 = 2:57."""
    control = TimeControl.fischer(3 * MINUTE_MS, 2 * S)
    assert control.kind is ClockKind.FISCHER
    first = Clock.new(control).start(0).press(5 * S)
    assert (first.charged_ms, first.credited_ms) == (5 * S, 2 * S)
    assert first.clock.remaining_ms(0, 5 * S) == 177 * S
    # Fischer time can grow above the base: three 1 s moves of White each gain 1 s.
    clock, now = play(Clock.new(control), 1 * S, 1 * S, 1 * S, 1 * S, 1 * S)
    assert clock.remaining_ms(0, now) == 3 * MINUTE_MS + 3 * S


def test_fischer_increment_is_not_earned_by_a_flagged_move() -> None:
    clock = Clock.new(TimeControl.fischer(10 * S, 5 * S)).start(0)
    with pytest.raises(FlagFallenError) as raised:
        clock.press(10 * S)
    assert (raised.value.seat, raised.value.flag_at_ms) == (0, 10 * S)
    assert clock.press(10 * S - 1).clock.remaining_ms(0, 10 * S) == 5 * S + 1


# -- Game of the Generals: per-move clock with strikes --------------------------------------------


def test_generals_strikes_accumulate_and_the_third_loses() -> None:
    """Seed 004: "Every move gets a fresh clock. Going over counts as a strike and starts a new one; the
    third strike loses the game." Strikes are never reset by a move in time."""
    control = TimeControl.per_move(MINUTE_MS)
    assert control.kind is ClockKind.PER_MOVE
    clock = Clock.new(control).start(0)

    status = clock.status(0, 59_999)
    assert (status.remaining_ms, status.periods_used) == (1, 0)
    assert clock.next_event_at_ms(0) == 60 * S  # the first strike is due

    # Red overruns once: a strike at 60 s, a fresh minute, and the move is still Red's.
    status = clock.status(0, 60 * S)
    assert (status.remaining_ms, status.periods_used, status.periods_left) == (60 * S, 1, 2)
    assert clock.next_event_at_ms(60 * S) == 120 * S
    moved = clock.press(70 * S)
    assert (moved.seat, moved.periods_used) == (0, 1)
    clock = moved.clock

    # Blue moves in time; Red's strike stays, Red's next move gets a fresh minute.
    clock = clock.press(80 * S).clock
    status = clock.status(0, 80 * S)
    assert (status.remaining_ms, status.periods_used) == (60 * S, 1)

    # Red overruns again: strike two at 60 s into the turn, strike three (loss) at 120 s.
    assert clock.status(0, 140 * S).periods_used == 2
    assert clock.flag_at_ms() == 200 * S
    assert clock.status(0, 199_999).remaining_ms == 1
    assert clock.is_flagged(200 * S)
    with pytest.raises(FlagFallenError):
        clock.press(200 * S)
    assert clock.status(0, 200 * S).periods_used == 3
    assert clock.next_event_at_ms(200 * S) is None


def test_generals_three_overruns_in_one_turn_lose() -> None:
    clock = Clock.new(TimeControl.per_move(30 * S)).start(5 * S, to_move=1)
    assert clock.flag_at_ms() == 95 * S
    assert clock.press(95 * S - 1).periods_used == 2


# -- go: absolute and Japanese byo-yomi ------------------------------------------------------------


def test_go_absolute_is_sudden_death() -> None:
    clock, now = play(Clock.new(TimeControl.sudden_death(10 * MINUTE_MS)), 2 * MINUTE_MS)
    assert clock.remaining_ms(0, now) == 8 * MINUTE_MS


def test_byo_yomi_period_consumption() -> None:
    """1 min main time, then 3 periods of 30 s, hand-checked move by move (Black's moves only; White
    answers instantly)."""
    control = TimeControl.byo_yomi(MINUTE_MS, 3, 30 * S)
    assert control.kind is ClockKind.BYO_YOMI
    clock = Clock.new(control).start(0)
    now = 0

    def black_moves(duration_ms: int) -> int:
        nonlocal clock, now
        result = clock.press(now + duration_ms)
        now += duration_ms
        clock = result.clock.press(now).clock  # White replies at once
        return result.periods_used

    assert black_moves(50 * S) == 0  # 10 s of main time left
    assert clock.status(0, now) == clock.control.status(clock.seats[0], 0)
    assert clock.remaining_ms(0, now) == 10 * S
    # 25 s: main time runs out after 10 s, the move lands 15 s into the first period: no period used.
    assert clock.next_event_at_ms(now) == now + 10 * S  # entering byo-yomi
    assert black_moves(25 * S) == 0
    status = clock.status(0, now)
    assert (status.remaining_ms, status.periods_left, status.in_periods) == (30 * S, 3, True)
    # 40 s: the first period runs out at 30 s and is used up; the move is 10 s into the second.
    mid = clock.status(0, now + 45 * S)
    assert (mid.remaining_ms, mid.periods_left, mid.periods_used) == (15 * S, 2, 1)
    assert black_moves(40 * S) == 1
    assert clock.status(0, now).periods_left == 2
    # 29.999 s is within the period; exactly 30 s uses it up.
    assert black_moves(30 * S - 1) == 0
    assert black_moves(30 * S) == 1
    status = clock.status(0, now)
    assert (status.periods_left, status.until_flag_ms) == (1, 30 * S)
    # The last period: overrunning it flags.
    assert clock.flag_at_ms() == now + 30 * S
    with pytest.raises(FlagFallenError):
        clock.press(now + 30 * S)


def test_byo_yomi_press_exactly_at_the_end_of_main_time_keeps_every_period() -> None:
    result = Clock.new(TimeControl.byo_yomi(MINUTE_MS, 5, 10 * S)).start(0).press(MINUTE_MS)
    assert result.periods_used == 0
    assert result.clock.seats[0].main_ms == 0
    assert result.clock.status(0, MINUTE_MS).periods_left == 5
