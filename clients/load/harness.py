"""The load engine: pairs of players that play real matches through the gateway, and the schedules that
start them (closed loop: N matches per family kept going; open loop: a fixed arrival rate).

A *pair* is two fresh players (ids ``<run id>-<family>-<n>-a`` and ``-b``) on development tokens. With
table pairing (the default) ``a`` opens its lobby stream, creates a table and waits for its
``MatchReady``; ``b`` lists the family's tables and joins ``a``'s. With queue pairing both enter the
quick-match queue and wait for their ``MatchReady`` (matchmaking may pair them with players of other
pairs; every count below is per match all the same). Each player then follows the match as its own
seat and, whenever its stream shows it legal actions, picks one with the family's bot strategy
(:mod:`clients.families`) and submits it, after the think time. At the ply cap the player to move
resigns. The *transport* says how: ``play`` (the default) is one ``Play`` stream per player for its
updates and its actions (:meth:`~clients.player.PlayerSession.play`); ``unary`` is a ``WatchMatch``
stream for the updates (:meth:`~clients.player.PlayerSession.watch_match`) and a ``SubmitAction`` call
per action.

What is measured (:class:`Metrics`): every action that was answered (``submit_action``: from sending the
attempt that succeeded, the call or the stream message, to its answer), the *submit-to-opponent-update*
latency (from that same moment until the opponent's stream delivers the update with the sequence the
action was given, whichever of the answer and the update comes first), and the *match setup* (from a
pair's start, before signing in, to each player's first update of its match). Refusals are counted by
operation (those of actions as ``SubmitAction`` whichever the transport) and status code; the
gateway's rate limit (``RESOURCE_EXHAUSTED``, "retry in N ms") is counted and waited out, then the same
call is made again (with the same idempotency key for actions); ``UNAVAILABLE`` is counted and retried
for calls that are safe to repeat (actions are: their idempotency key makes a repeat return the original
answer), after the wait the refusal asks for (a database restarting behind the gateway: "retry in N ms")
or a growing delay, for as long as ``outage_s`` allows (:class:`OutageTolerance`): a short outage of a
service or its database delays the live matches instead of failing them. A match whose player hits any
other error, or an outage longer than that, counts as failed, and the harness resigns it so its
opponent is not left waiting.

:class:`Engine` plays pairs (the Locust file uses it directly); :class:`LoadRun` schedules them and
stops: after ``duration_s`` (matches still being played are then resigned and counted as *cut*;
nothing after the stop is measured), or once ``matches`` pairs have ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal, TextIO, TypeVar

import grpc
from skillclassics.gateway.v1 import gateway_pb2 as gw
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2

from clients.families import FamilyClient, Strategy, UnknownFamily, family, plies_played, resign_action
from clients.load.histogram import Histogram
from clients.load.procstat import ProcessMonitor, ServiceUsage
from clients.player import (
    DEFAULT_GATEWAY,
    GatewayError,
    Lobby,
    MatchStream,
    PlayerSession,
    PlayStream,
    RetryPolicy,
    development_token,
    exhausted_wait_s,
    is_over,
    new_key,
)

__all__ = [
    "LATENCIES",
    "Engine",
    "FamilyPlan",
    "LoadConfig",
    "LoadError",
    "LoadRun",
    "Metrics",
    "OutageTolerance",
    "RunResult",
    "TokenMinter",
    "Transport",
    "arrival_time",
    "error_label",
    "new_run_id",
    "parse_families",
]

_T = TypeVar("_T")

LATENCIES: Final = ("submit_action", "opponent_update", "match_setup")


def error_label(error: GatewayError) -> str:
    """How a refusal is counted: its code and the catalogue's reason ("RESOURCE_EXHAUSTED/RATE_LIMITED"),
    or the code alone when there is no reason (the connection broke)."""
    return error.code.name if error.reason == "UNSPECIFIED" else f"{error.code.name}/{error.reason}"


"""The latency histograms every family keeps (microseconds)."""

Mode = Literal["closed", "open"]
Pairing = Literal["table", "queue"]
Transport = Literal["play", "unary"]
TRANSPORTS: Final = ("play", "unary")
"""How players play: one ``Play`` stream each (the default), or ``WatchMatch`` and ``SubmitAction``."""

_FATAL_AT_SETUP = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNIMPLEMENTED,
)
"""Refusals while pairing that mean the run is misconfigured (no point in trying more matches)."""
_OPPONENT_EVENTS = ("action", "resign")


class LoadError(Exception):
    """The run cannot go on: the gateway is unreachable, tokens are refused, the tables are refused."""


def new_run_id() -> str:
    """A short unique prefix for the run's player ids."""
    return f"load-{uuid.uuid4().hex[:8]}"


# -- configuration ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FamilyPlan:
    """One family of the mix."""

    name: str
    concurrency: int
    """Matches of this family kept going at once (closed loop), or its share of arrivals (open loop)."""
    minutes: float | None = None
    """Main time per player; ``None``: the family's shortest lobby clock (chess 3, gin 5)."""
    increment_s: float = 0.0
    options: Mapping[str, str] = field(default_factory=dict)
    """The family's option settings (``{"variant": "oklahoma"}``), as the command line's ``--option``."""
    strategy: str = "random"
    """The bot strategy of :mod:`clients.families` (``random`` or ``greedy``)."""


def parse_families(text: str) -> tuple[FamilyPlan, ...]:
    """``chess=3,gin=2`` (a bare name means 1); ``ValueError`` with the reason."""
    plans: dict[str, int] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, count = part.partition("=")
        name = name.strip()
        try:
            number = int(count) if count.strip() else 1
        except ValueError:
            raise ValueError(f"{part!r}: the count after = must be a whole number") from None
        if number < 1:
            raise ValueError(f"{part!r}: the count must be at least 1")
        if name in plans:
            raise ValueError(f"{name} is listed twice")
        plans[name] = number
    if not plans:
        raise ValueError("name at least one family, e.g. chess=3,gin=2")
    return tuple(FamilyPlan(name, count) for name, count in plans.items())


