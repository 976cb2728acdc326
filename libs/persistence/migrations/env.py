"""Alembic environment: runs on the connection :func:`libs.persistence.migrate.migrate` hands over."""

from __future__ import annotations

from alembic import context

from libs.persistence.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `python -m libs.persistence.migrate` (make migrate)")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
