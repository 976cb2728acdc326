"""matches: the match log, match summaries and results

Revision ID: 0003_matches
Revises: 0002_clock
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_matches"
down_revision = "0002_clock"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "matches",
        sa.Column("match_id", sa.String(128), nullable=False),
        sa.Column("family", sa.String(32), nullable=False),
        sa.Column("shard", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("ended_at_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_matches")),
    )
    op.create_index("ix_matches_shard_status", "matches", ["shard", "status"])
    op.create_table(
        "match_events",
        sa.Column("match_id", sa.String(128), nullable=False),
        sa.Column("sequence", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=True),
        sa.ForeignKeyConstraint(
            ["match_id"],
            ["matches.match_id"],
            name=op.f("fk_match_events_match_id_matches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("match_id", "sequence", name=op.f("pk_match_events")),
        sa.UniqueConstraint("match_id", "idempotency_key", name=op.f("uq_match_events_match_id")),
    )
    op.create_table(
        "match_results",
        sa.Column("match_id", sa.String(128), nullable=False),
        sa.Column("family", sa.String(32), nullable=False),
        sa.Column("termination", sa.String(48), nullable=False),
        sa.Column("winner", sa.Integer(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("seats", sa.JSON(), nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.Column("record_format", sa.String(16), nullable=False),
        sa.Column("clock_history", sa.JSON(), nullable=False),
        sa.Column("fairness_commitment", sa.String(64), nullable=False),
        sa.Column("ended_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("reported_at_ms", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["match_id"],
            ["matches.match_id"],
            name=op.f("fk_match_results_match_id_matches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_match_results")),
    )


def downgrade() -> None:
    op.drop_table("match_results")
    op.drop_table("match_events")
    op.drop_index("ix_matches_shard_status", table_name="matches")
    op.drop_table("matches")
