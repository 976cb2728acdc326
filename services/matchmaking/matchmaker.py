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
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import grpc
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.rules.v1 import rules_pb2

from libs.fairness import FAIRNESS_VERSION
from libs.pairing import Seeker, pair
from libs.runtime.errors import ErrorReason, InvalidArgument, ServiceError, Unavailable, retry_after_ms
from libs.runtime.game_metrics import PAIRING_WAIT_SECONDS, QUEUE_DEPTH
from libs.runtime.log import get_logger
from libs.runtime.timesource import ServiceTime
from services.matchmaking.families import (
    FAMILIES,
    family_rules,
    policy_column,
    policy_of_column,
    queue_pool_key,
)
from services.matchmaking.lobby import LobbyHub
from services.matchmaking.replicas import ReplicaSettings
from services.matchmaking.shards import RulesShards
from services.matchmaking.store import FORFEIT, Lease, LeaseLost, MatchmakingStore

PAIRING_INTERVAL_S = 0.25
PAIRING_BATCH = 64
"""Pairs made together: one transaction takes them all out of the queue, their matches are created on
the rules shards concurrently and marked playing in one more transaction."""
RETRY_INTERVAL_S = 1.0
FAIRNESS_TIMEOUT_S = 5.0
"""How long a fairness ``Commit`` may take before the join or pairing that needs it is given up."""
PAIRING_LEASE = "pairing"
"""The lease (``mm_leases``) of the one replica that pairs the queue (docs/matchmaking.md, "Replicas")."""
RETRY_GRACE_MS = 10_000
"""With several replicas, the leader's retry loop leaves a ``starting`` match alone this long: the replica
that wrote it is creating it (a shard call takes at most 5 s) and tells its players itself."""
_log = get_logger(__name__)


DEFAULT_CLIENT_SEED_WINDOW_MS = 5_000
"""How long a chance family's first draw waits for both players' client seeds (they send them as soon
as they hear of the match: a second is plenty; the window only bounds a player who sends none)."""


def fairness_fields(match: dict[str, Any]) -> dict[str, Any]:
    """The fairness commitment of a match row and its version, as ``MatchReady`` and ``PlayedMatch``
    announce them to players (empty and 0 for a family without chance)."""
    commitment = match["fairness_commitment"] or ""
    return {"fairness_commitment": commitment, "fairness_version": FAIRNESS_VERSION if commitment else 0}


_RUNNING: weakref.WeakSet[Matchmaker] = weakref.WeakSet()
"""The matchmakers started and not closed (one per process, but the tests run several)."""


def _queue_depth(family: str) -> float:
    return float(sum(matchmaker.queue_depth(family) for matchmaker in list(_RUNNING)))


def _depth_of(family: str) -> Callable[[], float]:
    return lambda: _queue_depth(family)


for _family in FAMILIES:
    # Read when scraped: nothing to keep up to date on the queue's path.
    QUEUE_DEPTH.labels(_family).set_function(_depth_of(_family))


