"""fairness: commitments, client seeds and draws

Revision ID: 0001_fairness
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_fairness"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fairness_commitments",
        sa.Column("match_id", sa.String(128), nullable=False),
        sa.Column("commitment", sa.String(64), nullable=False),
        sa.Column("seed_ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column("seed_nonce", sa.LargeBinary(), nullable=False),
        sa.Column("seed_key_id", sa.String(16), nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("committed_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("finished_at_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("match_id", name=op.f("pk_fairness_commitments")),
    )
    op.create_table(
        "fairness_client_seeds",
        sa.Column("match_id", sa.String(128), nullable=False),
        sa.Column("seat", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("seed", sa.LargeBinary(), nullable=False),
        sa.Column("added_at_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["match_id"],
            ["fairness_commitments.match_id"],
            name=op.f("fk_fairness_client_seeds_match_id_fairness_commitments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("match_id", "seat", name=op.f("pk_fairness_client_seeds")),
    )
    op.create_table(
        "fairness_draws",
        sa.Column("match_id", sa.String(128), nullable=False),
        sa.Column("stream", sa.String(64), nullable=False),
        sa.Column("draw_index", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("bound", sa.BigInteger(), nullable=False),
        sa.Column("draw_values", sa.JSON(), nullable=False),
        sa.Column("issued_at_ms", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["match_id"],
            ["fairness_commitments.match_id"],
            name=op.f("fk_fairness_draws_match_id_fairness_commitments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("match_id", "stream", "draw_index", name=op.f("pk_fairness_draws")),
    )


def downgrade() -> None:
    op.drop_table("fairness_draws")
    op.drop_table("fairness_client_seeds")
    op.drop_table("fairness_commitments")
