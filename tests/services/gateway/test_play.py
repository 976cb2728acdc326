"""The gateway's Play stream and its shard links (one Exchange stream per rules shard), over real gRPC.

The Play tests run against a real chess rules shard (the gateway tests' platform); the link's own tests,
and the ones that need a shard to misbehave on cue, run against a small fake that serves Exchange by a
script.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import structlog
from skillclassics.chess.v1 import chess_pb2
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.match.exchange import ExchangeSession
from libs.match.routing import RulesChannels
from libs.runtime import RunningServer
from libs.runtime.config import sqlite_url
from libs.runtime.errors import (
    FailedPrecondition,
    ResourceExhausted,
    ServiceError,
    Unavailable,
    code_number,
    status_code,
)
from services.gateway import servicer as gateway_servicer
from services.gateway.limits import Priority
from services.gateway.service import GatewayService
from services.gateway.servicer import _PlayOutbox
from services.gateway.shard_link import ShardLink, ShardLinks, refusal_error
from services.rules_chess.service import chess_rules_service
from tests.services.gateway import test_gateway_service
from tests.services.gateway.test_gateway_service import (
    Metadata,
    Platform,
    bearer,
    direct_match,
    start_gateway,
    wait_for_presence,
)
from tests.support import backend_channel, free_port, start_in_process, stream_calls_counted, transport_as

platform = test_gateway_service.platform
"""The gateway tests' platform (matchmaking, a chess rules shard and a gateway), as a fixture here."""

SHARD = "rules-chess shard 0"


@pytest.fixture
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """SQLite only: Play is the gateway's; the shards' storage is tested on both backends elsewhere."""
    return sqlite_url(tmp_path_factory.mktemp("db") / "test.db")


def chess(san: str) -> rules_pb2.Action:
    return rules_pb2.Action(chess=chess_pb2.ChessAction(move=san))


class PlayClient:
    """One Play stream as a client drives it: it writes, and keeps what it reads (updates in order,
    answers by idempotency key)."""

    def __init__(self, gateway: gateway_pb2_grpc.GatewayServiceStub, metadata: Metadata | None) -> None:
        self.call = gateway.Play(metadata=metadata)
        self.updates: list[rules_pb2.MatchUpdate] = []
        self.answers: dict[str, pb.PlayAnswer] = {}
        self._cursor = 0

    async def open(self, match_id: str, from_sequence: int = 0) -> pb.PlayOpened:
        await self.call.write(
            pb.PlayRequest(open=pb.PlayOpen(match_id=match_id, from_sequence=from_sequence))
        )
        async with asyncio.timeout(5):
            first: pb.PlayResponse = await self.call.read()
        assert first.WhichOneof("kind") == "opened", first
        return first.opened

    async def act(self, san: str, key: str | None = None) -> str:
        key = uuid.uuid4().hex if key is None else key
        await self.call.write(pb.PlayRequest(action=pb.PlayAction(idempotency_key=key, action=chess(san))))
        return key

    async def answer(self, key: str) -> pb.PlayAnswer:
        async with asyncio.timeout(5):
            while key not in self.answers:
                await self._read()
        return self.answers.pop(key)

    async def play(self, san: str) -> int:
        """Act and wait for the answer: the sequence (the action must be accepted)."""
        answer = await self.answer(await self.act(san))
        assert answer.code == 0, answer
        assert answer.sequence > 0
        return answer.sequence

    async def update(self, wanted: Callable[[rules_pb2.MatchUpdate], bool]) -> rules_pb2.MatchUpdate:
        """The next update (after the last one returned) that is ``wanted``."""
        async with asyncio.timeout(5):
            while True:
                while self._cursor < len(self.updates):
                    update = self.updates[self._cursor]
                    self._cursor += 1
                    if wanted(update):
                        return update
                await self._read()

    async def refused(self, *messages: pb.PlayRequest) -> grpc.aio.AioRpcError:
        """Send ``messages`` (the stream may end before they are all written), then read to the end of
        the stream, which must be a refusal: its error."""
        for message in messages:
            try:
                await self.call.write(message)
            except grpc.aio.AioRpcError:
                break  # refused already: ended() reads why
        return await self.ended()

    async def ended(self, within_s: float = 5) -> grpc.aio.AioRpcError:
        """Read to the end of the stream, which must be a refusal: its error."""
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await asyncio.wait_for(self._read_forever(), within_s)
        return caught.value

    async def _read_forever(self) -> None:
        while True:
            await self._read()

    async def _read(self) -> None:
        response = await self.call.read()
        assert response is not grpc.aio.EOF, "the stream ended OK"
        which = response.WhichOneof("kind")
        if which == "update":
            self.updates.append(response.update)
        elif which == "answer":
            self.answers[response.answer.idempotency_key] = response.answer
        else:  # opened: read by open(), or before a refusal the test expects
            assert which == "opened", response


def refused_with(error: grpc.aio.AioRpcError, code: grpc.StatusCode, reason: str) -> None:
    assert error.code() == code, (error.code(), error.details())
    assert reason in (error.details() or ""), error.details()


def moves(update: rules_pb2.MatchUpdate) -> list[str]:
    return list(update.view.chess.moves_san)


