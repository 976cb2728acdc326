"""clock: durable timers

Revision ID: 0002_clock
Revises: 0001_fairness
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_clock"
down_revision = "0001_fairness"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "clock_timers",
        sa.Column("shard", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("timer_id", sa.String(128), nullable=False),
        sa.Column("arm_id", sa.BigInteger(), nullable=False),
        sa.Column("deadline_ms", sa.BigInteger(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("armed_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("shard", "owner", "timer_id", name=op.f("pk_clock_timers")),
    )


def downgrade() -> None:
    op.drop_table("clock_timers")
