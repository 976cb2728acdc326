"""Where each family's rules shards listen, which of them takes a new match, and creating matches there.

``RULES_<FAMILY>_ADDRESSES`` (e.g. ``RULES_CHESS_ADDRESSES=10.0.0.5:50060,10.0.0.6:50060``) lists a
family's shards in shard order: the n-th address serves shard n, and the match id names the shard
(``chess.<n>.<unique>``). ``RULES_SHARDS_FILE`` may list them too, and shards appended there are used
without a restart (:class:`~libs.match.routing.ShardDirectory`).

Placement (docs/matchmaking.md, "Placement"): a new match goes to one of the family's live shards, the
least loaded. A shard is live unless its last health check (every ``RULES_PLACEMENT_PROBE_MS``, default
1000, over the same mutual-TLS channel the matches are created on) answered anything but SERVING or
failed, or it refused or timed out a ``CreateMatch`` in the last ``RULES_PLACEMENT_COOLDOWN_MS`` (default
5000). Its load is its live matches, counted every ``RULES_PLACEMENT_LOAD_MS`` (default 5000), plus those
placed there since that count. The count is the shard's own answer to ``GetLoad`` (every match it holds
that is not over, those created directly by other backends included); for a shard that does not answer,
the matches matchmaking made there and has not seen end (``mm_matches`` rows ``starting`` or
``playing``). Ties go to a shard chosen by the match's unique part (a hash, as before),
and when no shard is live the match is placed by that hash among all of them (its creation is retried
until its shard answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from libs.match.ids import MatchId, MatchIdError
from libs.match.routing import RulesChannels, ShardDirectory, address_variable
from libs.persistence.schema import mm_matches
from libs.runtime.config import database_url_from_env, env_int
from libs.runtime.errors import ErrorReason, Unavailable
from libs.runtime.log import get_logger
from libs.runtime.tls import TransportSecurity

CALL_TIMEOUT_S = 5.0
HEALTH_TIMEOUT_S = 1.0
_UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_log = get_logger(__name__)

LoadSource = Callable[[], Awaitable[dict[tuple[str, int], int]]]
"""Counts the live matches of every (family, shard) that has any."""


@dataclass
class ShardState:
    """What placement knows about one shard."""

    serving: bool = True
    """The last health check answered SERVING (a shard never checked yet counts as serving)."""
    down_until: float = 0.0
    """Until this ``time.monotonic()`` instant the shard is skipped: it refused or timed out a creation."""
    live: int = 0
    """Its live matches at the last count."""
    placed: int = 0
    """Matches placed on it since that count."""

    def is_live(self, now: float) -> bool:
        return self.serving and now >= self.down_until

    @property
    def load(self) -> int:
        return self.live + self.placed


class MatchLoad:
    """The live matches matchmaking made on each shard, from its own ``mm_matches`` table."""

    def __init__(self, database_url: str) -> None:
        self._engine: AsyncEngine = create_async_engine(database_url, poolclass=NullPool)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MatchLoad | None:
        """From matchmaking's database (``DATABASE_URL``, or its SQLite file in ``DATA_DIR``); ``None``
        when neither is set (no database to count in: every shard counts as empty)."""
        if not (env.get("DATABASE_URL", "").strip() or env.get("DATA_DIR", "").strip()):
            return None
        return cls(database_url_from_env("matchmaking", env))

    async def __call__(self) -> dict[tuple[str, int], int]:
        counts: dict[tuple[str, int], int] = {}
        async with self._engine.connect() as conn:
            rows = await conn.execute(
                select(mm_matches.c.match_id).where(mm_matches.c.status.in_(("starting", "playing")))
            )
            for (match_id,) in rows:
                try:
                    parsed = MatchId.parse(match_id)
                except MatchIdError:
                    continue
                key = (parsed.family, parsed.shard)
                counts[key] = counts.get(key, 0) + 1
        return counts

    async def close(self) -> None:
        await self._engine.dispose()


class RulesShards:
    """gRPC stubs for every rules shard of every configured family, and where a new match goes."""

    def __init__(
        self,
        env: Mapping[str, str],
        families: list[str],
        transport: TransportSecurity,
        *,
        load: LoadSource | None = None,
        watch: bool = True,
    ) -> None:
        """``load`` counts the shards' live matches (default: :class:`MatchLoad` on matchmaking's
        database); ``watch=False`` leaves :meth:`probe` and :meth:`count_load` to the caller (tests)."""
        self._addresses = ShardDirectory(env, families)
        self.transport = transport
        """How matchmaking calls other services (mutual TLS)."""
        self._channels = RulesChannels(transport)
        self._probe_s = env_int(env, "RULES_PLACEMENT_PROBE_MS", 1000, minimum=50) / 1000
        self._cooldown_s = env_int(env, "RULES_PLACEMENT_COOLDOWN_MS", 5000, minimum=0) / 1000
        self._load_s = env_int(env, "RULES_PLACEMENT_LOAD_MS", 5000, minimum=50) / 1000
        self._own_load = load is None
        self._load = load if load is not None else MatchLoad.from_env(env)
        self._states: dict[tuple[str, int], ShardState] = {}
        self._monitor: asyncio.Task[None] | None = None
        self._closed = not watch  # (no monitor is ever started)
        self._start_monitor()

    # -- where -------------------------------------------------------------------------------------------

    @property
    def directory(self) -> ShardDirectory:
        """Every family's shard addresses (re-read from ``RULES_SHARDS_FILE`` while watching)."""
        return self._addresses

    def require(self, family: str) -> list[str]:
        """``family``'s shard addresses; ``Unavailable`` when it has none (its matches cannot be made)."""
        self._start_monitor()
        shards = self._addresses.get(family) or []
        if not shards:
            raise Unavailable(
                f"no {family} rules shard is configured ({address_variable(family)})",
                reason=ErrorReason.ERROR_REASON_NOT_CONFIGURED,
            )
        return shards

    def state(self, family: str, shard: int) -> ShardState:
        """What placement knows about ``family``'s shard ``shard``."""
        key = (family, shard)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = ShardState()
        return state

    def live_shards(self, family: str) -> list[int]:
        """``family``'s shards that may take a new match now, in shard order."""
        now = time.monotonic()
        return [n for n in range(len(self.require(family))) if self.state(family, n).is_live(now)]

    def new_match_id(self, family: str) -> str:
        """A new match's id, naming the shard it goes to: the least loaded live shard (see above)."""
        shards = self.require(family)
        unique = uuid.uuid4().hex
        spread = int.from_bytes(hashlib.sha256(unique.encode()).digest()[:4], "big")
        live = self.live_shards(family)
        if not live:
            shard = spread % len(shards)
        else:
            least = min(self.state(family, n).load for n in live)
            candidates = [n for n in live if self.state(family, n).load == least]
            shard = candidates[spread % len(candidates)]
        self.state(family, shard).placed += 1
        return str(MatchId(family, shard, unique))

    def stub(self, match_id: str) -> rules_pb2_grpc.RulesServiceStub:
        parsed = MatchId.parse(match_id)
        return self._channels.stub(self._addresses[parsed.family][parsed.shard], parsed.family)

    async def create_match(self, request: rules_pb2.CreateMatchRequest) -> None:
        """Create the match on its shard (idempotent: the request carries its idempotency key). A shard
        that refuses as unreachable or times out is skipped by placement for the cooldown."""
        try:
            await self.stub(request.match_id).CreateMatch(request, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as error:
            if error.code() in _UNREACHABLE:
                parsed = MatchId.parse(request.match_id)
                self.state(parsed.family, parsed.shard).down_until = time.monotonic() + self._cooldown_s
                _log.warning(
                    "placement.shard_skipped",
                    family=parsed.family,
                    shard=parsed.shard,
                    reason=error.code().name,
                    seconds=self._cooldown_s,
                )
            raise Unavailable(
                f"the rules shard of {request.match_id} refused: {error.details()}",
                reason=ErrorReason.ERROR_REASON_BACKEND_UNAVAILABLE,
            ) from None

    # -- watching the shards -----------------------------------------------------------------------------

    async def probe(self) -> None:
        """Check every shard's health once (concurrently) and note which serve."""
        checks = [
            (family, shard, address)
            for family, addresses in list(self._addresses.items())
            for shard, address in enumerate(addresses)
        ]
        answers = await asyncio.gather(*(self._check(family, address) for family, _, address in checks))
        for (family, shard, _), serving in zip(checks, answers, strict=True):
            state = self.state(family, shard)
            if state.serving != serving:
                _log.info("placement.shard_health", family=family, shard=shard, serving=serving)
            state.serving = serving

    async def _check(self, family: str, address: str) -> bool:
        stub = health_pb2_grpc.HealthStub(self._channels.channel(address, family))
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=HEALTH_TIMEOUT_S)
        except grpc.aio.AioRpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    async def count_load(self) -> None:
        """Count every shard's live matches again (the placements since the last count are in it): each
        shard's own count (``GetLoad``: the matches it holds that are not over, whoever created them), and
        for a shard that did not answer (down, or of a version without ``GetLoad`` during a rollout)
        matchmaking's count of the matches it made there."""
        shards = [
            (family, shard, address)
            for family, addresses in list(self._addresses.items())
            for shard, address in enumerate(addresses)
        ]
        # Placements made while the shards answer may not be in their answers: only those made before the
        # count began are taken out of ``placed`` below.
        placed_before = {key: state.placed for key, state in self._states.items()}
        answers = await asyncio.gather(*(self._ask_load(*shard) for shard in shards))
        counts = {
            (family, shard): n for (family, shard, _), n in zip(shards, answers, strict=True) if n is not None
        }
        if len(counts) < len(shards) and self._load is not None:
            for key, count in (await self._load()).items():
                counts.setdefault(key, count)
        for key, state in list(self._states.items()):
            state.live = counts.get(key, 0)
            state.placed -= placed_before.get(key, 0)
        for key, count in counts.items():
            if key not in self._states:
                self.state(*key).live = count

    async def _ask_load(self, family: str, shard: int, address: str) -> int | None:
        """Shard ``shard``'s own count of its live matches; ``None`` when it does not answer, or answers
        as another shard (a directory that lists it in the wrong place)."""
        stub = rules_pb2_grpc.RulesServiceStub(self._channels.channel(address, family))
        try:
            reply = await stub.GetLoad(rules_pb2.GetLoadRequest(), timeout=HEALTH_TIMEOUT_S)
        except grpc.aio.AioRpcError:
            return None
        if (reply.family, reply.shard) != (family, shard):
            _log.warning(
                "placement.shard_mislisted",
                family=family,
                shard=shard,
                address=address,
                answered=f"{reply.family}.{reply.shard}",
            )
            return None
        return int(reply.live_matches)

    def _start_monitor(self) -> None:
        """Start watching the shards once there is an event loop (matchmaking makes this in its start)."""
        if self._monitor is not None or self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._addresses.start()
        self._monitor = loop.create_task(self._watch())

    async def _watch(self) -> None:
        counted = 0.0
        while True:
            try:
                await self.probe()
                if time.monotonic() - counted >= self._load_s:
                    counted = time.monotonic()
                    await self.count_load()
            except Exception as error:  # keep watching: placement uses what it knew last
                _log.warning("placement.watch_failed", error=f"{type(error).__name__}: {error}")
            await asyncio.sleep(self._probe_s)

    async def close(self) -> None:
        self._closed = True
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
            self._monitor = None
        await self._addresses.close()
        if self._own_load and isinstance(self._load, MatchLoad):
            await self._load.close()
        await self._channels.close()