def gateway_links(gateway: RunningServer) -> ShardLinks:
    assert isinstance(gateway.service, GatewayService)
    return gateway.service.links


async def eventually(check: Callable[[], bool], what: str, within_s: float = 5) -> None:
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


# -- Play over a real chess shard ------------------------------------------------------------------------


def _actions_counted(code: str) -> float:
    return stream_calls_counted("skillclassics.gateway.v1.GatewayService", "Play", "action", code)


async def test_two_seated_players_play_a_game_over_play_streams(platform: Platform) -> None:
    counted = {code: _actions_counted(code) for code in ("OK", "FAILED_PRECONDITION")}
    match_id = await direct_match(platform, "alice", "bob")
    white, black = PlayClient(platform.gateway, bearer("alice")), PlayClient(platform.gateway, bearer("bob"))
    assert await white.open(match_id) == pb.PlayOpened(match_id=match_id, seat=0)
    assert await black.open(match_id) == pb.PlayOpened(match_id=match_id, seat=1)
    created = await white.update(lambda u: True)
    assert created.sequence == 1  # from the start, as WatchMatch does
    assert created.legal_actions  # her own seat's view: White to move

    # Refused actions are answered with the shard's code and reason; the stream goes on.
    out_of_turn = await black.answer(await black.act("e5"))
    assert (out_of_turn.code, out_of_turn.sequence) == (code_number(grpc.StatusCode.FAILED_PRECONDITION), 0)
    assert out_of_turn.message
    illegal = await white.answer(await white.act("Ke2"))
    assert illegal.code == code_number(grpc.StatusCode.FAILED_PRECONDITION), illegal

    key = await white.act("e4")
    accepted = await white.answer(key)
    assert accepted.code == 0, accepted
    assert accepted.sequence > 1
    seen = await black.update(lambda u: moves(u) == ["e4"])
    assert seen.sequence == accepted.sequence  # the opponent sees the mover's update
    assert seen.legal_actions  # Black to move: his own view lists his moves
    retried = await white.answer(await white.act("e4", key))
    assert retried == accepted  # the same key: the original answer, nothing played twice

    assert await black.play("g5") > accepted.sequence
    # Two actions in flight at once: both answered, each on its own.
    legal, late = await white.act("d4"), await white.act("Qh5")
    assert (await white.answer(legal)).code == 0
    assert (await white.answer(late)).code == code_number(grpc.StatusCode.FAILED_PRECONDITION)
    await black.play("f6")
    await white.play("Qh5#")
    for client in (white, black):
        final = await client.update(lambda u: u.HasField("result"))
        assert final.result.termination == rules_pb2.TERMINATION_CHECKMATE
        assert final.result.winner == 0
        assert moves(final) == ["e4", "g5", "d4", "f6", "Qh5#"]
        async with asyncio.timeout(5):  # the match is over: its stream ends OK
            assert await client.call.read() is grpc.aio.EOF
        assert await client.call.code() == grpc.StatusCode.OK
    # Each action is counted by its answer's code (the stream itself is one RPC to the interceptor).
    # Accepted: e4, its retry, g5, d4, f6, Qh5#; refused: e5 out of turn, Ke2, Qh5 after d4.
    assert _actions_counted("OK") - counted["OK"] == 6
    assert _actions_counted("FAILED_PRECONDITION") - counted["FAILED_PRECONDITION"] == 3


async def test_a_play_streams_request_id_goes_with_its_calls_to_the_shard(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str | None, str]] = []
    start = ExchangeSession._start

    def recording(session: ExchangeSession, call: rules_pb2.ExchangeCall) -> None:
        seen.append((call.WhichOneof("call"), call.request_id))
        start(session, call)

    monkeypatch.setattr(ExchangeSession, "_start", recording)
    match_id = await direct_match(platform, "alice", "bob")
    white = PlayClient(platform.gateway, (*bearer("alice"), ("x-request-id", "alice-play-1")))
    await white.open(match_id)
    await white.play("e4")
    assert ("watch", "alice-play-1") in seen
    assert ("submit", "alice-play-1") in seen
    white.call.cancel()


async def test_a_play_stream_counts_as_connected(platform: Platform) -> None:
    match_id = await direct_match(platform, "alice", "bob")
    white, black = PlayClient(platform.gateway, bearer("alice")), PlayClient(platform.gateway, bearer("bob"))
    await white.open(match_id)
    await black.open(match_id)
    assert (await black.update(lambda u: list(u.connected_seats) == [0, 1])).event.kind == "presence"
    white.call.cancel()
    await black.update(lambda u: list(u.connected_seats) == [1])  # she left: her seat is disconnected
    black.call.cancel()
    await wait_for_presence(platform, match_id, [])


