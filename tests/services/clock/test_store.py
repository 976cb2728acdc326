"""The clock's durable timers on each backend: an acknowledgement deletes only the arming it names."""

from __future__ import annotations

from libs.persistence import Database
from services.clock.store import TimerStore


async def test_an_ack_of_a_replaced_arming_deletes_nothing(migrated_url: str) -> None:
    db = Database(migrated_url)
    store = TimerStore(db, "0")
    try:
        await store.load()
        first = await store.arm("rules-chess-0", "m1", 1_000, b"", 0)
        second = await store.arm("rules-chess-0", "m1", 2_000, b"", 10)  # re-armed: a new arming
        other = await store.arm("rules-chess-0", "m2", 3_000, b"", 10)
        assert await store.remove("rules-chess-0", "m1", first.arm_id) is False  # stale: kept
        assert [(t.timer_id, t.arm_id) for t in await store.load()] == [
            ("m1", second.arm_id),
            ("m2", other.arm_id),
        ]
        assert await store.remove("rules-chess-0", "m1", second.arm_id) is True
        assert await store.remove("rules-chess-0", "m1") is False  # already gone
        assert await store.remove("rules-chess-0", "m2") is True  # without an arm id: any arming
        assert await store.load() == []
    finally:
        await store.close()
        await db.dispose()
