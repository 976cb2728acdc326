"""Shard ownership on SQLite and PostgreSQL: a second owner is refused until the first lets go."""

from __future__ import annotations

import pytest

from libs.persistence import Database
from libs.persistence.ownership import ShardLock, ShardTaken


async def test_a_shard_has_one_owner_at_a_time(migrated_url: str) -> None:
    first_db, second_db = Database(migrated_url), Database(migrated_url)
    first = ShardLock(first_db, "clock/0")
    await first.acquire()
    with pytest.raises(ShardTaken, match="clock/0"):
        await ShardLock(second_db, "clock/0").acquire()
    other = ShardLock(second_db, "clock/1")  # another shard is free
    await other.acquire()
    await first.release()
    again = ShardLock(second_db, "clock/0")
    await again.acquire()
    for lock in (again, other):
        await lock.release()
    await first_db.dispose()
    await second_db.dispose()
