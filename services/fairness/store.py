"""The fairness service's state in the database: commitments, client seeds and the draws issued.

Each operation is a unit of work in a group transaction
(:class:`~libs.persistence.group_commit.GroupCommitter`): the operations of concurrent calls share one
transaction and one durable commit. Operations on one match
serialise on its commitment row (``SELECT ... FOR UPDATE`` on PostgreSQL; a committer runs its
transactions one at a time, and SQLite's are serial anyway), and two operations in the same transaction
see each other's writes in order, so a client seed can never slip in after the first draw and each draw
index is issued exactly once, whatever the concurrency.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from libs.fairness import derivation
from libs.fairness.derivation import DrawKind, DrawSpec
from libs.persistence import Database
from libs.persistence.group_commit import GroupCommitter
from libs.persistence.schema import fairness_client_seeds, fairness_commitments, fairness_draws
from libs.runtime.errors import (
    AlreadyExists,
    ErrorReason,
    FailedPrecondition,
    NotFound,
    invalid_field,
)
from libs.runtime.game_metrics import FAIRNESS_REVEALS
from services.fairness.seed_vault import SeedVault

STATE_OPEN = "open"
STATE_DRAWING = "drawing"
STATE_FINISHED = "finished"
MAX_SEATS = 16
"""Seats 0..15 may add client seeds; a two-player match uses 0 and 1."""
_KEY_CACHE_SIZE = 4096
SHUTTING_DOWN = "the fairness service is shutting down; retry on another instance"
"""Why a call is refused (``UNAVAILABLE``) once the store is closed."""


def wall_clock_ms() -> int:
    """Unix time in milliseconds (services may read the clock; engines may not)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Commitment:
    """A match's public commitment and where its stream is."""

    match_id: str
    commitment: str
    state: str
    committed_at_ms: int
    finished_at_ms: int | None


@dataclass(frozen=True, slots=True)
class IssuedDraw:
    """One recorded draw."""

    stream: str
    index: int
    spec: DrawSpec
    values: tuple[int, ...]
    issued_at_ms: int


@dataclass(frozen=True, slots=True)
class Revelation:
    """Everything needed to verify a finished match's stream offline."""

    commitment: Commitment
    server_seed: bytes
    client_seeds: dict[int, bytes]
    draws: tuple[IssuedDraw, ...]


