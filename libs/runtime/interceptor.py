"""The server interceptor every service runs behind: authorisation, request ids, logs, metrics and
error mapping.

Before a handler runs, the call is checked against the authorisation table (:mod:`libs.runtime.authz`)
with the caller's identity from its certificate. This is the one place where a
:class:`~libs.runtime.errors.ServiceError` becomes a gRPC status. A request that cannot be parsed is
``INVALID_ARGUMENT`` (grpc itself would answer it with a traceback in the log), a method the service
does not implement ``UNIMPLEMENTED``. An exception a registered translator recognises (a database that
cannot serve: :mod:`libs.persistence.failures`) is answered as the refusal it stands for, ``UNAVAILABLE``
with retry guidance, and logged as a warning without its traceback (an outage would otherwise fill the
log with tracebacks of one cause). Any other exception is logged with its traceback and answered with
INTERNAL and the request id, never with the exception's text (which could leak state).

Every refusal ends the call with its details in the trailing metadata, beside the request id: the
``google.rpc.Status`` with an ``ErrorInfo`` (the catalogue's reason), a ``RetryInfo`` when there is retry
guidance (also as ``retry-after-ms``) and a ``BadRequest`` for invalid fields
(:func:`~libs.runtime.errors.status_trailers`).
"""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import structlog

from libs.runtime import validation
from libs.runtime.authz import Authorizer
from libs.runtime.errors import (
    ErrorReason,
    InvalidArgument,
    ServiceError,
    error_for,
    internal_error_reason,
    status_trailers,
    translated,
    truncated,
)
from libs.runtime.identity import DEFAULT_TRUST_DOMAIN
from libs.runtime.log import get_logger
from libs.runtime.metrics import RPC_HANDLED, RPC_IN_FLIGHT, RPC_LATENCY, RPC_STARTED, RPC_UNDECODABLE
from libs.runtime.tls import peer_identity

REQUEST_ID_METADATA = "x-request-id"
_log = get_logger(__name__)

# Handler shapes, as grpc.aio calls them.
_Unary = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
_Streaming = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]


class _Call:
    """Bookkeeping for one RPC: its labels, request id, start instant and final code."""

    __slots__ = ("grpc_type", "method", "request_id", "service", "started", "status")

    def __init__(self, full_method: str, grpc_type: str, request_id: str) -> None:
        _, _, rest = full_method.partition("/")
        self.service, _, self.method = rest.partition("/")
        self.grpc_type = grpc_type
        self.request_id = request_id
        self.started = time.perf_counter()
        self.status = grpc.StatusCode.OK

    def begin(self) -> None:
        RPC_STARTED.labels(self.service, self.method, self.grpc_type).inc()
        RPC_IN_FLIGHT.labels(self.service, self.method).inc()

    def end(self) -> None:
        elapsed = time.perf_counter() - self.started
        RPC_IN_FLIGHT.labels(self.service, self.method).dec()
        RPC_LATENCY.labels(self.service, self.method, self.grpc_type).observe(elapsed)
        RPC_HANDLED.labels(self.service, self.method, self.grpc_type, self.status.name).inc()
        ok = self.status == grpc.StatusCode.OK
        log = _log.debug if ok or self.status == grpc.StatusCode.CANCELLED else _log.info
        log("rpc.finished", code=self.status.name, duration_ms=round(elapsed * 1000, 3))

    async def fail(self, context: grpc.aio.ServicerContext, error: BaseException) -> None:
        """Answer ``error`` with the right status and its details (raises grpc's AbortError, as
        ``context.abort`` does)."""
        if not isinstance(error, ServiceError):
            refusal = translated(error)
            if refusal is not None:
                _log.warning(
                    "rpc.refused_for_dependency",
                    code=refusal.code.name,
                    reason=refusal.message,
                    error=truncated(f"{type(error).__name__}: {error}", 300),
                )
                error = refusal
        if not isinstance(error, ServiceError):
            if isinstance(error, NotImplementedError):  # a generated base class's method nobody overrode
                error = error_for(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"{self.method} is not implemented by {self.service}",
                    ErrorReason.ERROR_REASON_NOT_IMPLEMENTED,
                )
            else:
                _log.error("rpc.internal_error", exc_info=error)
                error = error_for(
                    grpc.StatusCode.INTERNAL,
                    internal_error_reason(self.request_id),
                    ErrorReason.ERROR_REASON_INTERNAL,
                )
        self.status = error.code
        trailers = ((REQUEST_ID_METADATA, self.request_id), *status_trailers(error))
        await context.abort(error.code, error.message, trailers)

    def aborted(self, context: grpc.aio.ServicerContext) -> None:
        """The handler called ``context.abort`` itself: record the code it chose."""
        code = context.code()
        self.status = code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.UNKNOWN


def _request_id(details: grpc.HandlerCallDetails) -> str:
    for key, value in details.invocation_metadata or ():
        if key == REQUEST_ID_METADATA and isinstance(value, str) and 0 < len(value) <= 128:
            return value
    return uuid.uuid4().hex