@dataclass(frozen=True, slots=True)
class LoadConfig:
    """Everything a run needs (the command line's options)."""

    families: tuple[FamilyPlan, ...]
    gateway: str = DEFAULT_GATEWAY
    mode: Mode = "closed"
    rate: float = 0.0
    """Open loop: new matches per second once ramped up."""
    poisson: bool = False
    """Open loop: exponential gaps between arrivals (the same mean rate) instead of even ones."""
    duration_s: float | None = 60.0
    matches: int | None = None
    """Stop once this many pairs have ended (finished or failed); with ``duration_s`` too, the first."""
    ramp_up_s: float = 0.0
    think_ms: float = 0.0
    think_jitter_ms: float = 0.0
    """The think time is uniform in ``think_ms ± think_jitter_ms`` (never below 0)."""
    max_plies: int | None = 200
    """The player to move resigns once the match has had this many moves (``None``: no cap)."""
    pairing: Pairing = "table"
    transport: Transport = "play"
    """``play``: one ``Play`` stream per player for its updates and actions; ``unary``: a ``WatchMatch``
    stream for the updates and a ``SubmitAction`` call per action."""
    connections: int = 8
    """HTTP/2 connections to the gateway shared by all players (each player has its own token)."""
    stall_s: float = 30.0
    """A player whose stream brings nothing for this long fails its match (``STALLED``)."""
    max_in_flight: int = 10_000
    """Open loop: arrivals while this many pairs are still playing are dropped (counted)."""
    run_id: str = field(default_factory=new_run_id)
    seed: int | None = None
    progress_s: float = 1.0
    """Seconds between progress lines (0: none)."""
    rate_limit_attempts: int = 200
    """How many times one call is retried after the rate limit refused it."""
    drain_s: float = 10.0
    """After a duration stop: how long resigning the matches still being played may take."""
    outage_s: float = 30.0
    """How long one call or action keeps being retried while it is refused ``UNAVAILABLE`` (a service
    behind the gateway, or its database, restarting) before its match counts as failed."""

    def validate(self) -> None:
        """``ValueError`` naming the first setting that makes no sense."""
        if not self.families:
            raise ValueError("no families to play")
        names = [plan.name for plan in self.families]
        if len(set(names)) != len(names):
            raise ValueError(f"a family is listed twice: {', '.join(names)}")
        for plan in self.families:
            if plan.concurrency < 1:
                raise ValueError(f"{plan.name}: at least 1 match")
            try:
                _Adapter(plan)  # the family, its options, clock and strategy
            except UnknownFamily as error:
                raise ValueError(str(error)) from None
        if self.mode not in ("closed", "open"):
            raise ValueError(f"mode must be closed or open, not {self.mode!r}")
        if self.mode == "open" and not self.rate > 0:
            raise ValueError("open loop needs a rate above 0 (--rate)")
        if self.duration_s is None and self.matches is None:
            raise ValueError("give a duration or a number of matches")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ValueError("the duration must be above 0 seconds")
        if self.matches is not None and self.matches < 1:
            raise ValueError("the number of matches must be at least 1")
        if self.ramp_up_s < 0 or self.think_ms < 0 or self.think_jitter_ms < 0:
            raise ValueError("ramp-up, think time and jitter cannot be negative")
        if self.max_plies is not None and self.max_plies < 1:
            raise ValueError("the ply cap must be at least 1")
        if self.pairing not in ("table", "queue"):
            raise ValueError(f"pairing must be table or queue, not {self.pairing!r}")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport must be play or unary, not {self.transport!r}")
        if self.connections < 1:
            raise ValueError("at least 1 connection")
        if not self.stall_s > 0:
            raise ValueError("the stall timeout must be above 0 seconds")
        if not self.outage_s >= 0:
            raise ValueError("the outage tolerance cannot be negative")

    @property
    def total_concurrency(self) -> int:
        return sum(plan.concurrency for plan in self.families)

    def describe(self) -> str:
        """The run in one line."""
        mix = ",".join(f"{plan.name}={plan.concurrency}" for plan in self.families)
        if self.mode == "open":
            arrivals = "Poisson" if self.poisson else "even"
            what = f"open loop, {self.rate:g} matches/s ({arrivals} arrivals), mix {mix}"
        else:
            what = f"closed loop, {mix} matches at once"
        stop = []
        if self.duration_s is not None:
            stop.append(f"{self.duration_s:g} s")
        if self.matches is not None:
            stop.append(f"{self.matches} match{'es' if self.matches != 1 else ''}")
        think = f"think {self.think_ms:g} ms" + (
            f" ± {self.think_jitter_ms:g}" if self.think_jitter_ms else ""
        )
        cap = f"cap {self.max_plies} plies" if self.max_plies else "no ply cap"
        return (
            f"{self.run_id}: {what}, {self.pairing} pairing, {self.transport} transport, {think}, {cap}, "
            f"ramp-up {self.ramp_up_s:g} s, stop after {' or '.join(stop)}, gateway {self.gateway}"
        )


# -- tokens ----------------------------------------------------------------------------------------------


class TokenMinter:
    """Development tokens for fresh players, signed with the local stack's development key (the key file
    ``make run`` wrote under ``DATA_DIR``): see :func:`clients.player.development_token`. The key is
    read once."""

    def __init__(self, env: Mapping[str, str] | None = None, ttl_s: int = 6 * 3600) -> None:
        from services.gateway import tokens  # minting is the gateway's own; development only

        self._env = dict(os.environ if env is None else env)
        development_token("load-probe", self._env, ttl_s)  # DevKeyMissing / ValueError with the reason
        self._key = tokens.token_key(self._env, Path(self._env.get("DATA_DIR") or "data"), create=False)
        self._mint = tokens.mint_token
        self._ttl_s = ttl_s

    def __call__(self, player_id: str) -> str:
        return self._mint(self._key, player_id, self._ttl_s, int(time.time()))


