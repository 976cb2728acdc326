"""shard_owners: each shard's owner and epoch, the fencing token of every write of the shard's data

Revision ID: 0007_shard_owners
Revises: 0006_matches_listing_index
Create Date: 2026-12-02

A PostgreSQL restart ends every session and with it every session-level advisory lock: a second process
of the same shard could then take the lock while the first still served. Each acquisition now increments
the shard's epoch in this table, and every write of the shard's data is conditional on the epoch it was
made under, so the first process's writes are refused once the second owns the shard.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_shard_owners"
down_revision = "0006_matches_listing_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shard_owners",
        sa.Column("shard", sa.String(128), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("acquired_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("alive_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("shard", name=op.f("pk_shard_owners")),
    )


def downgrade() -> None:
    op.drop_table("shard_owners")
