"""Security through the real gateway, beyond what tests/services/gateway already covers (no token, a
scheme other than Bearer, expired, wrong key, altered payload, acting or watching when not seated, a
spectator seeing no one's moves, rate limits).

Here: JWTs that are unsigned (alg none), truncated, signed by a key the gateway does not trust, tampered
with, HMAC-signed or signed over bad claims; no request can name a player or
a seat; a player cannot use another player's idempotency key, resign for the other seat, cancel another
player's table, or see another player's lobby events, history or private tables.
"""

from __future__ import annotations

import base64
import json
import time

import grpc
import jwt
from google.protobuf.descriptor import Descriptor
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.rules.v1 import rules_pb2

from services.gateway.tokens import SigningKey, mint_token
from tests.fullstack.helpers import (
    Metadata,
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


def bearer(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


def claims(key: SigningKey, subject: object, **changes: object) -> dict[str, object]:
    """What a development token for ``subject`` says (its issuer, audience and an hour's validity)."""
    now = int(time.time())
    return {"iss": key.issuer, "aud": key.audience, "sub": subject, "iat": now, "exp": now + 3600, **changes}


def signed(key: SigningKey, payload: dict[str, object], **headers: object) -> Metadata:
    """A token correctly signed with ``key`` over any payload (what only the key holder can make)."""
    token = jwt.encode(payload, key.private_key, algorithm=key.algorithm, headers={"kid": key.kid, **headers})
    return bearer(token)


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
    trusted = platform.signing_key
    token = alice.metadata[0][1].removeprefix("Bearer ")
    header, payload, signature = token.split(".")
    stranger = SigningKey.generate()  # a key the gateway has never heard of
    impostor = SigningKey.of(SigningKey.generate().private_key, kid=trusted.kid)  # claiming the trusted kid
    p256 = SigningKey.generate("ES256", kid=trusted.kid)  # the trusted kid, the other algorithm
    raw_public = base64.urlsafe_b64decode(trusted.public_jwk()["x"] + "==")
    as_bob = _b64(json.dumps(claims(trusted, "bob")).encode())
    cases = {
        "unsigned (alg none)": (
            bearer(jwt.encode(claims(trusted, alice.id), "", algorithm="none", headers={"kid": trusted.kid})),
            "algorithm",
        ),
        "unsigned (signature stripped)": (bearer(f"{header}.{payload}."), "signature"),
        "no signature part": (bearer(f"{header}.{payload}"), "malformed"),
        "truncated mid-signature": (bearer(f"{header}.{payload}.{signature[:-1]}"), "malformed"),
        "signature cut short": (bearer(f"{header}.{payload}.{signature[:-6]}"), "signature"),  # 60 bytes
        "truncated payload": (
            bearer(f"{header}.{payload[: len(payload) // 4 * 4 - 4]}.{signature}"),
            "signature",
        ),
        "signature not base64url": (bearer(f"{header}.{payload}.{signature}!"), "malformed"),
        "signed by an untrusted key": (
            bearer(mint_token(stranger, alice.id, 3600, int(time.time()))),
            "trusts",
        ),
        "signed by another key under the trusted kid": (
            signed(impostor, claims(trusted, alice.id)),
            "signature",
        ),
        "tampered payload (Alice's signature, Bob's claims)": (
            bearer(f"{header}.{as_bob}.{signature}"),
            "signature",
        ),
        "HS256 with a shared secret": (
            bearer(jwt.encode(claims(trusted, alice.id), bytes(32), "HS256", headers={"kid": trusted.kid})),
            "algorithm",
        ),
        "HS256 keyed with the trusted public key": (
            bearer(jwt.encode(claims(trusted, alice.id), raw_public, "HS256", headers={"kid": trusted.kid})),
            "algorithm",
        ),
        "ES256 under the EdDSA key's kid": (signed(p256, claims(trusted, alice.id)), "match"),
        "no kid": (
            bearer(jwt.encode(claims(trusted, alice.id), trusted.private_key, algorithm=trusted.algorithm)),
            "kid",
        ),
        "empty bearer": ((("authorization", "Bearer "),), "Bearer"),
        "another metadata key": ((("x-authorization", f"Bearer {token}"),), "no token"),
        "far too long": (bearer(f"{token}{'A' * 4096}"), "too long"),
        "signed, subject not a player id": (signed(trusted, claims(trusted, "a b")), "subject"),
        "signed, subject missing": (
            signed(trusted, {k: v for k, v in claims(trusted, "x").items() if k != "sub"}),
            "subject",
        ),
        "signed, expiry not a number": (
            signed(trusted, claims(trusted, alice.id, exp=str(int(time.time()) + 3600))),
            "exp",
        ),
        "signed, another audience": (signed(trusted, claims(trusted, alice.id, aud="elsewhere")), "audience"),
        "signed, another issuer": (signed(trusted, claims(trusted, alice.id, iss="mallory")), "issuer"),
        "signed, expired": (
            signed(trusted, claims(trusted, alice.id, exp=int(time.time()) - 3600)),
            "expired",
        ),
    }
    for case, (metadata, reason) in cases.items():
        details = await refused(gw.WhoAmI(pb.WhoAmIRequest(), metadata=metadata), UNAUTHENTICATED, reason)
        assert alice.id not in details, case
        await refused(gw.GetRatings(pb.GetRatingsRequest(), metadata=metadata), UNAUTHENTICATED, reason)
    # The same claims, correctly signed with the trusted key, are Alice.
    assert (
        await gw.WhoAmI(pb.WhoAmIRequest(), metadata=signed(trusted, claims(trusted, alice.id)))
    ).player_id == alice.id


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