class FairnessStore:
    """Commit, seed, draw, finish and reveal, each durable before it returns.

        Every operation is one synchronous unit of work run by a :class:`GroupCommitter`: the operations of
        concurrent calls share one transaction and one durable commit (on SQLite, one trip to the
        committer's writer thread), and an operation that fails (a refused draw, say) is run again alone so
        that only it fails. Reads go through it too (:meth:`GroupCommitter.read`: on SQLite in the next
    batch, elsewhere on a connection of their own), and see every write acknowledged before them.
    """

    def __init__(self, db: Database, vault: SeedVault, now_ms: Callable[[], int] = wall_clock_ms) -> None:
        self._vault = vault
        self._now_ms = now_ms
        self.committer = GroupCommitter(db, closed_reason=SHUTTING_DOWN)
        """Runs every operation (its ``batches`` and ``units`` count commits and the operations they
        held); once closed it refuses changes with ``Unavailable`` and :data:`SHUTTING_DOWN`."""
        # Stream keys of matches that have drawn: they can no longer change, so they are safe to keep.
        # Changed only on the event loop; the writer thread only reads it.
        self._keys: OrderedDict[str, bytes] = OrderedDict()

    async def close(self) -> None:
        """Commit what is queued, then stop: later calls are refused with ``Unavailable``."""
        await self.committer.close()

    async def commit(self, match_id: str, idempotency_key: str) -> Commitment:
        """Create the match's server seed; a retry with the same key returns the original commitment."""

        def work(conn: Connection) -> dict[str, Any]:
            existing = _find(conn, match_id)
            if existing is not None:
                return existing
            seed = secrets.token_bytes(derivation.SERVER_SEED_BYTES)
            nonce, ciphertext, key_id = self._vault.seal(match_id, seed)
            row = {
                "match_id": match_id,
                "commitment": derivation.commitment(seed),
                "seed_ciphertext": ciphertext,
                "seed_nonce": nonce,
                "seed_key_id": key_id,
                "idempotency_key": idempotency_key,
                "state": STATE_OPEN,
                "committed_at_ms": self._now_ms(),
                "finished_at_ms": None,
            }
            conn.execute(insert(fairness_commitments).values(row))
            return row

        # Two services committing the same match at once (PostgreSQL): the loser's insert fails, its
        # batch is run again unit by unit, and its retry finds the winner's row.
        made = await self.committer.run_sync(work)
        if made["idempotency_key"] == idempotency_key:
            return _commitment(made)
        raise AlreadyExists(
            f"match {match_id} already has a commitment ({made['commitment']})",
            reason=ErrorReason.ERROR_REASON_ALREADY_EXISTS,
        )

    async def add_client_seed(self, match_id: str, seat: int, seed: bytes) -> dict[int, bytes]:
        """Add ``seat``'s client seed before the first draw; the same seed again changes nothing."""
        if seat >= MAX_SEATS:
            raise invalid_field("seat", f"must be below {MAX_SEATS}, got {seat}")

        def work(conn: Connection) -> dict[int, bytes]:
            row = _get(conn, match_id, lock=True)
            seeds = _client_seeds(conn, match_id)
            if seeds.get(seat) == seed:
                return seeds
            if row["state"] == STATE_FINISHED:
                raise FailedPrecondition(
                    f"match {match_id} is finished; no more client seeds",
                    reason=ErrorReason.ERROR_REASON_MATCH_OVER,
                )
            if row["state"] == STATE_DRAWING:
                raise FailedPrecondition(
                    f"match {match_id} has drawn already; client seeds must come before the first draw",
                    reason=ErrorReason.ERROR_REASON_DRAWS_STARTED,
                )
            if seat in seeds:
                raise AlreadyExists(
                    f"seat {seat} of match {match_id} has added its client seed already",
                    reason=ErrorReason.ERROR_REASON_ALREADY_EXISTS,
                )
            conn.execute(
                insert(fairness_client_seeds).values(
                    match_id=match_id, seat=seat, seed=seed, added_at_ms=self._now_ms()
                )
            )
            return dict(sorted({**seeds, seat: seed}.items()))

        return await self.committer.run_sync(work)

    async def draw(
        self, match_id: str, stream: str, spec: DrawSpec, index: int | None
    ) -> tuple[IssuedDraw, bool]:
        """Issue the next draw of ``stream`` (or return draw ``index`` if already issued).

        The draws of a stream are issued in order with no gaps (docs/fairness.md, "Draw order"):
        ``index`` unset or equal to the number already issued issues the next draw; an index already
        issued returns its recorded draw (an idempotent retry; the same kind, count and bound, or it is
        refused), even after the finish; a later index is refused and records nothing, so no draw can be
        made ahead of the game. After the finish no new draw is issued.

        Returns the draw and whether it was issued now.
        """

        def work(conn: Connection) -> tuple[IssuedDraw, bool, bytes | None]:
            """The draw, whether it is new, and the stream key to remember (the match's first draw)."""
            row = _get(conn, match_id, lock=True)
            issued = conn.scalar(
                select(func.count())
                .select_from(fairness_draws)
                .where(fairness_draws.c.match_id == match_id, fairness_draws.c.stream == stream)
            )
            next_index = int(issued or 0)
            if index is not None and index < next_index:
                recorded = _recorded_draw(conn, match_id, stream, index)
                if recorded.spec != spec:
                    raise FailedPrecondition(
                        f"draw {index} of stream {stream} was issued as {_describe(recorded.spec)}, "
                        f"not {_describe(spec)}",
                        reason=ErrorReason.ERROR_REASON_WRONG_STATE,
                    )
                return recorded, False, None
            if row["state"] == STATE_FINISHED:
                raise FailedPrecondition(
                    f"match {match_id} is finished; no more draws", reason=ErrorReason.ERROR_REASON_MATCH_OVER
                )
            if index is not None and index > next_index:
                raise FailedPrecondition(
                    f"draw {index} of stream {stream} cannot be issued before draw {next_index}: a "
                    f"stream's draws are issued in order with no gaps, and its next index is {next_index}",
                    reason=ErrorReason.ERROR_REASON_WRONG_STATE,
                )
            key = self._keys.get(match_id)
            if key is None:
                key = derivation.stream_key(self._open_seed(row), match_id, _client_seeds(conn, match_id))
            draw = IssuedDraw(
                stream=stream,
                index=next_index,
                spec=spec,
                values=derivation.draw_values(key, stream, next_index, spec),
                issued_at_ms=self._now_ms(),
            )
            conn.execute(
                insert(fairness_draws).values(
                    match_id=match_id,
                    stream=stream,
                    draw_index=draw.index,
                    kind=spec.kind.value,
                    count=spec.count,
                    bound=spec.bound,
                    draw_values=list(draw.values),
                    issued_at_ms=draw.issued_at_ms,
                )
            )
            if row["state"] == STATE_OPEN:
                conn.execute(
                    update(fairness_commitments)
                    .where(fairness_commitments.c.match_id == match_id)
                    .values(state=STATE_DRAWING)
                )
            return draw, True, key  # from here on the client seeds are fixed: the key is too

        draw, issued_now, key = await self.committer.run_sync(work)
        if key is not None:
            self._remember_key(match_id, key)
        return draw, issued_now

    async def finish(self, match_id: str) -> int:
        """Mark the match finished (idempotent): no more draws, and the seed may be revealed.

        Returns when it finished, in Unix milliseconds.
        """

        def work(conn: Connection) -> tuple[int, bool]:
            row = _get(conn, match_id, lock=True)
            if row["state"] == STATE_FINISHED:
                return int(row["finished_at_ms"]), False
            finished_at_ms = self._now_ms()
            conn.execute(
                update(fairness_commitments)
                .where(fairness_commitments.c.match_id == match_id)
                .values(state=STATE_FINISHED, finished_at_ms=finished_at_ms)
            )
            return finished_at_ms, True

        finished_at_ms, now_finished = await self.committer.run_sync(work)
        self._keys.pop(match_id, None)
        if now_finished:
            FAIRNESS_REVEALS.inc()  # committed: the seed may be revealed from now on
        return finished_at_ms

    async def reveal(self, match_id: str) -> Revelation:
        """The seed, client seeds and every draw of a finished match."""

        def work(conn: Connection) -> tuple[dict[str, Any], dict[int, bytes], tuple[IssuedDraw, ...]]:
            row = _get(conn, match_id)
            if row["state"] != STATE_FINISHED:
                raise FailedPrecondition(
                    f"match {match_id} is not finished (state: {row['state']}); the seed is revealed "
                    "only after the match is finished",
                    reason=ErrorReason.ERROR_REASON_MATCH_NOT_OVER,
                )
            result = conn.execute(select(fairness_draws).where(fairness_draws.c.match_id == match_id))
            # Sorted here, not by the database: the proof orders streams by code point, whatever the
            # server's collation says about "-" and ".".
            draws = tuple(sorted((_issued(r._mapping) for r in result), key=lambda d: (d.stream, d.index)))
            return row, _client_seeds(conn, match_id), draws

        row, seeds, draws = await self.committer.read(work)
        return Revelation(_commitment(row), self._open_seed(row), seeds, draws)

    async def status(self, match_id: str) -> tuple[Commitment, dict[int, bytes], dict[str, int]]:
        """The public state of a match: commitment, client seeds and draws issued per stream."""

        def work(conn: Connection) -> tuple[Commitment, dict[int, bytes], dict[str, int]]:
            row = _get(conn, match_id)
            result = conn.execute(
                select(fairness_draws.c.stream, func.count())
                .where(fairness_draws.c.match_id == match_id)
                .group_by(fairness_draws.c.stream)
                .order_by(fairness_draws.c.stream)
            )
            streams = {stream: int(count) for stream, count in result}
            return _commitment(row), _client_seeds(conn, match_id), streams

        return await self.committer.read(work)

    # -- helpers -------------------------------------------------------------------------------------

    def _remember_key(self, match_id: str, key: bytes) -> None:
        self._keys[match_id] = key
        self._keys.move_to_end(match_id)
        while len(self._keys) > _KEY_CACHE_SIZE:
            self._keys.popitem(last=False)

    def _open_seed(self, row: dict[str, Any]) -> bytes:
        return self._vault.open(
            row["match_id"], bytes(row["seed_nonce"]), bytes(row["seed_ciphertext"]), row["seed_key_id"]
        )


