"""``INSERT ... ON CONFLICT DO UPDATE`` for the two backends, which spell it the same way in SQLAlchemy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert


def upsert(dialect: str, table: Table, values: Mapping[str, Any], key: Sequence[str]) -> Insert:
    """Insert ``values`` into ``table``, or update every non-key column where the ``key`` columns match."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(table).values(**values)
    updates = {name: statement.excluded[name] for name in values if name not in key}
    return statement.on_conflict_do_update(index_elements=list(key), set_=updates)