# -- measurements ----------------------------------------------------------------------------------------


@dataclass
class FamilyStats:
    """One family's counts and latency histograms."""

    started: int = 0
    """Matches that began (each match once, whichever of its players saw it first)."""
    finished: int = 0
    """Matches whose final update a player received."""
    failed: int = 0
    """Pairs that ended on an error (the error table says which)."""
    cut: int = 0
    """Matches resigned by the harness when the run stopped."""
    actions: int = 0
    """Actions the gateway accepted."""
    terminations: Counter[str] = field(default_factory=Counter)
    latency: dict[str, Histogram] = field(default_factory=lambda: {name: Histogram() for name in LATENCIES})


class Metrics:
    """What a run counts and times; one per run. Counts stop when :attr:`recording` goes off (the run
    stopped), except the matches cut then."""

    def __init__(self, families: Iterable[str]) -> None:
        self.families: dict[str, FamilyStats] = {name: FamilyStats() for name in families}
        self.errors: Counter[tuple[str, str]] = Counter()
        """(operation, status code name) → count."""
        self.recording = True
        self.dropped = 0
        """Open-loop arrivals not started because too many pairs were in flight."""
        self.reconnects = 0
        """Match streams reopened (the player library does it on UNAVAILABLE and RESOURCE_EXHAUSTED)."""
        self.interval: dict[str, Histogram] = {name: Histogram() for name in LATENCIES}
        """Since the last progress line (reset by it)."""

    def _family(self, name: str) -> FamilyStats:
        stats = self.families.get(name)
        if stats is None:
            stats = self.families[name] = FamilyStats()
        return stats

    # Recorders (each a no-op once recording stopped).

    def match_started(self, family_name: str) -> bool:
        """Count a match that began; whether it was counted (not once recording stopped)."""
        if self.recording:
            self._family(family_name).started += 1
        return self.recording

    def match_finished(self, family_name: str, result: rules_pb2.Result) -> None:
        if self.recording:
            stats = self._family(family_name)
            stats.finished += 1
            name = rules_pb2.Termination.Name(result.termination) if result.termination else "UNSPECIFIED"
            stats.terminations[name.removeprefix("TERMINATION_").lower()] += 1

    def pair_failed(self, family_name: str) -> None:
        if self.recording:
            self._family(family_name).failed += 1

    def match_cut(self, family_name: str) -> None:
        self._family(family_name).cut += 1

    def latency(self, family_name: str, kind: str, nanoseconds: int) -> None:
        if self.recording:
            micros = nanoseconds // 1000
            self._family(family_name).latency[kind].record(micros)
            self.interval[kind].record(micros)
            if kind == "submit_action":
                self._family(family_name).actions += 1

    def error(self, operation: str, code: str) -> None:
        if self.recording:
            self.errors[(operation, code)] += 1

    # Totals.

    def total(self, attribute: str) -> int:
        value = 0
        for stats in self.families.values():
            count = getattr(stats, attribute)
            assert isinstance(count, int)
            value += count
        return value

    def merged(self, kind: str) -> Histogram:
        """The latency ``kind`` of every family together."""
        merged = Histogram()
        for stats in self.families.values():
            merged.merge(stats.latency[kind])
        return merged


# -- playing ---------------------------------------------------------------------------------------------


class _Adapter:
    """What the harness needs of a family's client module (one place to follow its API)."""

    def __init__(self, plan: FamilyPlan) -> None:
        self.client: FamilyClient = family(plan.name)
        self.name = plan.name
        self.options = self.client.options(plan.options)
        minutes = plan.minutes if plan.minutes is not None else self.client.quick_minutes
        self.time_control = self.client.time_control(minutes, plan.increment_s)
        if plan.strategy not in self.client.strategies:
            raise ValueError(
                f"{plan.name} strategies are {', '.join(self.client.strategies)}, not {plan.strategy!r}"
            )
        self.strategy_name = plan.strategy

    def strategy(self, rng: random.Random) -> Strategy:
        return self.client.strategy(self.strategy_name, rng)

    def plies(self, update: rules_pb2.MatchUpdate, counted: int) -> int:
        return plies_played(update, self.client, counted)


class _LiveMatch:
    """A match being played by harness players: who may resign it, and the submit-to-opponent-update
    bookkeeping (the answer and the opponent's update can come in either order)."""

    __slots__ = ("counted", "family", "match_id", "over", "pairs", "players", "seen", "sent", "sessions")

    def __init__(self, match_id: str, family_name: str) -> None:
        self.match_id = match_id
        self.family = family_name
        self.sent: dict[int, int] = {}
        """Sequence → when the call that made it began (its answer came before the opponent's update)."""
        self.seen: dict[int, int] = {}
        """Sequence → when the opponent's stream delivered it (before the submitter's answer)."""
        self.over = False
        self.counted = False
        """Whether it began while the run was measuring (else resigning it at the stop is not a cut)."""
        self.players = 0
        self.pairs: set[int] = set()
        """The numbers of the pairs whose players play it (one pair, unless paired by the queue)."""
        self.sessions: list[PlayerSession] = []

    def submitted(self, sequence: int, began_ns: int) -> int | None:
        seen = self.seen.pop(sequence, None)
        if seen is not None:
            return seen - began_ns
        self.sent[sequence] = began_ns
        return None

    def observed(self, sequence: int, at_ns: int) -> int | None:
        began = self.sent.pop(sequence, None)
        if began is not None:
            return at_ns - began
        self.seen[sequence] = at_ns
        return None