# -- statements (run in a unit of work, on the committer's connection) ------------------------------------


def _find(conn: Connection, match_id: str) -> dict[str, Any] | None:
    query = select(fairness_commitments).where(fairness_commitments.c.match_id == match_id)
    found = conn.execute(query).first()
    return dict(found._mapping) if found else None


def _get(conn: Connection, match_id: str, *, lock: bool = False) -> dict[str, Any]:
    """The match's commitment row (locked for the transaction with ``lock``, on PostgreSQL)."""
    query = select(fairness_commitments).where(fairness_commitments.c.match_id == match_id)
    if lock:
        query = query.with_for_update()
    found = conn.execute(query).first()
    if found is None:
        raise NotFound(
            f"match {match_id} has no commitment", reason=ErrorReason.ERROR_REASON_NO_FAIRNESS_STREAM
        )
    return dict(found._mapping)


def _client_seeds(conn: Connection, match_id: str) -> dict[int, bytes]:
    result = conn.execute(
        select(fairness_client_seeds.c.seat, fairness_client_seeds.c.seed)
        .where(fairness_client_seeds.c.match_id == match_id)
        .order_by(fairness_client_seeds.c.seat)
    )
    return {int(seat): bytes(seed) for seat, seed in result}


def _recorded_draw(conn: Connection, match_id: str, stream: str, index: int) -> IssuedDraw:
    found = conn.execute(
        select(fairness_draws).where(
            fairness_draws.c.match_id == match_id,
            fairness_draws.c.stream == stream,
            fairness_draws.c.draw_index == index,
        )
    ).first()
    if found is None:  # indices are dense, so this means the log was tampered with
        raise RuntimeError(f"draw {index} of stream {stream} in match {match_id} is missing")
    return _issued(found._mapping)


def _commitment(row: dict[str, Any]) -> Commitment:
    return Commitment(
        match_id=row["match_id"],
        commitment=row["commitment"],
        state=row["state"],
        committed_at_ms=int(row["committed_at_ms"]),
        finished_at_ms=None if row["finished_at_ms"] is None else int(row["finished_at_ms"]),
    )


def _issued(row: Any) -> IssuedDraw:
    return IssuedDraw(
        stream=row["stream"],
        index=int(row["draw_index"]),
        spec=DrawSpec(DrawKind(row["kind"]), int(row["count"]), int(row["bound"])),
        values=tuple(int(v) for v in row["draw_values"]),
        issued_at_ms=int(row["issued_at_ms"]),
    )


def _describe(spec: DrawSpec) -> str:
    return f"{spec.kind.value} (count {spec.count}, bound {spec.bound})"


__all__: Sequence[str] = ["Commitment", "FairnessStore", "IssuedDraw", "Revelation"]
