"""The fuzzed platform: every service in this event loop, one live match per family to keep an eye on,
and calls of any method with raw bytes.

:func:`start_platform` starts fairness, clock, rules-chess, rules-gin and matchmaking
(:func:`tests.support.start_backends`, each on its own SQLite file) and a gateway in front of them, and
sets up the matches the fuzzing must never change: a chess match one move in (LIVE) and a gin rummy
match dealt from its fairness stream. :meth:`Platform.snapshot` records what anyone can see of them;
comparing two snapshots proves that nothing in between touched them.

:func:`call_raw` calls one method of a service descriptor with already-encoded request bytes (the
channel's ``unary_unary``/``unary_stream``/``stream_stream`` with no serializer, so a payload goes on
the wire exactly as drawn, valid or not) and reports how the call ended, reading a streaming answer
for a bounded time and number of messages.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from skillclassics.chess.v1 import chess_pb2
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.gin.v1 import gin_pb2
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.runtime import RunningServer, ServiceConfig, start_server
from services.gateway.service import GatewayService
from services.gateway.tokens import SigningKey, mint_token
from tests.support import Backends, backend_channel, start_backends, tls_settings

HOUR_MS = 3_600_000
TOKEN_KEY = SigningKey.of(Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))))
"""The token issuer the fuzzed gateway trusts."""
FUZZ_PLAYERS = ("fuzz-a", "fuzz-b")
"""The players the fuzzer plays as (never seated in a live match)."""
LIVE_PLAYERS = ("live-white", "live-black")

UNARY_TIMEOUT_S = 15.0
"""A unary call that has not ended in this long hangs (generous: a loaded 2-core CI machine)."""
STREAM_WINDOW_S = 0.2
"""How long a streaming call is read before the fuzzer hangs up (a valid watch streams forever)."""
STREAM_MAX_REPLIES = 8

FORBIDDEN = frozenset(
    {
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DATA_LOSS,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)
"""Codes no request, however bad, may get: a bug, a crash or an unimplemented method."""


CLIENT_WRITE_RACE = "Internal error from Core"
"""What grpc's client reports when the server ends a client stream (refusing one of its messages) while
the client is still writing the next: the client's write fails and grpc gives the call INTERNAL with
this text instead of the server's status. The server did answer properly (its own count of the call's
code, :func:`server_faults`, says so), so the fuzzer does not count it as a fault of the server."""

FORBIDDEN_NUMBERS = frozenset(code.value[0] for code in FORBIDDEN)

_FAULT_METRICS = {
    "grpc_server_handled_total": ("grpc_service", "grpc_method"),
    "skillclassics_stream_calls_handled_total": ("grpc_service", "grpc_method", "call"),
}


HARVESTED = {
    "table_id": "table_id",
    "next_page_token": "page_token",
    "arm_id": "arm_id",
    "match_id": "match_id",
}
"""Fields of replies whose values the fuzzer keeps (:data:`DISCOVERED`), and the request field that
names them later: ids and tokens only a server makes."""
DISCOVERED: dict[str, list[Any]] = {name: [] for name in (*HARVESTED.values(), "fairness_commitment")}
"""Values only a server makes, for requests to name: from replies (:data:`HARVESTED`), and the
commitments of the fuzz pool's gin matches."""


PROTECTED: set[str] = set()
"""Values never harvested: the live matches' ids (a reply listing every match names them too), which the
fuzzer must never name."""


def discovered(name: str, default: Any = "") -> st.SearchStrategy[Any]:
    """One of the latest values of ``name`` seen so far, or ``default`` before any (the draw is an
    index, so it replays)."""
    seen = DISCOVERED[name]
    return st.integers(0, 15).map(lambda i: seen[-1 - i % len(seen)] if seen else default)


def _harvest(message: Any) -> None:
    for descriptor, value in message.ListFields():
        if descriptor.type == descriptor.TYPE_MESSAGE:
            for item in value if descriptor.is_repeated else [value]:
                _harvest(item)
        elif descriptor.name in HARVESTED and not descriptor.is_repeated and value and value not in PROTECTED:
            seen = DISCOVERED[HARVESTED[descriptor.name]]
            if value not in seen:
                seen.append(value)
                del seen[:-64]


