"""matchmaking: tables, activity, queue, ratings, rating changes and matches

Revision ID: 0004_matchmaking
Revises: 0003_matches
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_matchmaking"
down_revision = "0003_matches"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mm_tables",
        sa.Column("table_id", sa.String(64), nullable=False),
        sa.Column("family", sa.String(32), nullable=False),
        sa.Column("options", sa.LargeBinary(), nullable=False),
        sa.Column("time_control", sa.LargeBinary(), nullable=False),
        sa.Column("entry_fee_minor", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("visibility", sa.String(8), nullable=False),
        sa.Column("creator_id", sa.String(128), nullable=False),
        sa.Column("joiner_id", sa.String(128), nullable=True),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("match_id", sa.String(128), nullable=True),
        sa.Column("idempotency_key", sa.String(128), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("table_id", name=op.f("pk_mm_tables")),
        sa.UniqueConstraint("creator_id", "idempotency_key", name=op.f("uq_mm_tables_creator_id")),
    )
    op.create_index("ix_mm_tables_family_status", "mm_tables", ["family", "status"])
    op.create_table(
        "mm_activity",
        sa.Column("player_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("ref", sa.String(200), nullable=False),
        sa.Column("since_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("player_id", name=op.f("pk_mm_activity")),
    )
    op.create_table(
        "mm_queue",
        sa.Column("player_id", sa.String(128), nullable=False),
        sa.Column("pool", sa.String(400), nullable=False),
        sa.Column("family", sa.String(32), nullable=False),
        sa.Column("request", sa.LargeBinary(), nullable=False),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("entered_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("player_id", name=op.f("pk_mm_queue")),
    )
    op.create_table(
        "mm_ratings",
        sa.Column("player_id", sa.String(128), nullable=False),
        sa.Column("family", sa.String(32), nullable=False),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("games", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("player_id", "family", name=op.f("pk_mm_ratings")),
    )
    op.create_table(
        "mm_rating_changes",
        sa.Column("match_id", sa.String(128), nullable=False),
        sa.Column("player_id", sa.String(128), nullable=False),
        sa.Column("family", sa.String(32), nullable=False),
        sa.Column("before", sa.Integer(), nullable=False),
        sa.Column("after", sa.Integer(), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("match_id", "player_id", name=op.f("pk_mm_rating_changes")),
    )
    op.create_index("ix_mm_rating_changes_player", "mm_rating_changes", ["player_id", "at_ms"])
    op.create_table(
        "mm_matches",
        sa.Column("match_id", sa.String(128), nullable=False),
        sa.Column("table_id", sa.String(64), nullable=True),
        sa.Column("family", sa.String(32), nullable=False),
        sa.Column("player0", sa.String(128), nullable=False),
        sa.Column("player1", sa.String(128), nullable=False),
        sa.Column("entry_fee_minor", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("fairness_commitment", sa.String(64), nullable=False),
        sa.Column("options", sa.LargeBinary(), nullable=False),
        sa.Column("time_control", sa.LargeBinary(), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("result", sa.LargeBinary(), nullable=True),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("ended_at_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_mm_matches")),
    )
    op.create_index("ix_mm_matches_player0", "mm_matches", ["player0"])
    op.create_index("ix_mm_matches_player1", "mm_matches", ["player1"])


def downgrade() -> None:
    op.drop_index("ix_mm_matches_player1", table_name="mm_matches")
    op.drop_index("ix_mm_matches_player0", table_name="mm_matches")
    op.drop_table("mm_matches")
    op.drop_index("ix_mm_rating_changes_player", table_name="mm_rating_changes")
    op.drop_table("mm_rating_changes")
    op.drop_table("mm_ratings")
    op.drop_table("mm_queue")
    op.drop_table("mm_activity")
    op.drop_index("ix_mm_tables_family_status", table_name="mm_tables")
    op.drop_table("mm_tables")
