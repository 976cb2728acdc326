"""The pure part of the runtime: a match record, the events that step it, and what is due when.

A :class:`MatchRecord` is immutable. :func:`step` applies one logged event and returns the next record,
and the live path and the recovery after a restart both go through it, so a replayed log gives exactly
the match that was acknowledged. Nothing here reads the clock: every event carries its instant.

Timing decisions (docs/match-runtime.md, RULES.md "Everywhere"): the match is *live* once the first
move of the game is made, and the game clock starts with that move (it is not charged; the turn then
passes and the next mover's time runs). What can end a match by itself depends only on that:

- before it is live, the only thing that can happen is the no-show abort: the first mover has not made
  the first move within ``first_move_timeout_ms`` of the match's creation (no clock runs, and nobody can
  forfeit for a disconnection, since play has not begun);
- once it is live, the abort is gone for good: the side to move's flag (timeout) and a seat disconnected
  for ``disconnect_forfeit_ms`` (forfeit) are all that can happen.

So an abort and a forfeit never compete. When a flag and a forfeit, or two forfeits, fall due in the same
millisecond, :data:`SAME_INSTANT_ORDER` and the seat to move decide which happened first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cache
from typing import Any, cast

from libs.clocks import Clock, TimeControl
from libs.engines.base import ActionContext, ChanceRequest, Outcome, PhaseDeadline, Termination, TimesPhases
from libs.fairness import FAIRNESS_VERSION
from libs.match.family import Family, JudgesMovesByResult, SaysWhatIsAMove

DEFAULT_FIRST_MOVE_TIMEOUT_MS = 60_000
DEFAULT_DISCONNECT_FORFEIT_MS = 60_000
MAX_CLIENT_SEED_WINDOW_MS = 60_000
"""The longest a first draw may wait for the players' seeds (it eats into the first mover's time)."""


class EventKind(StrEnum):
    """What a logged event records."""

    CREATED = "created"
    ACTION = "action"
    RESIGN = "resign"
    PRESENCE = "presence"
    END = "end"
    """An end the actions do not imply: a timeout, a disconnect forfeit, a no-show abort."""
    CHANCE = "chance"
    """A draw from the match's fairness stream (a shuffle, the first dealer) handed to the engine."""
    RESUMED = "resumed"
    """The shard was down from ``down_from_ms`` until this event: that time is charged to nobody."""
    DEADLINE = "deadline"
    """A phase's own deadline passed (:class:`~libs.engines.base.PhaseDeadline`): the engine says what
    follows."""


class MatchStatus(StrEnum):
    WAITING = "waiting"
    LIVE = "live"
    FINISHED = "finished"
    ABORTED = "aborted"


@dataclass(frozen=True, slots=True)
class MatchEvent:
    """One entry of a match's append-only log."""

    sequence: int
    kind: EventKind
    at_ms: int
    payload: Mapping[str, Any]
    """JSON types only."""
    seat: int | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class MatchSetup:
    """Everything fixed when the match is created."""

    match_id: str
    family: str
    players: tuple[str, ...]
    """Player id by seat."""
    options: Mapping[str, Any]
    """The family's options as JSON."""
    time_control: TimeControl
    fairness_commitment: str
    first_move_timeout_ms: int
    disconnect_forfeit_ms: int
    created_at_ms: int
    client_seed_window_ms: int = 0
    """How long the first draw waits for every seat's client seed (chance families; 0: no wait)."""
    fairness_version: int = 0
    """The version of the fairness stream behind :attr:`fairness_commitment` (0 without one)."""
    stand_in_after_ms: int = 0
    """The disconnect policy: 0, a seat away for :attr:`disconnect_forfeit_ms` forfeits; otherwise a seat
    away this long is played by the family's stand-in on its turns, and nobody forfeits for being away."""

    def to_json(self) -> dict[str, Any]:
        return {
            "match_id": self.match_id,
            "family": self.family,
            "players": list(self.players),
            "options": dict(self.options),
            "time_control": self.time_control.to_dict(),
            "fairness_commitment": self.fairness_commitment,
            "first_move_timeout_ms": self.first_move_timeout_ms,
            "disconnect_forfeit_ms": self.disconnect_forfeit_ms,
            "created_at_ms": self.created_at_ms,
            "client_seed_window_ms": self.client_seed_window_ms,
            "fairness_version": self.fairness_version,
            "stand_in_after_ms": self.stand_in_after_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MatchSetup:
        return cls(
            match_id=data["match_id"],
            family=data["family"],
            players=tuple(data["players"]),
            options=data["options"],
            time_control=TimeControl.from_dict(data["time_control"]),
            fairness_commitment=data["fairness_commitment"],
            first_move_timeout_ms=int(data["first_move_timeout_ms"]),
            disconnect_forfeit_ms=int(data["disconnect_forfeit_ms"]),
            created_at_ms=int(data["created_at_ms"]),
            client_seed_window_ms=int(data.get("client_seed_window_ms", 0)),
            # Matches logged before the version was recorded drew with version 1, the only one then.
            fairness_version=int(
                data.get("fairness_version", FAIRNESS_VERSION if data["fairness_commitment"] else 0)
            ),
            stand_in_after_ms=int(data.get("stand_in_after_ms", 0)),
        )


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "termination": outcome.termination.value,
        "winner": outcome.winner,
        "cause": outcome.cause.value if outcome.cause else None,
        "tiebreak_step": outcome.tiebreak_step,
        "detail": outcome.detail,
        "score": list(outcome.score),
    }