def server_faults() -> dict[tuple[str, ...], float]:
    """How many calls the services in this process answered with a forbidden code, by metric and
    method (their own count, whatever the client saw: a stream the fuzzer hung up on counts too)."""
    forbidden = {code.name for code in FORBIDDEN}
    faults: dict[tuple[str, ...], float] = {}
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            labels = _FAULT_METRICS.get(sample.name)
            if labels is None or sample.labels.get("grpc_code") not in forbidden:
                continue
            key = (sample.name, *(sample.labels[name] for name in labels), sample.labels["grpc_code"])
            faults[key] = faults.get(key, 0.0) + sample.value
    return faults


def in_flight() -> dict[tuple[str, str], float]:
    """The calls each server in this process is handling right now, by service and method."""
    counts: dict[tuple[str, str], float] = {}
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == "grpc_server_in_flight" and sample.value:
                counts[(sample.labels["grpc_service"], sample.labels["grpc_method"])] = sample.value
    return counts


PERSISTENT = {("skillclassics.rules.v1.RulesService", "Exchange"): 2.0}
"""Streams a service keeps open for good once it has used them: the gateway's Exchange stream to each
rules shard (chess and gin)."""


async def settled(before: dict[tuple[str, str], float], within: float = 5.0) -> bool:
    """Whether every server is soon handling no more calls than ``before`` (or than it keeps open for
    good, :data:`PERSISTENT`)."""

    def done() -> bool:
        now = in_flight()
        return all(n <= max(before.get(key, 0.0), PERSISTENT.get(key, 0.0)) for key, n in now.items())

    deadline = time.monotonic() + within
    while not done():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def new_faults(before: dict[tuple[str, ...], float], after: dict[tuple[str, ...], float]) -> list[str]:
    return [
        f"{' '.join(key)}: {after[key] - before.get(key, 0.0):g} more"
        for key in sorted(after)
        if after[key] > before.get(key, 0.0)
    ]


def bearer(player: str) -> tuple[tuple[str, str], ...]:
    token = mint_token(TOKEN_KEY, player, 3600, int(time.time()))
    return (("authorization", f"Bearer {token}"),)


@dataclass
class Outcome:
    """How one fuzzed call ended."""

    method: str
    code: grpc.StatusCode
    details: str
    replies: int
    seconds: float
    idle: bool = False
    """A streaming call still open when the fuzzer hung up."""
    streamed: bool = False
    """The client streamed its requests."""

    in_stream: tuple[str, ...] = ()
    """Refusals with a forbidden code carried inside the stream's replies (Exchange, Play)."""

    def problem(self) -> str | None:
        """Why this outcome is a bug, or ``None``."""
        if self.in_stream:
            return f"{self.method} refused calls inside its stream with {', '.join(self.in_stream)}"
        if self.code == grpc.StatusCode.INTERNAL and self.details == CLIENT_WRITE_RACE and self.streamed:
            return None  # the client's own write lost a race with the server's answer (see below)
        if self.code in FORBIDDEN:
            return f"{self.method} answered {self.code.name}: {self.details}"
        if self.code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return f"{self.method} did not end within {UNARY_TIMEOUT_S} s (a hang)"
        return None


