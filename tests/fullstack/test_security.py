"""Security through the real gateway, beyond what tests/services/gateway already covers (no token, a
scheme other than Bearer, expired, wrong key, altered payload, acting or watching when not seated, a
spectator seeing no one's moves, rate limits).

Here: tokens that are unsigned, truncated or signed over a bad payload; no request can name a player or
a seat; a player cannot use another player's idempotency key, resign for the other seat, cancel another
player's table, or see another player's lobby events, history or private tables.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import grpc
from google.protobuf.descriptor import Descriptor
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.rules.v1 import rules_pb2

from tests.fullstack.helpers import (
    Platform,
    has_moves,
    is_final,
    live_lobby,
    lobby_probe,
    move,
    next_lobby,
    refused,
    resign,
    table_match,
    table_request,
    watch,
)

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
FAILED = grpc.StatusCode.FAILED_PRECONDITION
IDENTITY_FIELDS = {"player_id", "player", "seat", "seats", "creator_id", "joiner_id", "subject", "sub"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed(key: bytes, payload: object) -> tuple[tuple[str, str], ...]:
    """A token correctly signed with ``key`` over any JSON payload (what only the key holder can make)."""
    body = f"v1.{_b64(json.dumps(payload).encode())}"
    mac = hmac.new(key, body.encode(), hashlib.sha256).digest()
    return (("authorization", f"Bearer {body}.{_b64(mac)}"),)


def _fields(message: Descriptor, seen: set[str]) -> set[str]:
    """Every field name of ``message`` and of the messages it contains."""
    if message.full_name in seen:
        return set()
    seen.add(message.full_name)
    names = set()
    for field in message.fields:
        names.add(field.name)
        if field.message_type is not None:
            names |= _fields(field.message_type, seen)
    return names


def test_no_gateway_request_can_name_a_player_or_a_seat() -> None:
    """The player is always the token's subject and the seat is derived from it: the contract has no
    field through which a client could claim either."""
    # What the gateway fills in for the services behind it is exactly what a client cannot send.
    assert "seat" in _fields(rules_pb2.SubmitActionRequest.DESCRIPTOR, set())
    assert "player_id" in _fields(mm_pb.JoinTableRequest.DESCRIPTOR, set())
    service = pb.DESCRIPTOR.services_by_name["GatewayService"]
    assert len(service.methods) >= 15
    for method in service.methods:
        assert not _fields(method.input_type, set()) & IDENTITY_FIELDS, method.name


async def test_unsigned_truncated_and_badly_signed_tokens_are_refused(platform: Platform) -> None:
    gw = platform.gateway
    alice = platform.player("alice")
    token = alice.metadata[0][1].removeprefix("Bearer ")
    version, payload, mac = token.split(".")
    later = int(time.time()) + 3600
    cases = {
        "unsigned (empty signature)": ((("authorization", f"Bearer {version}.{payload}."),), "signature"),
        "no signature part": ((("authorization", f"Bearer {version}.{payload}"),), "malformed"),
        "signature not base64url": ((("authorization", f"Bearer {version}.{payload}.{mac}!"),), "malformed"),
        "a later version": ((("authorization", f"Bearer v2.{payload}.{mac}"),), "version"),
        "empty bearer": ((("authorization", "Bearer "),), "Bearer"),
        "another metadata key": ((("x-authorization", f"Bearer {token}"),), "no token"),
        "far too long": ((("authorization", f"Bearer {token}{'A' * 4096}"),), "too long"),
        "signed, subject not a player id": (signed(platform.key, {"sub": "a b", "exp": later}), "subject"),
        "signed, subject missing": (signed(platform.key, {"exp": later}), "subject"),
        "signed, expiry not an integer": (
            signed(platform.key, {"sub": alice.id, "exp": str(later)}),
            "expiry",
        ),
        "signed, not an object": (signed(platform.key, [alice.id, later]), "object"),
    }
    for case, (metadata, reason) in cases.items():
        details = await refused(gw.WhoAmI(pb.WhoAmIRequest(), metadata=metadata), UNAUTHENTICATED, reason)
        assert alice.id not in details, case
        await refused(gw.GetRatings(pb.GetRatingsRequest(), metadata=metadata), UNAUTHENTICATED, reason)
    # The same payload, correctly signed, is Alice.
    good = signed(platform.key, {"sub": alice.id, "exp": later})
    assert (await gw.WhoAmI(pb.WhoAmIRequest(), metadata=good)).player_id == alice.id


async def test_a_player_cannot_replay_another_players_idempotency_key(platform: Platform) -> None:
    gw = platform.gateway
    alice, bob = platform.player("alice"), platform.player("bob")
    match_id = await table_match(platform, alice, bob)
    first = await gw.SubmitAction(move(match_id, "e4", key="k-1"), metadata=alice.metadata)
    # Bob sends Alice's key with her very action, and with his own reply: neither gets her answer.
    await refused(
        gw.SubmitAction(move(match_id, "e4", key="k-1"), metadata=bob.metadata),
        grpc.StatusCode.ALREADY_EXISTS,
    )
    await refused(
        gw.SubmitAction(move(match_id, "e5", key="k-1"), metadata=bob.metadata),
        grpc.StatusCode.ALREADY_EXISTS,
    )
    again = await gw.SubmitAction(move(match_id, "e4", key="k-1"), metadata=alice.metadata)
    assert (again.sequence, again.seat) == (first.sequence, 0)  # her own retry: the original answer
    reply = await gw.SubmitAction(move(match_id, "e5", key="k-2"), metadata=bob.metadata)
    assert reply.update.view.chess.moves_san == ["e4", "e5"]
    await gw.SubmitAction(resign(match_id), metadata=bob.metadata)


async def test_resigning_resigns_the_callers_own_seat(platform: Platform) -> None:
    gw = platform.gateway
    alice, bob, carol = platform.player("alice"), platform.player("bob"), platform.player("carol")
    match_id = await table_match(platform, alice, bob)
    await gw.SubmitAction(move(match_id, "e4"), metadata=alice.metadata)
    await gw.SubmitAction(move(match_id, "e5"), metadata=bob.metadata)
    await refused(
        gw.SubmitAction(resign(match_id), metadata=carol.metadata), grpc.StatusCode.PERMISSION_DENIED
    )
    stream = watch(platform, alice, match_id)
    await stream.until(has_moves("e4", "e5"))
    # White is to move; Bob resigns: it is Bob's seat that resigns, whoever's turn it is.
    reply = await gw.SubmitAction(resign(match_id), metadata=bob.metadata)
    assert reply.seat == 1
    final = (await stream.to_the_end())[-1]
    assert is_final(final)
    assert (final.event.kind, final.event.seat) == ("resign", 1)
    assert (final.result.termination, final.result.winner) == (rules_pb2.TERMINATION_RESIGNATION, 0)
    await refused(gw.SubmitAction(resign(match_id), metadata=alice.metadata), FAILED, "over")


async def test_lobby_events_history_and_private_tables_stay_private(platform: Platform) -> None:
    gw = platform.gateway
    alice, bob, carol = platform.player("alice"), platform.player("bob"), platform.player("carol")
    carol_lobby = await live_lobby(platform, carol)
    alice_lobby = await live_lobby(platform, alice)

    # Carol can neither cancel Alice's open table nor see her private one in the list.
    public = (await gw.CreateTable(table_request(), metadata=alice.metadata)).table
    await refused(
        gw.LeaveTable(pb.LeaveTableRequest(table_id=public.table_id), metadata=carol.metadata),
        FAILED,
        "only the player at an open table",
    )
    listed = await gw.ListTables(pb.ListTablesRequest(family="chess"), metadata=carol.metadata)
    assert public.table_id in [t.table_id for t in listed.tables]
    await gw.LeaveTable(pb.LeaveTableRequest(table_id=public.table_id), metadata=alice.metadata)
    private = (
        await gw.CreateTable(table_request(visibility=mm_pb.VISIBILITY_PRIVATE), metadata=alice.metadata)
    ).table
    listed = await gw.ListTables(pb.ListTablesRequest(family="chess"), metadata=carol.metadata)
    assert private.table_id not in [t.table_id for t in listed.tables]

    # Alice and Bob play (Bob joins the private table by its id) and are rated.
    joined = (await gw.JoinTable(pb.JoinTableRequest(table_id=private.table_id), metadata=bob.metadata)).table
    await gw.SubmitAction(move(joined.match_id, "e4"), metadata=alice.metadata)
    await gw.SubmitAction(resign(joined.match_id), metadata=bob.metadata)
    await next_lobby(alice_lobby, "rating_changed")

    # Carol's stream got nothing of it: only her own tables' updates come before her next probe.
    for event in await lobby_probe(platform, carol, carol_lobby):
        assert event.WhichOneof("event") == "table_updated", event
        assert event.table_updated.creator_id == carol.id, event
    assert not (await gw.GetMatchHistory(pb.GetMatchHistoryRequest(), metadata=carol.metadata)).matches
    assert not (await gw.GetRatings(pb.GetRatingsRequest(), metadata=carol.metadata)).ratings
    [played] = (await gw.GetMatchHistory(pb.GetMatchHistoryRequest(), metadata=alice.metadata)).matches
    assert played.match_id == joined.match_id
    for stream in (alice_lobby, carol_lobby):
        await stream.cancel()
