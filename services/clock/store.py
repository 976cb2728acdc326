"""The clock's timers in the database: stored before Arm answers, deleted on cancel or acknowledgement.

Writes go through a :class:`GroupCommitter`: concurrent Arm calls share one commit. Each commit is
conditional on the shard's ownership epoch the store was built under (its fence), so a clock process that
lost its shard to another never writes its timers again.
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, bindparam, delete, select

from libs.persistence import Database
from libs.persistence.group_commit import GroupCommitter, WriteFence
from libs.persistence.schema import clock_timers
from libs.persistence.upsert import upsert
from services.clock.scheduler import TimerEntry

_KEY = ("shard", "owner", "timer_id")


class TimerStore:
    """The durable copy of one shard's timers; one clock process owns a shard (it issues the arm ids)."""

    def __init__(self, db: Database, shard: str, fence: WriteFence | None = None) -> None:
        self._db = db
        self._shard = shard
        self._writer = GroupCommitter(db, fence=fence)
        self._next_arm_id = 1  # set by load()

    async def close(self) -> None:
        """Commit what is queued and stop the writer: later writes are refused with ``CommitterClosed``,
        which the runtime answers ``UNAVAILABLE`` (the service is shutting down; the caller retries)."""
        await self._writer.close()

    async def load(self) -> list[TimerEntry]:
        """Every timer of the shard (armed, or fired and not yet acknowledged)."""
        async with self._db.connect() as conn:
            result = await conn.execute(
                select(clock_timers)
                .where(clock_timers.c.shard == self._shard)
                .order_by(clock_timers.c.arm_id)
            )
            entries = [
                TimerEntry(
                    owner=row.owner,
                    timer_id=row.timer_id,
                    arm_id=int(row.arm_id),
                    deadline_ms=int(row.deadline_ms),
                    payload=bytes(row.payload),
                    armed_at_ms=int(row.armed_at_ms),
                )
                for row in result
            ]
        # Arm ids only grow: past every stored one, and past every one issued before a restart (the
        # counter starts from the wall clock, with room for 1024 arms per millisecond).
        highest = max((entry.arm_id for entry in entries), default=0)
        self._next_arm_id = max(highest + 1, time.time_ns() // 1_000_000 * 1024)
        return entries

    async def arm(
        self, owner: str, timer_id: str, deadline_ms: int, payload: bytes, now_ms: int
    ) -> TimerEntry:
        """Store a timer, replacing any with the same owner and id; it gets a fresh arm id."""
        arm_id = self._next_arm_id
        self._next_arm_id += 1
        values = {
            "shard": self._shard,
            "owner": owner,
            "timer_id": timer_id,
            "arm_id": arm_id,
            "deadline_ms": deadline_ms,
            "payload": payload,
            "armed_at_ms": now_ms,
        }
        statement = upsert(self._db.engine.dialect.name, clock_timers, list(values), _KEY)

        def work(conn: Connection) -> None:
            conn.execute(statement, values)

        await self._writer.run_sync(work)
        return TimerEntry(owner, timer_id, arm_id, deadline_ms, payload, now_ms)

    async def remove(self, owner: str, timer_id: str, arm_id: int | None = None) -> bool:
        """Delete a timer (only the arming ``arm_id`` when given); whether one was deleted."""
        params: dict[str, str | int] = {"shard": self._shard, "owner": owner, "timer_id": timer_id}
        if arm_id is None:
            statement = _DELETE
        else:
            statement = _DELETE_ARMING
            params["arm_id"] = arm_id

        def work(conn: Connection) -> bool:
            return bool(conn.execute(statement, params).rowcount)

        return await self._writer.run_sync(work)


_DELETE = delete(clock_timers).where(
    clock_timers.c.shard == bindparam("shard"),
    clock_timers.c.owner == bindparam("owner"),
    clock_timers.c.timer_id == bindparam("timer_id"),
)
"""A timer by its key; built once (as the upsert is), run with the key as parameters."""
_DELETE_ARMING = _DELETE.where(clock_timers.c.arm_id == bindparam("arm_id"))
"""A timer by its key, only while it is the arming ``arm_id`` (an acknowledgement of a replaced arming
deletes nothing)."""
