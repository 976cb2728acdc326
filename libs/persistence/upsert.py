"""``INSERT ... ON CONFLICT DO UPDATE`` for the two backends, which spell it the same way in SQLAlchemy."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert


def upsert(dialect: str, table: Table, columns: Sequence[str], key: Sequence[str]) -> Insert:
    """Insert a row of ``columns`` into ``table``, or update every non-key column where the ``key``
    columns match; execute it with the row's values as parameters (``conn.execute(statement, values)``).

    Built once per (dialect, table, columns, key) and reused: building the construct (its ``excluded``
    pseudo-table, its column collections) cost more than running it, on the clock's path of every
    ``Arm``."""
    return _upsert(dialect, table, tuple(columns), tuple(key))


@functools.cache
def _upsert(dialect: str, table: Table, columns: tuple[str, ...], key: tuple[str, ...]) -> Insert:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(table)
    updates = {name: statement.excluded[name] for name in columns if name not in key}
    return statement.on_conflict_do_update(index_elements=list(key), set_=updates)
