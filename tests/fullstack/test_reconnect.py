"""Dropped match streams through the real stack: resuming from the last sequence, and the disconnect
forfeit (a short window on a match made directly on rules-chess; the lobby's default of 60 s proved on
the durable records without waiting a minute)."""

from __future__ import annotations

import asyncio
import time

import grpc
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.rules.v1 import rules_pb2
from sqlalchemy import select

from libs.persistence.schema import clock_timers, match_events
from tests.fullstack.helpers import (
    MINUTE,
    MatchStream,
    Platform,
    Player,
    assert_every_update_once,
    connected,
    direct_match,
    has_moves,
    is_final,
    move,
    moves,
    refused,
    resign,
    table_match,
    watch,
)

WINDOW_MS = 2_000
"""The disconnect window of the short-window test."""
DEFAULT_WINDOW_MS = 60_000
AWAY_S = 5.0
"""How long a player stays away in the default-window test (far less than the window)."""


def summary(updates: list[rules_pb2.MatchUpdate]) -> list[tuple[int, str, str, list[int]]]:
    """What every viewer of a chess match must see alike: sequence, event, position, who is connected."""
    return [(u.sequence, u.event.kind, u.view.chess.fen, list(u.connected_seats)) for u in updates]


async def play(platform: Platform, match_id: str, players: list[Player], sans: list[str], first: int) -> None:
    """Play ``sans`` from ply ``first`` on, each move by the player whose turn it is."""
    for ply, san in enumerate(sans, start=first):
        await platform.gateway.SubmitAction(move(match_id, san), metadata=players[ply % 2].metadata)


async def both_watching(platform: Platform, alice: Player, bob: Player, match_id: str) -> list[MatchStream]:
    streams = [watch(platform, alice, match_id), watch(platform, bob, match_id)]
    for stream in streams:
        await stream.until(connected(0, 1))
    return streams


async def test_a_dropped_stream_reopened_from_its_last_sequence_sees_every_update_once(
    platform: Platform,
) -> None:
    alice, bob = platform.player("alice"), platform.player("bob")
    players = [alice, bob]
    match_id = await table_match(platform, alice, bob)
    alice_stream, bob_stream = watch(platform, alice, match_id), watch(platform, bob, match_id)
    alice_seen = await alice_stream.until(connected(0, 1))
    bob_seen = await bob_stream.until(connected(0, 1))
    await play(platform, match_id, players, ["e4", "e5"], 0)
    alice_seen += await alice_stream.until(has_moves("e4", "e5"))
    last = alice_seen[-1].sequence

    await alice_stream.cancel()  # her connection drops mid-game
    bob_seen += await bob_stream.until(connected(1))  # her disconnection: an update she does not see
    await play(platform, match_id, players, ["Nf3", "Nc6", "Bb5"], 2)  # she still moves, without a stream
    bob_seen += await bob_stream.until(has_moves("e4", "e5", "Nf3", "Nc6", "Bb5"))

    resumed = watch(platform, alice, match_id, from_sequence=last)
    missed = await resumed.until(connected(0, 1))  # what she missed, then her own reconnection
    await play(platform, match_id, players, ["a6"], 5)
    after = await resumed.until(has_moves("e4", "e5", "Nf3", "Nc6", "Bb5", "a6"))
    bob_seen += await bob_stream.until(has_moves("e4", "e5", "Nf3", "Nc6", "Bb5", "a6"))

    assert missed[0].sequence == last + 1
    assert (missed[0].event.kind, list(missed[0].connected_seats)) == ("presence", [1])
    assert [u.event.description for u in missed if u.event.kind == "action"] == ["Nf3", "Nc6", "Bb5"]
    # The missed updates are rebuilt as she saw them then: her legal moves exactly when it was her turn.
    assert [bool(u.legal_actions) for u in missed] == [u.to_move == 0 and not is_final(u) for u in missed]
    assert [moves(u)[-1] for u in after if u.event.kind == "action"] == ["a6"]
    everything = alice_seen + missed + after
    assert_every_update_once(everything)  # no gap, no repeat, across the drop
    assert_every_update_once(bob_seen)
    assert summary(everything) == summary(bob_seen)
    assert not resumed.received()
    assert not bob_stream.received()

    await platform.gateway.SubmitAction(resign(match_id), metadata=alice.metadata)
    for stream in (resumed, bob_stream):
        assert is_final((await stream.to_the_end())[-1])


