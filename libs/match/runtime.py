"""The matches of one rules shard: creation, lookup, recovery after a restart, wake-ups."""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError

from libs.match.actor import MatchActor, replay
from libs.match.chance import ChanceSource
from libs.match.deadlines import Deadlines
from libs.match.family import Family
from libs.match.ids import MatchId, MatchIdError
from libs.match.model import EventKind, MatchEvent, MatchSetup
from libs.match.presence import DEFAULT_LEASE_MS, clamp_lease_ms
from libs.match.reporting import ResultReporter
from libs.match.store import MatchStore, MatchSummaryRow
from libs.runtime.errors import (
    AlreadyExists,
    ErrorReason,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unavailable,
    invalid_field,
)
from libs.runtime.game_metrics import MatchMetrics
from libs.runtime.log import get_logger
from libs.runtime.timesource import ServiceTime

FINISHED_KEPT = 1_000
"""Finished matches kept in memory for late readers; older ones are read back from the log on demand."""
_log = get_logger(__name__)


class MatchRuntime:
    """Every match of one family on one shard."""

    def __init__(
        self,
        family: Family,
        shard: int,
        store: MatchStore,
        deadlines: Deadlines,
        time: ServiceTime,
        reporter: ResultReporter | None = None,
        chance: ChanceSource | None = None,
        *,
        down_since_ms: int | None = None,
        credit_downtime: bool = False,
        lease_ms: int = DEFAULT_LEASE_MS,
    ) -> None:
        """``down_since_ms``: the last instant the shard's previous owner was known alive (its last
        heartbeat); from then until this runtime starts the shard was down, and that time is charged to
        nobody (docs/match-runtime.md, "Server downtime is not a player's time"). ``None`` with
        ``credit_downtime``: the latest event of the shard's unfinished matches stands in for it;
        ``None`` without it: nothing is credited. ``lease_ms``: the presence lease a renewal that names
        none gets, and the one every seat connected in the log gets on recovery."""
        self._down_since_ms = down_since_ms
        self._credit_downtime = credit_downtime
        self.lease_ms = lease_ms
        self._reporter = reporter
        self._chance = chance
        self.has_chance = chance is not None
        """Whether draws can be had (a family whose options may draw needs it for those matches)."""
        self.family = family
        self.shard = shard
        self._store = store
        self._deadlines = deadlines
        self._time = time
        self.metrics = MatchMetrics(family.name, shard)
        """The shard's metrics (libs/runtime/game_metrics.py), bound once and shared by its matches."""
        if reporter is not None:
            reporter.backlog = self.metrics.outbox_backlog
        self._actors: dict[str, MatchActor] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self._closed = False
        """Set by :meth:`close`: every call is refused ``UNAVAILABLE`` from then on. A shard that lost its
        ownership closes its runtime and, once it holds the shard again, serves a new one read from the
        log; until then a call must not reach (nor load) an actor of the closed one, whose updates would
        never come."""

    async def start(self) -> None:
        """Rebuild every unfinished match from its log, end what fell due while down, re-arm the rest."""
        await self._deadlines.start(self.wake)
        if self._reporter is not None:
            self._reporter.start()
        logs = await self._store.load_unfinished()
        for match_id, events in logs.items():
            self._actors[match_id] = actor = self._actor(events)
            actor.count_live()
        down_from = self._down_since_ms
        if down_from is None and self._credit_downtime and logs:
            # WIRING POINT: until the shard lock reports the previous owner's last heartbeat, the latest
            # logged instant of the shard stands in (it may credit the quiet time before a crash too).
            down_from = max(events[-1].at_ms for events in logs.values())
        # All at once: each match's resumed event is logged at (nearly) the same instant, in shared
        # group commits, rather than one after another while the later ones' clocks would run.
        actors = list(self._actors.values())
        await asyncio.gather(*(actor.start(down_from) for actor in actors))
        for actor in actors:
            self._note_if_finished(actor)
        _log.info(
            "matches.recovered",
            family=self.family.name,
            shard=self.shard,
            matches=len(logs),
            down_from_ms=down_from,
            down_ms=None if down_from is None else self.now_ms() - down_from,
        )

    @property
    def store(self) -> MatchStore:
        """The shard's durable side (the log, summaries and results)."""
        return self._store

    def now_ms(self) -> int:
        return self._time.now_ms()

    def check_id(self, match_id: str) -> MatchId:
        """Parse ``match_id`` and make sure it belongs to this family and shard."""
        try:
            parsed = MatchId.parse(match_id)
        except MatchIdError as error:
            raise invalid_field("match_id", str(error)) from None
        if parsed.family != self.family.name:
            raise InvalidArgument(
                f"match {match_id} is a {parsed.family} match; this is the {self.family.name} service",
                reason=ErrorReason.ERROR_REASON_WRONG_FAMILY,
            )
        if parsed.shard != self.shard:
            raise FailedPrecondition(
                f"match {match_id} belongs to shard {parsed.shard}; this is shard {self.shard}",
                reason=ErrorReason.ERROR_REASON_WRONG_STATE,
            )
        return parsed

    def _serving(self) -> None:
        if self._closed:
            raise Unavailable(
                f"rules-{self.family.name} shard {self.shard} is not serving right now (restarting, or "
                "taking its shard again after losing it); retry",
                reason=ErrorReason.ERROR_REASON_SHARD_NOT_SERVING,
            )

    async def create(self, setup: MatchSetup, idempotency_key: str) -> MatchActor:
        """Create the match, or find it again for a retry of the request that created it.

        A retry is the same request again: the same idempotency key, seats, options, clock, commitment and
        timeouts. Anything else under an existing match id is ``ALREADY_EXISTS``, naming what differs.
        """
        self._serving()
        existing = await self._find(setup.match_id)
        if existing is not None:
            _check_retry(existing.created_event, setup, idempotency_key)
            return existing
        event = MatchEvent(1, EventKind.CREATED, setup.created_at_ms, setup.to_json(), None, idempotency_key)
        actor = self._actor([event])
        # Registered before the first await: a reader who finds the new row in the database while it is
        # being committed must get this actor, never build a second one from the log (two writers of
        # one match would collide on sequence numbers).
        self._actors[setup.match_id] = actor
        actor.count_live()
        try:
            await self._store.create(event)
        except BaseException as error:
            actor.close()  # (out of the live count)
            if self._actors.get(setup.match_id) is actor:
                del self._actors[setup.match_id]
            if isinstance(error, IntegrityError):
                raise AlreadyExists(
                    f"match {setup.match_id} exists already", reason=ErrorReason.ERROR_REASON_ALREADY_EXISTS
                ) from None
            raise
        await actor.start()
        return actor

    async def get(self, match_id: str) -> MatchActor:
        self.check_id(match_id)
        actor = await self._find(match_id)
        if actor is None:
            raise NotFound(f"no match {match_id}", reason=ErrorReason.ERROR_REASON_MATCH_NOT_FOUND)
        return actor

    async def _find(self, match_id: str) -> MatchActor | None:
        self._serving()
        actor = self._actors.get(match_id)
        if actor is not None:
            return actor
        events = await self._store.load_log(match_id)  # a finished match evicted from memory
        self._serving()  # closed while the log was read: its actors are not to be handed out
        raced = self._actors.get(match_id)  # created or loaded by someone else meanwhile: one actor only
        if raced is not None:
            return raced
        if not events:
            return None
        actor = self._actor(events)
        self._actors[match_id] = actor
        actor.count_live()
        self._note_if_finished(actor)
        return actor

    def _actor(self, events: list[MatchEvent]) -> MatchActor:
        notify = self._reporter.notify if self._reporter is not None else (lambda: None)
        return MatchActor(
            self.family,
            events,
            self._store,
            self._deadlines,
            self._time,
            notify,
            self._chance,
            self.lease_ms,
            self.metrics,
        )

    async def renew_presence(
        self,
        holder: str,
        held: Sequence[tuple[str, int]],
        released: Sequence[tuple[str, int]],
        lease_ms: int = 0,
    ) -> tuple[int, list[tuple[str, int]]]:
        """A gateway instance's presence report (``RenewPresence``): release ``released``, renew ``held``
        for ``lease_ms`` (0: the default; clamped to 1-60 s). Returns the lease granted and the seats of
        ``held`` nobody holds a lease on (unknown here, out of range, or over). Answers once every change
        of presence it caused is logged."""
        self._serving()
        granted = clamp_lease_ms(lease_ms, self.lease_ms)
        pending: list[asyncio.Future[None]] = []
        for match_id, seat in released:
            actor = self._actors.get(match_id)
            if actor is not None and actor.seat_in_range(seat):
                task = actor.release_presence(seat, holder)
                if task is not None:
                    pending.append(task)
        ignored: list[tuple[str, int]] = []
        for match_id, seat in held:
            actor = self._actors.get(match_id)
            if actor is None or actor.record.is_over or not actor.seat_in_range(seat):
                ignored.append((match_id, seat))
                continue
            task = actor.renew_presence(seat, holder, granted)
            if task is not None:
                pending.append(task)
        for task in set(pending):
            await asyncio.shield(task)
        return granted, ignored

    def _note_if_finished(self, actor: MatchActor) -> None:
        if not actor.record.is_over:
            return
        self._finished[actor.match_id] = None
        while len(self._finished) > FINISHED_KEPT:
            evicted, _ = self._finished.popitem(last=False)
            self._actors.pop(evicted, None)

    async def wake(self, match_id: str) -> None:
        actor = self._actors.get(match_id)
        if actor is not None:
            await actor.wake()
            self._note_if_finished(actor)

    def note_progress(self, actor: MatchActor) -> None:
        """Called after an action: a finished match moves to the finished list."""
        self._note_if_finished(actor)

    async def summaries(
        self, statuses: Sequence[str], *, after: str | None = None, limit: int
    ) -> list[MatchSummaryRow]:
        """Up to ``limit`` of this shard's matches as committed, in any of ``statuses`` (all when empty),
        by match id, from the first one after ``after``."""
        return await self._store.summaries(statuses, after=after, limit=limit)

    def live(self) -> list[MatchActor]:
        return [a for a in self._actors.values() if not a.record.is_over]

    def live_count(self) -> int:
        """How many matches that are not over this shard holds (every one is in memory: loaded at start,
        kept until its end), whoever created them; ``Unavailable`` while the shard is not serving."""
        self._serving()
        return len(self.live())

    async def close(self) -> None:
        self._closed = True
        for actor in self._actors.values():
            actor.close()
        await self._deadlines.close()
        if self._reporter is not None:
            await self._reporter.close()
        if self._chance is not None:
            await self._chance.close()
        await self._store.close()


def _check_retry(created: MatchEvent, setup: MatchSetup, idempotency_key: str) -> None:
    """Refuse a create request for an existing match unless it repeats the one that created it."""
    match_id = setup.match_id
    if created.idempotency_key != idempotency_key:
        raise AlreadyExists(
            f"match {match_id} exists already, created by another request (a different idempotency key)",
            reason=ErrorReason.ERROR_REASON_ALREADY_EXISTS,
        )
    original = _plain(MatchSetup.from_json(created.payload).to_json())
    asked = _plain(setup.to_json())
    differs = sorted(k for k in asked if k != "created_at_ms" and asked[k] != original.get(k))
    if differs:
        raise AlreadyExists(
            f"match {match_id} exists already with a different {', '.join(differs)}: a retry with the same "
            "idempotency key must repeat the original request",
            reason=ErrorReason.ERROR_REASON_IDEMPOTENCY_KEY_REUSED,
        )


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as the log's JSON would give it back (tuples become lists), for comparison."""
    plain: dict[str, Any] = json.loads(json.dumps(data))
    return plain


__all__ = ["MatchRuntime", "replay"]