def outcome_from_json(data: Mapping[str, Any]) -> Outcome:
    return Outcome(
        termination=Termination(data["termination"]),
        winner=data["winner"],
        cause=Termination(data["cause"]) if data.get("cause") else None,
        tiebreak_step=data.get("tiebreak_step"),
        detail=data.get("detail", ""),
        score=tuple(float(s) for s in data.get("score", ())),
    )


@dataclass(frozen=True, slots=True)
class ClockMark:
    """A seat's clock right after one of its moves (for PGN ``[%clk]`` and the clock history)."""

    seat: int
    remaining_ms: int
    at_ms: int


@dataclass(frozen=True, slots=True)
class DrawUsed:
    """A draw the match took from its fairness stream and handed to the engine (a ``chance`` event)."""

    request: ChanceRequest
    values: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Due:
    """Something that happens by itself at an instant unless an action comes first."""

    at_ms: int
    kind: str
    """``first_move`` (abort), ``flag`` (timeout) or ``disconnect`` (forfeit)."""
    seat: int


SAME_INSTANT_ORDER = ("flag", "phase", "disconnect", "stand_in")
NOT_AN_END = ("phase", "stand_in")
"""What may fall due without ending the match: a timed phase's deadline (the engine says what follows)
and a stand-in's turn (it plays for the absent seat)."""
"""Which of a live match's automatic ends counts as first when they fall due in the same millisecond.

The flag comes first: the clock is the game's own rule (the ruleset says what it means, e.g. a FIDE draw
against a lone king) and is measured by the server to the millisecond, while a disconnection's instant is
when a gateway last vouched for the seat (a stream's close, or a lease's last renewal). Between two
disconnect forfeits at the same instant (both seats gone since before the first move, say), the seat to
move forfeits: its absence is what holds the game up.
"""


