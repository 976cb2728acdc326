"""Per-player lobby event streams: every open WatchLobby stream of a player gets that player's events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from skillclassics.matchmaking.v1 import matchmaking_pb2

QUEUE_LIMIT = 1_000


class LobbyHub:
    """Fans lobby events out to the players' open streams; a stream that falls behind is dropped.

    With several replicas (docs/matchmaking.md, "Replicas") :attr:`publish` is set: every event told here
    is also published for the other replicas, which hand it to their own streams with :meth:`deliver`."""

    def __init__(self) -> None:
        self._streams: dict[str, set[asyncio.Queue[matchmaking_pb2.WatchLobbyResponse | None]]] = {}
        self.publish: Callable[[str, matchmaking_pb2.WatchLobbyResponse], None] | None = None

    def tell(self, player_id: str, event: matchmaking_pb2.WatchLobbyResponse) -> None:
        """Tell ``player_id``'s streams, here and (when published) on every other replica."""
        self.deliver(player_id, event)
        if self.publish is not None:
            self.publish(player_id, event)

    def players(self) -> list[str]:
        """The players with a stream open here."""
        return list(self._streams)

    def deliver(self, player_id: str, event: matchmaking_pb2.WatchLobbyResponse) -> None:
        """Tell ``player_id``'s streams on this replica only."""
        for queue in list(self._streams.get(player_id, ())):
            if queue.qsize() >= QUEUE_LIMIT:
                queue.put_nowait(None)
                self._streams[player_id].discard(queue)
            else:
                queue.put_nowait(event)

    async def watch(
        self,
        player_id: str,
        playing: Callable[[], Awaitable[Sequence[matchmaking_pb2.MatchReady]]] | None = None,
    ) -> AsyncIterator[matchmaking_pb2.WatchLobbyResponse]:
        """The player's lobby events: first ``subscribed`` (with the matches they are playing, read once
        the stream is registered, so nothing falls between the two), then each event as it happens."""
        queue: asyncio.Queue[matchmaking_pb2.WatchLobbyResponse | None] = asyncio.Queue()
        self._streams.setdefault(player_id, set()).add(queue)
        try:
            current = await playing() if playing is not None else ()
            yield matchmaking_pb2.WatchLobbyResponse(subscribed=matchmaking_pb2.Subscribed(playing=current))
            while True:
                event = await queue.get()
                if event is None:
                    return
                yield event
        finally:
            streams = self._streams.get(player_id)
            if streams is not None:
                streams.discard(queue)
                if not streams:
                    del self._streams[player_id]

    def close(self) -> None:
        for streams in self._streams.values():
            for queue in streams:
                queue.put_nowait(None)