async def call_raw(
    channel: grpc.aio.Channel,
    method: MethodDescriptor,
    payloads: Sequence[bytes],
    metadata: Sequence[tuple[str, str]] = (),
) -> Outcome:
    """Call ``method`` with ``payloads`` as they are (one for a unary request, all of them in order on a
    client stream) and say how it ended."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    started = time.perf_counter()
    replies = 0
    in_stream: list[str] = []
    idle = False
    code, details = grpc.StatusCode.OK, ""
    try:
        if not method.server_streaming:
            if method.client_streaming:
                reply = await channel.stream_unary(path)(
                    iter(payloads), timeout=UNARY_TIMEOUT_S, metadata=metadata
                )
            else:
                reply = await channel.unary_unary(path)(
                    payloads[0], timeout=UNARY_TIMEOUT_S, metadata=metadata
                )
            _harvest(GetMessageClass(method.output_type).FromString(reply))
            replies = 1
        else:
            if method.client_streaming:
                stream = channel.stream_stream(path)(iter(payloads), metadata=metadata)
            else:
                stream = channel.unary_stream(path)(payloads[0], metadata=metadata)
            try:
                async with asyncio.timeout(STREAM_WINDOW_S):
                    async for reply in stream:
                        in_stream.extend(_refusals(method, reply))
                        replies += 1
                        if replies >= STREAM_MAX_REPLIES:
                            break
            except TimeoutError:
                idle = True
            finally:
                stream.cancel()
            if not idle and replies < STREAM_MAX_REPLIES:
                code = await stream.code()
                details = await stream.details() or ""
    except grpc.aio.AioRpcError as error:
        code, details = error.code(), error.details() or ""
    elapsed = time.perf_counter() - started
    return Outcome(path, code, details, replies, elapsed, idle, method.client_streaming, tuple(in_stream))


def _refusals(method: MethodDescriptor, reply: bytes) -> list[str]:
    """The forbidden codes of the refusals inside one reply of a stream (``ExchangeReply.refused``,
    ``PlayAnswer``): any field named ``code`` of a message with a ``message`` beside it."""
    found: list[str] = []

    def walk(message: Any) -> None:
        for descriptor, value in message.ListFields():
            if descriptor.type == descriptor.TYPE_MESSAGE:
                for item in value if descriptor.is_repeated else [value]:
                    walk(item)
            elif (
                descriptor.name == "code"
                and "message" in message.DESCRIPTOR.fields_by_name
                and value in FORBIDDEN_NUMBERS
            ):
                found.append(f"{value} ({message.message})")

    message = GetMessageClass(method.output_type).FromString(reply)
    walk(message)
    _harvest(message)
    return found


async def serving(address: str, identity: str | None) -> bool:
    """Whether the server at ``address`` answers its health check SERVING (over mutual TLS as
    ``identity``, or in plaintext)."""
    channel = grpc.aio.insecure_channel(address) if identity is None else backend_channel(address, identity)
    async with channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


@dataclass
class Platform:
    backends: Backends
    gateway: RunningServer
    chess_match: str
    gin_match: str
    baseline: dict[str, Any] = field(default_factory=dict)
    """:meth:`snapshot` right after the live matches were set up."""
    channels: dict[tuple[str, str | None], grpc.aio.Channel] = field(default_factory=dict)

    def servers(self) -> dict[str, RunningServer]:
        b = self.backends
        return {
            "fairness": b.fairness,
            "clock": b.clock,
            "rules-chess": b.chess,
            "rules-gin": b.gin,
            "matchmaking": b.matchmaking,
            "gateway": self.gateway,
        }

    def channel(self, server: str, identity: str | None) -> grpc.aio.Channel:
        """A channel to ``server`` as ``identity`` (``None``: plaintext, the gateway's players' door)."""
        key = (server, identity)
        channel = self.channels.get(key)
        if channel is None:
            address = self.servers()[server].address
            channel = (
                grpc.aio.insecure_channel(address) if identity is None else backend_channel(address, identity)
            )
            self.channels[key] = channel
        return channel

    async def all_serving(self) -> dict[str, bool]:
        return {
            name: await serving(server.address, None if name == "gateway" else "operator")
            for name, server in self.servers().items()
        }

    async def snapshot(self) -> dict[str, Any]:
        """What anyone can see of the live matches (minus the running clocks): each seat's and a
        spectator's view, their listing, their record and the gin match's fairness stream."""
        rules = {
            self.chess_match: rules_pb2_grpc.RulesServiceStub(self.channel("rules-chess", "gateway")),
            self.gin_match: rules_pb2_grpc.RulesServiceStub(self.channel("rules-gin", "gateway")),
        }
        listing = {
            self.chess_match: rules_pb2_grpc.RulesServiceStub(self.channel("rules-chess", "operator")),
            self.gin_match: rules_pb2_grpc.RulesServiceStub(self.channel("rules-gin", "operator")),
        }
        seen: dict[str, Any] = {}
        for match_id, stub in rules.items():
            for viewer in ("spectator", 0, 1):
                request = rules_pb2.GetMatchRequest(match_id=match_id)
                if viewer == "spectator":
                    request.spectator = True
                else:
                    request.seat = int(viewer)
                reply = await stub.GetMatch(request, timeout=10)
                seen[f"{match_id} as {viewer}"] = _stable(reply)
            try:
                record: Any = _stable(await stub.GetRecord(rules_pb2.GetRecordRequest(match_id=match_id)))
            except grpc.aio.AioRpcError as error:
                record = error.code().name
            seen[f"{match_id} record"] = record
            summaries = await _list_all(listing[match_id])
            seen[f"{match_id} listed"] = [_stable(s) for s in summaries if s.match_id == match_id]
        fairness = fairness_pb2_grpc.FairnessServiceStub(self.channel("fairness", "operator"))
        commitment = await fairness.GetCommitment(fairness_pb2.GetCommitmentRequest(match_id=self.gin_match))
        seen["gin fairness"] = _stable(commitment)
        return seen

    async def close(self) -> None:
        channels, self.channels = list(self.channels.values()), {}
        for channel in channels:
            await channel.close()
        await self.gateway.stop(grace=0.5)
        await self.backends.stop()


async def _list_all(stub: rules_pb2_grpc.RulesServiceStub) -> list[rules_pb2.MatchSummary]:
    summaries: list[rules_pb2.MatchSummary] = []
    token = ""
    while True:
        reply = await stub.ListMatches(rules_pb2.ListMatchesRequest(page_size=1000, page_token=token))
        summaries.extend(reply.matches)
        token = reply.next_page_token
        if not token:
            return summaries


_MOVING = {"clocks", "server_time_ms"}
"""What changes with the time alone (the running clocks and the instant they are given at)."""


def _stable(message: Message) -> Any:
    """``message`` as plain data, without the fields that change with the time alone."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in _MOVING}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return json.loads(json.dumps(strip(MessageToDict(message, preserving_proto_field_name=True))))


