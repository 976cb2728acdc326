"""The chaos run's pure parts: its schedule from a seed, checks that catch what they are for on made-up
evidence (a move charged for downtime, a stream silent while nothing was down, a key logged twice), and
the recording of a ``Play`` stream, the second door, as a ``WatchMatch`` stream is recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from tools.chaos.checks import Evidence, acks_logged_once, downtime_not_charged, no_stream_hung, overlap
from tools.chaos.config import DOWNTIME_CHARGE_BOUND_MS, STREAM_SILENCE_BOUND_S
from tools.chaos.controller import Outage, now_ms
from tools.chaos.players import PLAY, WATCH, Ack, StreamLog, _RecordedCall
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
    assert "18000 ms turn (2000 to 20000), 5000 ms of it down (rules-chess SIGKILL)" in failed.details[0]
    assert "5000 ms more than its time outside the outages" in failed.details[0]
    assert downtime_not_charged(evidence(outages=[down], results={"chess.0.a": credited})).ok
    gateway_down = Outage("gateway", "SIGTERM", 10_000, 15_000)  # not credited: noted, not failed
    noted = downtime_not_charged(evidence(outages=[gateway_down], results={"chess.0.a": charged}))
    assert noted.ok
    assert "noted: 1 moves charged over 1000 ms" in noted.summary
    assert "(down during the turn: gateway SIGTERM)" in noted.summary
    clock_down = Outage("clock", "SIGKILL", 10_000, 15_000)  # chess does not wait for the clock service
    assert downtime_not_charged(evidence(outages=[clock_down], results={"chess.0.a": charged})).ok
    within = chess_result(
        [[0, 300_000, 1_000], [1, 299_000, 2_000], [0, 287_000 - DOWNTIME_CHARGE_BOUND_MS, 20_000]]
    )
    assert downtime_not_charged(evidence(outages=[down], results={"chess.0.a": within})).ok


def test_a_charge_no_outage_explains_fails_and_says_so() -> None:
    # Black's clock lost 5 s over a 1 s turn while nothing was down (the clock ran for the wrong seat, as
    # it did after a backgammon roll with no legal play before that was mended): the check names no fault.
    down = Outage("rules-chess", "SIGKILL", 30_000, 35_000)
    wrong = chess_result([[0, 300_000, 1_000], [1, 299_000, 2_000], [0, 299_000, 3_000], [1, 294_000, 4_000]])
    failed = downtime_not_charged(evidence(outages=[down], results={"chess.0.a": wrong}))
    assert not failed.ok
    assert "1000 ms turn (3000 to 4000), 0 ms of it down (no outage)" in failed.details[0]
    assert "(down during the turn: no outage)" in failed.summary


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


class _ScriptedPlayCall:
    """A ``Play`` call that delivers ``count`` messages and then breaks with UNAVAILABLE."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.written: list[object] = []
        self.cancelled = False

    async def write(self, request: object) -> None:
        self.written.append(request)

    async def done_writing(self) -> None:
        pass

    def cancel(self) -> bool:
        self.cancelled = True
        return True

    def __aiter__(self) -> AsyncIterator[int]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[int]:
        for message in range(self.count):
            yield message
        raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata())


async def test_a_play_call_is_recorded_as_a_watch_call_is_with_its_door() -> None:
    log = StreamLog("chess.0.a", "ann", opened_ms=now_ms(), door=PLAY)
    call = _ScriptedPlayCall(3)
    recorded = _RecordedCall(call, log)
    await recorded.write("open")
    assert call.written == ["open"]  # writes go through untouched
    with pytest.raises(grpc.aio.AioRpcError):
        async for _ in recorded:
            pass
    assert (log.messages, log.end, log.door) == (3, "UNAVAILABLE", PLAY)
    recorded.cancel()  # closing it afterwards does not change how it ended
    assert log.end == "UNAVAILABLE"
    assert call.cancelled
    assert Ack("chess.0.a", "ann", 0, 2, "k1", 0).door == WATCH
    assert Ack("chess.0.a", "ann", 0, 3, "k2", 0, PLAY).door == PLAY


def test_a_stream_given_up_on_keeps_its_last_silence_for_the_check() -> None:
    stream = StreamLog("chess.0.a", "ann", opened_ms=1_000, last_ms=1_000, messages=3, door=PLAY)
    silent = int(STREAM_SILENCE_BOUND_S * 1000) + 5_000
    stream.finish("abandoned", 1_000 + silent)
    stream.finish("closed", 2_000 + silent)  # the player closing it on the way out
    assert stream.end == "abandoned"
    assert stream.silences == [(1_000, 1_000 + silent)]
    hung = no_stream_hung(evidence(streams=[stream], matches={"chess.0.a": {"ended_at_ms": None}}))
    assert not hung.ok
    assert "(ann, play): silent" in hung.details[0]