@dataclass(frozen=True, slots=True)
class MatchRecord:
    """A match after some prefix of its log."""

    setup: MatchSetup
    options: Any
    game: Any
    clock: Clock
    sequence: int
    last_event: MatchEvent
    outcome: Outcome | None = None
    ended_at_ms: int | None = None
    moves_made: tuple[int, ...] = (0, 0)
    turn_since_ms: int = 0
    """When the turn of the seat to move began (for the first-move timeout)."""
    live_since_ms: int | None = None
    disconnected_since: tuple[int | None, ...] = (None, None)
    clock_marks: tuple[ClockMark, ...] = ()
    draws: tuple[DrawUsed, ...] = ()
    """Every draw the match used, in the order it was logged (what the fairness proof must contain)."""
    stood_in: tuple[bool, ...] = (False, False)
    """Per seat: a stand-in played for it at least once (what settlement reads)."""
    phase_since_ms: int | None = None
    """When the phase the game is in began, while it is in one that its own deadline times instead of
    the clocks (:class:`~libs.engines.base.PhaseDeadline`); ``None`` otherwise."""

    @property
    def match_id(self) -> str:
        return self.setup.match_id

    @property
    def status(self) -> MatchStatus:
        if self.outcome is not None:
            aborted = self.outcome.termination is Termination.ABORTED
            return MatchStatus.ABORTED if aborted else MatchStatus.FINISHED
        return MatchStatus.LIVE if self.live_since_ms is not None else MatchStatus.WAITING

    @property
    def is_over(self) -> bool:
        return self.outcome is not None

    @property
    def last_at_ms(self) -> int:
        return self.last_event.at_ms

    def to_move(self, family: Family) -> int | None:
        return None if self.is_over else family.engine.to_move(self.game)

    def chance_needed(self, family: Family) -> ChanceRequest | None:
        """The draw the game waits for (nobody can act until it is logged), or ``None``."""
        return None if self.is_over else family.engine.chance_needed(self.game)

    def connected_seats(self) -> tuple[int, ...]:
        return tuple(seat for seat, since in enumerate(self.disconnected_since) if since is None)

    def phase_due_ms(self, family: Family) -> int | None:
        """When the timed phase the game is in reaches its deadline (``None``: no such phase now)."""
        if self.phase_since_ms is None or self.is_over:
            return None
        phase = phase_deadline(family, self.game)
        return None if phase is None else self.phase_since_ms + phase.within_ms

    def due(self, family: Family) -> list[Due]:
        """What will happen by itself, in the order it would happen (empty once the match is over).

        Before the match is live: only the no-show abort, at the first mover's deadline. Once it is live:
        the side to move's flag and each disconnected seat's forfeit, earliest first, ties broken by
        :data:`SAME_INSTANT_ORDER` and then the seat to move first.
        """
        mover = self.to_move(family)
        if mover is None:
            return []
        if self.live_since_ms is not None and self.chance_needed(family) is not None:
            # Play waits for a draw from the fairness service: nobody can act, so nothing falls due (the
            # draw's event charges the wait to nobody, and the counts go on from there).
            return []
        if self.live_since_ms is None:
            # Play has not begun: no clock runs and nobody can forfeit. A game that begins in a timed
            # phase (a setup both seats make at once) has that phase's deadline; otherwise a first move
            # that does not come in time aborts the match.
            phase = phase_deadline(family, self.game)
            if phase is not None and self.phase_since_ms is not None:
                seat = phase.seat if phase.seat is not None else mover
                return [Due(self.phase_since_ms + phase.within_ms, "phase", seat)]
            return [Due(self.turn_since_ms + self.setup.first_move_timeout_ms, "first_move", mover)]
        found: list[Due] = []
        phase = phase_deadline(family, self.game)
        if phase is not None and self.phase_since_ms is not None:
            # A phase its own deadline times: no clock runs (so no flag can fall) until it ends.
            seat = phase.seat if phase.seat is not None else mover
            found.append(Due(self.phase_since_ms + phase.within_ms, "phase", seat))
        else:
            flag_at = self.clock.flag_at_ms()
            if flag_at is not None:
                found.append(Due(flag_at, "flag", mover))
        stand_in_after = self.setup.stand_in_after_ms
        for seat, since in enumerate(self.disconnected_since):
            if since is None:
                continue
            start = max(since, self.live_since_ms)
            if not stand_in_after:
                found.append(Due(start + self.setup.disconnect_forfeit_ms, "disconnect", seat))
            elif seat == mover and phase is None:
                # Away long enough, and its turn (outside a timed phase: the player's own step): the
                # stand-in plays, as soon as the turn is there.
                found.append(Due(max(start + stand_in_after, self.last_at_ms), "stand_in", seat))
        return sorted(found, key=lambda d: (d.at_ms, SAME_INSTANT_ORDER.index(d.kind), d.seat != mover))

    def overdue(self, family: Family, now_ms: int) -> tuple[Due, Outcome | None] | None:
        """The first thing that has happened by itself by ``now_ms``, and the outcome it brings (``None``
        for a phase's deadline: what follows is the engine's to say, through a ``deadline`` event)."""
        for due in self.due(family):
            if due.at_ms > now_ms:
                return None
            return due, None if due.kind in NOT_AN_END else self._outcome_of(family, due)
        return None

    def _outcome_of(self, family: Family, due: Due) -> Outcome:
        other = 1 - due.seat
        name = _seat_name(family, due.seat)
        if due.kind == "first_move":
            seconds = self.setup.first_move_timeout_ms / 1000
            return Outcome(
                Termination.ABORTED, None, detail=f"{name} did not make a first move within {seconds:g} s"
            )
        if due.kind == "flag":
            return family.engine.timeout_outcome(self.game, due.seat)
        seconds = self.setup.disconnect_forfeit_ms / 1000
        return Outcome(
            Termination.DISCONNECT,
            other,
            detail=f"{name} stayed disconnected for {seconds:g} s",
            score=_win_score(other),
        )


