"""matchmaking: when each table's status last changed

Revision ID: 0011_mm_table_updated
Revises: 0010_mm_disconnect_policy
Create Date: 2026-12-02

``mm_tables.updated_at_ms``: the instant of the table's last status change (joined, playing, ended,
cancelled). A replica that missed lobby events catches its players up with every table of theirs changed
since the gap (docs/matchmaking.md, "Replicas"); before, a table cancelled during the gap that was created
before it could not be found. Nullable: rows from before the column have none (their last change is
unknown; they are caught up by their status and creation time, as before).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_mm_table_updated"
down_revision = "0010_mm_disconnect_policy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("mm_tables") as batch:
        batch.add_column(sa.Column("updated_at_ms", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mm_tables") as batch:
        batch.drop_column("updated_at_ms")
