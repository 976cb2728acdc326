"""Every clock the seeds name, one by one: the chess lobby tables (seed 000), Game of the Generals'
per-move clocks (seed 004) and Skirmish Chess's main and skirmish clocks (seed 003)."""

from __future__ import annotations

from pathlib import Path

import pytest

from libs.clocks import (
    CHESS_LOBBY_CONTROLS,
    GENERALS_CONTROLS,
    GENERALS_DEFAULT,
    MINUTE_MS,
    SECOND_MS,
    Clock,
    ClockKind,
    FlagFallenError,
    SeatTime,
    TimeControl,
)

S = SECOND_MS

# -- chess lobby tables: 3, 5, 10, 20 or 30 minutes, no increment (seed 000) ------------------------


def test_the_chess_lobby_presets_are_the_seeds_five_clocks() -> None:
    assert [control.base_ms for control in CHESS_LOBBY_CONTROLS] == [
        m * MINUTE_MS for m in (3, 5, 10, 20, 30)
    ]
    assert {control.kind for control in CHESS_LOBBY_CONTROLS} == {ClockKind.SUDDEN_DEATH}


@pytest.mark.parametrize("minutes", [3, 5, 10, 20, 30])
def test_chess_lobby_sudden_death(minutes: int) -> None:
    base = minutes * MINUTE_MS
    control = TimeControl.sudden_death(base)
    assert control in CHESS_LOBBY_CONTROLS
    assert control.kind is ClockKind.SUDDEN_DEATH
    clock = Clock.new(control).start(0)
    assert (clock.remaining_ms(0, 0), clock.remaining_ms(1, 0)) == (base, base)

    # White 7 s, Black 11 s, White 13 s, Black 17 s: each move charged to its own side, nothing added.
    now = 0
    for seat, duration in [(0, 7 * S), (1, 11 * S), (0, 13 * S), (1, 17 * S)]:
        now += duration
        result = clock.press(now)
        assert (result.seat, result.charged_ms, result.credited_ms) == (seat, duration, 0)
        clock = result.clock
    assert clock.remaining_ms(0, now) == base - 20 * S
    assert clock.remaining_ms(1, now) == base - 28 * S

    # White thinks on: the flag falls when White's own time is used up, whatever Black has.
    flag = now + base - 20 * S
    assert clock.flag_at_ms() == flag
    assert clock.next_event_at_ms(now) == flag
    assert clock.press(flag - 1).clock.remaining_ms(0, flag - 1) == 1
    with pytest.raises(FlagFallenError) as raised:
        clock.press(flag)
    assert (raised.value.seat, raised.value.flag_at_ms) == (0, flag)
    view = clock.view(flag + MINUTE_MS)
    assert view.is_flagged
    assert [seat.remaining_ms for seat in view.seats] == [0, base - 28 * S]  # never negative


# -- Game of the Generals: 30 s, 1 min (default) or 2 min per move, three strikes (seed 004) -----------


def test_the_generals_presets_are_the_seeds_three_clocks() -> None:
    assert [control.period_ms for control in GENERALS_CONTROLS] == [30 * S, 60 * S, 120 * S]
    assert {(c.kind, c.base_ms, c.periods) for c in GENERALS_CONTROLS} == {(ClockKind.PER_MOVE, 0, 3)}
    assert TimeControl.per_move(MINUTE_MS) == GENERALS_DEFAULT


