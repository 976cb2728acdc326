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
    }
