"""The match log, match summaries and results in the database.

Appends go through a :class:`~libs.persistence.group_commit.GroupCommitter`: the events of many
matches share a commit, and each caller is answered only once its event is durable. Reads and the
result outbox's bookkeeping go through it too (``read`` and ``run_sync``): on SQLite the process's
connections to the file take turns, and a transaction on the async driver (several thread trips, each
waiting for a busy event loop) held the turn for hundreds of milliseconds while every move's commit
queued behind it.

A shard's store is fenced (:class:`~libs.persistence.ownership.Fence`): every write commits only while the
shard's epoch is still the one the store was built under, so a process that lost the shard to another can
never append to the log again (``UNAVAILABLE``, "shard X lost its ownership; retry").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, and_, func, insert, select, update

from libs.match.model import EventKind, MatchEvent, MatchRecord, outcome_to_json
from libs.persistence import Database
from libs.persistence.group_commit import GroupCommitter, WriteFence
from libs.persistence.schema import match_events, match_results, matches

UNFINISHED = ("waiting", "live")


@dataclass(frozen=True, slots=True)
class MatchResultRow:
    """A finished match's stored result."""

    match_id: str
    result: dict[str, Any]
    record: str
    record_format: str


@dataclass(frozen=True, slots=True)
class MatchSummaryRow:
    """One match of a shard as the database has it: for listing."""

    match_id: str
    status: str
    sequence: int
    players: tuple[str, ...]
    """Player id by seat."""


class MatchStore:
    """The durable side of one rules shard."""

    def __init__(self, db: Database, family: str, shard: str, fence: WriteFence | None = None) -> None:
        """``fence``: the shard's ownership epoch every write is conditional on (the service's store has
        one; a test's may go without)."""
        self._family = family
        self._shard = shard
        self._writer = GroupCommitter(db, fence=fence)

    async def close(self) -> None:
        """Commit what is queued and stop the writer: later writes are refused with ``CommitterClosed``,
        which the runtime answers ``UNAVAILABLE`` (the service is shutting down; the caller retries)."""
        await self._writer.close()

    async def create(self, event: MatchEvent) -> None:
        """Store a new match with its ``created`` event (IntegrityError if the id exists)."""

        def work(conn: Connection) -> None:
            conn.execute(
                insert(matches).values(
                    match_id=event.payload["match_id"],
                    family=self._family,
                    shard=self._shard,
                    status="waiting",
                    created_at_ms=event.at_ms,
                )
            )
            conn.execute(insert(match_events).values(**_event_row(event.payload["match_id"], event)))

        await self._writer.run_sync(work)

    async def append(self, record: MatchRecord, previous_status: str, result: dict[str, Any] | None) -> None:
        """Append the record's last event; update the summary and store the result when they change."""
        event = record.last_event
        status = record.status.value

        def work(conn: Connection) -> None:
            if status != previous_status:
                conn.execute(
                    update(matches)
                    .where(matches.c.match_id == record.match_id)
                    .values(status=status, ended_at_ms=record.ended_at_ms)
                )
            if result is not None:
                conn.execute(insert(match_results).values(**result))

        # The event row goes in with every other match's events of the same group commit, in one
        # statement; the summary and result, which change rarely, as work of their own.
        changed = status != previous_status or result is not None
        await self._writer.insert(
            ((match_events, _event_row(record.match_id, event)),), work if changed else None
        )

    async def load_unfinished(self) -> dict[str, list[MatchEvent]]:
        """The logs of this shard's matches that are not over, by match id, in sequence order."""
        query = (
            select(match_events)
            .join(matches, matches.c.match_id == match_events.c.match_id)
            .where(
                matches.c.shard == self._shard,
                matches.c.family == self._family,
                matches.c.status.in_(UNFINISHED),
            )
            .order_by(match_events.c.match_id, match_events.c.sequence)
        )

        def read(conn: Connection) -> dict[str, list[MatchEvent]]:
            logs: dict[str, list[MatchEvent]] = defaultdict(list)
            for row in conn.execute(query):
                logs[row.match_id].append(event_from_row(row._mapping))
            return dict(logs)

        return await self._writer.read(read)

    async def event_by_key(self, match_id: str, idempotency_key: str) -> MatchEvent | None:
        """The event ``idempotency_key`` logged in ``match_id``, if any (a retry's original answer)."""
        query = select(match_events).where(
            match_events.c.match_id == match_id, match_events.c.idempotency_key == idempotency_key
        )

        def read(conn: Connection) -> MatchEvent | None:
            row = conn.execute(query).first()
            return None if row is None else event_from_row(row._mapping)

        return await self._writer.read(read)

    async def load_log(self, match_id: str) -> list[MatchEvent]:
        query = (
            select(match_events).where(match_events.c.match_id == match_id).order_by(match_events.c.sequence)
        )
        return await self._writer.read(
            lambda conn: [event_from_row(row._mapping) for row in conn.execute(query)]
        )

    async def summaries(
        self, statuses: Sequence[str], *, after: str | None = None, limit: int
    ) -> list[MatchSummaryRow]:
        """Up to ``limit`` of this shard's matches as committed (every status, or only ``statuses``), by
        match id, from the first one after ``after`` (from the first one when ``None``).

        A keyset page: each page starts where the last one ended whatever was created or changed
        meanwhile (``ix_matches_family_shard_match_id`` serves the range in order). The status is the
        summary kept with the log; the sequence is the last logged event's and the players come from the
        ``created`` event, so finished and aborted matches that are no longer in memory are listed like
        live ones.
        """
        # The page's matches first, then the log of those only: joined before the limit, PostgreSQL
        # may merge-join the whole log up to the page instead.
        page_query = select(matches.c.match_id, matches.c.status).where(
            matches.c.family == self._family, matches.c.shard == self._shard
        )
        if statuses:
            page_query = page_query.where(matches.c.status.in_(statuses))
        if after is not None:
            page_query = page_query.where(matches.c.match_id > after)
        page = page_query.order_by(matches.c.match_id).limit(limit).subquery("page")
        created = match_events.alias("created")
        last_sequence = (
            select(func.max(match_events.c.sequence))
            .where(match_events.c.match_id == page.c.match_id)
            .scalar_subquery()
        )
        query = (
            select(page.c.match_id, page.c.status, last_sequence.label("sequence"), created.c.payload)
            .join(created, and_(created.c.match_id == page.c.match_id, created.c.sequence == 1))
            .order_by(page.c.match_id)
        )
        return await self._writer.read(
            lambda conn: [
                MatchSummaryRow(row.match_id, row.status, int(row.sequence), tuple(row.payload["players"]))
                for row in conn.execute(query)
            ]
        )

    async def result(self, match_id: str) -> MatchResultRow | None:
        query = select(match_results).where(match_results.c.match_id == match_id)
        row = await self._writer.read(lambda conn: conn.execute(query).first())
        if row is None:
            return None
        return MatchResultRow(row.match_id, dict(row.result), row.record, row.record_format)

    # -- the result outbox (libs.match.reporting) ------------------------------------------------------

    def _unreported(self, query: Select[Any]) -> Select[Any]:
        """``query`` narrowed to this shard's results not yet reported."""
        return query.join(matches, matches.c.match_id == match_results.c.match_id).where(
            match_results.c.reported_at_ms.is_(None),
            matches.c.family == self._family,
            matches.c.shard == self._shard,
        )

    async def unreported_results(self) -> list[dict[str, Any]]:
        """This shard's results that have not reached every recipient yet, oldest first."""
        query = self._unreported(select(match_results)).order_by(match_results.c.ended_at_ms)
        return await self._writer.read(lambda conn: [dict(row._mapping) for row in conn.execute(query)])

    async def has_unreported_results(self) -> bool:
        query = self._unreported(select(match_results.c.match_id)).limit(1)
        return await self._writer.read(lambda conn: conn.execute(query).first() is not None)

    async def mark_reported(self, match_id: str, at_ms: int) -> None:
        """Every recipient has ``match_id``'s result: it leaves the outbox (durable before returning)."""

        def work(conn: Connection) -> None:
            conn.execute(
                update(match_results).where(match_results.c.match_id == match_id).values(reported_at_ms=at_ms)
            )

        await self._writer.run_sync(work)


