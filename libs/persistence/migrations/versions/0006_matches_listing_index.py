"""matches: an index for ListMatches' pages (a shard's matches in match id order, from a position on)

Revision ID: 0006_matches_listing_index
Revises: 0005_mm_rating_peak
Create Date: 2026-11-30

ListMatches pages by match id (keyset pagination: the matches after the last one of the previous page).
The primary key alone orders every family's and shard's matches together, so a page of one shard could
read past every other shard's rows first; (family, shard, match_id) gives the shard's range in order.
"""

from __future__ import annotations

from alembic import op

revision = "0006_matches_listing_index"
down_revision = "0005_mm_rating_peak"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_matches_family_shard_match_id", "matches", ["family", "shard", "match_id"])


def downgrade() -> None:
    op.drop_index("ix_matches_family_shard_match_id", table_name="matches")