class OutageTolerance:
    """When one call (or action) refused ``UNAVAILABLE`` is tried again: after the wait the refusal asks
    for (``retry_after_s``: "retry in N ms", ``retry-after-ms``) or else a delay doubling from 0.1 s up to
    ``max_delay_s``, as long as the first refusal of the call is less than ``outage_s`` ago (the last
    wait is cut to what is left). Used once per call; ``clock`` is for tests."""

    def __init__(
        self, outage_s: float, *, max_delay_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.outage_s = outage_s
        self.max_delay_s = max_delay_s
        self._clock = clock
        self._since: float | None = None
        self.refusals = 0

    def wait_after(self, error: GatewayError) -> float | None:
        """The wait before trying again after ``error`` (``None``: not ``UNAVAILABLE``, or the outage has
        lasted longer than tolerated: give up)."""
        if error.code != grpc.StatusCode.UNAVAILABLE:
            return None
        now = self._clock()
        if self._since is None:
            self._since = now
        left = self.outage_s - (now - self._since)
        if left <= 0:
            return None
        wait = error.retry_after_s
        if wait is None:
            wait = min(self.max_delay_s, 0.1 * 2**self.refusals)
        self.refusals += 1
        return min(wait, left)


class Stalled(Exception):
    """A player's stream (``operation``) brought nothing for ``stall_s`` seconds."""

    def __init__(self, operation: str, message: str) -> None:
        super().__init__(message)
        self.operation = operation


class _PartnerFailed(Exception):
    """The other player of a table pair failed before the table existed (counted once, there)."""


def _fail(table: asyncio.Future[str]) -> None:
    if not table.done():
        table.set_exception(_PartnerFailed())
        table.exception()  # retrieved: nobody else may be waiting for it


@dataclass(frozen=True, slots=True)
class PairOutcome:
    """How a pair's players fared: the match ids they played and whether one of them failed."""

    match_ids: tuple[str, ...]
    failed: bool


class Engine:
    """Plays pairs of players through the gateway; one per run (or per Locust process).

    ``async with Engine(config, metrics, tokens)``: opens the shared connections; :meth:`play_pair`
    plays one pair's match(es) to the end; :meth:`cut` resigns every match still being played."""

    def __init__(
        self,
        config: LoadConfig,
        metrics: Metrics,
        tokens: Callable[[str], str],
        *,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.tokens = tokens
        # Refusals reach the harness (to be counted); it does its own waiting and retrying.
        self.retry = retry or RetryPolicy(
            unavailable_attempts=1, rate_limited_attempts=1, unavailable_wait_s=0
        )
        self.adapters = {plan.name: _Adapter(plan) for plan in config.families}
        self.live: dict[str, _LiveMatch] = {}
        self.fatal: LoadError | None = None
        """Set when a refusal showed the run cannot work (bad options, tokens refused)."""
        self.stopping = False
        """Set by :meth:`stop_all`: a pair whose match begins from now on resigns it at once."""
        self._stopped_pairs: set[int] = set()
        self._channels: list[grpc.aio.Channel] = []
        self._next_channel = 0
        self._pairs = 0
        self._seed = config.seed if config.seed is not None else random.randrange(1 << 30)

    async def __aenter__(self) -> Engine:
        self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def open(self) -> None:
        # A local subchannel pool: each channel is its own connection (by default equal channels share).
        options = [("grpc.use_local_subchannel_pool", 1)]
        self._channels = [
            grpc.aio.insecure_channel(self.config.gateway, options=options)
            for _ in range(self.config.connections)
        ]

    async def close(self) -> None:
        channels, self._channels = self._channels, []
        await asyncio.gather(*(channel.close() for channel in channels), return_exceptions=True)

    def session(self, player_id: str) -> PlayerSession:
        """A session for ``player_id`` on one of the shared connections."""
        channel = self._channels[self._next_channel % len(self._channels)]
        self._next_channel += 1
        return PlayerSession(self.config.gateway, self.tokens(player_id), retry=self.retry, channel=channel)

    def pace(self, think_ms: float, think_jitter_ms: float = 0.0) -> None:
        """Change the players' think time from their next move on, in the matches being played (the
        platform benchmark slows the same matches down for its half-rate window)."""
        paced = replace(self.config, think_ms=think_ms, think_jitter_ms=think_jitter_ms)
        paced.validate()
        self.config = paced

    async def probe(self) -> None:
        """One signed-in call, to fail early and clearly (gateway down, key refused)."""
        session = self.session(f"{self.config.run_id}-probe")
        try:
            await session.whoami()
        except GatewayError as error:
            raise LoadError(f"the gateway at {self.config.gateway} refused the probe: {error}") from None

    # -- calls with counting and waiting ---------------------------------------------------------------

    async def call(self, operation: str, make: Callable[[], Awaitable[_T]], *, repeatable: bool = True) -> _T:
        """``make()``, counting refusals; the rate limit is waited out and the call made again,
        ``UNAVAILABLE`` too when ``repeatable`` (for up to ``outage_s``); other refusals raise
        :class:`GatewayError`."""
        limited = 0
        outage = OutageTolerance(self.config.outage_s)
        while True:
            try:
                return await make()
            except GatewayError as error:
                self.metrics.error(operation, error_label(error))
                if (
                    error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
                    and limited < self.config.rate_limit_attempts
                ):
                    limited += 1
                    await asyncio.sleep(exhausted_wait_s(error))
                    continue
                wait = outage.wait_after(error) if repeatable else None
                if wait is not None:
                    await asyncio.sleep(wait)
                    continue
                raise

    # -- a pair ----------------------------------------------------------------------------------------

    async def play_pair(self, plan_name: str, number: int | None = None) -> PairOutcome:
        """Two fresh players of family ``plan_name`` pair up and play to the end (see the module
        docstring); ``number`` names the pair (unique in the run; default: the next one). Errors are
        counted, not raised (except cancellation); a refusal that shows the run is misconfigured also
        sets :attr:`fatal`.

        To stop pairs, prefer :meth:`stop_pair` / :meth:`stop_all` and :meth:`cut` (their matches are
        resigned and the players end on the final update) to cancelling their tasks: a call cancelled
        in flight is a client that went away mid-call, which the services must survive but which is
        not what a load run means to measure."""
        adapter = self.adapters[plan_name]
        if number is None:
            self._pairs += 1
            number = self._pairs
        began = time.perf_counter_ns()
        prefix = f"{self.config.run_id}-{plan_name}-{number}"
        sessions = (self.session(f"{prefix}-a"), self.session(f"{prefix}-b"))
        rng = random.Random(self._seed * 1_000_003 + number)
        table: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        players = [
            self._player(adapter, session, role, table, began, random.Random(rng.getrandbits(64)), number)
            for role, session in zip(("a", "b"), sessions, strict=True)
        ]
        results = await asyncio.gather(*players, return_exceptions=True)
        match_ids: list[str] = []
        failed = False
        for result in results:
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                failed = True
            elif result:
                match_ids.append(result)
        if failed:
            self.metrics.pair_failed(plan_name)
        return PairOutcome(tuple(dict.fromkeys(match_ids)), failed)

    async def _player(
        self,
        adapter: _Adapter,
        session: PlayerSession,
        role: str,
        table: asyncio.Future[str],
        began: int,
        rng: random.Random,
        number: int,
    ) -> str:
        """One player: sign in, pair, play; returns the match id. Failures are counted and re-raised."""
        match: _LiveMatch | None = None
        try:
            await self.call("WhoAmI", session.whoami)
            if self.config.pairing == "queue":
                match_id, seat = await self._queue(adapter, session)
            elif role == "a":
                match_id, seat = await self._create(adapter, session, table)
            else:
                match_id, seat = await self._join(adapter, session, table)
            match = self._attach(match_id, adapter.name, session, number)
            if (self.stopping or number in self._stopped_pairs) and not match.over:
                await self.cut([(match, session)], 5)  # stopped while pairing: end it at once
            await self._play(adapter, session, match, seat, began, rng)
            return match_id
        except asyncio.CancelledError:
            _fail(table)
            raise
        except GatewayError as error:
            _fail(table)
            if error.code in _FATAL_AT_SETUP and match is None and self.fatal is None:
                self.fatal = LoadError(f"the gateway refused to set a {adapter.name} match up: {error}")
            await self._abandon(match)
            raise
        except Exception as error:
            _fail(table)
            if isinstance(error, Stalled):
                self.metrics.error(error.operation, "STALLED")
            elif not isinstance(error, _PartnerFailed):
                self.metrics.error("harness", type(error).__name__)
            await self._abandon(match)
            raise
        finally:
            if match is not None:
                self._detach(match, session)

    async def _lobby_ready(self, lobby: Lobby) -> None:
        """Wait for the lobby stream's first event (``subscribed``): from then on nothing is missed
        (the lobby also falls back on the match history, so a slow stream only costs time)."""
        events: asyncio.Queue[gw.WatchLobbyResponse] = lobby.events
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(events.get(), self.config.stall_s)

    async def _create(
        self, adapter: _Adapter, session: PlayerSession, table: asyncio.Future[str]
    ) -> tuple[str, int]:
        async with session.lobby() as lobby:
            await self._lobby_ready(lobby)
            key = new_key()
            created = await self.call(
                "CreateTable",
                lambda: session.create_table(
                    adapter.name,
                    time_control=adapter.time_control,
                    options=adapter.options,
                    idempotency_key=key,
                ),
            )
            table.set_result(created.table_id)
            try:
                ready = await self._wait_ready(lobby, created.table_id)
            except BaseException:
                # Stopped or failed before the match: do not leave an open table in the lobby.
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(session.leave_table(created.table_id), 2)
                raise
        return ready.match_id, ready.seat

    async def _wait_ready(self, lobby: Lobby, table_id: str | None) -> mm.MatchReady:
        try:
            async with asyncio.timeout(self.config.stall_s):
                return await self.call("WatchLobby", lambda: lobby.match_ready(table_id=table_id))
        except TimeoutError:
            raise Stalled("WatchLobby", f"no MatchReady within {self.config.stall_s:g} s") from None

    async def _join(
        self, adapter: _Adapter, session: PlayerSession, table: asyncio.Future[str]
    ) -> tuple[str, int]:
        try:
            async with asyncio.timeout(self.config.stall_s):
                table_id = await asyncio.shield(table)
        except TimeoutError:
            raise Stalled(
                "CreateTable", f"the partner opened no table within {self.config.stall_s:g} s"
            ) from None
        await self.call(
            "ListTables", lambda: session.list_tables(adapter.name, base_ms=adapter.time_control.base_ms)
        )
        # Join the partner's table whether or not this page of the list showed it (many open at once).
        joined = await self.call("JoinTable", lambda: session.join_table(table_id), repeatable=False)
        return joined.match_id, 1

    async def _queue(self, adapter: _Adapter, session: PlayerSession) -> tuple[str, int]:
        async with session.lobby() as lobby:
            await self._lobby_ready(lobby)
            await self.call(
                "EnterQueue",
                lambda: session.enter_queue(
                    adapter.name, time_control=adapter.time_control, options=adapter.options
                ),
                repeatable=False,
            )
            try:
                ready = await self._wait_ready(lobby, None)
            except BaseException:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(session.leave_queue(), 2)
                raise
        return ready.match_id, ready.seat

    def _attach(self, match_id: str, family_name: str, session: PlayerSession, number: int) -> _LiveMatch:
        match = self.live.get(match_id)
        if match is None:
            match = self.live[match_id] = _LiveMatch(match_id, family_name)
            match.counted = self.metrics.match_started(family_name)
        match.pairs.add(number)
        match.players += 1
        match.sessions.append(session)
        return match

    def _detach(self, match: _LiveMatch, session: PlayerSession) -> None:
        match.players -= 1
        with contextlib.suppress(ValueError):
            match.sessions.remove(session)
        if match.players <= 0 and self.live.get(match.match_id) is match:
            del self.live[match.match_id]

    async def _abandon(self, match: _LiveMatch | None) -> None:
        """Resign a match a player could not finish, so that its opponent is not left waiting."""
        if match is None or match.over or not match.sessions:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(match.sessions[0].resign(match.match_id), 5)

    async def _play(
        self,
        adapter: _Adapter,
        session: PlayerSession,
        match: _LiveMatch,
        seat: int,
        began: int,
        rng: random.Random,
    ) -> None:
        config = self.config
        metrics = self.metrics
        strategy = adapter.strategy(rng)
        stream: PlayStream | MatchStream
        if config.transport == "play":
            stream = session.play(match.match_id)
            operation = "Play"
        else:
            stream = session.watch_match(match.match_id)
            operation = "WatchMatch"
        send = self._sender(session, match.match_id, stream)
        updates = aiter(stream)
        first = True
        acted_at = 0
        counted = 0
        try:
            while True:
                try:
                    async with asyncio.timeout(config.stall_s):
                        update = await anext(updates)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise Stalled(
                        operation,
                        f"{match.match_id}: no update for {config.stall_s:g} s "
                        f"after sequence {stream.last_sequence}",
                    ) from None
                now = time.perf_counter_ns()
                if first:
                    first = False
                    metrics.latency(adapter.name, "match_setup", now - began)
                event = update.event
                if event.kind == "action":
                    counted += 1
                if event.kind in _OPPONENT_EVENTS and event.HasField("seat") and event.seat != seat:
                    elapsed = match.observed(update.sequence, now)
                    if elapsed is not None:
                        metrics.latency(adapter.name, "opponent_update", elapsed)
                if is_over(update):
                    if not match.over:
                        match.over = True
                        metrics.match_finished(adapter.name, update.result)
                    return
                if update.sequence < acted_at or not adapter.client.should_act(update, seat):
                    continue  # from before our last action, or nothing for us to do
                action: rules_pb2.Action | None
                if config.max_plies is not None and adapter.plies(update, counted) >= config.max_plies:
                    action = resign_action()
                else:
                    action = strategy(update, seat)
                if action is None:
                    continue
                pace = self.config  # read per move: :meth:`pace` may change it while matches play
                think_ms = pace.think_ms
                if pace.think_jitter_ms:
                    think_ms = max(0.0, think_ms + rng.uniform(-pace.think_jitter_ms, pace.think_jitter_ms))
                if think_ms > 0:
                    await asyncio.sleep(think_ms / 1000)
                submitted = await self._submit(adapter.name, send, match, action)
                if submitted is None:
                    continue
                sequence, call_began = submitted
                acted_at = sequence
                elapsed = match.submitted(sequence, call_began)
                if elapsed is not None:
                    metrics.latency(adapter.name, "opponent_update", elapsed)
        finally:
            metrics.reconnects += stream.reconnects
            stream.close()

    async def before_submit(self, action: rules_pb2.Action) -> None:
        """Called before each action is submitted, outside its timing (a benchmark holding moves back
        until its stack is ready overrides this; waiting here is not counted as the call's latency)."""

    def _sender(
        self, session: PlayerSession, match_id: str, stream: PlayStream | MatchStream
    ) -> Callable[[rules_pb2.Action, str], Awaitable[int]]:
        """How a player sends an action with an idempotency key, for its sequence: on its play stream, or
        (following a match stream) with ``SubmitAction``."""
        if isinstance(stream, PlayStream):
            play = stream
            stall_s = self.config.stall_s

            async def on_the_stream(action: rules_pb2.Action, key: str) -> int:
                try:
                    async with asyncio.timeout(stall_s):
                        return await play.submit(action, idempotency_key=key)
                except TimeoutError:
                    raise Stalled("SubmitAction", f"{match_id}: no answer for {stall_s:g} s") from None

            return on_the_stream

        async def unary(action: rules_pb2.Action, key: str) -> int:
            return (await session.submit(match_id, action, idempotency_key=key)).sequence

        return unary

    async def _submit(
        self,
        family_name: str,
        send: Callable[[rules_pb2.Action, str], Awaitable[int]],
        match: _LiveMatch,
        action: rules_pb2.Action,
    ) -> tuple[int, int] | None:
        """Submit ``action`` with ``send`` (:meth:`_sender`); the sequence it was given and when the
        successful attempt was sent (``None``: refused as stale, the match moved on meanwhile)."""
        await self.before_submit(action)
        key = new_key()
        limited = 0
        outage = OutageTolerance(self.config.outage_s)
        while True:
            began = time.perf_counter_ns()
            try:
                sequence = await send(action, key)
            except GatewayError as error:
                if error.reason == "MATCH_OVER" and match.over:
                    return None  # the harness resigned it meanwhile (the run or the pair stopped)
                self.metrics.error("SubmitAction", error_label(error))
                if (
                    error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
                    and limited < self.config.rate_limit_attempts
                ):
                    limited += 1
                    await asyncio.sleep(exhausted_wait_s(error))
                    continue
                wait = outage.wait_after(error)  # the idempotency key makes the repeat safe
                if wait is not None:
                    await asyncio.sleep(wait)
                    continue
                if error.code == grpc.StatusCode.FAILED_PRECONDITION:
                    return None
                raise
            self.metrics.latency(family_name, "submit_action", time.perf_counter_ns() - began)
            return sequence, began

    def unfinished(self, pair: int | None = None) -> list[tuple[_LiveMatch, PlayerSession]]:
        """The matches being played now (of pair ``pair``, or all), each with a session seated in it,
        to :meth:`cut` them."""
        return [
            (match, match.sessions[0])
            for match in self.live.values()
            if not match.over and match.sessions and (pair is None or pair in match.pairs)
        ]

    def stop_pair(self, number: int) -> list[tuple[_LiveMatch, PlayerSession]]:
        """Stop pair ``number``: its matches to :meth:`cut` now; one it begins later is cut at once."""
        self._stopped_pairs.add(number)
        return self.unfinished(number)

    def stop_all(self) -> list[tuple[_LiveMatch, PlayerSession]]:
        """Stop every pair: the matches to :meth:`cut` now; those that begin later are cut at once."""
        self.stopping = True
        return self.unfinished()

    async def cut(self, unfinished: list[tuple[_LiveMatch, PlayerSession]], timeout_s: float) -> int:
        """Resign ``unfinished`` matches (the run stopped); returns how many were cut."""
        pending = [(match, session) for match, session in unfinished if not match.over]
        for match, _ in pending:
            match.over = True
            if match.counted:
                self.metrics.match_cut(match.family)

        async def resign(match: _LiveMatch, session: PlayerSession) -> None:
            with contextlib.suppress(Exception):
                await session.resign(match.match_id)

        if pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*(resign(*item) for item in pending), return_exceptions=True), timeout_s
                )
        return len(pending)


