"""A small service for testing the runtime, with raw-bytes methods (no contract needed).

``test.Sample/Echo`` echoes; ``/Sleep`` sleeps the milliseconds given as ASCII digits then answers;
``/Loop`` answers the module of the event loop it runs on; ``/Fail`` raises a
:class:`FailedPrecondition`; ``/Crash`` raises an unexpected error carrying a secret; ``/Ticks``
streams N ticks 50 ms apart. Run as a process with
``python -m tests.libs.runtime.sample_service``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import grpc

from libs.runtime import FailedPrecondition, Service, ServiceConfig, run_service
from libs.runtime.errors import ErrorReason
from libs.runtime.log import get_logger

SERVICE = "test.Sample"
SECRET = "s3cret-state-that-must-not-leak"
_log = get_logger(__name__)


def _identity(data: bytes) -> bytes:
    return data


async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    _log.info("echo.handled", size=len(request))
    return request


async def sleep(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    await asyncio.sleep(int(request.decode()) / 1000)
    return b"slept"


async def loop(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return type(asyncio.get_running_loop()).__module__.encode()


async def fail(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    raise FailedPrecondition("you cannot do that now", reason=ErrorReason.ERROR_REASON_WRONG_STATE)


async def crash(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    raise RuntimeError(SECRET)


async def ticks(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    for tick in range(int(request.decode())):
        yield str(tick).encode()
        await asyncio.sleep(0.05)


class SampleService(Service):
    name = "sample"

    def __init__(self, config: ServiceConfig | None = None) -> None:
        self.closed = False

    @property
    def service_names(self) -> Sequence[str]:
        return [SERVICE]

    async def start(self, server: grpc.aio.Server) -> None:
        unary = {
            name: grpc.unary_unary_rpc_method_handler(
                handler, request_deserializer=_identity, response_serializer=_identity
            )
            for name, handler in (
                ("Echo", echo),
                ("Sleep", sleep),
                ("Loop", loop),
                ("Fail", fail),
                ("Crash", crash),
            )
        }
        unary["Ticks"] = grpc.unary_stream_rpc_method_handler(
            ticks, request_deserializer=_identity, response_serializer=_identity
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, unary),))

    async def close(self) -> None:
        self.closed = True


if __name__ == "__main__":
    run_service(SampleService, SampleService.name)