def _seat_name(family: Family, seat: int) -> str:
    if family.name == "chess":
        return ("White", "Black")[seat]
    return f"seat {seat}"


def _win_score(winner: int) -> tuple[float, ...]:
    return (1.0, 0.0) if winner == 0 else (0.0, 1.0)


def created(family: Family, event: MatchEvent) -> MatchRecord:
    """The record of a match right after its ``created`` event."""
    setup = MatchSetup.from_json(event.payload)
    options = family.options_from_json(setup.options)
    seats = len(setup.players)
    game = family.engine.new_game(options)
    return MatchRecord(
        setup=setup,
        options=options,
        game=game,
        clock=Clock.new(setup.time_control, seats),
        sequence=event.sequence,
        last_event=event,
        moves_made=(0,) * seats,
        turn_since_ms=event.at_ms,
        disconnected_since=(event.at_ms,) * seats,
        # A game that begins in a timed phase (Game of the Generals' setup) is timed by it from creation.
        phase_since_ms=event.at_ms if phase_deadline(family, game) is not None else None,
    )


def step(family: Family, record: MatchRecord, event: MatchEvent) -> MatchRecord:
    """The record after ``event``; raises the engine's rules errors for an action it refuses."""
    if event.sequence != record.sequence + 1:
        raise ValueError(f"event {event.sequence} does not follow {record.sequence}")
    base = replace(record, sequence=event.sequence, last_event=event)
    if event.kind is EventKind.ACTION:
        return _in_phase(family, _act(family, base, event), event.at_ms)
    if event.kind is EventKind.DEADLINE:
        engine = family.engine
        if not isinstance(engine, TimesPhases) or engine.phase_deadline(record.game) is None:
            raise ValueError("the log has a phase deadline for a game in no timed phase")
        game = engine.on_phase_deadline(record.game)
        outcome = engine.outcome(game)
        updated = _turn_passed(family, replace(base, game=game), event.at_ms)
        return _in_phase(
            family, updated if outcome is None else _end(updated, outcome, event.at_ms), event.at_ms
        )
    if event.kind is EventKind.PRESENCE:
        assert event.seat is not None
        since = list(record.disconnected_since)
        if event.payload["connected"]:
            since[event.seat] = None
        elif since[event.seat] is None:
            # A lease that ran out: the seat was last vouched for at since_ms (libs/match/presence.py).
            since[event.seat] = min(int(event.payload.get("since_ms", event.at_ms)), event.at_ms)
        return replace(base, disconnected_since=tuple(since))
    if event.kind is EventKind.RESUMED:
        credited = resumed(record, int(event.payload["down_from_ms"]), event.at_ms)
        return replace(credited, sequence=event.sequence, last_event=event)
    if event.kind is EventKind.RESIGN:
        assert event.seat is not None
        return _end(base, family.engine.resignation_outcome(record.game, event.seat), event.at_ms)
    if event.kind is EventKind.END:
        return _end(base, outcome_from_json(event.payload["outcome"]), int(event.payload["ended_at_ms"]))
    if event.kind is EventKind.CHANCE:
        waited_from = event.payload.get("waited_from_ms")
        if waited_from is not None and record.live_since_ms is not None:
            # Nobody could act while the draw was awaited (the fairness service slow or down): that wait
            # is charged to nobody, as a server outage is not (docs/match-runtime.md).
            base = replace(
                resumed(record, int(waited_from), event.at_ms), sequence=event.sequence, last_event=event
            )
        request = ChanceRequest.from_json(event.payload["request"])
        needed = family.engine.chance_needed(record.game)
        if needed != request:
            raise ValueError(f"the game needs draw {needed}, the log has {request}")
        values = tuple(int(v) for v in event.payload["values"])
        game = family.engine.apply_chance(record.game, request, values)
        outcome = family.engine.outcome(game)
        updated = _turn_passed(
            family, replace(base, game=game, draws=(*record.draws, DrawUsed(request, values))), event.at_ms
        )
        return _in_phase(
            family, updated if outcome is None else _end(updated, outcome, event.at_ms), event.at_ms
        )
    raise ValueError(f"unexpected event kind {event.kind}")