# -- schedules -------------------------------------------------------------------------------------------


def arrival_time(k: float, rate: float, ramp_up_s: float) -> float:
    """When the ``k``-th arrival (counted from 0, fractional for Poisson) is due, in seconds from the
    start, for a rate that rises linearly from 0 to ``rate`` over ``ramp_up_s`` and then stays:
    the inverse of the expected count ``N(t) = rate t² / 2R`` (t ≤ R), ``rate (t - R/2)`` after."""
    if ramp_up_s <= 0:
        return k / rate
    ramped = rate * ramp_up_s / 2
    if k <= ramped:
        return math.sqrt(2 * ramp_up_s * k / rate)
    return k / rate + ramp_up_s / 2


class _WeightedRoundRobin:
    """Families in proportion to their weights, spread evenly (smooth weighted round robin)."""

    def __init__(self, weights: Mapping[str, int]) -> None:
        self.weights = dict(weights)
        self.current = dict.fromkeys(weights, 0)
        self.total = sum(weights.values())

    def next(self) -> str:
        for name, weight in self.weights.items():
            self.current[name] += weight
        chosen = max(self.current, key=lambda name: self.current[name])
        self.current[chosen] -= self.total
        return chosen


@dataclass
class RunResult:
    """A finished run: what it was, what it measured, and what the services used."""

    config: LoadConfig
    metrics: Metrics
    started_at: float
    """Unix seconds."""
    elapsed_s: float
    """The measured window: from the start to the stop."""
    stopped_by: str
    """``duration``, ``matches``, ``interrupted`` or ``error``."""
    services: list[ServiceUsage]
    generator: ServiceUsage | None
    """This process (the load generator itself)."""
    loop_lag: Histogram
    """How late the generator's event loop ran a 100 ms timer (µs): its own queueing."""
    notes: list[str] = field(default_factory=list)