async def start_platform(folder: Path) -> Platform:
    """Every service, with one live match per family (see the module docstring)."""
    backends = await start_backends(folder)
    try:
        jwks = folder / "fuzz-issuer-jwks.json"
        jwks.write_text(json.dumps({"keys": [TOKEN_KEY.public_jwk()]}))
        config = ServiceConfig.from_env(
            "gateway",
            {
                "GRPC_PORT": "0",
                "METRICS_PORT": "-1",
                "HEALTH_PORT": "-1",
                "DATA_DIR": str(folder),
                **tls_settings(),
            },
        )
        env = {
            **backends.gateway_env(),
            "GATEWAY_JWKS_FILE": str(jwks),
            "GATEWAY_CALL_RATE": "100000",
            "GATEWAY_CALL_BURST": "100000",
            "GATEWAY_STREAM_RATE": "100000",
            "GATEWAY_STREAM_BURST": "100000",
        }
        gateway = await start_server(GatewayService(config, env), config)
    except BaseException:
        await backends.stop()
        raise
    platform = Platform(backends, gateway, "", "")
    try:
        platform.chess_match = await _live_chess(platform)
        platform.gin_match = await _live_gin(platform)
        PROTECTED.update((platform.chess_match, platform.gin_match))
        await _fuzz_pool(platform)
        platform.baseline = await platform.snapshot()
    except BaseException:
        await platform.close()
        raise
    return platform


def _seats(players: tuple[str, str] = LIVE_PLAYERS) -> list[rules_pb2.SeatAssignment]:
    return [rules_pb2.SeatAssignment(seat=i, player_id=p) for i, p in enumerate(players)]


