"""The ceiling: how many actions per second the platform's message path allows when every service
does nothing at all, measured against the yardstick in the same run.

One action on the platform crosses these gRPC hops (docs/architecture.md): the player's unary
``SubmitAction`` into the gateway, the gateway's unary ``SubmitAction`` into the rules shard, the rules
shard's update on each seat's ``Watch`` stream into the gateway (two messages), and the gateway's copy
of each onto the players' streams (two more). This benchmark builds exactly that path with no work
in it: a "rules" process that answers and broadcasts a fixed 1.5 KB update without a database, an
engine or a clock; a "gateway" process that only relays; and a player process driving ``MATCHES``
matches with zero think time, each player moving when its own stream says the opponent has moved.

The figure is an upper bound for this architecture on this machine: the real platform adds a
durable write, the rules engine, views, clocks, tokens and admission on top of it. Issue #8's target
(a quarter of the yardstick with 500 matches) is read against it in docs/performance.md.

Run alone: ``python -m benchmarks ceiling``.
"""

from __future__ import annotations

import asyncio
import collections
import sys
import time

import grpc

from benchmarks.grpc_baseline import baseline_rate
from tests.support import free_port

MATCHES = 500
SECONDS = 10.0
WARM_UP_S = 3.0
UPDATE_BYTES = 1500
"""About the size of a chess ``MatchUpdate`` in the middlegame (view, legal moves, clocks)."""
_SUBMIT = "/ceiling.Relay/Submit"
_WATCH = "/ceiling.Relay/Watch"


def _identity(payload: bytes) -> bytes:
    return payload


def _handlers(
    submit: grpc.aio.UnaryUnaryMultiCallable | object, watch: object
) -> grpc.GenericRpcHandler:  # pragma: no cover - wiring
    return grpc.method_handlers_generic_handler(
        "ceiling.Relay",
        {
            "Submit": grpc.unary_unary_rpc_method_handler(
                submit, request_deserializer=_identity, response_serializer=_identity
            ),
            "Watch": grpc.unary_stream_rpc_method_handler(
                watch, request_deserializer=_identity, response_serializer=_identity
            ),
        },
    )


async def serve_rules(port: int) -> None:
    """Answers every submit with a fixed update and broadcasts it to the match's two watchers."""
    update = b"u" * UPDATE_BYTES
    watchers: dict[bytes, list[asyncio.Queue[bytes]]] = collections.defaultdict(list)

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

    await _serve(port, _handlers(submit, watch))


async def serve_gateway(port: int, upstream: str) -> None:
    """Relays submits to the rules process and copies its stream messages to each player."""
    channel = grpc.aio.insecure_channel(upstream)
    forward = channel.unary_unary(_SUBMIT, request_serializer=_identity, response_deserializer=_identity)
    open_watch = channel.unary_stream(_WATCH, request_serializer=_identity, response_deserializer=_identity)

    async def submit(request: bytes, context: object) -> bytes:
        return await forward(request)  # type: ignore[no-any-return]

    async def watch(request: bytes, context: object):  # type: ignore[no-untyped-def]
        async for message in open_watch(request):
            yield message

    await _serve(port, _handlers(submit, watch))


async def _serve(port: int, handlers: grpc.GenericRpcHandler) -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handlers,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


async def drive(
    address: str, matches: int = MATCHES, seconds: float = SECONDS, warm_up_s: float = WARM_UP_S
) -> float:
    """Actions per second with ``matches`` matches, two players each, alternating with no think time."""
    async with grpc.aio.insecure_channel(address) as channel:
        await asyncio.wait_for(channel.channel_ready(), timeout=20)
        submit = channel.unary_unary(_SUBMIT, request_serializer=_identity, response_deserializer=_identity)
        open_watch = channel.unary_stream(
            _WATCH, request_serializer=_identity, response_deserializer=_identity
        )
        counted = 0
        counting = False
        stop = asyncio.Event()

        async def match(number: int) -> None:
            nonlocal counted
            match_id = f"m{number}".encode()
            streams = [open_watch(match_id), open_watch(match_id)]
            for stream in streams:  # both watchers are registered before the first move
                await stream.read()
            ply = 0
            while not stop.is_set():
                await submit(match_id + b"|" + str(ply).encode())
                for stream in streams:  # the opponent (and the mover) see the update on their streams
                    await stream.read()
                ply += 1
                if counting:
                    counted += 1
            for stream in streams:
                stream.cancel()

        tasks = [asyncio.create_task(match(n)) for n in range(matches)]
        await asyncio.sleep(warm_up_s)
        counting = True
        began = time.perf_counter()
        await asyncio.sleep(seconds)
        counting = False
        rate = counted / (time.perf_counter() - began)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        return rate


async def ceiling_rate(
    matches: int = MATCHES, seconds: float = SECONDS, warm_up_s: float = WARM_UP_S
) -> float:
    """Start the do-nothing rules and gateway processes and drive them."""
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
        return await drive(f"127.0.0.1:{gateway_port}", matches, seconds, warm_up_s)
    finally:
        for process in processes:
            process.terminate()
            await process.wait()


async def run() -> None:
    yardstick = (await baseline_rate())["rate"]
    ceiling = await ceiling_rate()
    print(f"yardstick (raw loopback unary): {yardstick:,.0f} calls/s")
    print(
        f"ceiling (the platform's hops for one action, no work in any service, {MATCHES} matches): "
        f"{ceiling:,.0f} actions/s = {100 * ceiling / yardstick:.1f} % of the yardstick"
    )


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "rules":
        asyncio.run(serve_rules(int(sys.argv[2])))
    elif len(sys.argv) >= 4 and sys.argv[1] == "gateway":
        asyncio.run(serve_gateway(int(sys.argv[2]), sys.argv[3]))
    else:
        asyncio.run(run())