class LoadRun:
    """One run: the engine, the schedule, progress lines, the stop, the result.

    ``services``: process ids by service name to report CPU and memory for (see
    :mod:`clients.load.procstat`)."""

    def __init__(
        self,
        config: LoadConfig,
        *,
        tokens: Callable[[str], str] | None = None,
        services: Mapping[str, int] | None = None,
        progress: TextIO | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.metrics = metrics or Metrics(plan.name for plan in config.families)
        self.tokens = tokens
        self.progress = progress if progress is not None else sys.stderr
        self.services = dict(services or {})
        self._stop = asyncio.Event()
        self._stopped_by = ""
        self._claimed = 0
        self._ended = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = 0.0
        self._loop_lag = Histogram()
        self._last_actions = 0
        self._last_tick = 0.0
        self._notes: list[str] = []

    def request_stop(self, reason: str = "interrupted") -> None:
        """Stop the run now (Ctrl-C); the report still covers what ran."""
        if not self._stop.is_set():
            self._stopped_by = reason
            self._stop.set()

    async def run(self) -> RunResult:
        config = self.config
        tokens = self.tokens or TokenMinter()
        monitor = ProcessMonitor(self.services, include_self=True)
        started_at = time.time()
        async with Engine(config, self.metrics, tokens) as engine:
            await engine.probe()
            monitor.start()
            self._started = self._last_tick = time.monotonic()
            helpers = [
                asyncio.create_task(self._watch_lag(), name="loop-lag"),
                asyncio.create_task(self._sample(monitor), name="process-samples"),
            ]
            if config.progress_s > 0:
                helpers.append(asyncio.create_task(self._report_progress(engine), name="progress"))
            schedule = asyncio.create_task(
                self._open_loop(engine) if config.mode == "open" else self._closed_loop(engine),
                name="schedule",
            )
            try:
                await self._wait_for_stop(engine)
            finally:
                self.metrics.recording = False
                elapsed = time.monotonic() - self._started
                self._stop.set()
                schedule.cancel()
                await asyncio.gather(schedule, return_exceptions=True)
                await self._wind_down(engine)
                cut = self.metrics.total("cut")
                if cut:
                    self._notes.append(f"{cut} matches still being played at the stop were resigned (cut)")
                for helper in helpers:
                    helper.cancel()
                await asyncio.gather(*helpers, return_exceptions=True)
                usages = monitor.finish()
        if engine.fatal is not None:
            self._notes.append(f"stopped early: {engine.fatal}")
        return RunResult(
            config=config,
            metrics=self.metrics,
            started_at=started_at,
            elapsed_s=elapsed,
            stopped_by=self._stopped_by or "duration",
            services=[usage for usage in usages if usage.name != ProcessMonitor.SELF],
            generator=next((usage for usage in usages if usage.name == ProcessMonitor.SELF), None),
            loop_lag=self._loop_lag,
            notes=self._notes,
        )

    async def _wind_down(self, engine: Engine) -> None:
        """Resign the matches still being played and let their players end on the final update; pairs
        still pairing after that are cancelled (then whatever began meanwhile is resigned too)."""
        deadline = time.monotonic() + self.config.drain_s
        unfinished = engine.stop_all()
        for _ in range(2):
            await engine.cut(unfinished, max(0.5, deadline - time.monotonic()))
            tasks = list(self._tasks)
            if not tasks:
                return
            await asyncio.wait(tasks, timeout=max(0.5, min(3.0, deadline - time.monotonic())))
            unfinished = engine.unfinished()
        unfinished = engine.unfinished()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await engine.cut(unfinished, max(0.5, deadline - time.monotonic()))

    async def _wait_for_stop(self, engine: Engine) -> None:
        timeout = self.config.duration_s
        try:
            await asyncio.wait_for(self._stop.wait(), timeout)
        except TimeoutError:
            self._stopped_by = "duration"
        if engine.fatal is not None:
            self._stopped_by = "error"

    # Schedules.

    def _claim(self) -> bool:
        if self._stop.is_set():
            return False
        if self.config.matches is not None and self._claimed >= self.config.matches:
            return False
        self._claimed += 1
        return True

    def _pair_ended(self, engine: Engine) -> None:
        self._ended += 1
        if engine.fatal is not None:
            self.request_stop("error")
        elif self.config.matches is not None and self._ended >= self.config.matches:
            self.request_stop("matches")

    async def _closed_loop(self, engine: Engine) -> None:
        order: list[str] = []
        robin = _WeightedRoundRobin({plan.name: plan.concurrency for plan in self.config.families})
        for _ in range(self.config.total_concurrency):
            order.append(robin.next())
        total = len(order)
        for index, name in enumerate(order):
            delay = self.config.ramp_up_s * index / total
            self._spawn(self._slot(engine, name, delay), f"slot-{index}")

    async def _slot(self, engine: Engine, family_name: str, delay_s: float) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        while self._claim():
            await engine.play_pair(family_name)
            self._pair_ended(engine)

    async def _open_loop(self, engine: Engine) -> None:
        config = self.config
        robin = _WeightedRoundRobin({plan.name: plan.concurrency for plan in config.families})
        rng = random.Random(config.seed)
        operational = 0.0
        arrival = 0
        loop = asyncio.get_running_loop()
        begin = loop.time()
        while not self._stop.is_set():
            due = begin + arrival_time(operational, config.rate, config.ramp_up_s)
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            name = robin.next()
            if len(self._tasks) >= config.max_in_flight:
                if self.metrics.recording:
                    self.metrics.dropped += 1
            elif self._claim():
                self._spawn(self._arrival(engine, name), f"arrival-{arrival}")
            else:
                return
            arrival += 1
            operational += rng.expovariate(1.0) if config.poisson else 1.0

    async def _arrival(self, engine: Engine, family_name: str) -> None:
        await engine.play_pair(family_name)
        self._pair_ended(engine)

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # Helpers.

    async def _watch_lag(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            expected = loop.time() + 0.1
            await asyncio.sleep(0.1)
            self._loop_lag.record(int(max(0.0, loop.time() - expected) * 1_000_000))

    async def _sample(self, monitor: ProcessMonitor) -> None:
        while True:
            await asyncio.sleep(1.0)
            monitor.sample()

    async def _report_progress(self, engine: Engine) -> None:
        while True:
            await asyncio.sleep(self.config.progress_s)
            if not self.metrics.recording:
                return
            print(self.progress_line(engine), file=self.progress, flush=True)

    def progress_line(self, engine: Engine) -> str:
        """One line: the time, matches, the action rate over the last interval, its latencies."""
        metrics = self.metrics
        now = time.monotonic()
        actions = metrics.total("actions")
        interval = max(1e-9, now - self._last_tick)
        rate = (actions - self._last_actions) / interval
        self._last_actions, self._last_tick = actions, now
        submit = metrics.interval["submit_action"].percentiles((50.0, 99.0))
        opponent = metrics.interval["opponent_update"].percentiles((50.0, 99.0))
        for histogram in metrics.interval.values():
            histogram.reset()
        errors = sum(metrics.errors.values())
        return (
            f"[{now - self._started:6.1f} s] matches {metrics.total('started')} started, "
            f"{metrics.total('finished')} finished, {len(engine.live)} live, {metrics.total('failed')} failed"
            f" | {actions} actions, {rate:.0f}/s"
            f" | submit p50 {submit[50.0] / 1000:.1f} p99 {submit[99.0] / 1000:.1f} ms"
            f" | opponent p50 {opponent[50.0] / 1000:.1f} p99 {opponent[99.0] / 1000:.1f} ms"
            f" | errors {errors}"
        )


async def run_load(
    config: LoadConfig,
    *,
    tokens: Callable[[str], str] | None = None,
    services: Mapping[str, int] | None = None,
    progress: TextIO | None = None,
) -> RunResult:
    """Run ``config`` to its stop and return the result (:class:`LoadRun`)."""
    return await LoadRun(config, tokens=tokens, services=services, progress=progress).run()
