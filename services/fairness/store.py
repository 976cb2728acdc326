"""The fairness service's state in the database: commitments, client seeds and the draws issued.

Each operation is one short transaction. Operations on one match serialise on its commitment row
(``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite transactions are serial already), so a client seed can
never slip in after the first draw and each draw index is issued exactly once, whatever the concurrency.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from libs.fairness import derivation
from libs.fairness.derivation import DrawKind, DrawSpec
from libs.persistence import Database
from libs.persistence.schema import fairness_client_seeds, fairness_commitments, fairness_draws
from libs.runtime.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from services.fairness.seed_vault import SeedVault

STATE_OPEN = "open"
STATE_DRAWING = "drawing"
STATE_FINISHED = "finished"
MAX_SEATS = 16
"""Seats 0..15 may add client seeds; a two-player match uses 0 and 1."""
_KEY_CACHE_SIZE = 4096


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
    """Commit, seed, draw, finish and reveal, each durable before it returns."""

    def __init__(self, db: Database, vault: SeedVault, now_ms: Callable[[], int] = wall_clock_ms) -> None:
        self._db = db
        self._vault = vault
        self._now_ms = now_ms
        # Stream keys of matches that have drawn: they can no longer change, so they are safe to keep.
        self._keys: OrderedDict[str, bytes] = OrderedDict()

    async def commit(self, match_id: str, idempotency_key: str) -> Commitment:
        """Create the match's server seed; a retry with the same key returns the original commitment."""
        existing = await self._find(match_id)
        if existing is None:
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
            try:
                async with self._db.begin() as conn:
                    await conn.execute(insert(fairness_commitments).values(row))
                return _commitment(row)
            except IntegrityError:
                existing = await self._find(match_id)  # a concurrent Commit won the race
                if existing is None:
                    raise
        if existing["idempotency_key"] == idempotency_key:
            return _commitment(existing)
        raise AlreadyExists(f"match {match_id} already has a commitment ({existing['commitment']})")

    async def add_client_seed(self, match_id: str, seat: int, seed: bytes) -> dict[int, bytes]:
        """Add ``seat``'s client seed before the first draw; the same seed again changes nothing."""
        if seat >= MAX_SEATS:
            raise InvalidArgument(f"seat must be below {MAX_SEATS}, got {seat}")
        async with self._db.begin() as conn:
            row = await self._lock(conn, match_id)
            seeds = await self._client_seeds(conn, match_id)
            if seeds.get(seat) == seed:
                return seeds
            if row["state"] == STATE_FINISHED:
                raise FailedPrecondition(f"match {match_id} is finished; no more client seeds")
            if row["state"] == STATE_DRAWING:
                raise FailedPrecondition(
                    f"match {match_id} has drawn already; client seeds must come before the first draw"
                )
            if seat in seeds:
                raise AlreadyExists(f"seat {seat} of match {match_id} has added its client seed already")
            await conn.execute(
                insert(fairness_client_seeds).values(
                    match_id=match_id, seat=seat, seed=seed, added_at_ms=self._now_ms()
                )
            )
        seeds[seat] = seed
        return dict(sorted(seeds.items()))

    async def draw(
        self, match_id: str, stream: str, spec: DrawSpec, index: int | None
    ) -> tuple[IssuedDraw, bool]:
        """Issue the next draw of ``stream`` (or return draw ``index`` if already issued).

        Returns the draw and whether it was issued now.
        """
        async with self._db.begin() as conn:
            row = await self._lock(conn, match_id)
            issued = await conn.scalar(
                select(func.count())
                .select_from(fairness_draws)
                .where(fairness_draws.c.match_id == match_id, fairness_draws.c.stream == stream)
            )
            next_index = int(issued or 0)
            if index is not None and index < next_index:
                recorded = await self._recorded_draw(conn, match_id, stream, index)
                if recorded.spec != spec:
                    raise FailedPrecondition(
                        f"draw {index} of stream {stream} was issued as {_describe(recorded.spec)}, "
                        f"not {_describe(spec)}"
                    )
                return recorded, False
            if row["state"] == STATE_FINISHED:
                raise FailedPrecondition(f"match {match_id} is finished; no more draws")
            if index is not None and index > next_index:
                raise FailedPrecondition(
                    f"draw {index} of stream {stream} cannot be issued before draw {next_index}"
                )
            key = await self._stream_key(conn, row)
            draw = IssuedDraw(
                stream=stream,
                index=next_index,
                spec=spec,
                values=derivation.draw_values(key, stream, next_index, spec),
                issued_at_ms=self._now_ms(),
            )
            await conn.execute(
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
                await conn.execute(
                    update(fairness_commitments)
                    .where(fairness_commitments.c.match_id == match_id)
                    .values(state=STATE_DRAWING)
                )
        if row["state"] == STATE_OPEN:
            self._remember_key(match_id, key)
        return draw, True

    async def finish(self, match_id: str) -> int:
        """Mark the match finished (idempotent): no more draws, and the seed may be revealed.

        Returns when it finished, in Unix milliseconds.
        """
        async with self._db.begin() as conn:
            row = await self._lock(conn, match_id)
            if row["state"] != STATE_FINISHED:
                row = {**row, "state": STATE_FINISHED, "finished_at_ms": self._now_ms()}
                await conn.execute(
                    update(fairness_commitments)
                    .where(fairness_commitments.c.match_id == match_id)
                    .values(state=STATE_FINISHED, finished_at_ms=row["finished_at_ms"])
                )
        self._keys.pop(match_id, None)
        return int(row["finished_at_ms"])

    async def reveal(self, match_id: str) -> Revelation:
        """The seed, client seeds and every draw of a finished match."""
        async with self._db.connect() as conn:
            row = await self._get(conn, match_id)
            if row["state"] != STATE_FINISHED:
                raise FailedPrecondition(
                    f"match {match_id} is not finished (state: {row['state']}); the seed is revealed "
                    "only after the match is finished"
                )
            seeds = await self._client_seeds(conn, match_id)
            result = await conn.execute(
                select(fairness_draws)
                .where(fairness_draws.c.match_id == match_id)
                .order_by(fairness_draws.c.stream, fairness_draws.c.draw_index)
            )
            # Sorted here, not by the database: the proof orders streams by code point, whatever the
            # server's collation says about "-" and ".".
            draws = tuple(sorted((_issued(r._mapping) for r in result), key=lambda d: (d.stream, d.index)))
        return Revelation(_commitment(row), self._open_seed(row), seeds, draws)

    async def status(self, match_id: str) -> tuple[Commitment, dict[int, bytes], dict[str, int]]:
        """The public state of a match: commitment, client seeds and draws issued per stream."""
        async with self._db.connect() as conn:
            row = await self._get(conn, match_id)
            seeds = await self._client_seeds(conn, match_id)
            result = await conn.execute(
                select(fairness_draws.c.stream, func.count())
                .where(fairness_draws.c.match_id == match_id)
                .group_by(fairness_draws.c.stream)
                .order_by(fairness_draws.c.stream)
            )
            streams = {stream: int(count) for stream, count in result}
        return _commitment(row), seeds, streams

    # -- helpers -------------------------------------------------------------------------------------

    async def _find(self, match_id: str) -> dict[str, Any] | None:
        async with self._db.connect() as conn:
            result = await conn.execute(
                select(fairness_commitments).where(fairness_commitments.c.match_id == match_id)
            )
            found = result.first()
        return dict(found._mapping) if found else None

    async def _get(self, conn: AsyncConnection, match_id: str, *, lock: bool = False) -> dict[str, Any]:
        query = select(fairness_commitments).where(fairness_commitments.c.match_id == match_id)
        if lock:
            query = query.with_for_update()
        found = (await conn.execute(query)).first()
        if found is None:
            raise NotFound(f"match {match_id} has no commitment")
        return dict(found._mapping)

    async def _lock(self, conn: AsyncConnection, match_id: str) -> dict[str, Any]:
        return await self._get(conn, match_id, lock=True)

    async def _client_seeds(self, conn: AsyncConnection, match_id: str) -> dict[int, bytes]:
        result = await conn.execute(
            select(fairness_client_seeds.c.seat, fairness_client_seeds.c.seed)
            .where(fairness_client_seeds.c.match_id == match_id)
            .order_by(fairness_client_seeds.c.seat)
        )
        return {int(seat): bytes(seed) for seat, seed in result}

    async def _recorded_draw(
        self, conn: AsyncConnection, match_id: str, stream: str, index: int
    ) -> IssuedDraw:
        found = (
            await conn.execute(
                select(fairness_draws).where(
                    fairness_draws.c.match_id == match_id,
                    fairness_draws.c.stream == stream,
                    fairness_draws.c.draw_index == index,
                )
            )
        ).first()
        if found is None:  # indices are dense, so this means the log was tampered with
            raise RuntimeError(f"draw {index} of stream {stream} in match {match_id} is missing")
        return _issued(found._mapping)

    async def _stream_key(self, conn: AsyncConnection, row: dict[str, Any]) -> bytes:
        match_id: str = row["match_id"]
        cached = self._keys.get(match_id)
        if cached is not None:
            self._keys.move_to_end(match_id)
            return cached
        seeds = await self._client_seeds(conn, match_id)
        key = derivation.stream_key(self._open_seed(row), match_id, seeds)
        if row["state"] == STATE_DRAWING:
            self._remember_key(match_id, key)
        return key

    def _remember_key(self, match_id: str, key: bytes) -> None:
        self._keys[match_id] = key
        self._keys.move_to_end(match_id)
        while len(self._keys) > _KEY_CACHE_SIZE:
            self._keys.popitem(last=False)

    def _open_seed(self, row: dict[str, Any]) -> bytes:
        return self._vault.open(
            row["match_id"], bytes(row["seed_nonce"]), bytes(row["seed_ciphertext"]), row["seed_key_id"]
        )


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
