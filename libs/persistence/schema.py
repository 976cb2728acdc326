"""The platform's tables, one metadata for the whole shared store; each area's tables are prefixed.

Migrations in ``migrations/versions`` create exactly this schema; a test compares the two.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# -- shard ownership (libs.persistence.ownership) -------------------------------------------------------

# One row per shard (``clock/0``, ``rules-chess/1``): its current owner and the owner's epoch. Every write of
# a shard's data is conditional on the epoch it was made under, so a process whose ownership passed to
# another (its lock lost in a database restart) can never commit again.
shard_owners = Table(
    "shard_owners",
    metadata,
    Column("shard", String(128), primary_key=True),
    # Incremented by every acquisition: the fencing token.
    Column("epoch", BigInteger, nullable=False),
    Column("owner", String(200), nullable=False),
    Column("acquired_at_ms", BigInteger, nullable=False),
    # The last instant the owner was known alive (its heartbeat and every commit renew it).
    Column("alive_at_ms", BigInteger, nullable=False),
)

# -- fairness --------------------------------------------------------------------------------------------

fairness_commitments = Table(
    "fairness_commitments",
    metadata,
    Column("match_id", String(128), primary_key=True),
    Column("commitment", String(64), nullable=False),
    # The server seed, encrypted (AES-256-GCM) so that a database dump reveals no future draw.
    Column("seed_ciphertext", LargeBinary, nullable=False),
    Column("seed_nonce", LargeBinary, nullable=False),
    Column("seed_key_id", String(16), nullable=False),
    Column("idempotency_key", String(128), nullable=False),
    # open -> drawing (first draw) -> finished
    Column("state", String(16), nullable=False),
    Column("committed_at_ms", BigInteger, nullable=False),
    Column("finished_at_ms", BigInteger, nullable=True),
)

fairness_client_seeds = Table(
    "fairness_client_seeds",
    metadata,
    Column(
        "match_id",
        String(128),
        ForeignKey("fairness_commitments.match_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("seat", BigInteger, primary_key=True, autoincrement=False),
    Column("seed", LargeBinary, nullable=False),
    Column("added_at_ms", BigInteger, nullable=False),
)

fairness_draws = Table(
    "fairness_draws",
    metadata,
    Column(
        "match_id",
        String(128),
        ForeignKey("fairness_commitments.match_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("stream", String(64), primary_key=True),
    Column("draw_index", BigInteger, primary_key=True, autoincrement=False),
    Column("kind", String(16), nullable=False),
    Column("count", Integer, nullable=False),
    Column("bound", BigInteger, nullable=False),
    Column("draw_values", JSON, nullable=False),
    Column("issued_at_ms", BigInteger, nullable=False),
)

# -- clock -----------------------------------------------------------------------------------------------

clock_timers = Table(
    "clock_timers",
    metadata,
    Column("shard", String(64), primary_key=True),
    Column("owner", String(128), primary_key=True),
    Column("timer_id", String(128), primary_key=True),
    # Issued by the shard's one clock process, increasing; re-arming gets a new one.
    Column("arm_id", BigInteger, nullable=False),
    Column("deadline_ms", BigInteger, nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("armed_at_ms", BigInteger, nullable=False),
)

# -- matches (every rules service) -----------------------------------------------------------------------

matches = Table(
    "matches",
    metadata,
    Column("match_id", String(128), primary_key=True),
    Column("family", String(32), nullable=False),
    Column("shard", String(64), nullable=False),
    # waiting | live | finished | aborted; a cached summary of the log, for listing and recovery.
    Column("status", String(16), nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("ended_at_ms", BigInteger, nullable=True),
    Index("ix_matches_shard_status", "shard", "status"),
    # ListMatches' keyset pages: a shard's matches in match id order, from a position on.
    Index("ix_matches_family_shard_match_id", "family", "shard", "match_id"),
)

# The append-only log: the source of truth of every match.
match_events = Table(
    "match_events",
    metadata,
    Column("match_id", String(128), ForeignKey("matches.match_id", ondelete="CASCADE"), primary_key=True),
    Column("sequence", BigInteger, primary_key=True, autoincrement=False),
    Column("kind", String(16), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("at_ms", BigInteger, nullable=False),
    Column("idempotency_key", String(128), nullable=True),
    UniqueConstraint("match_id", "idempotency_key"),
)

match_results = Table(
    "match_results",
    metadata,
    Column("match_id", String(128), ForeignKey("matches.match_id", ondelete="CASCADE"), primary_key=True),
    Column("family", String(32), nullable=False),
    Column("termination", String(48), nullable=False),
    Column("winner", Integer, nullable=True),
    Column("result", JSON, nullable=False),
    Column("seats", JSON, nullable=False),
    Column("record", Text, nullable=False),
    Column("record_format", String(16), nullable=False),
    Column("clock_history", JSON, nullable=False),
    Column("fairness_commitment", String(64), nullable=False),
    Column("ended_at_ms", BigInteger, nullable=False),
    # The outbox: set once the result reached every configured recipient (fairness, matchmaking).
    Column("reported_at_ms", BigInteger, nullable=True),
)

# -- matchmaking -----------------------------------------------------------------------------------------

mm_tables = Table(
    "mm_tables",
    metadata,
    Column("table_id", String(64), primary_key=True),
    Column("family", String(32), nullable=False),
    # The rules contract's MatchOptions and TimeControl, serialised protobuf.
    Column("options", LargeBinary, nullable=False),
    Column("time_control", LargeBinary, nullable=False),
    Column("entry_fee_minor", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("visibility", String(8), nullable=False),
    Column("creator_id", String(128), nullable=False),
    Column("joiner_id", String(128), nullable=True),
    # open -> starting (full; creating the match) -> playing -> finished; or cancelled
    Column("status", String(12), nullable=False),
    Column("match_id", String(128), nullable=True),
    Column("idempotency_key", String(128), nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    # What its match does with a player who disconnects (DisconnectPolicy): "forfeit" (the platform's rule;
    # every row from before migration 0010) or "stand_in" (seed 002's stand-in after 120 s).
    Column("disconnect_policy", String(16), nullable=False, server_default="forfeit"),
    # When its status last changed (migration 0011; none on older rows): what a lobby catch-up after a gap
    # looks at, so a table cancelled during the gap is found.
    Column("updated_at_ms", BigInteger, nullable=True),
    Index("ix_mm_tables_family_status", "family", "status"),
    UniqueConstraint("creator_id", "idempotency_key"),
)

# What each player is doing: at most one open table, queue entry or unfinished match at a time.
mm_activity = Table(
    "mm_activity",
    metadata,
    Column("player_id", String(128), primary_key=True),
    Column("kind", String(8), nullable=False),
    Column("ref", String(200), nullable=False),
    Column("since_ms", BigInteger, nullable=False),
)

mm_queue = Table(
    "mm_queue",
    metadata,
    Column("player_id", String(128), primary_key=True),
    Column("pool", String(400), nullable=False),
    Column("family", String(32), nullable=False),
    # The EnterQueue request, serialised: the options, clock and fee of the match to make.
    Column("request", LargeBinary, nullable=False),
    Column("rating", Integer, nullable=False),
    Column("entered_at_ms", BigInteger, nullable=False),
)

mm_ratings = Table(
    "mm_ratings",
    metadata,
    Column("player_id", String(128), primary_key=True),
    Column("family", String(32), primary_key=True),
    Column("rating", Integer, nullable=False),
    Column("games", Integer, nullable=False),
    # The highest rating ever held in the family: from 2400 on, K stays 10 even after a fall below.
    Column("peak", Integer, nullable=False),
)

mm_rating_changes = Table(
    "mm_rating_changes",
    metadata,
    Column("match_id", String(128), primary_key=True),
    Column("player_id", String(128), primary_key=True),
    Column("family", String(32), nullable=False),
    Column("before", Integer, nullable=False),
    Column("after", Integer, nullable=False),
    Column("at_ms", BigInteger, nullable=False),
    Index("ix_mm_rating_changes_player", "player_id", "at_ms"),
)

mm_matches = Table(
    "mm_matches",
    metadata,
    Column("match_id", String(128), primary_key=True),
    Column("table_id", String(64), nullable=True),
    Column("family", String(32), nullable=False),
    Column("player0", String(128), nullable=False),
    Column("player1", String(128), nullable=False),
    Column("entry_fee_minor", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("fairness_commitment", String(64), nullable=False),
    Column("options", LargeBinary, nullable=False),
    Column("time_control", LargeBinary, nullable=False),
    # starting (being created on its rules shard) -> playing -> finished | aborted
    Column("status", String(12), nullable=False),
    # The rules contract's Result, serialised, once reported.
    Column("result", LargeBinary, nullable=True),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("ended_at_ms", BigInteger, nullable=True),
    # The table's or queue entry's disconnect policy, as mm_tables.disconnect_policy: "forfeit" or
    # "stand_in" (CreateMatchRequest.stand_in_after_ms follows from it).
    Column("disconnect_policy", String(16), nullable=False, server_default="forfeit"),
    Index("ix_mm_matches_player0", "player0"),
    Index("ix_mm_matches_player1", "player1"),
)

# Players' saved Game of the Generals formations (docs/matchmaking.md, "Formations"): at most 50 a player,
# each in its canonical text (the owner's orientation; libs.engines.generals.formation).
mm_formations = Table(
    "mm_formations",
    metadata,
    Column("player_id", String(128), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("text", Text, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
)

# Matchmaking's leases (docs/matchmaking.md, "Replicas"): ``pairing`` names the one replica that pairs the
# quick-match queue. Every takeover increments ``epoch``, the fencing token every pairing write checks.
mm_leases = Table(
    "mm_leases",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("epoch", BigInteger, nullable=False),
    Column("holder", String(200), nullable=False),
    # Unix ms (the holder's clock) until which the holder may pair without renewing.
    Column("expires_at_ms", BigInteger, nullable=False),
)