def _current_pool(row: dict[str, Any], request: pb.EnterQueueRequest) -> str:
    """A stored queue entry's pool as this version keys it, computed again from its request: an entry made
    before the key changed (a deploy that added a clock field to it) would otherwise wait in a pool nobody
    new joins. An entry whose request the lobby no longer offers keeps its stored pool (it pairs only with
    its like, as it was promised when it entered)."""
    try:
        pool = queue_pool_key(request)
    except InvalidArgument:
        return str(row["pool"])
    if pool != row["pool"]:
        _log.info("queue.pool_rekeyed", player_id=row["player_id"], stored=row["pool"], pool=pool)
    return pool


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
        replicas: ReplicaSettings | None = None,
    ) -> None:
        self.store = store
        self.replicas = replicas
        """Set when this is one of several replicas (PostgreSQL): it pairs only while it holds the pairing
        lease, reading the queue from the database; ``None``: the one process, queue in memory."""
        self.lease: Lease | None = None
        """The pairing lease while this replica holds it (several replicas only)."""
        self._lease_until = 0.0
        """Until when (event loop time) the lease is surely still ours: its last renewal's start plus the
        lease. Past it this replica stops pairing, even before it learns whether it was taken over."""
        self._first_move_timeout_ms = first_move_timeout_ms
        """0: the rules service's default (60 s)."""
        self._disconnect_forfeit_ms = disconnect_forfeit_ms
        self._client_seed_window_ms = client_seed_window_ms
        self.shards = shards
        self.hub = hub
        self.time = time
        self._fairness_channel = (
            shards.transport.channel(fairness_address, "fairness") if fairness_address else None
        )
        self._fairness = (
            fairness_pb2_grpc.FairnessServiceStub(self._fairness_channel) if self._fairness_channel else None
        )
        self._seekers: dict[str, tuple[Seeker, pb.EnterQueueRequest]] = {}
        self._pairing: dict[str, tuple[Seeker, pb.EnterQueueRequest]] = {}
        """Seekers taken out of ``_seekers`` while their pairing is being made; back there if it fails."""
        self._left_while_reading: set[str] | None = None
        """Players who left the queue while :meth:`_load_queue` was reading it (``None``: no read now)."""
        self._pools: dict[tuple[str, int, str], str] = {}
        """The current pool of each stored entry (player, time entered, stored pool) last loaded: a replica
        reloads the queue every round and keys only the entries it has not seen (about 7 us each)."""
        self._launching: set[str] = set()
        """Match ids being created on their shard right now (the retry loop leaves them alone)."""
        self._pairing_wanted = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.replicas is None:
            await self._load_queue()
        else:
            await self._lead_once()  # a free lease is taken before the first call is served
            self._tasks.append(loop.create_task(self._lead_forever()))
        self._tasks += [loop.create_task(self._pair_forever()), loop.create_task(self._retry_forever())]
        self._pairing_wanted.set()
        _RUNNING.add(self)

    async def _load_queue(self) -> None:
        """Everyone queued, as stored (those being paired right now excepted)."""
        seekers = {}
        pools: dict[tuple[str, int, str], str] = {}
        self._left_while_reading = set()
        try:
            rows = await self.store.queued()
        finally:
            left, self._left_while_reading = self._left_while_reading, None
        for row in rows:
            if row["player_id"] in self._pairing or row["player_id"] in left:
                continue  # (one who left while the queue was read may be in what was read)
            request = pb.EnterQueueRequest.FromString(row["request"])
            entry = (row["player_id"], row["entered_at_ms"], row["pool"])
            pool = self._pools.get(entry)
            if pool is None:
                pool = _current_pool(row, request)
            pools[entry] = pool
            seeker = Seeker(row["player_id"], row["rating"], row["entered_at_ms"], pool)
            seekers[row["player_id"]] = (seeker, request)
        self._seekers = seekers
        self._pools = pools

    # -- the pairing lease (several replicas) ----------------------------------------------------------

    @property
    def leading(self) -> bool:
        """Whether this process pairs the queue now: always for the one process; for a replica, while it
        holds the pairing lease and that lease has surely not expired."""
        if self.replicas is None:
            return True
        return self.lease is not None and asyncio.get_running_loop().time() < self._lease_until

    async def _lead_forever(self) -> None:
        """Take the pairing lease when it is free or expired, and renew it every third of its length while
        held; a renewal refused (another replica took it over) or an expiry stops the pairing here."""
        assert self.replicas is not None
        while True:
            await asyncio.sleep(self.replicas.lease_ms / 3000)
            await self._lead_once()

    async def _lead_once(self) -> None:
        assert self.replicas is not None
        holder, lease_ms = self.replicas.holder, self.replicas.lease_ms
        started = asyncio.get_running_loop().time()
        now_ms = self.time.now_ms()
        try:
            if self.lease is None:
                self.lease = await self.store.claim_lease(PAIRING_LEASE, holder, now_ms, lease_ms)
                if self.lease is not None:
                    _log.warning("queue.leading", holder=holder, epoch=self.lease.epoch)
                    self._lease_until = started + lease_ms / 1000
                    self._pairing_wanted.set()
            elif await self.store.renew_lease(self.lease, now_ms, lease_ms):
                self._lease_until = started + lease_ms / 1000
            else:
                self._step_down("another replica took the pairing lease over")
        except Exception as error:  # the database is unreachable: the lease runs out on its own
            _log.warning("queue.lease_failed", error=type(error).__name__)

    def _step_down(self, reason: str) -> None:
        if self.lease is not None:
            _log.warning("queue.not_leading", epoch=self.lease.epoch, reason=reason)
        self.lease = None
        self._lease_until = 0.0
        self._seekers.clear()

    def queue_depth(self, family: str) -> int:
        """Players of ``family`` in the quick-match queue now (those being paired right now included)."""
        return sum(
            1 for _, request in (*self._seekers.values(), *self._pairing.values()) if request.family == family
        )

    async def close(self) -> None:
        _RUNNING.discard(self)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.lease is not None:  # hand the pairing over at once rather than after the lease runs out
            lease, self.lease = self.lease, None
            try:
                await self.store.release_lease(lease, self.time.now_ms())
            except Exception as error:
                _log.warning("queue.lease_release_failed", error=type(error).__name__)
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
        *,
        disconnect_policy: str = FORFEIT,
    ) -> dict[str, Any]:
        """The match row for two players; a fairness commitment is made first when the family needs one.
        ``disconnect_policy`` is the table's or the queue entries' (``mm_matches.disconnect_policy``:
        ``forfeit`` or ``stand_in``).

        Raises ``Unavailable`` when that commitment cannot be had (no fairness service configured, or it
        failed or timed out); nothing is stored by then.
        """
        match_id = self.shards.new_match_id(family)
        chance = family_rules(family).draws_chance(options)
        commitment = await self._commit(family, match_id) if chance else ""
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
            "disconnect_policy": disconnect_policy,
        }

    def require_fairness(self, family: str, options: rules_pb2.MatchOptions | None = None) -> None:
        """``Unavailable`` when ``family``'s matches (with ``options``, when given) draw from the fairness
        service and none is configured: then none of them could ever be made, so no table or queue entry
        is accepted for them."""
        rules = family_rules(family)
        needs = rules.uses_chance if options is None else rules.draws_chance(options)
        if needs and self._fairness is None:
            raise Unavailable(
                f"{family} needs the fairness service (FAIRNESS_ADDRESS)",
                reason=ErrorReason.ERROR_REASON_NOT_CONFIGURED,
            )

    async def _commit(self, family: str, match_id: str) -> str:
        if self._fairness is None:
            raise Unavailable(
                f"{family} needs the fairness service (FAIRNESS_ADDRESS)",
                reason=ErrorReason.ERROR_REASON_NOT_CONFIGURED,
            )
        try:
            reply = await self._fairness.Commit(
                fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=match_id),
                timeout=FAIRNESS_TIMEOUT_S,
            )
        except grpc.aio.AioRpcError as error:
            raise Unavailable(
                f"the fairness service could not commit to a seed for a {family} match "
                f"({error.code().name}: {error.details()}); nothing was changed, try again",
                retry_after_ms=retry_after_ms(error.trailing_metadata()),  # fairness's own guidance
                reason=ErrorReason.ERROR_REASON_BACKEND_UNAVAILABLE,
            ) from None
        return str(reply.commitment)

    async def launch(self, match: dict[str, Any]) -> bool:
        """Create the match on its rules shard and tell both players; False if the shard is unreachable."""
        return bool(await self.launch_many([match]))

    async def launch_many(self, matches: list[dict[str, Any]]) -> list[str]:
        """Create the matches on their rules shards (concurrently), mark them playing (one transaction)
        and tell both players of each; the ids created. One whose shard is unreachable stays ``starting``
        for the retry loop."""
        self._launching.update(m["match_id"] for m in matches)
        try:
            created = await asyncio.gather(*(self._create(m) for m in matches))
            done = [match for match, ok in zip(matches, created, strict=True) if ok]
            if done:
                await self.store.mark_playing_many(done, self.time.now_ms())
        finally:
            self._launching.difference_update(m["match_id"] for m in matches)
        now = self.time.now_ms()
        for match in done:
            for seat, (player, opponent) in enumerate(
                ((match["player0"], match["player1"]), (match["player1"], match["player0"]))
            ):
                ready = pb.MatchReady(
                    match_id=match["match_id"],
                    family=match["family"],
                    seat=seat,
                    opponent_id=opponent,
                    table_id=match["table_id"] or "",
                    **fairness_fields(match),
                )
                self.hub.tell(player, pb.WatchLobbyResponse(match_ready=ready, at_ms=now))
            if match["table_id"]:
                await self.announce_table(match["table_id"])
        return [match["match_id"] for match in done]

    async def _create(self, match: dict[str, Any]) -> bool:
        family = family_rules(match["family"])
        chance = family.draws_chance(match["options"])
        request = rules_pb2.CreateMatchRequest(
            match_id=match["match_id"],
            seats=[
                rules_pb2.SeatAssignment(seat=0, player_id=match["player0"]),
                rules_pb2.SeatAssignment(seat=1, player_id=match["player1"]),
            ],
            options=rules_pb2.MatchOptions.FromString(match["options"]),
            time_control=rules_pb2.TimeControl.FromString(match["time_control"]),
            **fairness_fields(match),
            idempotency_key=match["match_id"],
            first_move_timeout_ms=self._first_move_timeout_ms,
            disconnect_forfeit_ms=self._disconnect_forfeit_ms,
            client_seed_window_ms=self._client_seed_window_ms if chance else 0,
            # the table's or queue entries' disconnect policy (checked when they were made)
            stand_in_after_ms=family.stand_in_after_ms(policy_of_column(match["disconnect_policy"])),
        )
        try:
            await self.shards.create_match(request)
        except ServiceError as error:
            _log.warning("match.create_failed", match_id=match["match_id"], reason=error.message)
            return False
        return True

    async def announce_table(self, table_id: str) -> None:
        """Tell the players at a table its state as stored now (:meth:`tell_table`)."""
        from services.matchmaking.servicer import table_proto  # the one encoder of tables

        self.tell_table(table_proto(await self.store.table(table_id)))

    def tell_table(self, table: pb.Table) -> None:
        """Tell the players seated at ``table`` (its creator, and its joiner once there is one) of it, on
        their own lobby streams: from its creation on, so a creator waiting on the stream hears of it. No
        one else is told, whatever the table's visibility (others find public tables with ListTables)."""
        event = pb.WatchLobbyResponse(table_updated=table, at_ms=self.time.now_ms())
        for player in {seat.player_id for seat in table.seats}:
            self.hub.tell(player, event)

    async def catch_up(self, players: Iterable[str], since_ms: int) -> None:
        """Tell ``players``' streams here what the database holds that they may have missed since
        ``since_ms`` (this replica stopped hearing the others' events then): the state of each of their
        tables still open or in play, or created or changed since, ``MatchReady`` for each of their
        matches in play made since, and ``RatingChanged`` for each rating change since. A repeat of an
        event heard already changes nothing for a client (a table's state, a match's coordinates, a
        rating's before and after for one match)."""
        from services.matchmaking.servicer import table_proto

        now = self.time.now_ms()
        for player in players:
            tables, matches, ratings = await self.store.recent_of(player, since_ms)
            for row in tables:
                self.hub.deliver(player, pb.WatchLobbyResponse(table_updated=table_proto(row), at_ms=now))
            for match in matches:
                seat = 0 if match["player0"] == player else 1
                ready = pb.MatchReady(
                    match_id=match["match_id"],
                    family=match["family"],
                    seat=seat,
                    opponent_id=match["player1"] if seat == 0 else match["player0"],
                    table_id=match["table_id"] or "",
                    **fairness_fields(match),
                )
                self.hub.deliver(player, pb.WatchLobbyResponse(match_ready=ready, at_ms=now))
            for change in ratings:
                rated = pb.RatingChanged(
                    family=change["family"],
                    match_id=change["match_id"],
                    before=change["before"],
                    after=change["after"],
                )
                self.hub.deliver(player, pb.WatchLobbyResponse(rating_changed=rated, at_ms=now))

    async def _retry_forever(self) -> None:
        while True:
            try:
                before_ms = None
                if self.replicas is not None:  # the leader's job, for matches their replica did not finish
                    before_ms = self.time.now_ms() - RETRY_GRACE_MS
                waiting = (
                    [
                        m
                        for m in await self.store.matches_starting(before_ms)
                        if m["match_id"] not in self._launching
                    ]
                    if self.leading
                    else []
                )
                for start in range(0, len(waiting), PAIRING_BATCH):
                    await self.launch_many(waiting[start : start + PAIRING_BATCH])
            except Exception as error:  # the database is unreachable: try again later
                _log.warning("match.retry_scan_failed", error=type(error).__name__)
            await asyncio.sleep(RETRY_INTERVAL_S)

    # -- the queue -----------------------------------------------------------------------------------

    def queue(self, seeker: Seeker, request: pb.EnterQueueRequest) -> None:
        if self.leading:  # (a replica's pairing reads the queue from the database at every round)
            self._seekers[seeker.player_id] = (seeker, request)
        self._pairing_wanted.set()

    def dequeue(self, player_id: str) -> None:
        self._seekers.pop(player_id, None)
        self._pairing.pop(player_id, None)  # a pairing in flight will not put them back
        if self._left_while_reading is not None:  # nor a read of the queue made before they left
            self._left_while_reading.add(player_id)

    async def pair_now(self) -> int:
        """One pairing round over everyone queued; returns how many matches it made."""
        pairs = pair([s for s, _ in self._seekers.values()], self.time.now_ms())
        made = 0
        for start in range(0, len(pairs), PAIRING_BATCH):
            # the longer-waiting player of each pair (first) takes seat 0 (White)
            batch = [
                (first.player_id, second.player_id) for first, second in pairs[start : start + PAIRING_BATCH]
            ]
            made += await self._make_pairs(batch)
        return made

    async def _make_pairs(self, pairs: list[tuple[str, str]]) -> int:
        """Make the matches of pairs of queued players; how many were made. A pair that fails (one of them
        left the queue meanwhile, fairness is down, the database refused) loses nobody: whoever is still
        queued goes back into the queue with their place (``entered_at_ms``) kept, to be paired in a later
        round; a player who left stays out."""
        held: list[tuple[str, str]] = []
        requests: list[pb.EnterQueueRequest] = []
        for first, second in pairs:
            taken = {p: self._seekers.pop(p) for p in (first, second) if p in self._seekers}
            if len(taken) == 2:
                self._pairing.update(taken)
                held.append((first, second))
                requests.append(taken[first][1])
            else:  # one of them left during this round: the other simply stays queued
                self._seekers.update(taken)
        made: list[dict[str, Any]] = []
        left: set[str] = set()
        try:
            rows = await asyncio.gather(
                *(self._match_row(pair_, request) for pair_, request in zip(held, requests, strict=True)),
                return_exceptions=True,
            )
            candidates = []
            for (first, second), row in zip(held, rows, strict=True):
                if isinstance(row, BaseException):
                    reason = row.message if isinstance(row, ServiceError) else type(row).__name__
                    _log.warning("queue.pairing_failed", players=[first, second], reason=reason)
                else:
                    candidates.append((first, second, row))
            if candidates:
                lease = self.lease
                if self.replicas is not None and (lease is None or not self.leading):
                    raise LeaseLost(lease or Lease(PAIRING_LEASE, "", 0))
                paired = await (
                    self.store.pair_many(candidates)
                    if lease is None
                    else self.store.pair_many(candidates, lease=lease)
                )
                made = [match for (_, _, match), ok in zip(candidates, paired, strict=True) if ok]
                missed = [
                    p for (f, s, _), ok in zip(candidates, paired, strict=True) if not ok for p in (f, s)
                ]
                if missed:  # someone's queue row was gone: believe the store about who is still queued
                    left = set(missed) - await self.store.still_queued(missed)
        except LeaseLost as error:
            self._step_down(error.message)
        except Exception as error:
            _log.warning(
                "queue.pairing_failed",
                players=[p for pair_ in held for p in pair_],
                error=type(error).__name__,
            )
        finally:
            matched = {p for match in made for p in (match["player0"], match["player1"])}
            now_ms = self.time.now_ms()
            for player in (p for pair_ in held for p in pair_):
                entry = self._pairing.pop(player, None)
                if entry is not None and player in matched:
                    seeker, request = entry
                    waited_s = max(0, now_ms - seeker.entered_at_ms) / 1000
                    PAIRING_WAIT_SECONDS.labels(request.family).observe(waited_s)
                elif entry is not None and player not in left:
                    self._seekers[player] = entry
        if made:
            try:
                await self.launch_many(made)
            except Exception as error:  # the match rows exist: the retry loop creates them on their shards
                _log.warning("match.launch_failed", matches=len(made), error=type(error).__name__)
        return len(made)

    async def _match_row(self, players: tuple[str, str], request: pb.EnterQueueRequest) -> dict[str, Any]:
        return await self.new_match_row(
            request.family,
            players,
            request.options.SerializeToString(),
            request.time_control.SerializeToString(),
            request.entry_fee_minor,
            request.currency,
            None,
            disconnect_policy=policy_column(request.disconnect_policy),
        )

    async def _pair_forever(self) -> None:
        while True:
            # Windows widen with time: pair again after the interval even when nobody new came. (Not
            # wait_for: on Python 3.11 it can lose a cancellation that comes as the event is set, and
            # close() would then wait for this loop forever.)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PAIRING_INTERVAL_S):
                    await self._pairing_wanted.wait()
            self._pairing_wanted.clear()
            if self.replicas is not None:
                if not self.leading:
                    continue
                try:
                    await self._load_queue()
                except Exception as error:
                    _log.warning("queue.read_failed", error=type(error).__name__)
                    continue
            if len(self._seekers) >= 2:
                try:
                    await self.pair_now()
                except Exception as error:
                    _log.warning("queue.pairing_failed", error=type(error).__name__)

    def new_table_id(self) -> str:
        return f"t-{uuid.uuid4().hex[:20]}"