async def test_play_refuses_what_it_cannot_serve(platform: Platform) -> None:
    gw = platform.gateway
    match_id = await direct_match(platform, "alice", "bob")
    opening = pb.PlayRequest(open=pb.PlayOpen(match_id=match_id))
    nobody = await PlayClient(gw, None).refused(opening)
    refused_with(nobody, grpc.StatusCode.UNAUTHENTICATED, "no token")
    forged = await PlayClient(gw, bearer("alice", key=b"x" * 32)).refused(opening)
    refused_with(forged, grpc.StatusCode.UNAUTHENTICATED, "signature")

    carol = await PlayClient(gw, bearer("carol")).refused(opening)
    refused_with(carol, grpc.StatusCode.PERMISSION_DENIED, "spectators use WatchMatch")
    acting = pb.PlayRequest(action=pb.PlayAction(idempotency_key="k", action=chess("e4")))
    acting_first = await PlayClient(gw, bearer("alice")).refused(acting)  # refused on reading it
    refused_with(acting_first, grpc.StatusCode.INVALID_ARGUMENT, "first message")
    silent = PlayClient(gw, bearer("alice"))
    await silent.call.done_writing()
    refused_with(await silent.ended(), grpc.StatusCode.INVALID_ARGUMENT, "first message")
    for bad_id, code in (
        ("not-a-match", grpc.StatusCode.INVALID_ARGUMENT),
        ("go.0.x", grpc.StatusCode.NOT_FOUND),
    ):
        lost = await PlayClient(gw, bearer("alice")).refused(
            pb.PlayRequest(open=pb.PlayOpen(match_id=bad_id))
        )
        refused_with(lost, code, "")

    twice = PlayClient(gw, bearer("alice"))
    await twice.open(match_id)
    keyless = await twice.answer(await twice.act("e4", key=""))
    assert keyless.code == code_number(grpc.StatusCode.INVALID_ARGUMENT), keyless  # the shard's refusal
    assert "idempotency_key" in keyless.message
    refused_with(await twice.refused(opening), grpc.StatusCode.INVALID_ARGUMENT, "opened once")