def phase_deadline(family: Family, game: Any) -> PhaseDeadline | None:
    """The deadline of the timed phase ``game`` is in (``None``: the clocks time it, or the engine has no
    such phases)."""
    engine = family.engine
    if not _times_phases(type(engine)):
        return None
    return cast(TimesPhases, engine).phase_deadline(game)


@cache
def _times_phases(engine_type: type) -> bool:
    """Whether engines of this type have timed phases: asked on every step and every look at what is
    due, and a protocol check costs microseconds, so it is answered once per type."""
    return issubclass(engine_type, TimesPhases)


def _in_phase(family: Family, record: MatchRecord, at_ms: int) -> MatchRecord:
    """``record`` with its clock and phase start kept in step with the game's timed phase: entering one
    stops the clock (nobody's time runs) and notes when it began; leaving it hands the clock over to the
    game's next mover, charged from then (docs/match-runtime.md, "Phases")."""
    if record.is_over:
        return record if record.phase_since_ms is None else replace(record, phase_since_ms=None)
    phase = phase_deadline(family, record.game)
    clock = record.clock
    if phase is not None:
        if clock.is_running:
            clock = clock.pause(max(at_ms, clock.since_ms or at_ms))
        # The count runs from the phase's start, or (a phase with clocks of its own) from its latest event.
        since = record.phase_since_ms if record.phase_since_ms is not None and not phase.per_move else at_ms
        return replace(record, clock=clock, phase_since_ms=since)
    if record.phase_since_ms is None:
        return record
    if not record.clock.is_started:
        # The phase the game began with is over (both seats set up): nobody has moved yet, so no clock
        # runs; the first mover's no-show count starts now (after the first mover's draw, if one comes).
        return replace(record, phase_since_ms=None, turn_since_ms=at_ms)
    mover = family.engine.to_move(record.game)
    if (
        clock.is_started
        and clock.paused
        and mover is not None
        and family.engine.chance_needed(record.game) is None
    ):
        # The phase is over and someone is to move: their time runs from now (the turn's start).
        return replace(record, clock=clock.hand_over(at_ms, mover), phase_since_ms=None, turn_since_ms=at_ms)
    return record  # (a draw comes first: the clock waits for it, paused, and is handed over after)


def _turn_passed(family: Family, record: MatchRecord, at_ms: int) -> MatchRecord:
    """``record`` with its clock handed to the game's mover when something other than that seat's own
    action passed the turn: a draw (a backgammon roll with no legal play forfeits the turn) or a phase's
    deadline. The seat whose time was running is charged up to ``at_ms`` as for a move, with no increment
    or bonus (it played nothing), and gets a clock mark; the next seat's time runs from ``at_ms``.
    Without this the clock would run on for the seat that had passed, through the opponent's whole turn
    (docs/match-runtime.md, "Time").

    A seat whose flag fell before ``at_ms`` keeps the clock: the flag is what ends its turn, and the
    runtime settles it first."""
    clock = record.clock
    if record.is_over or not clock.is_running or clock.is_flagged(at_ms):
        return record
    mover = family.engine.to_move(record.game)
    running = clock.to_move
    if mover is None or mover == running:
        return record
    assert running is not None
    passed = clock.pass_turn(at_ms, to_move=mover).clock
    mark = ClockMark(running, passed.remaining_ms(running, at_ms), at_ms)
    return replace(record, clock=passed, clock_marks=(*record.clock_marks, mark), turn_since_ms=at_ms)


