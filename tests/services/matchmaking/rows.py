"""Rows the matchmaking store takes, for tests that write to it directly."""

from __future__ import annotations

from typing import Any


def match_row(match_id: str, player0: str, player1: str, *, entry_fee_minor: int = 0) -> dict[str, Any]:
    """A chess match about to be created on its shard (status ``starting``), as the matchmaker makes one."""
    return {
        "match_id": match_id,
        "table_id": None,
        "family": "chess",
        "player0": player0,
        "player1": player1,
        "entry_fee_minor": entry_fee_minor,
        "currency": "USD",
        "fairness_commitment": "",
        "options": b"",
        "time_control": b"",
        "status": "starting",
        "result": None,
        "created_at_ms": 1,
        "ended_at_ms": None,
        "disconnect_policy": "forfeit",
    }


def queue_row(player_id: str, pool: str = "chess|test") -> dict[str, Any]:
    """A player's queue entry, as ``EnterQueue`` writes it."""
    return {
        "player_id": player_id,
        "pool": pool,
        "family": "chess",
        "request": b"",
        "rating": 1500,
        "entered_at_ms": 1,
    }


def table_row(table_id: str, creator_id: str) -> dict[str, Any]:
    """An open public chess table, as ``CreateTable`` writes it."""
    return {
        "table_id": table_id,
        "family": "chess",
        "options": b"",
        "time_control": b"",
        "entry_fee_minor": 0,
        "currency": "USD",
        "visibility": "public",
        "creator_id": creator_id,
        "joiner_id": None,
        "status": "open",
        "match_id": None,
        "idempotency_key": table_id,
        "created_at_ms": 1,
        "disconnect_policy": "forfeit",
    }