@pytest.mark.parametrize("move_s", [30, 60, 120])
def test_generals_per_move_clock(move_s: int) -> None:
    move = move_s * S
    control = TimeControl.per_move(move)
    assert control in GENERALS_CONTROLS
    clock = Clock.new(control).start(0)

    # A fresh clock each move: a move 1 ms short of it takes no strike and the next move is fresh again.
    result = clock.press(move - 1)
    assert (result.charged_ms, result.periods_used) == (move - 1, 0)
    clock = result.clock.press(move - 1 + 5 * S).clock  # the opponent answers in 5 s
    now = move - 1 + 5 * S
    status = clock.status(0, now)
    assert (status.remaining_ms, status.periods_used) == (move, 0)

    # Running out is a strike and a fresh clock for the same move, at the very instant it runs out.
    assert clock.next_event_at_ms(now) == now + move
    assert clock.status(0, now + move - 1).periods_used == 0
    status = clock.status(0, now + move)
    assert (status.remaining_ms, status.periods_used, status.periods_left) == (move, 1, 2)
    result = clock.press(now + move + 3 * S)
    assert (result.seat, result.periods_used) == (0, 1)
    clock, now = result.clock, now + move + 3 * S

    # The strike stays for the rest of the game: the opponent's turn, then a turn with two overruns.
    clock = clock.press(now + S).clock
    now += S
    assert clock.status(0, now) == clock.control.status(SeatTime(0, 2), 0)
    assert clock.status(0, now).remaining_ms == move
    assert clock.status(0, now + move).periods_used == 2
    third = now + 2 * move  # the third strike loses
    assert clock.flag_at_ms() == third
    assert clock.press(third - 1).periods_used == 1
    assert clock.is_flagged(third)
    with pytest.raises(FlagFallenError):
        clock.press(third)


# -- Skirmish Chess: two Fischer clocks (seed 003) ---------------------------------------------------
#
# Seed 003: "Main and skirmish clocks are separate and both configurable. Main and skirmish increments
# are supported. Skirmish has configurable start countdown. 0 means immediate start." RULES.md adds that
# skirmish clocks are fresh for each skirmish, main clocks stop during a skirmish, and running out of
# skirmish time loses the skirmish; a skirmish is drawn after 16 plies. The seed gives no times, so the
# tables below pick some: main 10 min + 5 s, skirmish 20 s + 2 s, countdown 3 s.

MAIN = TimeControl.fischer(10 * MINUTE_MS, 5 * S)
SKIRMISH = TimeControl.fischer(20 * S, 2 * S)
COUNTDOWN = 3 * S
SKIRMISH_PLIES = 16


def test_skirmish_chess_main_clock_stops_for_a_skirmish_and_the_skirmish_clock_decides_it() -> None:
    """1. e4 (4 s) d5 (6 s) 2. exd5 (5 s): the capture attempt starts a skirmish, and the defender's
    owner (Black, the skirmish's Black) runs out of skirmish time: the attacker wins, the capture stands."""
    assert (MAIN.kind, SKIRMISH.kind) == (ClockKind.FISCHER, ClockKind.FISCHER)
    main = Clock.new(MAIN).start(0)
    main = main.press(4 * S).clock  # 1. e4
    main = main.press(10 * S).clock  # 1... d5
    # 2. exd5 is White's move, charged and credited like any other; then the main clock stops.
    capture = main.press(15 * S)
    assert (capture.seat, capture.charged_ms, capture.credited_ms) == (0, 5 * S, 5 * S)
    main = capture.clock.pause(15 * S)
    # White: 10:00 - 4 s + 5 s - 5 s + 5 s = 10:01; Black: 10:00 - 6 s + 5 s = 9:59.
    white_main, black_main = 10 * MINUTE_MS + S, 10 * MINUTE_MS - S
    assert main.remaining_ms(0, 15 * S) == white_main
    assert main.remaining_ms(1, 15 * S) == black_main
    assert main.flag_at_ms() is None  # no main deadline to arm while the skirmish runs

    # The skirmish: a fresh clock, seat 0 the attacker (the skirmish's White), after the countdown.
    start = 15 * S + COUNTDOWN
    skirmish = Clock.new(SKIRMISH).start(start, to_move=0)
    skirmish = skirmish.press(start + 4 * S).clock  # attacker 4 s: 20 - 4 + 2 = 18 s
    skirmish = skirmish.press(start + 10 * S).clock  # defender 6 s: 20 - 6 + 2 = 16 s
    skirmish = skirmish.press(start + 11 * S).clock  # attacker 1 s: 19 s
    assert (skirmish.remaining_ms(0, start + 11 * S), skirmish.remaining_ms(1, start + 11 * S)) == (
        19 * S,
        16 * S,
    )
    lost_at = start + 27 * S  # the defender thinks for its whole 16 s
    assert skirmish.flag_at_ms() == lost_at
    assert not skirmish.is_flagged(lost_at - 1)
    assert skirmish.is_flagged(lost_at)  # the defender loses the skirmish: the capture stands

    # Back on the main board, Black's turn: neither main clock moved during countdown and skirmish.
    main = main.resume(lost_at)
    assert main.to_move == 1
    assert main.remaining_ms(0, lost_at) == white_main
    assert main.remaining_ms(1, lost_at) == black_main
    assert main.flag_at_ms() == lost_at + black_main
    reply = main.press(lost_at + 8 * S)  # 2... Qxd5 (the next skirmish would follow the same way)
    assert (reply.charged_ms, reply.credited_ms) == (8 * S, 5 * S)