class Undecodable:
    """Stands for a request message that could not be parsed (the handler is never given it)."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


def _lenient(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """``deserialize``, answering an unparseable message with :class:`Undecodable` instead of raising
    (which grpc would log with a traceback and answer with a status of its own choosing)."""
    if deserialize is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception:
            return Undecodable(len(data))

    return parse


class _Gate:
    """What every call of one method passes before its handler: authorisation and a parsable request that
    keeps its contract's rules (:mod:`libs.runtime.validation`)."""

    __slots__ = ("authorizer", "method", "service", "short", "trust_domain")

    def __init__(self, method: str, authorizer: Authorizer | None, trust_domain: str) -> None:
        self.method = method
        self.authorizer = authorizer
        self.trust_domain = trust_domain
        _, _, rest = method.partition("/")
        self.service, _, self.short = rest.partition("/")

    def check(self, context: grpc.aio.ServicerContext, request: Any) -> None:
        if isinstance(request, Undecodable):
            raise self.undecodable(request)
        if self.authorizer is not None:
            self.authorizer.check(self.method, peer_identity(context, self.trust_domain), request)
        if request is not None:  # (None: a client stream, whose messages are checked as they come)
            validation.check(request, self.short)  # the contract's rules (docs/validation.md)

    def undecodable(self, request: Undecodable) -> InvalidArgument:
        RPC_UNDECODABLE.labels(self.service, self.short).inc()
        return InvalidArgument(
            f"the request to {self.short} could not be parsed ({request.size} bytes that are not a "
            "message of its type)",
            reason=ErrorReason.ERROR_REASON_UNDECODABLE_REQUEST,
        )

    async def requests(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """A client stream's messages; an unparseable one ends the call with INVALID_ARGUMENT."""
        async for message in requests:
            if isinstance(message, Undecodable):
                raise self.undecodable(message)
            validation.check(message, self.short)
            yield message


class RpcInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Wraps every handler of the server with authorisation, request ids, logs, metrics and status
    mapping. Without an ``authorizer`` (plaintext, for local debugging) every caller is trusted."""

    def __init__(
        self, authorizer: Authorizer | None = None, trust_domain: str = DEFAULT_TRUST_DOMAIN
    ) -> None:
        self._authorizer = authorizer
        self._trust_domain = trust_domain
        self._methods: dict[str, tuple[_Gate, Callable[[bytes], Any] | None]] = {}
        """Each method's gate and lenient deserializer, made on its first call (not on every call)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method: str = handler_call_details.method
        request_id = _request_id(handler_call_details)
        known = self._methods.get(method)
        if known is None:
            gate = _Gate(method, self._authorizer, self._trust_domain)
            known = self._methods[method] = (gate, _lenient(handler.request_deserializer))
        gate, deserialize = known
        common = {"request_deserializer": deserialize, "response_serializer": handler.response_serializer}
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                _wrap_unary(handler.unary_unary, method, "unary", request_id, gate), **common
            )
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(
                _wrap_unary(handler.stream_unary, method, "client_stream", request_id, gate, streamed=True),
                **common,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                _wrap_stream(handler.unary_stream, method, "server_stream", request_id, gate), **common
            )
        return grpc.stream_stream_rpc_method_handler(
            _wrap_stream(handler.stream_stream, method, "bidi_stream", request_id, gate, streamed=True),
            **common,
        )


def _wrap_stream(
    behavior: Any, method: str, grpc_type: str, request_id: str, gate: _Gate, *, streamed: bool = False
) -> Any:
    # A streaming handler is either an async generator or a coroutine that calls context.write
    # (as the standard health service's Watch does); the wrapper must take the same shape.
    if inspect.isasyncgenfunction(behavior):
        return _wrap_streaming(behavior, method, grpc_type, request_id, gate, streamed)
    return _wrap_unary(behavior, method, grpc_type, request_id, gate, streamed=streamed)


def _admit(gate: _Gate, request: Any, context: grpc.aio.ServicerContext, streamed: bool) -> Any:
    """Check the call before its handler runs; the request (a client stream: its checked messages)."""
    if streamed:
        gate.check(context, None)
        return gate.requests(request)
    gate.check(context, request)
    return request


def _wrap_unary(
    behavior: _Unary, method: str, grpc_type: str, request_id: str, gate: _Gate, *, streamed: bool = False
) -> _Unary:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
        call = _Call(method, grpc_type, request_id)
        # grpc.aio runs each RPC in its own task, so context bound here stays with this call.
        structlog.contextvars.bind_contextvars(request_id=request_id, rpc=method)
        call.begin()
        try:
            context.set_trailing_metadata(((REQUEST_ID_METADATA, request_id),))
            return await behavior(_admit(gate, request, context, streamed), context)
        except grpc.aio.AbortError:
            call.aborted(context)
            raise
        except Exception as error:
            await call.fail(context, error)
        except BaseException:
            call.status = grpc.StatusCode.CANCELLED
            raise
        finally:
            call.end()

    return wrapped


def _wrap_streaming(
    behavior: _Streaming, method: str, grpc_type: str, request_id: str, gate: _Gate, streamed: bool
) -> _Streaming:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        call = _Call(method, grpc_type, request_id)
        structlog.contextvars.bind_contextvars(request_id=request_id, rpc=method)
        call.begin()
        try:
            context.set_trailing_metadata(((REQUEST_ID_METADATA, request_id),))
            async for response in behavior(_admit(gate, request, context, streamed), context):
                yield response
        except grpc.aio.AbortError:
            call.aborted(context)
            raise
        except Exception as error:
            await call.fail(context, error)
        except BaseException:
            call.status = grpc.StatusCode.CANCELLED
            raise
        finally:
            call.end()

    return wrapped
