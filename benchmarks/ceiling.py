"""The ceiling: how many actions per second the platform's message path allows when every service
does nothing at all, measured against the yardstick in the same run.

One action on the platform crosses these gRPC hops (docs/architecture.md): the player's unary
``SubmitAction`` into the gateway, the gateway's unary ``SubmitAction`` into the rules shard, the rules
shard's update on each seat's ``Watch`` stream into the gateway (two messages), and the gateway's copy
of each onto the players' streams (two more). This benchmark builds exactly that path with no work
in it: a "rules" process that answers and broadcasts a fixed 1.5 KB update without a database, an
engine or a clock; a "gateway" process that only relays; and a player process driving ``MATCHES``
matches with zero think time, each player moving when its own stream says the opponent has moved.

It measures a second shape too, the one the platform plays over since #8's third round
(docs/performance.md): each player has one bidirectional ``Play`` stream to the gateway carrying its
actions, their answers and its updates, and the gateway keeps one ``Exchange`` stream to the rules
process on which everything is batched (each message carries whatever calls or replies are ready).

The gateway's hop to the rules process is mutual TLS, as between the platform's services (the relay
presents the gateway's certificate of this run's development PKI, the rules process rules-chess-0's);
the players' hop is plaintext, as the gateway's own port is.

The figures are upper bounds for each shape on this machine: the real platform adds a durable write,
the rules engine, views, clocks, tokens and admission on top. Issue #8's target (a quarter of the
yardstick with 500 matches) is read against them in docs/performance.md.

Last, the streamed shape paced (:data:`PACED_THINK_MS` of think time before each move): its latency from
the mover's write to the opponent's read and the machine's CPU at about the rate of ``platform_load``'s
phase 3, so the half-rate latency target can be read against what the message path alone costs there.

Run alone: ``python -m benchmarks ceiling``.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
import random
import struct
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from benchmarks.grpc_baseline import baseline_rate
from benchmarks.support import bench_pki, machine_cpu, percentile
from libs.runtime import eventloop
from tests.support import free_port, transport_as

MATCHES = 500
SECONDS = 10.0
WARM_UP_S = 3.0
PACED_THINK_MS = 800.0
"""The paced run's think time: with 500 matches about 600 actions per second, about half of what the
platform reaches at full load on this machine (``platform_load`` phase 3's rate), so the relay's latency
at that rate can be read beside the platform's."""
UPDATE_BYTES = 1500
"""About the size of a chess ``MatchUpdate`` in the middlegame (view, legal moves, clocks)."""
_SUBMIT = "/ceiling.Relay/Submit"
_WATCH = "/ceiling.Relay/Watch"
_PLAY = "/ceiling.Relay/Play"
_EXCHANGE = "/ceiling.Relay/Exchange"
SHAPES = ("unary", "streamed")


@dataclass
class Window:
    """What a paced run measured in its window."""

    to_opponent: list[float] = field(default_factory=list)
    """Each action's time from the mover's write to the opponent's read, in seconds."""
    busy_cores: float = 0.0
    """The whole machine's busy CPU over the window, in cores (every process, not only the relay's)."""
    stolen_cores: float = 0.0
    """CPU the hypervisor gave to other guests while this one wanted it, over the window, in cores."""


def _identity(payload: bytes) -> bytes:
    return payload


def _handlers(
    submit: object = None, watch: object = None, play: object = None, exchange: object = None
) -> grpc.GenericRpcHandler:  # pragma: no cover - wiring
    methods = {}
    if submit is not None:
        methods["Submit"] = grpc.unary_unary_rpc_method_handler(
            submit, request_deserializer=_identity, response_serializer=_identity
        )
    if watch is not None:
        methods["Watch"] = grpc.unary_stream_rpc_method_handler(
            watch, request_deserializer=_identity, response_serializer=_identity
        )
    for name, method in (("Play", play), ("Exchange", exchange)):
        if method is not None:
            methods[name] = grpc.stream_stream_rpc_method_handler(
                method, request_deserializer=_identity, response_serializer=_identity
            )
    return grpc.method_handlers_generic_handler("ceiling.Relay", methods)


def _pack(frames: list[bytes]) -> bytes:
    """Several frames as one message: each with a four-byte length."""
    return b"".join(struct.pack(">I", len(frame)) + frame for frame in frames)


def _unpack(message: bytes) -> list[bytes]:
    frames = []
    at = 0
    while at < len(message):
        (size,) = struct.unpack_from(">I", message, at)
        frames.append(message[at + 4 : at + 4 + size])
        at += 4 + size
    return frames


def _drain(queue: asyncio.Queue[bytes], first: bytes) -> list[bytes]:
    """``first`` and everything already queued behind it: one batch."""
    batch = [first]
    while not queue.empty():
        batch.append(queue.get_nowait())
    return batch


async def serve_rules(port: int) -> None:
    """Answers every submit with a fixed update and broadcasts it to the match's two watchers: as unary
    calls and server streams, or batched on Exchange streams."""
    update = b"u" * UPDATE_BYTES
    watchers: dict[bytes, list[asyncio.Queue[bytes]]] = collections.defaultdict(list)
    exchange_watchers: dict[bytes, list[tuple[asyncio.Queue[bytes], bytes]]] = collections.defaultdict(list)

    async def submit(request: bytes, context: object) -> bytes:
        match = request.split(b"|", 1)[0]
        for queue in watchers[match]:
            queue.put_nowait(update)
        return update

    async def watch(request: bytes, context: object):  # type: ignore[no-untyped-def]
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        watchers[request].append(queue)
        yield b"ready"  # the watcher is registered: the player may start
        while True:
            yield await queue.get()

    async def exchange(requests: AsyncIterator[bytes], context: object):  # type: ignore[no-untyped-def]
        """Frames in: ``S|call|match|ply`` (a submit), ``W|call|match`` (a watch). Frames out:
        ``A|call|update`` (an answer), ``U|call|update`` (a watch's update). Batched both ways."""
        out: asyncio.Queue[bytes] = asyncio.Queue()

        async def read() -> None:
            async for message in requests:
                for frame in _unpack(message):
                    kind, call, match = frame.split(b"|", 3)[:3]
                    if kind == b"W":
                        exchange_watchers[match].append((out, call))
                        out.put_nowait(b"U|" + call + b"|ready")
                        continue
                    out.put_nowait(b"A|" + call + b"|" + update)
                    for queue, watch_call in exchange_watchers[match]:
                        queue.put_nowait(b"U|" + watch_call + b"|" + update)

        reader = asyncio.create_task(read())
        try:
            while True:
                yield _pack(_drain(out, await out.get()))
        finally:
            reader.cancel()

    # Mutual TLS, as a rules shard serves the gateway.
    await _serve(
        port, _handlers(submit, watch, exchange=exchange), transport_as("rules-chess-0").server_credentials()
    )


async def serve_gateway(port: int, upstream: str) -> None:
    """Relays submits to the rules process and copies its stream messages to each player (the unary
    shape), and carries each player's Play stream over one batched Exchange stream (the streamed one)."""
    channel = transport_as("gateway").channel(upstream, "rules-chess")  # mutual TLS, as the gateway's
    forward = channel.unary_unary(_SUBMIT, request_serializer=_identity, response_deserializer=_identity)
    open_watch = channel.unary_stream(_WATCH, request_serializer=_identity, response_deserializer=_identity)
    open_exchange = channel.stream_stream(
        _EXCHANGE, request_serializer=_identity, response_deserializer=_identity
    )
    outgoing: asyncio.Queue[bytes] = asyncio.Queue()
    answers: dict[bytes, asyncio.Queue[bytes]] = {}
    """A call id on the Exchange stream → the Play stream its replies go to."""
    calls = itertools.count()
    exchange_call = None

    async def batches() -> AsyncIterator[bytes]:
        while True:
            yield _pack(_drain(outgoing, await outgoing.get()))

    async def dispatch(replies: AsyncIterator[bytes]) -> None:
        async for message in replies:
            for frame in _unpack(message):
                kind, call, payload = frame.split(b"|", 2)
                queue = answers.pop(call) if kind == b"A" else answers[call]
                queue.put_nowait(b"answer" if kind == b"A" else payload)

    async def submit(request: bytes, context: object) -> bytes:
        return await forward(request)  # type: ignore[no-any-return]

    async def watch(request: bytes, context: object):  # type: ignore[no-untyped-def]
        async for message in open_watch(request):
            yield message

    async def play(requests: AsyncIterator[bytes], context: object):  # type: ignore[no-untyped-def]
        """First message: the match id; then actions. Out: the updates and one answer per action."""
        nonlocal exchange_call
        if exchange_call is None:
            exchange_call = open_exchange(batches(), wait_for_ready=True)
            tasks.add(asyncio.create_task(dispatch(exchange_call)))
        replies: asyncio.Queue[bytes] = asyncio.Queue()
        match = await anext(aiter(requests))
        call = str(next(calls)).encode()
        answers[call] = replies
        outgoing.put_nowait(b"W|" + call + b"|" + match)

        async def read() -> None:
            async for action in requests:
                submit_call = str(next(calls)).encode()
                answers[submit_call] = replies
                outgoing.put_nowait(b"S|" + submit_call + b"|" + action)

        reader = asyncio.create_task(read())
        try:
            while True:
                yield await replies.get()
        finally:
            reader.cancel()

    tasks: set[asyncio.Task[None]] = set()
    await _serve(port, _handlers(submit, watch, play=play))


async def _serve(
    port: int, handlers: grpc.GenericRpcHandler, credentials: grpc.ServerCredentials | None = None
) -> None:
    """Serve ``handlers`` on ``port``: mutual TLS with ``credentials``, else plaintext."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handlers,))
    if credentials is not None:
        server.add_secure_port(f"127.0.0.1:{port}", credentials)
    else:
        server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


async def drive(
    address: str,
    matches: int = MATCHES,
    seconds: float = SECONDS,
    warm_up_s: float = WARM_UP_S,
    shape: str = "unary",
    think_ms: float = 0.0,
    window: Window | None = None,
) -> float:
    """Actions per second with ``matches`` matches, two players each, alternating. Each mover thinks
    ``think_ms`` ± 25 % first (the streamed shape; a seeded jitter); ``window``, if given, gets each
    action's time to the opponent and the machine's busy time over the window."""
    async with grpc.aio.insecure_channel(address) as channel:
        await asyncio.wait_for(channel.channel_ready(), timeout=20)
        submit = channel.unary_unary(_SUBMIT, request_serializer=_identity, response_deserializer=_identity)
        open_watch = channel.unary_stream(
            _WATCH, request_serializer=_identity, response_deserializer=_identity
        )
        open_play = channel.stream_stream(
            _PLAY, request_serializer=_identity, response_deserializer=_identity
        )
        counted = 0
        counting = False
        stop = asyncio.Event()

        async def keep_playing(streams: list[Any], action: Callable[[int], Awaitable[None]]) -> None:
            """Play ``action(ply)`` for ply 0, 1, ... until stopped, counting those in the window."""
            nonlocal counted
            ply = 0
            try:
                while not stop.is_set():
                    await action(ply)
                    ply += 1
                    if counting:
                        counted += 1
            finally:
                for stream in streams:
                    stream.cancel()

        async def unary_match(match_id: bytes) -> None:
            streams = [open_watch(match_id), open_watch(match_id)]
            for stream in streams:  # both watchers are registered before the first move
                await stream.read()

            async def action(ply: int) -> None:
                await submit(match_id + b"|" + str(ply).encode())
                for stream in streams:  # the opponent (and the mover) see the update on their streams
                    await stream.read()

            await keep_playing(streams, action)

        async def streamed_match(match_id: bytes) -> None:
            streams = [open_play(), open_play()]
            for stream in streams:
                await stream.write(match_id)
            for stream in streams:
                await stream.read()
            jitter = random.Random(match_id)

            async def mover_reads(mover: Any) -> None:
                for _ in range(2):  # the mover gets the answer and the update, in either order
                    await mover.read()

            async def opponent_reads(opponent: Any, began: float) -> None:
                await opponent.read()
                if counting and window is not None:
                    window.to_opponent.append(time.perf_counter() - began)

            async def action(ply: int) -> None:
                mover, opponent = streams[ply % 2], streams[(ply + 1) % 2]
                if think_ms:
                    await asyncio.sleep(think_ms * jitter.uniform(0.75, 1.25) / 1000)
                began = time.perf_counter()
                await mover.write(match_id + b"|" + str(ply).encode())
                await asyncio.gather(mover_reads(mover), opponent_reads(opponent, began))

            await keep_playing(streams, action)

        play = unary_match if shape == "unary" else streamed_match
        tasks = [asyncio.create_task(play(f"m{n}".encode())) for n in range(matches)]
        await asyncio.sleep(warm_up_s)
        busy_before, stolen_before = machine_cpu()
        counting = True
        began = time.perf_counter()
        await asyncio.sleep(seconds)
        counting = False
        elapsed = time.perf_counter() - began
        rate = counted / elapsed
        if window is not None:
            busy_after, stolen_after = machine_cpu()
            window.busy_cores = (busy_after - busy_before) / elapsed
            window.stolen_cores = (stolen_after - stolen_before) / elapsed
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return rate


async def ceiling_rate(
    matches: int = MATCHES,
    seconds: float = SECONDS,
    warm_up_s: float = WARM_UP_S,
    shape: str = "unary",
    think_ms: float = 0.0,
    window: Window | None = None,
) -> float:
    """Start the do-nothing rules and gateway processes and drive them in ``shape`` (:data:`SHAPES`)
    (:func:`drive` says what ``think_ms`` and ``window`` are)."""
    bench_pki()  # the relays' certificates (TLS_DIR, inherited by their processes)
    rules_port, gateway_port = free_port(), free_port()
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.ceiling", "rules", str(rules_port)
        ),
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.ceiling",
            "gateway",
            str(gateway_port),
            f"127.0.0.1:{rules_port}",
        ),
    ]
    try:
        return await drive(f"127.0.0.1:{gateway_port}", matches, seconds, warm_up_s, shape, think_ms, window)
    finally:
        for process in processes:
            process.terminate()
            await process.wait()


async def run() -> None:
    yardstick = (await baseline_rate())["rate"]
    print(f"yardstick (raw loopback unary): {yardstick:,.0f} calls/s")
    for shape, description in (
        ("unary", "unary calls and a stream per watcher"),
        ("streamed", "a Play stream per player, one batched Exchange stream"),
    ):
        ceiling = await ceiling_rate(shape=shape)
        print(
            f"ceiling, {description} (no work in any service, {MATCHES} matches): "
            f"{ceiling:,.0f} actions/s = {100 * ceiling / yardstick:.1f} % of the yardstick"
        )
    window = Window()
    paced = await ceiling_rate(shape="streamed", think_ms=PACED_THINK_MS, window=window)
    latencies = sorted(window.to_opponent)
    print(
        f"the streamed relay paced (think time {PACED_THINK_MS:,.0f} ms ± 25 %, {MATCHES} matches): "
        f"{paced:,.0f} actions/s, mover's write to the opponent's read p50 "
        f"{percentile(latencies, 0.5) * 1000:.1f} ms, p99 {percentile(latencies, 0.99) * 1000:.1f} ms, "
        f"max {latencies[-1] * 1000:.1f} ms ({len(latencies):,}); the machine "
        f"{100 * window.busy_cores:.0f} % busy of {100 * (os.cpu_count() or 1)} % in the window, "
        f"{100 * window.stolen_cores:.0f} % stolen by the hypervisor"
    )


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "rules":
        eventloop.run(serve_rules(int(sys.argv[2])))
    elif len(sys.argv) >= 4 and sys.argv[1] == "gateway":
        eventloop.run(serve_gateway(int(sys.argv[2]), sys.argv[3]))
    else:
        eventloop.run(run())