async def test_a_refusal_on_the_token_waits_for_the_open_the_client_is_writing(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway reads the first message before refusing on the metadata (a refusal that overtakes
    the client's write of its open makes that write fail on the client's side, which grpc reports as
    INTERNAL, "Internal error from Core", instead of UNAUTHENTICATED: seen in CI). So the refusal comes
    as soon as the open arrives, and without one only after the grace."""
    monkeypatch.setattr(gateway_servicer, "FIRST_MESSAGE_GRACE_S", 2.0)
    match_id = await direct_match(platform, "alice", "bob")
    opening = pb.PlayRequest(open=pb.PlayOpen(match_id=match_id))
    started = time.monotonic()
    nobody = await PlayClient(platform.gateway, None).refused(opening)
    refused_with(nobody, grpc.StatusCode.UNAUTHENTICATED, "no token")
    assert time.monotonic() - started < 1.5
    started = time.monotonic()
    silent = PlayClient(platform.gateway, bearer("alice", key=b"x" * 32))
    refused_with(await silent.ended(), grpc.StatusCode.UNAUTHENTICATED, "signature")
    assert time.monotonic() - started >= 1.9


async def test_a_play_stream_ends_when_its_token_expires(platform: Platform) -> None:
    match_id = await direct_match(platform, "short-lived", "bob")
    client = PlayClient(platform.gateway, bearer("short-lived", ttl=2))
    await client.open(match_id)
    await wait_for_presence(platform, match_id, [0])
    refused_with(await client.ended(within_s=4), grpc.StatusCode.UNAUTHENTICATED, "token expired")
    await wait_for_presence(platform, match_id, [])


async def test_matches_share_one_exchange_stream_in_batches(platform: Platform, tmp_path: Path) -> None:
    gateway = await start_gateway(tmp_path, {"RULES_CHESS_ADDRESSES": platform.rules_address})
    try:
        async with grpc.aio.insecure_channel(gateway.address) as channel:
            gw = gateway_pb2_grpc.GatewayServiceStub(channel)
            matches = 12
            pairs = []
            for n in range(matches):
                match_id = await direct_match(platform, f"white-{n}", f"black-{n}")
                white, black = PlayClient(gw, bearer(f"white-{n}")), PlayClient(gw, bearer(f"black-{n}"))
                await white.open(match_id)
                await black.open(match_id)
                pairs.append((white, black))
            link = gateway_links(gateway).link(platform.rules_address, SHARD, "chess")
            assert link.streams_opened == 1  # every match of the shard on one stream
            assert link.pending == 2 * matches  # a watch per Play stream
            requests, calls = link.requests_sent, link.calls_sent
            keys = await asyncio.gather(*(white.act("e4") for white, _ in pairs))
            answers = await asyncio.gather(
                *(white.answer(key) for (white, _), key in zip(pairs, keys, strict=True))
            )
            assert all(a.code == 0 and a.sequence > 1 for a in answers), answers
            for _, black in pairs:
                await black.update(lambda u: moves(u) == ["e4"])
            assert link.calls_sent - calls == matches
            assert link.requests_sent - requests < matches, "concurrent submits were not batched"
            for white, black in pairs:
                white.call.cancel()
                black.call.cancel()
            await eventually(lambda: link.pending == 0, "closed Play streams left watches on the link")
    finally:
        await gateway.stop(grace=0.5)


async def test_a_gateway_shutting_down_ends_play_unavailable(platform: Platform, tmp_path: Path) -> None:
    match_id = await direct_match(platform, "alice", "bob")
    gateway = await start_gateway(tmp_path, {"RULES_CHESS_ADDRESSES": platform.rules_address})
    async with grpc.aio.insecure_channel(gateway.address) as channel:
        client = PlayClient(gateway_pb2_grpc.GatewayServiceStub(channel), bearer("bob"))
        await client.open(match_id)
        await wait_for_presence(platform, match_id, [1])
        started = time.monotonic()
        await gateway.stop(grace=5)
        assert time.monotonic() - started < 3  # ended at once, not after the grace
        refused_with(await client.ended(), grpc.StatusCode.UNAVAILABLE, "shutting down")
    await wait_for_presence(platform, match_id, [])


@contextlib.asynccontextmanager
async def own_platform(gateway: RunningServer, rules: RunningServer) -> AsyncIterator[Platform]:
    """Stubs for a test's own gateway and rules shard (no matchmaking), for as long as it is open."""
    async with (
        grpc.aio.insecure_channel(gateway.address) as gateway_channel,  # the players' door: plaintext
        backend_channel(rules.address, "matchmaking") as rules_channel,
        backend_channel(rules.address, "gateway") as seat_views_channel,
    ):
        gw = gateway_pb2_grpc.GatewayServiceStub(gateway_channel)
        yield Platform(
            gw,
            rules_pb2_grpc.RulesServiceStub(rules_channel),
            rules.address,
            "",
            rules_pb2_grpc.RulesServiceStub(seat_views_channel),
        )


async def test_a_shard_that_goes_away_ends_play_unavailable_and_play_resumes_when_it_is_back(
    tmp_path: Path,
) -> None:
    port = str(free_port())
    url = sqlite_url(tmp_path / "rules.db")
    rules = await start_in_process("rules-chess", chess_rules_service, url, GRPC_PORT=port)
    gateway = await start_gateway(tmp_path, {"RULES_CHESS_ADDRESSES": rules.address})
    try:
        async with own_platform(gateway, rules) as shard:
            gw = shard.gateway
            match_id = await direct_match(shard, "alice", "bob")
            white, black = PlayClient(gw, bearer("alice")), PlayClient(gw, bearer("bob"))
            await white.open(match_id)
            await black.open(match_id)
            key = await white.act("e4")
            sequence = (await white.answer(key)).sequence

            started = time.monotonic()
            await rules.stop(grace=0)
            for client in (white, black):
                refused_with(
                    await client.ended(), grpc.StatusCode.UNAVAILABLE, "reconnect from your last sequence"
                )
            assert time.monotonic() - started < 3
            while_down = await PlayClient(gw, bearer("alice")).refused(
                pb.PlayRequest(open=pb.PlayOpen(match_id=match_id))
            )
            refused_with(while_down, grpc.StatusCode.UNAVAILABLE, SHARD)
            assert time.monotonic() - started < 4  # a shard that is down is refused at once, not waited for

            rules = await start_in_process("rules-chess", chess_rules_service, url, GRPC_PORT=port)
            deadline = time.monotonic() + 15
            while True:  # the channel reconnects after its backoff
                again = PlayClient(gw, bearer("alice"))
                failed = await opened_or_refused(again, match_id)
                if failed is None:
                    break
                assert failed.code() == grpc.StatusCode.UNAVAILABLE, failed
                assert time.monotonic() < deadline, "Play did not come back with its shard"
                await asyncio.sleep(0.2)
            retried = await again.answer(await again.act("e4", key))
            assert (retried.code, retried.sequence) == (0, sequence)  # the retry is safe: same answer
            bob = PlayClient(gw, bearer("bob"))
            await bob.open(match_id)
            await bob.play("e5")
            again.call.cancel()
            bob.call.cancel()
    finally:
        await gateway.stop(grace=0.5)
        await rules.stop(grace=0.5)


async def opened_or_refused(client: PlayClient, match_id: str) -> grpc.aio.AioRpcError | None:
    """Open ``client`` on the match and read the first move's update; the error if the stream ends."""
    try:
        await client.open(match_id)
        await client.update(lambda u: moves(u) == ["e4"])
    except grpc.aio.AioRpcError as error:
        return error
    return None


# -- a fake shard: Exchange by a script ------------------------------------------------------------------


class FakeShard(rules_pb2_grpc.RulesServiceServicer):
    """A rules shard that serves Exchange by a script, and the seats and presence the gateway asks for.

    Submits are answered with ``int(key)`` as the sequence; a key ``refuse:<code>:<reason>`` is refused
    with that code and reason; a key starting with ``hold`` is never answered. A watch gets one update
    (``flood`` more of about 1 KB each when set). Replies to one request go out as one response, in
    reverse order, so that a client matching them by order instead of id would fail.
    """

    def __init__(self) -> None:
        self.batches: list[rules_pb2.ExchangeRequest] = []
        self.streams = 0
        self.watches: dict[int, rules_pb2.WatchRequest] = {}
        self.unwatched: list[int] = []
        self.presence: list[tuple[int, bool]] = []
        self.flood = 0
        self._out: asyncio.Queue[rules_pb2.ExchangeResponse | None] | None = None

    def push(self, *replies: rules_pb2.ExchangeReply) -> None:
        assert self._out is not None, "no Exchange stream is open"
        self._out.put_nowait(rules_pb2.ExchangeResponse(replies=replies))

    def end_stream(self) -> None:
        """End the open stream UNAVAILABLE, as a shard going away does."""
        assert self._out is not None
        self._out.put_nowait(None)

    @property
    def calls(self) -> list[rules_pb2.ExchangeCall]:
        return [call for batch in self.batches for call in batch.calls]

    async def Exchange(  # type: ignore[override]
        self, requests: AsyncIterator[rules_pb2.ExchangeRequest], context: grpc.aio.ServicerContext
    ) -> None:
        self.streams += 1
        out = self._out = asyncio.Queue()
        reader = asyncio.create_task(self._read(requests, out))
        try:
            while (message := await out.get()) is not None:
                await context.write(message)
        finally:
            reader.cancel()
        await context.abort(grpc.StatusCode.UNAVAILABLE, "the fake shard is restarting")

    async def _read(
        self,
        requests: AsyncIterator[rules_pb2.ExchangeRequest],
        out: asyncio.Queue[rules_pb2.ExchangeResponse | None],
    ) -> None:
        async for request in requests:
            self.batches.append(request)
            replies = [reply for call in request.calls for reply in self._answer(call)]
            if replies:
                out.put_nowait(rules_pb2.ExchangeResponse(replies=replies[::-1]))
            if self.flood:
                for call in request.calls:
                    if call.HasField("watch"):
                        self._flood(call.id, out)

    def _answer(self, call: rules_pb2.ExchangeCall) -> Iterator[rules_pb2.ExchangeReply]:
        which = call.WhichOneof("call")
        if which == "unwatch":
            self.unwatched.append(call.unwatch.watch_id)
        elif which == "watch":
            self.watches[call.id] = call.watch
            first = rules_pb2.MatchUpdate(match_id=call.watch.match_id, sequence=call.watch.from_sequence + 1)
            yield rules_pb2.ExchangeReply(id=call.id, update=first)
        elif which == "submit":
            key = call.submit.idempotency_key
            if key.startswith("refuse:"):
                _, code, reason = key.split(":", 2)
                yield rules_pb2.ExchangeReply(
                    id=call.id, refused=rules_pb2.Refusal(code=int(code), message=reason)
                )
            elif not key.startswith("hold"):
                yield rules_pb2.ExchangeReply(id=call.id, submitted=rules_pb2.Submitted(sequence=int(key)))

    def _flood(self, watch_id: int, out: asyncio.Queue[rules_pb2.ExchangeResponse | None]) -> None:
        padding = "x" * 1000
        for first in range(2, self.flood + 2, 500):
            out.put_nowait(
                rules_pb2.ExchangeResponse(
                    replies=[
                        rules_pb2.ExchangeReply(
                            id=watch_id,
                            update=rules_pb2.MatchUpdate(
                                sequence=sequence, event=rules_pb2.Event(kind="action", description=padding)
                            ),
                        )
                        for sequence in range(first, min(first + 500, self.flood + 2))
                    ]
                )
            )

    async def GetMatch(
        self, request: rules_pb2.GetMatchRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.GetMatchResponse:
        return rules_pb2.GetMatchResponse(
            update=rules_pb2.MatchUpdate(match_id=request.match_id, sequence=1),
            seats=[
                rules_pb2.SeatAssignment(seat=0, player_id="alice"),
                rules_pb2.SeatAssignment(seat=1, player_id="bob"),
            ],
        )

    async def SetPresence(
        self, request: rules_pb2.SetPresenceRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.SetPresenceResponse:
        self.presence.append((request.seat, request.connected))
        return rules_pb2.SetPresenceResponse(sequence=1)


@dataclass
class Fake:
    shard: FakeShard
    address: str
    link: ShardLink


@pytest.fixture
async def fake() -> AsyncIterator[Fake]:
    server = grpc.aio.server()
    shard = FakeShard()  # type: ignore[abstract]  # the stubs' methods it does not serve are UNIMPLEMENTED
    rules_pb2_grpc.add_RulesServiceServicer_to_server(shard, server)
    # Mutual TLS with the certificate of chess shard 0, as the gateway expects of a chess shard.
    port = server.add_secure_port("127.0.0.1:0", transport_as("rules-chess-0").server_credentials())
    await server.start()
    address = f"127.0.0.1:{port}"
    async with backend_channel(address, "gateway", "rules-chess") as channel:
        link = ShardLink("rules-fake shard 0", rules_pb2_grpc.RulesServiceStub(channel))
        yield Fake(shard, address, link)
        await link.close()
    await server.stop(0)


def submit(key: str) -> rules_pb2.SubmitActionRequest:
    return rules_pb2.SubmitActionRequest(
        match_id="chess.0.fake", seat=0, idempotency_key=key, action=chess("e4")
    )


def watch_request(from_sequence: int = 0) -> rules_pb2.WatchRequest:
    return rules_pb2.WatchRequest(match_id="chess.0.fake", seat=0, from_sequence=from_sequence)


class Subscriber:
    def __init__(self) -> None:
        self.updates: list[rules_pb2.MatchUpdate] = []
        self.end: rules_pb2.Refusal | None = None

    def __call__(self, item: rules_pb2.MatchUpdate | rules_pb2.Refusal) -> None:
        assert self.end is None, "a watch got something after its end"
        if isinstance(item, rules_pb2.MatchUpdate):
            self.updates.append(item)
        else:
            self.end = item


# -- the shard link --------------------------------------------------------------------------------------


async def test_calls_queued_together_go_out_as_one_message_and_replies_find_their_calls(fake: Fake) -> None:
    keys = [str(n) for n in range(100, 150)]
    sequences = await asyncio.gather(*(fake.link.submit(submit(key), 5) for key in keys))
    assert sequences == [int(key) for key in keys]  # each answer reached its own call (sent reversed)
    assert len(fake.shard.batches) == 1
    assert [call.submit.idempotency_key for call in fake.shard.calls] == keys
    assert len({call.id for call in fake.shard.calls}) == len(keys)  # ids unique on the stream
    assert (fake.link.requests_sent, fake.link.calls_sent, fake.link.streams_opened) == (1, 50, 1)
    assert fake.link.pending == 0  # nothing left behind

    assert await fake.link.submit(submit("7"), 5) == 7  # later calls: the same stream
    assert fake.link.streams_opened == 1


async def test_calls_carry_the_request_id_of_the_request_they_serve(fake: Fake) -> None:
    structlog.contextvars.clear_contextvars()

    async def serving(request_id: str) -> None:
        structlog.contextvars.bind_contextvars(request_id=request_id)  # as the interceptor does for a call
        assert await fake.link.submit(submit("5"), 5) == 5
        fake.link.watch(watch_request(), Subscriber())

    await asyncio.create_task(serving("play-1"))  # a task of its own: its own context
    assert await fake.link.submit(submit("6"), 5) == 6  # outside any request
    await eventually(lambda: len(fake.shard.calls) == 3, "the three calls reach the shard")
    assert [(call.WhichOneof("call"), call.request_id) for call in fake.shard.calls] == [
        ("submit", "play-1"),
        ("watch", "play-1"),
        ("submit", ""),
    ]


async def test_refusals_keep_their_code_and_reason(fake: Fake) -> None:
    illegal = f"refuse:{code_number(grpc.StatusCode.FAILED_PRECONDITION)}:illegal move Ke2"
    with pytest.raises(FailedPrecondition, match="illegal move Ke2"):
        await fake.link.submit(submit(illegal), 5)
    with pytest.raises(ServiceError, match="try again") as caught:
        await fake.link.submit(submit(f"refuse:{code_number(grpc.StatusCode.ABORTED)}:try again"), 5)
    assert caught.value.code == grpc.StatusCode.ABORTED  # a code without a class of its own survives too
    assert fake.link.pending == 0
    for code in grpc.StatusCode:
        assert status_code(code_number(code)) is code
    assert status_code(999) is grpc.StatusCode.UNKNOWN
    assert refusal_error(rules_pb2.Refusal(code=0, message="")).code == grpc.StatusCode.UNKNOWN


async def test_a_watch_gets_updates_until_it_is_closed_or_refused(fake: Fake) -> None:
    seen = Subscriber()
    handle = fake.link.watch(watch_request(from_sequence=4), seen)
    await eventually(lambda: len(seen.updates) == 1, "the watch's first update did not come")
    assert seen.updates[0].sequence == 5
    assert fake.shard.watches[handle.id] == watch_request(from_sequence=4)
    fake.shard.push(rules_pb2.ExchangeReply(id=handle.id, update=rules_pb2.MatchUpdate(sequence=6)))
    await eventually(lambda: len(seen.updates) == 2, "a pushed update did not come")
    handle.close()
    handle.close()  # idempotent
    assert fake.link.pending == 0
    await eventually(lambda: fake.shard.unwatched == [handle.id], "no Unwatch reached the shard")
    fake.shard.push(rules_pb2.ExchangeReply(id=handle.id, update=rules_pb2.MatchUpdate(sequence=7)))
    assert await fake.link.submit(submit("8"), 5) == 8  # the shard's later reply has come by now
    assert [u.sequence for u in seen.updates] == [5, 6]  # nothing after the close

    refused = Subscriber()
    other = fake.link.watch(watch_request(), refused)
    await eventually(lambda: bool(refused.updates), "the second watch's first update did not come")
    not_found = rules_pb2.Refusal(code=code_number(grpc.StatusCode.NOT_FOUND), message="no match")
    fake.shard.push(rules_pb2.ExchangeReply(id=other.id, refused=not_found))
    await eventually(lambda: refused.end is not None, "the refusal did not end the watch")
    assert refused.end == not_found
    assert fake.link.pending == 0
    other.close()
    assert await fake.link.submit(submit("9"), 5) == 9
    assert fake.shard.unwatched == [handle.id]  # an ended watch needs no Unwatch


async def test_replies_for_unknown_ids_are_ignored(fake: Fake) -> None:
    assert await fake.link.submit(submit("1"), 5) == 1
    fake.shard.push(
        rules_pb2.ExchangeReply(id=999, submitted=rules_pb2.Submitted(sequence=3)),
        rules_pb2.ExchangeReply(id=998, update=rules_pb2.MatchUpdate(sequence=3)),
        rules_pb2.ExchangeReply(id=997, refused=rules_pb2.Refusal(code=5, message="x")),
        rules_pb2.ExchangeReply(id=1),  # already answered, and empty
    )
    assert await fake.link.submit(submit("2"), 5) == 2
    assert (fake.link.streams_opened, fake.link.pending) == (1, 0)


async def test_a_failed_stream_fails_everything_on_it_and_the_next_use_opens_another(fake: Fake) -> None:
    seen = Subscriber()
    fake.link.watch(watch_request(), seen)
    held = [asyncio.create_task(fake.link.submit(submit(f"hold-{n}"), 30)) for n in range(3)]
    await eventually(lambda: len(fake.shard.calls) == 4, "the calls did not reach the shard")
    assert fake.link.pending == 4
    fake.shard.end_stream()
    for task in held:
        with pytest.raises(Unavailable, match="rules-fake shard 0 is unavailable"):
            await asyncio.wait_for(task, 2)  # at once, not after the 30 s timeout
    await eventually(lambda: seen.end is not None, "the watch was not ended")
    assert seen.end is not None
    assert seen.end.code == code_number(grpc.StatusCode.UNAVAILABLE)
    assert "rules-fake shard 0" in seen.end.message
    assert "reconnect from your last sequence" in seen.end.message
    assert fake.link.pending == 0

    assert await fake.link.submit(submit("5"), 5) == 5  # a new stream
    assert (fake.link.streams_opened, fake.shard.streams) == (2, 2)


async def test_a_shard_that_does_not_answer_in_time_is_unavailable(fake: Fake) -> None:
    with pytest.raises(Unavailable, match="rules-fake shard 0 did not answer in time"):
        await fake.link.submit(submit("hold"), 0.2)
    assert fake.link.pending == 0
    cancelled = asyncio.create_task(fake.link.submit(submit("hold-too"), 30))
    await eventually(lambda: fake.link.pending == 1, "the submit was not pending")
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    assert fake.link.pending == 0  # a caller that went away leaves nothing behind
    assert await fake.link.submit(submit("3"), 5) == 3


async def test_a_shard_nobody_listens_on_is_unavailable_at_once() -> None:
    async with backend_channel(f"127.0.0.1:{free_port()}", "gateway", "rules-chess") as channel:
        link = ShardLink("rules-chess shard 3", rules_pb2_grpc.RulesServiceStub(channel))
        started = time.monotonic()
        with pytest.raises(Unavailable, match="rules-chess shard 3 is unavailable"):
            await link.submit(submit("1"), 30)
        seen = Subscriber()
        link.watch(watch_request(), seen)
        await eventually(lambda: seen.end is not None, "the watch was not ended", within_s=3)
        assert seen.end is not None
        assert seen.end.code == code_number(grpc.StatusCode.UNAVAILABLE)
        assert time.monotonic() - started < 3
        assert link.streams_opened == 2  # each use tried again
        await link.close()
        with pytest.raises(Unavailable, match="shutting down"):
            await link.submit(submit("1"), 30)


async def test_closing_the_links_fails_what_waits_on_them(fake: Fake) -> None:
    channels = RulesChannels(transport_as("gateway"))
    links = ShardLinks(channels)
    link = links.link(fake.address, "rules-fake shard 0", "chess")
    assert links.link(fake.address, "rules-fake shard 0", "chess") is link  # one per address
    held = asyncio.create_task(link.submit(submit("hold"), 30))
    await eventually(lambda: link.pending == 1, "the submit was not pending")
    await links.close()
    with pytest.raises(Unavailable, match="shutting down"):
        await held
    with pytest.raises(Unavailable, match="shutting down"):
        links.link("127.0.0.1:1", "rules-chess shard 1", "chess")
    await channels.close()


# -- Play in front of the fake shard ---------------------------------------------------------------------


async def test_a_client_that_stops_reading_is_cut_off(fake: Fake, tmp_path: Path) -> None:
    fake.shard.flood = 12_000  # about 12 MB of updates: more than the transport buffers and the backlog
    gateway = await start_gateway(tmp_path, {"RULES_CHESS_ADDRESSES": fake.address})
    try:
        async with grpc.aio.insecure_channel(gateway.address) as channel:
            client = PlayClient(gateway_pb2_grpc.GatewayServiceStub(channel), bearer("alice"))
            await client.open("chess.0.fake")
            # The client reads nothing more; the gateway ends its stream, which ends its presence.
            error = await client.ended(within_s=10)
            refused_with(error, grpc.StatusCode.RESOURCE_EXHAUSTED, "fell behind")

            def seat_left() -> bool:
                # This fake shard only has SetPresence (the gateway's legacy path): the seat's last report
                # is a disconnection, or none at all when the stream was cut before its connection was
                # reported (then there is nothing to take back).
                reports = [connected for seat, connected in fake.shard.presence if seat == 0]
                return reports[-1:] in ([], [False])

            await eventually(seat_left, "the slow reader's presence was not released", 10)
            assert "reconnect from your last sequence" in (error.details() or "")
            assert len(client.updates) < fake.shard.flood  # cut off, not delivered in full
            link = gateway_links(gateway).link(fake.address, SHARD, "chess")
            await eventually(lambda: link.pending == 0, "the cut-off stream left its watch on the link")
            await asyncio.sleep(1.0)  # a late report would come within the presence renewal's kick
            assert seat_left(), fake.shard.presence
    finally:
        await gateway.stop(grace=0.5)


async def test_play_answers_refusals_and_ends_when_the_shard_goes_away(fake: Fake, tmp_path: Path) -> None:
    gateway = await start_gateway(tmp_path, {"RULES_CHESS_ADDRESSES": fake.address})
    try:
        async with grpc.aio.insecure_channel(gateway.address) as channel:
            client = PlayClient(gateway_pb2_grpc.GatewayServiceStub(channel), bearer("bob"))
            assert (await client.open("chess.0.fake", from_sequence=9)).seat == 1
            assert (await client.update(lambda u: True)).sequence == 10
            [watch] = fake.shard.watches.values()
            assert (watch.seat, watch.from_sequence) == (1, 9)  # the caller's own seat, from their sequence
            assert (await client.answer(await client.act("e5", "41"))).sequence == 41
            aborted = await client.answer(
                await client.act("e5", f"refuse:{code_number(grpc.StatusCode.ABORTED)}:busy")
            )
            assert (aborted.code, aborted.message) == (code_number(grpc.StatusCode.ABORTED), "busy")
            [submitted] = [call.submit for call in fake.shard.calls if call.submit.idempotency_key == "41"]
            assert (submitted.match_id, submitted.seat) == ("chess.0.fake", 1)  # the seat from the token

            await client.act("e5", "hold")  # in flight when the shard goes away
            await eventually(
                lambda: any(c.submit.idempotency_key == "hold" for c in fake.shard.calls), "no submit"
            )
            fake.shard.end_stream()
            refused_with(await client.ended(), grpc.StatusCode.UNAVAILABLE, f"{SHARD} is unavailable")
            assert "hold" not in client.answers  # unanswered: the client retries it with the same key
            await eventually(lambda: (1, False) in fake.shard.presence, "the seat stayed connected")
    finally:
        await gateway.stop(grace=0.5)


async def test_the_play_backlog_is_bounded() -> None:
    outbox = _PlayOutbox(3)
    for n in range(3):
        outbox.put(pb.PlayResponse(update=rules_pb2.MatchUpdate(sequence=n)))
    assert outbox.error is None
    outbox.put(pb.PlayResponse(update=rules_pb2.MatchUpdate(sequence=3)))
    error = await asyncio.wait_for(outbox.ended(), 1)
    assert isinstance(error, ResourceExhausted)
    assert "fell behind" in error.message

    written: list[pb.PlayResponse] = []

    async def write(message: pb.PlayResponse) -> None:
        written.append(message)

    closing = _PlayOutbox(10)
    action = asyncio.create_task(asyncio.sleep(0.05))
    closing.track(action)
    closing.put(pb.PlayResponse(opened=pb.PlayOpened(seat=1)))
    closing.close()  # ends OK, but only once the action in flight is answered
    writer = asyncio.create_task(closing.write(write))
    assert await asyncio.wait_for(closing.ended(), 1) is None
    assert action.done()
    assert len(written) == 1
    await writer


async def test_at_capacity_an_action_is_answered_resource_exhausted_and_the_stream_goes_on(
    tmp_path: Path,
) -> None:
    url = sqlite_url(tmp_path / "rules.db")
    rules = await start_in_process("rules-chess", chess_rules_service, url)
    gateway = await start_gateway(
        tmp_path, {"RULES_CHESS_ADDRESSES": rules.address, "GATEWAY_MAX_CALLS": "2"}
    )
    try:
        async with own_platform(gateway, rules) as shard:
            gw = shard.gateway
            match_id = await direct_match(shard, "alice", "bob")
            white = PlayClient(gw, bearer("alice"))
            await white.open(match_id)
            assert isinstance(gateway.service, GatewayService)
            servicer = gateway.service.servicer
            assert servicer is not None
            admission = servicer.admission
            # Both call slots busy (as with two calls in flight): the gateway is at capacity.
            with admission.call(Priority.PLAY), admission.call(Priority.PLAY):
                shed = await white.answer(await white.act("e4", "first-try"))
                assert shed.code == code_number(grpc.StatusCode.RESOURCE_EXHAUSTED), shed
                assert "at capacity" in shed.message
                assert shed.sequence == 0
            # Refused at once, not queued: nothing was played, and the stream goes on.
            assert moves(await spectated(shard, match_id)) == []
            accepted = await white.answer(await white.act("e4", "first-try"))  # the retry, same key
            assert accepted.code == 0, accepted
            assert accepted.sequence > 1
            assert moves(await spectated(shard, match_id)) == ["e4"]
    finally:
        await gateway.stop(grace=0.5)
        await rules.stop(grace=0.5)


async def spectated(platform: Platform, match_id: str) -> rules_pb2.MatchUpdate:
    reply = await platform.seat_views.GetMatch(rules_pb2.GetMatchRequest(match_id=match_id, spectator=True))
    update: rules_pb2.MatchUpdate = reply.update
    return update
