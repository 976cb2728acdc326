"""The matchmaking logic between the gRPC face and the store: tables, the queue, making matches,
results, and the lobby events that tell players about each.

Making a match is at-least-once and idempotent: the match row is written (status ``starting``) in the
same transaction that fills the table or pairs the players, then the match is created on its rules
shard with the match id as idempotency key. If the shard cannot be reached, a background loop retries
every ``starting`` match until it succeeds; players hear ``MatchReady`` once it exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import grpc
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.rules.v1 import rules_pb2

from libs.pairing import Seeker, pair
from libs.runtime.errors import ServiceError, Unavailable
from libs.runtime.log import get_logger
from libs.runtime.timesource import ServiceTime
from services.matchmaking.families import family_rules
from services.matchmaking.lobby import LobbyHub
from services.matchmaking.shards import RulesShards
from services.matchmaking.store import MatchmakingStore

PAIRING_INTERVAL_S = 0.25
RETRY_INTERVAL_S = 1.0
_log = get_logger(__name__)


DEFAULT_CLIENT_SEED_WINDOW_MS = 5_000
"""How long a chance family's first draw waits for both players' client seeds (they send them as soon
as they hear of the match: a second is plenty; the window only bounds a player who sends none)."""


class Matchmaker:
    """Everything matchmaking does, over its store, the rules shards, fairness and the lobby hub."""

    def __init__(
        self,
        store: MatchmakingStore,
        shards: RulesShards,
        hub: LobbyHub,
        time: ServiceTime,
        fairness_address: str = "",
        first_move_timeout_ms: int = 0,
        disconnect_forfeit_ms: int = 0,
        client_seed_window_ms: int = DEFAULT_CLIENT_SEED_WINDOW_MS,
    ) -> None:
        self.store = store
        self._first_move_timeout_ms = first_move_timeout_ms
        """0: the rules service's default (60 s)."""
        self._disconnect_forfeit_ms = disconnect_forfeit_ms
        self._client_seed_window_ms = client_seed_window_ms
        self.shards = shards
        self.hub = hub
        self.time = time
        self._fairness_channel = grpc.aio.insecure_channel(fairness_address) if fairness_address else None
        self._fairness = (
            fairness_pb2_grpc.FairnessServiceStub(self._fairness_channel) if self._fairness_channel else None
        )
        self._seekers: dict[str, tuple[Seeker, pb.EnterQueueRequest]] = {}
        self._pairing_wanted = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for row in await self.store.queued():
            request = pb.EnterQueueRequest.FromString(row["request"])
            seeker = Seeker(row["player_id"], row["rating"], row["entered_at_ms"], row["pool"])
            self._seekers[row["player_id"]] = (seeker, request)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._pair_forever()), loop.create_task(self._retry_forever())]
        self._pairing_wanted.set()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.hub.close()
        await self.shards.close()
        if self._fairness_channel is not None:
            await self._fairness_channel.close()

    # -- making matches ------------------------------------------------------------------------------

    async def new_match_row(
        self,
        family: str,
        players: tuple[str, str],
        options: bytes,
        time_control: bytes,
        fee: int,
        currency: str,
        table_id: str | None,
    ) -> dict[str, Any]:
        """The match row for two players; a fairness commitment is made first when the family needs one."""
        match_id = self.shards.new_match_id(family)
        commitment = ""
        if family_rules(family).uses_chance:
            if self._fairness is None:
                raise Unavailable(f"{family} needs the fairness service (FAIRNESS_ADDRESS)")
            reply = await self._fairness.Commit(
                fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=match_id)
            )
            commitment = reply.commitment
        return {
            "match_id": match_id,
            "table_id": table_id,
            "family": family,
            "player0": players[0],
            "player1": players[1],
            "entry_fee_minor": fee,
            "currency": currency,
            "fairness_commitment": commitment,
            "options": options,
            "time_control": time_control,
            "status": "starting",
            "result": None,
            "created_at_ms": self.time.now_ms(),
            "ended_at_ms": None,
        }

    async def launch(self, match: dict[str, Any]) -> bool:
        """Create the match on its rules shard and tell both players; False if the shard is unreachable."""
        chance = family_rules(match["family"]).uses_chance
        request = rules_pb2.CreateMatchRequest(
            match_id=match["match_id"],
            seats=[
                rules_pb2.SeatAssignment(seat=0, player_id=match["player0"]),
                rules_pb2.SeatAssignment(seat=1, player_id=match["player1"]),
            ],
            options=rules_pb2.MatchOptions.FromString(match["options"]),
            time_control=rules_pb2.TimeControl.FromString(match["time_control"]),
            fairness_commitment=match["fairness_commitment"],
            idempotency_key=match["match_id"],
            first_move_timeout_ms=self._first_move_timeout_ms,
            disconnect_forfeit_ms=self._disconnect_forfeit_ms,
            client_seed_window_ms=self._client_seed_window_ms if chance else 0,
        )
        try:
            await self.shards.create_match(request)
        except ServiceError as error:
            _log.warning("match.create_failed", match_id=match["match_id"], reason=error.reason)
            return False
        await self.store.mark_playing(match)
        now = self.time.now_ms()
        for seat, (player, opponent) in enumerate(
            ((match["player0"], match["player1"]), (match["player1"], match["player0"]))
        ):
            ready = pb.MatchReady(
                match_id=match["match_id"],
                family=match["family"],
                seat=seat,
                opponent_id=opponent,
                table_id=match["table_id"] or "",
            )
            self.hub.tell(player, pb.WatchLobbyResponse(match_ready=ready, at_ms=now))
        if match["table_id"]:
            await self.announce_table(match["table_id"])
        return True

    async def announce_table(self, table_id: str) -> None:
        from services.matchmaking.servicer import table_proto  # the one encoder of tables

        table = await self.store.table(table_id)
        event = pb.WatchLobbyResponse(table_updated=table_proto(table), at_ms=self.time.now_ms())
        for player in {table["creator_id"], table["joiner_id"]} - {None}:
            self.hub.tell(player, event)

    async def _retry_forever(self) -> None:
        while True:
            try:
                for match in await self.store.matches_starting():
                    await self.launch(match)
            except Exception as error:  # the database is unreachable: try again later
                _log.warning("match.retry_scan_failed", error=type(error).__name__)
            await asyncio.sleep(RETRY_INTERVAL_S)

    # -- the queue -----------------------------------------------------------------------------------

    def queue(self, seeker: Seeker, request: pb.EnterQueueRequest) -> None:
        self._seekers[seeker.player_id] = (seeker, request)
        self._pairing_wanted.set()

    def dequeue(self, player_id: str) -> None:
        self._seekers.pop(player_id, None)

    async def pair_now(self) -> int:
        """One pairing round over everyone queued; returns how many matches it made."""
        pairs = pair([s for s, _ in self._seekers.values()], self.time.now_ms())
        made = 0
        for first, second in pairs:
            request = self._seekers[first.player_id][1]
            self.dequeue(first.player_id)
            self.dequeue(second.player_id)
            match = await self.new_match_row(
                request.family,
                (first.player_id, second.player_id),  # the longer-waiting player takes seat 0 (White)
                request.options.SerializeToString(),
                request.time_control.SerializeToString(),
                request.entry_fee_minor,
                request.currency,
                None,
            )
            if await self.store.pair(first.player_id, second.player_id, match):
                made += 1
                await self.launch(match)
        return made

    async def _pair_forever(self) -> None:
        while True:
            # Windows widen with time: pair again after the interval even when nobody new came.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._pairing_wanted.wait(), PAIRING_INTERVAL_S)
            self._pairing_wanted.clear()
            if len(self._seekers) >= 2:
                try:
                    await self.pair_now()
                except Exception as error:
                    _log.warning("queue.pairing_failed", error=type(error).__name__)

    def new_table_id(self) -> str:
        return f"t-{uuid.uuid4().hex[:20]}"
