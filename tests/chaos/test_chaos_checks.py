"""The chaos run's pure parts: its schedule from a seed, and checks that catch what they are for on
made-up evidence (a move charged for downtime, a stream silent while nothing was down, a key logged twice)."""

from __future__ import annotations

from typing import Any

from tools.chaos.checks import Evidence, acks_logged_once, downtime_not_charged, no_stream_hung, overlap
from tools.chaos.config import DOWNTIME_CHARGE_BOUND_MS, STREAM_SILENCE_BOUND_S
from tools.chaos.controller import Outage
from tools.chaos.players import Ack, StreamLog
from tools.chaos.schedule import POSTGRES, make_schedule

SERVICES = ["fairness", "clock", "rules-chess", "rules-gin", "matchmaking", "gateway"]


def evidence(**changes: Any) -> Evidence:
    fields: dict[str, Any] = {
        "acks": [],
        "streams": [],
        "played": {},
        "outages": [],
        "events": {},
        "matches": {},
        "results": {},
        "mm_matches": {},
        "rating_changes": [],
        "stored_ratings": {},
        "served_ratings": {},
        "proofs": {},
        "finished_ms": 1_000_000,
    }
    fields.update(changes)
    return Evidence(**fields)


def test_a_seed_gives_the_same_schedule_and_a_long_run_hits_every_target() -> None:
    schedule = make_schedule(7, 300, 6, SERVICES)
    assert schedule == make_schedule(7, 300, 6, SERVICES)
    assert schedule != make_schedule(8, 300, 6, SERVICES)
    assert {fault.target for fault in schedule} == {*SERVICES, POSTGRES}
    assert all(4 <= fault.at_s <= 297 for fault in schedule)
    assert 20 <= len(schedule) <= 40
    assert make_schedule(7, 300, 0, SERVICES) == []


def test_overlap_counts_the_union_of_windows_once() -> None:
    assert overlap((0, 100), [(10, 20), (15, 30), (90, 200)]) == 30
    assert overlap((0, 100), []) == 0


def chess_result(clock_history: list[list[int]]) -> dict[str, Any]:
    return {"family": "chess", "clock_history": clock_history}


def test_a_move_charged_for_its_shards_downtime_fails_and_a_credited_one_passes() -> None:
    down = Outage("rules-chess", "SIGKILL", 10_000, 15_000)
    # White moves at 1 000 (not charged), Black at 2 000, White at 20 000: a 18 s turn, 5 s of it down.
    charged = chess_result([[0, 300_000, 1_000], [1, 299_000, 2_000], [0, 282_000, 20_000]])
    credited = chess_result([[0, 300_000, 1_000], [1, 299_000, 2_000], [0, 287_000, 20_000]])
    failed = downtime_not_charged(evidence(outages=[down], results={"chess.0.a": charged}))
    assert not failed.ok
    assert "5000 ms of downtime charged" in failed.details[0]
    assert downtime_not_charged(evidence(outages=[down], results={"chess.0.a": credited})).ok
    gateway_down = Outage("gateway", "SIGTERM", 10_000, 15_000)  # not credited: noted, not failed
    noted = downtime_not_charged(evidence(outages=[gateway_down], results={"chess.0.a": charged}))
    assert noted.ok
    assert "noted: 1 moves charged over 1000 ms while gateway SIGTERM was down" in noted.summary
    clock_down = Outage("clock", "SIGKILL", 10_000, 15_000)  # chess does not wait for the clock service
    assert downtime_not_charged(evidence(outages=[clock_down], results={"chess.0.a": charged})).ok
    within = chess_result(
        [[0, 300_000, 1_000], [1, 299_000, 2_000], [0, 287_000 - DOWNTIME_CHARGE_BOUND_MS, 20_000]]
    )
    assert downtime_not_charged(evidence(outages=[down], results={"chess.0.a": within})).ok


def test_a_stream_silent_while_nothing_was_down_is_hung() -> None:
    silent = int(STREAM_SILENCE_BOUND_S * 1000) + 5_000
    stream = StreamLog("chess.0.a", "ann", opened_ms=1_000, last_ms=1_000, messages=3)
    stream.finish("abandoned", 1_000 + silent)
    live = {"chess.0.a": {"ended_at_ms": None}}
    assert not no_stream_hung(evidence(streams=[stream], matches=live)).ok
    covering = Outage(POSTGRES, "stop-fast", 1_000, 1_000 + silent)
    assert no_stream_hung(evidence(streams=[stream], matches=live, outages=[covering])).ok
    over = {"chess.0.a": {"ended_at_ms": 1_500}}
    assert no_stream_hung(evidence(streams=[stream], matches=over)).ok


def test_an_acknowledged_action_missing_or_logged_twice_fails() -> None:
    def row(sequence: int, key: str | None) -> dict[str, Any]:
        return {"sequence": sequence, "idempotency_key": key, "kind": "action"}

    ack = Ack("chess.0.a", "ann", 0, 2, "k1", 0)
    good = {"chess.0.a": [row(1, None), row(2, "k1")]}
    assert acks_logged_once(evidence(acks=[ack], events=good)).ok
    twice = {"chess.0.a": [row(1, None), row(2, "k1"), row(3, "k1")]}
    assert not acks_logged_once(evidence(acks=[ack], events=twice)).ok
    elsewhere = {"chess.0.a": [row(1, None), row(2, "k2")]}
    assert not acks_logged_once(evidence(acks=[ack], events=elsewhere)).ok
