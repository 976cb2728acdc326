"""Several matchmaking replicas on one PostgreSQL database (docs/matchmaking.md, "Replicas").

- :class:`ReplicaSettings`: who this replica is and how long the pairing lease lasts; the
  :class:`~services.matchmaking.matchmaker.Matchmaker` takes the ``pairing`` lease (``mm_leases``) with
  them, and pairs only while it holds it, every pairing write fenced by the lease's epoch.
- :class:`LobbyBus`: every lobby event a replica tells its own streams is also published with
  ``NOTIFY mm_lobby``; every replica ``LISTEN``s and hands the events of the others to its own streams.
  When the listening session is lost, the replica listens again and then tells its connected players the
  state of their tables as stored (what a notification missed in between is in the database). When a
  replica could not publish events (the database unreachable for longer than its retries), it publishes
  a *resync* once it can: every other replica then catches its players up the same way.

SQLite runs none of this: one process, everything in memory, as before.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from sqlalchemy.engine import make_url

from libs.runtime.log import get_logger

CHANNEL = "mm_lobby"
"""The NOTIFY channel of lobby events."""
MAX_PAYLOAD = 7_900
"""PostgreSQL refuses a NOTIFY payload of 8000 bytes or more; a lobby event is a few hundred."""
DEFAULT_LEASE_MS = 3_000
"""How long the pairing lease lasts without renewal (``MATCHMAKING_LEASE_MS``): the leader renews it
every third of that, and a replica takes it over once it has expired."""
CHECK_INTERVAL_S = 1.0
"""How often the listening session is checked (a round trip); a lost one is replaced at once."""
PUBLISH_ATTEMPTS = 20
"""How often a batch of events is tried (about 15 s in all) before it is given up, logged."""
CATCH_UP_MARGIN_MS = 5_000
"""How far before the last good check of a lost listening session the catch-up looks (events are
stamped by their replica's clock, and published a moment after their commit)."""
_log = get_logger(__name__)


def replica_id() -> str:
    """This process, as ``mm_leases.holder`` names it (for an operator reading the table)."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ReplicaSettings:
    """Matchmaking as one of several replicas."""

    lease_ms: int = DEFAULT_LEASE_MS
    holder: str = field(default_factory=replica_id)


def encode(origin: str, player_id: str, event: pb.WatchLobbyResponse) -> str:
    return f"{origin}|{player_id}|{base64.b64encode(event.SerializeToString()).decode()}"


def decode(payload: str) -> tuple[str, str, str]:
    """A notification's origin, its player (or :data:`RESYNC`) and its body: the event (:func:`event_of`),
    or for a resync the instant from which to catch up."""
    origin, player_id, body = payload.split("|", 2)
    return origin, player_id, body


def event_of(body: str) -> pb.WatchLobbyResponse:
    return pb.WatchLobbyResponse.FromString(base64.b64decode(body))


RESYNC = "*resync*"
"""In a notification's player place (no player id has a ``*``): the origin could not publish some events;
every other replica catches its connected players up from the database, from the instant that follows."""


def encode_resync(origin: str, since_ms: int) -> str:
    return f"{origin}|{RESYNC}|{since_ms}"


async def connect(database_url: str, application_name: str) -> Any:
    """A plain asyncpg session on ``database_url`` (LISTEN needs a session of its own, outside any pool)."""
    import asyncpg

    url = make_url(database_url)
    return await asyncpg.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        user=url.username,
        password=url.password,
        database=url.database,
        timeout=5,
        server_settings={"application_name": application_name},
    )


Deliver = Callable[[str, pb.WatchLobbyResponse], None]
Catch_up = Callable[[Iterable[str], int], Awaitable[None]]


class LobbyBus:
    """Lobby events between replicas through PostgreSQL ``LISTEN``/``NOTIFY``.

    :meth:`publish` queues an event for the other replicas (one publishing task sends them in order, a
    batch per round trip); the listening session hands every other replica's events to ``deliver`` (the
    local streams). ``players`` names the players with a stream here; when the listening session was lost,
    ``catch_up(players, since_ms)`` tells them what the database holds (their tables' state) once the
    session is back, so no event is lost for a connected stream.
    """

    def __init__(
        self,
        database_url: str,
        origin: str,
        deliver: Deliver,
        players: Callable[[], Iterable[str]],
        catch_up: Catch_up,
        now_ms: Callable[[], int],
    ) -> None:
        self._url = database_url
        self.origin = origin
        self._deliver = deliver
        self._players = players
        self._catch_up = catch_up
        self._now_ms = now_ms
        self._outbox: asyncio.Queue[str | None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._listener: Any = None
        self._listening = asyncio.Event()
        self.received = 0
        """Events of other replicas handed to local streams (for tests)."""
        self.reconnects = 0
        self.dropped = 0
        """Events this replica gave up publishing (a resync follows them)."""
        self.resyncs = 0
        """Resyncs of other replicas this one caught its players up for."""
        self._resyncing: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._listen_forever()), loop.create_task(self._publish_forever())]
        async with asyncio.timeout(10):
            await self._listening.wait()

    async def close(self) -> None:
        self._outbox.put_nowait(None)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                await self._tasks[1]
        for task in [*self._tasks, *self._resyncing]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._resyncing, return_exceptions=True)
        if self._listener is not None:
            # Not close(): it waits for the session to be idle, which a cancelled query may never be.
            with contextlib.suppress(Exception):
                self._listener.terminate()

    def publish(self, player_id: str, event: pb.WatchLobbyResponse) -> None:
        payload = encode(self.origin, player_id, event)
        if len(payload.encode()) > MAX_PAYLOAD:
            _log.error("lobby.event_too_large", player=player_id, size=len(payload))
            return
        self._outbox.put_nowait(payload)

    async def _publish_forever(self) -> None:
        connection: Any = None
        stopping = False
        # Set once events were given up: from when the other replicas must catch up (a resync is owed).
        owed_since_ms: int | None = None
        # When the last batch that was published was formed: every event given up came after it.
        last_good_ms = self._now_ms()
        try:
            while not stopping:
                batch: list[str] = []
                if owed_since_ms is None:  # (owing a resync, it is sent without waiting for an event)
                    first = await self._outbox.get()
                    if first is None:
                        break
                    batch.append(first)
                formed_ms = self._now_ms()
                while not self._outbox.empty():
                    item = self._outbox.get_nowait()
                    if item is None:
                        stopping = True
                        break
                    batch.append(item)
                if owed_since_ms is not None:
                    batch.insert(0, encode_resync(self.origin, owed_since_ms))
                connection, sent = await self._send(connection, batch)
                if sent:
                    if owed_since_ms is not None:
                        _log.warning("lobby.resync_published", since_ms=owed_since_ms)
                    owed_since_ms = None
                    last_good_ms = formed_ms
                    continue
                events = len(batch) - (1 if owed_since_ms is not None else 0)
                self.dropped += events
                if owed_since_ms is None:
                    owed_since_ms = last_good_ms - CATCH_UP_MARGIN_MS
                # The database was unreachable for the whole time: the other replicas' streams miss these
                # events until the resync owed from now on reaches them (docs/matchmaking.md "Replicas").
                _log.error("lobby.events_not_published", events=events, resync_since_ms=owed_since_ms)
        finally:
            if connection is not None:
                with contextlib.suppress(Exception):
                    connection.terminate()

    async def _send(self, connection: Any, batch: list[str]) -> tuple[Any, bool]:
        """Publish ``batch`` in one round trip, trying :data:`PUBLISH_ATTEMPTS` times (a fresh session after
        a failure); the session to use next, and whether it was published."""
        for attempt in range(PUBLISH_ATTEMPTS):
            try:
                if connection is None or connection.is_closed():
                    connection = await connect(self._url, "matchmaking-lobby-publish")
                await connection.execute(
                    "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload", CHANNEL, batch
                )
                return connection, True
            except Exception as error:
                _log.warning("lobby.publish_failed", attempt=attempt, error=type(error).__name__)
                with contextlib.suppress(Exception):
                    if connection is not None:
                        connection.terminate()
                connection = None
                await asyncio.sleep(min(1.0, 0.1 * (attempt + 1)))
        return connection, False

    def _notified(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            origin, player_id, body = decode(payload)
            if origin == self.origin:
                return  # told to the local streams already, when it was published
            if player_id == RESYNC:
                task = asyncio.get_running_loop().create_task(self._resync(origin, int(body)))
                self._resyncing.add(task)
                task.add_done_callback(self._resyncing.discard)
                return
            event = event_of(body)
        except Exception as error:
            _log.warning("lobby.bad_notification", error=type(error).__name__)
            return
        self.received += 1
        self._deliver(player_id, event)

    async def _resync(self, origin: str, since_ms: int) -> None:
        """``origin`` could not publish events from ``since_ms`` on: tell the players with a stream here what
        the database holds since then, as after a lost listening session."""
        self.resyncs += 1
        _log.warning("lobby.resync", origin=origin, since_ms=since_ms)
        try:
            await self._catch_up(list(self._players()), since_ms)
        except Exception as error:
            _log.error("lobby.catch_up_failed", error=type(error).__name__)

    async def _listen_forever(self) -> None:
        lost_at_ms: int | None = None
        while True:
            try:
                self._listener = await connect(self._url, "matchmaking-lobby-listen")
                await self._listener.add_listener(CHANNEL, self._notified)
            except Exception as error:
                _log.warning("lobby.listen_failed", error=type(error).__name__)
                await asyncio.sleep(CHECK_INTERVAL_S)
                continue
            if lost_at_ms is not None:
                # Listening again: whatever was published meanwhile is in the database.
                self.reconnects += 1
                try:
                    await self._catch_up(list(self._players()), lost_at_ms)
                except Exception as error:
                    _log.error("lobby.catch_up_failed", error=type(error).__name__)
            self._listening.set()
            lost_at_ms = None
            alive_ms = self._now_ms()
            while lost_at_ms is None:
                await asyncio.sleep(CHECK_INTERVAL_S)
                try:
                    async with asyncio.timeout(5):
                        await self._listener.fetchval("SELECT 1")
                    alive_ms = self._now_ms()
                except Exception as error:
                    # Notifications since the last good check may be lost: catch up from a little before.
                    lost_at_ms = alive_ms - CATCH_UP_MARGIN_MS
                    _log.warning("lobby.listen_lost", error=type(error).__name__)
                    with contextlib.suppress(Exception):
                        self._listener.terminate()
