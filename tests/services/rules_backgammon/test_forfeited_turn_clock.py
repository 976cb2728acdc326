"""Whose clock runs after a roll with no legal play: the turn passes with the dice, so the clock passes
with it (libs/match/model.py ``_turn_passed``). Found by the chaos run: the seat that forfeited its turn
was charged the opponent's whole next turn, and could have flagged on the opponent's time."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from libs.clocks import TimeControl
from libs.clocks.control import SeatTime
from libs.engines.backgammon import BackgammonOptions
from libs.engines.backgammon.board import BLACK, WHITE, Position
from libs.engines.backgammon.engine import BACKGAMMON
from libs.match.model import EventKind, MatchEvent, MatchRecord, MatchSetup, created, step
from services.rules_backgammon.family import BackgammonFamily

FAMILY = BackgammonFamily()
BASE_MS = 60_000
# Black on the bar against White's closed home board (19-24): every roll of Black's is forfeited.
CLOSED = Position.from_counts(
    {19: 2, 20: 2, 21: 2, 22: 2, 23: 2, 24: 2, 1: 3}, {6: 5, 8: 3, 13: 6}, bar=(0, 1)
)


class Log:
    """A match built event by event through the pure model, as the runtime logs and replays it."""

    def __init__(self, control: TimeControl) -> None:
        setup = MatchSetup(
            match_id="backgammon.0.forfeit",
            family="backgammon",
            players=("white", "black"),
            options=FAMILY.options_to_json(BackgammonOptions()),
            time_control=control,
            fairness_commitment="c" * 64,
            first_move_timeout_ms=60_000,
            disconnect_forfeit_ms=60_000,
            created_at_ms=1_000,
        )
        event = MatchEvent(1, EventKind.CREATED, 1_000, setup.to_json(), None, "c")
        self.record: MatchRecord = created(FAMILY, event)

    def _next(self, kind: EventKind, at_ms: int, payload: dict[str, Any], seat: int | None) -> None:
        event = MatchEvent(self.record.sequence + 1, kind, at_ms, payload, seat, f"k{self.record.sequence}")
        self.record = step(FAMILY, self.record, event)

    def dice(self, at_ms: int, values: tuple[int, int]) -> None:
        request = BACKGAMMON.chance_needed(self.record.game)
        assert request is not None
        payload: dict[str, Any] = {"request": request.to_json(), "values": list(values)}
        if self.record.live_since_ms is not None:
            payload["waited_from_ms"] = self.record.last_at_ms  # as the runtime logs a draw
        self._next(EventKind.CHANCE, at_ms, payload, None)

    def play(self, at_ms: int, seat: int, text: str) -> None:
        self._next(EventKind.ACTION, at_ms, {"action": {"notation": text}}, seat)

    def running(self) -> int | None:
        """The seat whose time runs."""
        clock = self.record.clock
        return clock.to_move if clock.is_running else None

    def remaining(self, seat: int, at_ms: int) -> int:
        return self.record.clock.remaining_ms(seat, at_ms)


def black_on_the_bar(control: TimeControl) -> Log:
    """White opened with 3-1 (8/5 6/5) at 2,000 ms; the board is then swapped for ``CLOSED`` (a test
    shortcut) with Black to roll, Black's time running since 2,000 ms."""
    log = Log(control)
    log.dice(1_000, (3, 1))
    log.play(2_000, WHITE, "8/5 6/5")
    assert log.running() == BLACK
    log.record = replace(log.record, game=replace(log.record.game, position=CLOSED))
    return log


def test_a_forfeited_roll_hands_the_clock_to_the_opponent() -> None:
    log = black_on_the_bar(TimeControl.sudden_death(BASE_MS))
    log.dice(2_300, (6, 5))  # drawn 300 ms after White's play: a wait charged to nobody
    assert BACKGAMMON.to_move(log.record.game) == WHITE
    assert log.running() == WHITE
    mark = log.record.clock_marks[-1]
    assert (mark.seat, mark.remaining_ms, mark.at_ms) == (BLACK, BASE_MS, 2_300)
    assert log.record.turn_since_ms == 2_300
    log.dice(2_300, (2, 1))
    # White thinks for 5 s: White's time runs, Black's stands still.
    assert log.remaining(BLACK, 7_300) == BASE_MS
    assert log.remaining(WHITE, 7_300) == BASE_MS - 5_000
    log.play(7_300, WHITE, "24/22 24/23")
    assert log.running() == BLACK
    assert log.remaining(WHITE, 7_300) == BASE_MS - 5_000
    assert log.remaining(BLACK, 7_300) == BASE_MS
    marks = [(m.seat, m.at_ms) for m in log.record.clock_marks]
    assert marks == [(WHITE, 2_000), (BLACK, 2_300), (WHITE, 7_300)]


def test_the_flag_after_a_forfeit_falls_on_the_seat_whose_turn_it_is() -> None:
    log = black_on_the_bar(TimeControl.sudden_death(BASE_MS))
    # Black is short of time (10 s): its flag must not fall during White's turn.
    clock = log.record.clock
    log.record = replace(log.record, clock=replace(clock, seats=(clock.seats[WHITE], SeatTime(10_000, 0))))
    log.dice(2_000, (6, 5))
    log.dice(2_000, (2, 1))
    assert log.remaining(BLACK, 30_000) == 10_000
    due = [d for d in log.record.due(FAMILY) if d.kind == "flag"]
    assert [(d.seat, d.at_ms) for d in due] == [(WHITE, 2_000 + BASE_MS)]


@pytest.mark.parametrize(
    "control",
    [TimeControl.fischer(BASE_MS, 5_000), TimeControl.capped_bonus(BASE_MS, 10_000, 10_000, cap_ms=90_000)],
    ids=["fischer", "capped-bonus"],
)
def test_a_forfeited_turn_earns_no_increment_or_bonus(control: TimeControl) -> None:
    # A press after 0 ms would add 5 s (Fischer) or 10 s (seed 002's bonus, here capped above the base);
    # a roll with no legal play is no move of Black's: Black keeps exactly what it had.
    log = black_on_the_bar(control)
    log.dice(2_000, (6, 5))
    assert log.running() == WHITE
    assert log.remaining(BLACK, 2_000) == BASE_MS
    assert log.record.clock_marks[-1].remaining_ms == BASE_MS
    assert log.record.moves_made == (1, 0)  # and it is not counted as a move
