"""Reporting results: a transactional outbox, so a result reaches every recipient even across restarts.

A finished match's result row is written in the same transaction as its last event, with
``reported_at_ms`` unset. A :class:`ResultReporter` delivers unreported results to every configured
recipient and sets ``reported_at_ms`` once all have accepted; a failed delivery is retried with
backoff, and the scan at start picks up whatever a crash interrupted. Recipients must be idempotent
(fairness ``Finish`` is; so will matchmaking's result call be).

Recipients, in delivery order: the fairness service (``FAIRNESS_ADDRESS``), told to finish the stream of
every match created with a fairness commitment, so that its seed can be revealed; then matchmaking
(``MATCHMAKING_ADDRESS``), which closes the table and updates the ratings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

import grpc
from prometheus_client import Gauge
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2, matchmaking_pb2_grpc

from libs.match.model import outcome_from_json
from libs.match.results import result_proto
from libs.match.store import MatchStore
from libs.runtime.log import get_logger
from libs.runtime.timesource import ServiceTime
from libs.runtime.tls import TransportSecurity

_log = get_logger(__name__)


class Recipient(Protocol):
    """Someone who must hear of every result."""

    name: str

    async def deliver(self, result: dict[str, Any]) -> None:
        """Accept one result row (raise to have it retried later)."""
        ...

    async def close(self) -> None: ...


class FairnessRecipient:
    """Finishes the fairness stream of matches that have a commitment (then the seed can be revealed)."""

    name = "fairness"

    def __init__(self, address: str, transport: TransportSecurity, timeout: float = 3.0) -> None:
        self._channel = transport.channel(address, "fairness")
        self._stub = fairness_pb2_grpc.FairnessServiceStub(self._channel)
        self._timeout = timeout

    async def deliver(self, result: dict[str, Any]) -> None:
        if result["fairness_commitment"]:
            await self._stub.Finish(
                fairness_pb2.FinishRequest(match_id=result["match_id"]), timeout=self._timeout
            )

    async def close(self) -> None:
        await self._channel.close()


class MatchmakingRecipient:
    """Tells matchmaking every result: it closes the table and updates both ratings."""

    name = "matchmaking"

    def __init__(self, address: str, transport: TransportSecurity, timeout: float = 3.0) -> None:
        self._channel = transport.channel(address, "matchmaking")
        self._stub = matchmaking_pb2_grpc.MatchmakingServiceStub(self._channel)
        self._timeout = timeout

    async def deliver(self, result: dict[str, Any]) -> None:
        outcome = outcome_from_json(result["result"])
        proto = result_proto(outcome, int(result["ended_at_ms"]), result.get("stood_in", ()))
        request = matchmaking_pb2.ReportResultRequest(match_id=result["match_id"], result=proto)
        try:
            await self._stub.ReportResult(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise
            # A match matchmaking never made (created directly on the rules service: tournaments,
            # tests): nothing to rate, and asking again would never change the answer.
            _log.info("result.unknown_to_matchmaking", match_id=result["match_id"])

    async def close(self) -> None:
        await self._channel.close()


class ResultReporter:
    """Delivers this shard's unreported results to every recipient, in the background."""

    def __init__(
        self,
        store: MatchStore,
        recipients: Sequence[Recipient],
        time: ServiceTime,
        retry_seconds: float = 1.0,
    ) -> None:
        self._store = store
        self._recipients = list(recipients)
        self._time = time
        self._retry = retry_seconds
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.backlog: Gauge | None = None
        """The shard's ``skillclassics_result_outbox_backlog`` child, set after each pass (the runtime
        binds it; ``None``: not kept)."""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._wake.set()  # deliver what a previous process left

    def notify(self) -> None:
        """A result was just written: deliver it soon."""
        self._wake.set()

    async def deliver_pending(self) -> int:
        """One pass over the unreported results; returns how many were fully delivered."""
        pending = await self._store.unreported_results()
        delivered = 0
        for result in pending:
            try:
                for recipient in self._recipients:
                    await recipient.deliver(result)
            except Exception as error:  # a recipient is down: keep the row, try again later
                code = error.code().name if isinstance(error, grpc.aio.AioRpcError) else None
                _log.warning(
                    "result.delivery_failed",
                    match_id=result["match_id"],
                    error=type(error).__name__,
                    code=code,
                )
                continue
            await self._store.mark_reported(result["match_id"], self._time.now_ms())
            delivered += 1
        if self.backlog is not None:
            self.backlog.set(len(pending) - delivered)
        return delivered

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.deliver_pending()
            except Exception as error:  # the database is unreachable: the next notify or retry tries again
                _log.warning("result.scan_failed", error=type(error).__name__)
                await asyncio.sleep(self._retry)
                self._wake.set()
                continue
            if await self._has_pending():
                await asyncio.sleep(self._retry)
                self._wake.set()

    async def _has_pending(self) -> bool:
        return await self._store.has_unreported_results()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.backlog is not None:
            self.backlog.set(0)  # the outbox is no longer this process's to deliver (the next owner's is)
        for recipient in self._recipients:
            await recipient.close()
