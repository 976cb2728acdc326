"""matchmaking: each rating's peak (the highest rating ever held), for the K = 10 rule from 2400

Revision ID: 0005_mm_rating_peak
Revises: 0004_matchmaking
Create Date: 2026-11-29

Existing ratings get the highest value their history shows: the current rating, or any rating held
before or after a recorded rating change, whichever is highest.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_mm_rating_peak"
down_revision = "0004_matchmaking"
branch_labels = None
depends_on = None

_BACKFILL = """
UPDATE mm_ratings SET peak = COALESCE(
    (
        SELECT MAX(held.value) FROM (
            SELECT c."after" AS value, c.player_id, c.family FROM mm_rating_changes c
            UNION ALL
            SELECT c."before" AS value, c.player_id, c.family FROM mm_rating_changes c
        ) held
        WHERE held.player_id = mm_ratings.player_id
          AND held.family = mm_ratings.family
          AND held.value > mm_ratings.rating
    ),
    mm_ratings.rating
)
"""


def upgrade() -> None:
    with op.batch_alter_table("mm_ratings") as batch:
        batch.add_column(sa.Column("peak", sa.Integer(), nullable=True))
    op.execute(_BACKFILL)
    with op.batch_alter_table("mm_ratings") as batch:
        batch.alter_column("peak", existing_type=sa.Integer(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("mm_ratings") as batch:
        batch.drop_column("peak")