def test_skirmish_chess_each_skirmish_gets_a_fresh_clock_with_the_attacker_on_seat_zero() -> None:
    """Black captures on the main board: Black's owner is the skirmish's White, seat 0. And whatever the
    previous skirmish used, the next one starts from the full skirmish time."""
    first = Clock.new(SKIRMISH).start(0, to_move=0).press(19 * S).clock  # a slow first skirmish
    assert first.remaining_ms(0, 19 * S) == 3 * S
    main = Clock.new(MAIN).start(0).press(2 * S).clock  # White moves; Black to move
    capture = main.press(9 * S)  # Black's capture attempt
    assert capture.seat == 1
    main = capture.clock.pause(9 * S)
    second = Clock.new(SKIRMISH).start(9 * S, to_move=0)  # countdown 0: immediate start
    assert [second.remaining_ms(seat, 9 * S) for seat in (0, 1)] == [SKIRMISH.base_ms] * 2
    assert second.flag_at_ms() == 9 * S + SKIRMISH.base_ms
    assert main.resume(30 * S).to_move == 0  # afterwards White, whose main time did not run


def test_skirmish_chess_a_skirmish_stops_the_main_clocks_for_a_bounded_time() -> None:
    """16 plies at most, 8 a side; a Fischer side can spend at most base + 7 increments over its 8
    moves (each move strictly before its flag). So the main clocks stop for less than countdown +
    2 * (20 s + 7 * 2 s) = 3 s + 68 s per skirmish, and one millisecond more on any move flags."""
    start = COUNTDOWN
    skirmish = Clock.new(SKIRMISH).start(start, to_move=0)
    now = start
    for ply in range(SKIRMISH_PLIES):
        mover = ply % 2  # the attacker (seat 0) moves first
        assert skirmish.to_move == mover
        longest = skirmish.remaining_ms(mover, now) - 1
        with pytest.raises(FlagFallenError):
            skirmish.press(now + longest + 1)
        now += longest
        skirmish = skirmish.press(now).clock
        assert skirmish.remaining_ms(mover, now) == 1 + SKIRMISH.increment_ms
    per_side = SKIRMISH.base_ms + 7 * SKIRMISH.increment_ms - 1  # 8 moves, each leaving 1 ms
    assert now - start == 2 * per_side == 68 * S - 2
    assert COUNTDOWN + (now - start) < COUNTDOWN + 2 * (SKIRMISH.base_ms + 7 * SKIRMISH.increment_ms)


def test_the_skirmish_chess_example_in_the_docs_holds() -> None:
    """The worked example of docs/clocks.md runs, and its asserts hold."""
    doc = (Path(__file__).resolve().parents[3] / "docs" / "clocks.md").read_text()
    section = doc[doc.index("### Skirmish Chess") :]
    example = section[section.index("```python\n") + len("```python\n") : section.index("\n```\n")]
    assert "skirmish.flag_at_ms() == 45_000" in example
    names = {"Clock": Clock, "TimeControl": TimeControl, "MINUTE_MS": MINUTE_MS, "SECOND_MS": SECOND_MS}
    exec(compile(example, "docs/clocks.md", "exec"), names)
    main = names["main"]
    assert isinstance(main, Clock)
    assert main.to_move == 1