def resumed(record: MatchRecord, down_from_ms: int, at_ms: int) -> MatchRecord:
    """The record after its shard was down from ``down_from_ms`` to ``at_ms``: nobody is charged for it.

    "Server downtime is not a player's time" (docs/match-runtime.md). The outage starts no earlier
    than the record's last event (the shard was up when it logged it). Every running count stops for
    the outage and goes on from ``at_ms`` where it stood at its start: the side to move's clock (the
    time it had at ``down_from_ms``), the first mover's no-show count, and each disconnected seat's
    forfeit count (nobody could reconnect to a shard that was down). A flag or a forfeit that fell
    before the outage is not undone: the caller ends the match for it first.
    """
    start = min(max(down_from_ms, record.last_at_ms), at_ms)
    credit = at_ms - start
    if credit <= 0 or record.is_over:
        return record
    clock = record.clock
    if clock.is_running:
        assert clock.since_ms is not None
        clock = clock.pause(max(start, clock.since_ms)).resume(at_ms)
    live = record.live_since_ms
    if live is None:
        # Waiting for the first move: its count resumes where it stood.
        return replace(record, clock=clock, turn_since_ms=record.turn_since_ms + credit)
    since = tuple(None if s is None else max(s, live) + credit for s in record.disconnected_since)
    phase_since = None if record.phase_since_ms is None else record.phase_since_ms + credit
    return replace(record, clock=clock, disconnected_since=since, phase_since_ms=phase_since)


def _end(record: MatchRecord, outcome: Outcome, at_ms: int) -> MatchRecord:
    clock = record.clock
    if clock.is_running:
        clock = clock.pause(max(at_ms, clock.since_ms or at_ms))
    return replace(record, outcome=outcome, ended_at_ms=at_ms, clock=clock)


def _act(family: Family, record: MatchRecord, event: MatchEvent) -> MatchRecord:
    assert event.seat is not None
    engine = family.engine
    action = family.action_from_json(event.payload["action"])
    mover = engine.to_move(record.game)
    now = event.at_ms
    seats = len(record.moves_made)
    declared = family.is_move(action) if isinstance(family, SaysWhatIsAMove) else None
    # The clock as it would be if this action ends the mover's turn (engines read it for tiebreaks).
    presses = record.clock.is_running and mover == event.seat and declared is not False
    pressed = record.clock.press(now).clock if presses else record.clock
    stand_in = bool(event.payload.get("stand_in"))
    context = ActionContext(
        remaining_ms=tuple(pressed.remaining_ms(s, now) for s in range(seats)),
        phase_elapsed_ms=0 if record.phase_since_ms is None else max(0, now - record.phase_since_ms),
        stand_in=stand_in,
    )
    if stand_in:
        stood = list(record.stood_in)
        stood[event.seat] = True
        record = replace(record, stood_in=tuple(stood))
    game = engine.apply(record.game, event.seat, action, context)
    next_mover = engine.to_move(game)
    outcome = engine.outcome(game)
    if declared is None and isinstance(family, JudgesMovesByResult):
        # The action alone does not say (a FIDE claim made with its move): the family tells by the states.
        is_move = family.moved(record.game, game)
    else:
        is_move = declared if declared is not None else (next_mover != mover or outcome is not None)
    if record.phase_since_ms is not None:
        is_move = False  # an action in a phase no clock times (a "continue" between games) is not a move
    if not is_move:
        # Not a move (a draw offer, accept or claim): no move counted, no press, no clock mark. If it
        # ends the game, the clock stops at this instant (the running side is charged up to it).
        updated = replace(record, game=game)
        return updated if outcome is None else _end(updated, outcome, now)
    clock = record.clock
    marks = record.clock_marks
    if not clock.is_started:
        clock = clock.start(now, to_move=next_mover if next_mover is not None else (event.seat + 1) % seats)
    else:
        clock = clock.press(now, to_move=next_mover).clock
    marks = (*marks, ClockMark(event.seat, clock.remaining_ms(event.seat, now), now))
    made = list(record.moves_made)
    made[event.seat] += 1
    updated = replace(
        record,
        game=game,
        clock=clock,
        clock_marks=marks,
        moves_made=tuple(made),
        turn_since_ms=now,
        live_since_ms=record.live_since_ms if record.live_since_ms is not None else now,
    )
    if outcome is not None:
        return _end(updated, outcome, now)
    return updated