async def _fuzz_pool(platform: Platform) -> None:
    """Matches for the fuzzer to play with (the first id of each pool of :mod:`test_rpc_fuzz`), so that
    fuzzed calls naming them reach a real match: ``chess.0.fz0`` and ``gin.0.fz0`` between the fuzz
    players, fairness streams for the other gin ids of the pool (so that a fuzzed CreateMatch can name
    their commitments), and one for ``gin.1.fz0`` (whose owner, rules-gin-1, the fuzzer plays)."""
    fairness = fairness_pb2_grpc.FairnessServiceStub(platform.channel("fairness", "matchmaking"))
    await fairness.Commit(fairness_pb2.CommitRequest(match_id="gin.1.fz0", idempotency_key="pool-gin.1.fz0"))
    commitments = DISCOVERED["fairness_commitment"]
    for match_id in ("gin.0.fz0", "gin.0.fz1", "gin.0.fz2"):
        reply = await fairness.Commit(
            fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=f"pool-{match_id}")
        )
        commitments.append(reply.commitment)
    committed = fairness_pb2.CommitResponse(commitment=commitments[-3])
    for server, match_id, options, commitment in (
        ("rules-chess", "chess.0.fz0", rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions()), ""),
        ("rules-gin", "gin.0.fz0", rules_pb2.MatchOptions(gin=gin_pb2.GinOptions()), committed.commitment),
    ):
        creator = rules_pb2_grpc.RulesServiceStub(platform.channel(server, "matchmaking"))
        await creator.CreateMatch(
            rules_pb2.CreateMatchRequest(
                match_id=match_id,
                seats=_seats(FUZZ_PLAYERS),
                options=options,
                time_control=rules_pb2.TimeControl(base_ms=HOUR_MS),
                fairness_commitment=commitment,
                idempotency_key=f"pool-{match_id}",
                first_move_timeout_ms=HOUR_MS,
                disconnect_forfeit_ms=HOUR_MS,
            )
        )


async def _live_chess(platform: Platform) -> str:
    """A contest chess match one move in (so no draw offer is ever legal), every deadline an hour
    away."""
    match_id = f"chess.0.live{uuid.uuid4().hex[:8]}"
    creator = rules_pb2_grpc.RulesServiceStub(platform.channel("rules-chess", "matchmaking"))
    await creator.CreateMatch(
        rules_pb2.CreateMatchRequest(
            match_id=match_id,
            seats=_seats(),
            options=rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST)),
            time_control=rules_pb2.TimeControl(base_ms=HOUR_MS),
            idempotency_key=f"create-{match_id}",
            first_move_timeout_ms=HOUR_MS,
            disconnect_forfeit_ms=HOUR_MS,
        )
    )
    player = rules_pb2_grpc.RulesServiceStub(platform.channel("rules-chess", "gateway"))
    await player.SubmitAction(
        rules_pb2.SubmitActionRequest(
            match_id=match_id,
            seat=0,
            idempotency_key="live-1",
            action=rules_pb2.Action(chess=chess_pb2.ChessAction(move="e2e4")),
        )
    )
    return match_id


async def _live_gin(platform: Platform) -> str:
    """A gin rummy match committed to by fairness, its dealer drawn and its cards dealt."""
    match_id = f"gin.0.live{uuid.uuid4().hex[:8]}"
    fairness = fairness_pb2_grpc.FairnessServiceStub(platform.channel("fairness", "matchmaking"))
    committed = await fairness.Commit(
        fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=f"commit-{match_id}")
    )
    creator = rules_pb2_grpc.RulesServiceStub(platform.channel("rules-gin", "matchmaking"))
    await creator.CreateMatch(
        rules_pb2.CreateMatchRequest(
            match_id=match_id,
            seats=_seats(),
            options=rules_pb2.MatchOptions(gin=gin_pb2.GinOptions(variant=gin_pb2.VARIANT_STANDARD)),
            time_control=rules_pb2.TimeControl(base_ms=HOUR_MS),
            fairness_commitment=committed.commitment,
            idempotency_key=f"create-{match_id}",
            first_move_timeout_ms=HOUR_MS,
            disconnect_forfeit_ms=HOUR_MS,
        )
    )
    viewer = rules_pb2_grpc.RulesServiceStub(platform.channel("rules-gin", "gateway"))
    async with asyncio.timeout(20):  # the deal: two draws from fairness, made by the shard on its own
        while True:
            update = (
                await viewer.GetMatch(rules_pb2.GetMatchRequest(match_id=match_id, spectator=True))
            ).update
            if update.HasField("to_move"):
                return match_id
            await asyncio.sleep(0.05)


def differences(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The entries of two snapshots that differ: ``{key: (before, after)}``."""
    return {
        key: (before.get(key), after.get(key))
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    }