async def test_staying_away_past_the_disconnect_window_forfeits(platform: Platform) -> None:
    gw = platform.gateway
    alice, bob = platform.player("alice"), platform.player("bob")
    match_id = await direct_match(platform, alice, bob, disconnect_forfeit_ms=WINDOW_MS)
    alice_stream, bob_stream = await both_watching(platform, alice, bob, match_id)
    await play(platform, match_id, [alice, bob], ["e4", "e5"], 0)  # live: the window applies
    last = (await alice_stream.until(has_moves("e4", "e5")))[-1].sequence
    await bob_stream.until(has_moves("e4", "e5"))

    # Away for a quarter of the window, then back: the forfeit is off, even once the window has passed.
    await alice_stream.cancel()
    await bob_stream.until(connected(1))
    await asyncio.sleep(WINDOW_MS / 4000)
    alice_stream = watch(platform, alice, match_id, from_sequence=last)
    last = (await alice_stream.until(connected(0, 1)))[-1].sequence
    await bob_stream.until(connected(0, 1))
    await asyncio.sleep(WINDOW_MS / 1000)
    assert not bob_stream.received()
    now = await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=bob.metadata)
    assert now.update.status == rules_pb2.MATCH_STATUS_LIVE
    assert not is_final(now.update)

    # Away for good: the window after her disconnection, Bob wins by forfeit (the clock service wakes
    # the match; nobody acts).
    await alice_stream.cancel()
    gone = (await bob_stream.until(connected(1)))[-1]
    rest = await bob_stream.to_the_end(within=WINDOW_MS / 1000 + 10)
    final = rest[-1]
    assert [u.sequence for u in rest] == [gone.sequence + 1]
    assert (final.event.kind, final.status) == ("end", rules_pb2.MATCH_STATUS_FINISHED)
    assert (final.result.termination, final.result.winner) == (rules_pb2.TERMINATION_DISCONNECT_FORFEIT, 1)
    # The window counts from when the gateway last vouched for her (the stream's close), which the shard
    # logs a moment later: the end is the window after that instant, at most the presence event's.
    assert gone.event.at_ms - 1_000 <= final.result.ended_at_ms - WINDOW_MS <= gone.event.at_ms
    assert f"disconnected for {WINDOW_MS / 1000:g} s" in final.result.detail

    # She comes back too late: what she missed, the end, and the stream ends; she can no longer move.
    late = await watch(platform, alice, match_id, from_sequence=last).to_the_end()
    assert_every_update_once(late, first=last + 1)
    assert summary(late) == summary([gone, final])
    assert late[-1].result == final.result
    await refused(
        gw.SubmitAction(move(match_id, "Nf3"), metadata=alice.metadata),
        grpc.StatusCode.FAILED_PRECONDITION,
        "over",
    )
    record = await gw.GetRecord(pb.GetRecordRequest(match_id=match_id), metadata=alice.metadata)
    assert (record.result.termination, record.result.winner) == (rules_pb2.TERMINATION_DISCONNECT_FORFEIT, 1)
    assert '[Result "0-1"]' in record.record


async def test_a_lobby_match_forfeits_after_60_seconds_away_not_5(platform: Platform) -> None:
    """Matchmaking creates matches with the rules service's default window: 60 s (docs/match-runtime.md).
    Proved without waiting a minute: the match's creation event records 60,000 ms, a wake-up is armed on
    the clock service no later than 60 s after she leaves, and 5 s away change nothing."""
    gw = platform.gateway
    alice, bob = platform.player("alice"), platform.player("bob")
    match_id = await table_match(platform, alice, bob)
    alice_stream, bob_stream = await both_watching(platform, alice, bob, match_id)
    await play(platform, match_id, [alice, bob], ["e4", "e5"], 0)
    last = (await alice_stream.until(has_moves("e4", "e5")))[-1].sequence
    e5 = (await bob_stream.until(has_moves("e4", "e5")))[-1]
    [created] = await platform.rows(
        "rules-chess",
        select(match_events.c.payload).where(
            match_events.c.match_id == match_id, match_events.c.sequence == 1
        ),
    )
    assert created["payload"]["disconnect_forfeit_ms"] == DEFAULT_WINDOW_MS

    await alice_stream.cancel()
    left = time.monotonic()
    gone = (await bob_stream.until(connected(1)))[-1]
    await wake_up_by(platform, match_id, gone.event.at_ms + DEFAULT_WINDOW_MS)
    await asyncio.sleep(max(0.0, AWAY_S - (time.monotonic() - left)))
    assert not bob_stream.received()  # no forfeit, nothing at all
    now = await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=bob.metadata)
    assert (now.update.status, list(now.update.connected_seats)) == (rules_pb2.MATCH_STATUS_LIVE, [1])
    assert not is_final(now.update)

    # Back: the forfeit is off. An earlier wake-up may stay armed (waking early is harmless: the match
    # re-checks, finds nothing due and re-arms for White's flag), so a reconnect costs no clock call.
    back = await watch(platform, alice, match_id, from_sequence=last).until(connected(0, 1))
    assert [u.sequence for u in back] == [gone.sequence, gone.sequence + 1]
    await bob_stream.until(connected(0, 1))
    await wake_up_by(platform, match_id, gone.event.at_ms + DEFAULT_WINDOW_MS)
    status = await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=bob.metadata)
    assert status.update.status == rules_pb2.MATCH_STATUS_LIVE
    flag_at = e5.event.at_ms + 5 * MINUTE  # White's 5 minutes run from Black's reply
    assert gone.event.at_ms + DEFAULT_WINDOW_MS < flag_at
    await gw.SubmitAction(resign(match_id), metadata=bob.metadata)
    assert (await bob_stream.to_the_end())[-1].result.winner == 0


async def wake_up_by(platform: Platform, match_id: str, deadline_ms: int) -> None:
    """Wait until the match's wake-up on the clock service is armed no later than ``deadline_ms`` (the
    runtime keeps an earlier wake-up rather than re-arming: docs/match-runtime.md)."""
    query = select(clock_timers.c.deadline_ms).where(clock_timers.c.timer_id == f"{match_id}/wake")
    armed: list[int] = []
    async with asyncio.timeout(10):
        while len(armed) != 1 or armed[0] > deadline_ms:
            armed = [row["deadline_ms"] for row in await platform.rows("clock", query)]
            await asyncio.sleep(0.05)
