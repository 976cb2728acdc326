"""matchmaking: each table's and match's disconnect policy, a column of its own

Revision ID: 0010_mm_disconnect_policy
Revises: 0009_mm_leases
Create Date: 2026-12-02

``mm_tables.disconnect_policy`` and ``mm_matches.disconnect_policy``: what the match does with a player who
loses their connection (``DisconnectPolicy``; docs/matchmaking.md, "What a lobby table offers"), as a short
string, ``forfeit`` (the platform's rule) or ``stand_in`` (seed 002's stand-in after 120 s). Not null, with
the server default ``forfeit``: every row written before the policy existed reads as the forfeit rule,
which is what its match was created with. (A string rather than the enum's number: a row reads the same
to anyone looking at the database, and the column does not depend on the contract's numbering.)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_mm_disconnect_policy"
down_revision = "0009_mm_leases"
branch_labels = None
depends_on = None

_TABLES = ("mm_tables", "mm_matches")


def upgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("disconnect_policy", sa.String(16), nullable=False, server_default="forfeit")
            )


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("disconnect_policy")
