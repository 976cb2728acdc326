"""A timed phase with clocks of its own (``PhaseDeadline.per_move``; docs/match-runtime.md, "Phases"):
the count starts again at every event of the phase, and each action is told how long its count ran
(``ActionContext.phase_elapsed_ms``) so the engine can charge a clock it keeps. Skirmish Chess's duels
are such phases; the family here is a small "rally" so that every instant is explicit.

Seats say "go" in turn; after the second "go" a rally starts: seats "hit" in turn, each with a rally
clock of 5 s of its own (charged by the engine, plus a 1 s increment), four hits end it; a seat whose
rally clock runs out loses the rally, and the game goes on either way. After 6 goes seat 0 wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from libs.clocks import TimeControl
from libs.engines.base import ActionContext, ChanceRequest, Outcome, PhaseDeadline, Termination
from libs.match.model import Due, EventKind, MatchEvent, MatchRecord, created, step
from tests.libs.match.test_phases import T0, RelayFamily, connected

RALLY_MS = 5_000
INCREMENT_MS = 1_000


@dataclass(frozen=True, slots=True)
class Rally:
    goes: int = 0
    hits: int = 0
    rally_clocks: tuple[int, int] = (RALLY_MS, RALLY_MS)
    charged: tuple[int, ...] = ()
    """The phase_elapsed_ms of every action, in order (what the runtime told the engine)."""
    lost_rally: int | None = None

    @property
    def in_rally(self) -> bool:
        return self.goes == 2 and self.hits < 4 and self.lost_rally is None


class RallyEngine:
    family = "relay"

    def new_game(self, options: Any) -> Rally:
        return Rally()

    def to_move(self, state: Rally) -> int | None:
        if state.goes >= 6:
            return None
        return state.hits % 2 if state.in_rally else state.goes % 2

    def apply(self, state: Rally, seat: int, action: Any, context: ActionContext) -> Rally:
        charged = (*state.charged, context.phase_elapsed_ms)
        if state.in_rally:
            clocks = list(state.rally_clocks)
            clocks[seat] = clocks[seat] - context.phase_elapsed_ms + INCREMENT_MS
            hits = state.hits + 1
            return replace(
                state,
                hits=hits,
                rally_clocks=(clocks[0], clocks[1]),
                charged=charged,
                goes=state.goes + (hits == 4),
            )
        return replace(state, goes=state.goes + 1, charged=charged)

    def legal_actions(self, state: Rally, seat: int) -> Sequence[str]:
        return ["hit"] if state.in_rally else ["go"]

    def outcome(self, state: Rally) -> Outcome | None:
        return Outcome(Termination.CHECKMATE, 0, score=(1.0, 0.0)) if state.goes >= 6 else None

    def timeout_outcome(self, state: Rally, seat: int) -> Outcome:
        return Outcome(Termination.TIMEOUT, 1 - seat)

    def resignation_outcome(self, state: Rally, seat: int) -> Outcome:
        return Outcome(Termination.RESIGNATION, 1 - seat)

    def view(self, state: Rally, seat: int | None) -> Rally:
        return state

    def chance_needed(self, state: Rally) -> ChanceRequest | None:
        return None

    def apply_chance(self, state: Rally, request: ChanceRequest, values: tuple[int, ...]) -> Rally:
        raise AssertionError("no chance in a rally")

    def phase_deadline(self, state: Rally) -> PhaseDeadline | None:
        if not state.in_rally:
            return None
        mover = state.hits % 2
        return PhaseDeadline(state.rally_clocks[mover], mover, per_move=True)

    def on_phase_deadline(self, state: Rally) -> Rally:
        return replace(state, lost_rally=state.hits % 2, goes=state.goes + 1)


class RallyFamily(RelayFamily):
    engine = RallyEngine()  # type: ignore[assignment]


FAMILY = RallyFamily()


def _new() -> MatchRecord:
    setup = {
        "match_id": "relay.0.rally",
        "family": "relay",
        "players": ["alice", "bob"],
        "options": {"lenient": False},
        "time_control": TimeControl.sudden_death(60_000).to_dict(),
        "fairness_commitment": "",
        "first_move_timeout_ms": 60_000,
        "disconnect_forfeit_ms": 60_000,
        "created_at_ms": T0,
    }
    return created(FAMILY, MatchEvent(1, EventKind.CREATED, T0, setup, None, "create"))


def _say(record: MatchRecord, seat: int, word: str, at_ms: int) -> MatchRecord:
    event = MatchEvent(
        record.sequence + 1, EventKind.ACTION, at_ms, {"action": {"say": word}}, seat, f"k{record.sequence}"
    )
    return step(FAMILY, record, event)


def _to_the_rally() -> MatchRecord:
    record = connected(_new(), T0)
    record = _say(record, 0, "go", T0 + 1_000)
    return _say(record, 1, "go", T0 + 2_000)  # the rally starts here


def test_each_event_of_the_phase_starts_its_count_again() -> None:
    record = _to_the_rally()
    assert record.phase_since_ms == T0 + 2_000
    assert record.phase_due_ms(FAMILY) == T0 + 2_000 + RALLY_MS
    assert record.due(FAMILY) == [Due(T0 + 7_000, "phase", 0)]
    record = _say(record, 0, "hit", T0 + 4_500)
    assert record.phase_since_ms == T0 + 4_500  # counted again from the hit
    # Seat 1's own rally clock is due now; seat 0 kept 5 - 2.5 + 1 = 3.5 s.
    assert record.due(FAMILY) == [Due(T0 + 4_500 + RALLY_MS, "phase", 1)]
    record = _say(record, 1, "hit", T0 + 5_000)
    assert record.game.rally_clocks == (3_500, 5_500)
    assert record.due(FAMILY) == [Due(T0 + 5_000 + 3_500, "phase", 0)]


def test_actions_are_told_how_long_the_count_ran() -> None:
    record = _to_the_rally()
    record = _say(record, 0, "hit", T0 + 4_500)
    record = _say(record, 1, "hit", T0 + 5_000)
    # Before the rally: no phase, so 0; in it: 2.5 s and 0.5 s.
    assert record.game.charged == (0, 0, 2_500, 500)


def test_main_clocks_stop_for_the_phase_and_the_next_mover_is_timed_after_it() -> None:
    record = _to_the_rally()
    assert not record.clock.is_running
    left = record.clock.remaining_ms(0, T0 + 2_000)
    for n, at in enumerate((T0 + 3_000, T0 + 4_000, T0 + 5_000, T0 + 6_000)):
        record = _say(record, n % 2, "hit", at)
    assert record.phase_since_ms is None
    assert record.clock.is_running
    assert record.clock.remaining_ms(0, T0 + 6_000) == left  # nobody's main time ran in the rally
    assert [d.kind for d in record.due(FAMILY)] == ["flag"]
    assert record.phase_due_ms(FAMILY) is None


def test_a_rally_clock_that_runs_out_is_a_deadline_the_engine_decides() -> None:
    record = _to_the_rally()
    record = _say(record, 0, "hit", T0 + 3_000)
    due = record.due(FAMILY)[0]
    assert due == Due(T0 + 3_000 + RALLY_MS, "phase", 1)
    record = step(
        FAMILY, record, MatchEvent(record.sequence + 1, EventKind.DEADLINE, due.at_ms, {"due": "phase"}, 1)
    )
    assert record.game.lost_rally == 1
    assert record.phase_since_ms is None
    assert record.outcome is None
