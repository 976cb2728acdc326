"""matchmaking: players' saved Game of the Generals formations

Revision ID: 0008_formations
Revises: 0007_shard_owners
Create Date: 2026-12-02

One row per formation a player saved under a name (at most 50 a player, checked by matchmaking), its
text canonical: the owner's orientation, so one formation sets up either colour.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_formations"
down_revision = "0007_shard_owners"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mm_formations",
        sa.Column("player_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("player_id", "name", name=op.f("pk_mm_formations")),
    )


def downgrade() -> None:
    op.drop_table("mm_formations")