def result_row(record: MatchRecord, record_text: str, record_format: str) -> dict[str, Any]:
    """The ``match_results`` row of a finished record."""
    assert record.outcome is not None
    assert record.ended_at_ms is not None
    return {
        "match_id": record.match_id,
        "family": record.setup.family,
        "termination": record.outcome.termination.value,
        "winner": record.outcome.winner,
        "result": {
            **outcome_to_json(record.outcome),
            "ended_at_ms": record.ended_at_ms,
            "stood_in": [seat for seat, stood in enumerate(record.stood_in) if stood],
        },
        "seats": list(record.setup.players),
        "record": record_text,
        "record_format": record_format,
        "clock_history": [[m.seat, m.remaining_ms, m.at_ms] for m in record.clock_marks],
        "fairness_commitment": record.setup.fairness_commitment,
        "ended_at_ms": record.ended_at_ms,
    }


def _event_row(match_id: str, event: MatchEvent) -> dict[str, Any]:
    payload = dict(event.payload)
    if event.seat is not None:
        payload["seat"] = event.seat
    return {
        "match_id": match_id,
        "sequence": event.sequence,
        "kind": event.kind.value,
        "payload": payload,
        "at_ms": event.at_ms,
        "idempotency_key": event.idempotency_key,
    }


def event_from_row(row: Any) -> MatchEvent:
    """A ``match_events`` row (a mapping) as the event it stores (for readers of the log outside the
    store too: the chaos run's checks)."""
    payload = dict(row["payload"])
    seat = payload.pop("seat", None)
    return MatchEvent(
        sequence=int(row["sequence"]),
        kind=EventKind(row["kind"]),
        at_ms=int(row["at_ms"]),
        payload=payload,
        seat=None if seat is None else int(seat),
        idempotency_key=row["idempotency_key"],
    )


__all__: Sequence[str] = ["MatchResultRow", "MatchStore", "MatchSummaryRow", "event_from_row", "result_row"]
