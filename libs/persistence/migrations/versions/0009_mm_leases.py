"""matchmaking: leases (the pairing leader of several matchmaking replicas) and their fencing epochs

Revision ID: 0009_mm_leases
Revises: 0008_formations
Create Date: 2026-12-02

One row per lease (``pairing``): the replica holding it, its epoch (incremented by every takeover) and
when it expires. Every pairing write is conditional on the epoch it was made under, so a leader that was
paused past its lease, and replaced, can no longer create a match.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_mm_leases"
down_revision = "0008_formations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mm_leases",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("expires_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_mm_leases")),
    )


def downgrade() -> None:
    op.drop_table("mm_leases")
