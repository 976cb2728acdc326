"""The game's own Prometheus metrics: what operators watch beside the per-RPC ones
(docs/deployment.md, "Game metrics").

Every metric is declared here once, with what it counts and when; the code that moves it binds its label
children once (per match shard, per family) so that the hot path of a match (libs/match/actor.py) does
no label lookup and allocates nothing per action. :data:`GAME_METRIC_NAMES` lists every metric the
platform exports, as Prometheus exposes them (counters with ``_total``, histograms by their base name), so
that dashboards, alert rules and tests can check the names against one list.
"""

from __future__ import annotations

import importlib.metadata
import weakref
from collections.abc import Callable
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

FALLBACK_VERSION = "0.1.0"
"""The version in pyproject.toml, for a source tree that is not installed."""


def platform_version() -> str:
    """The installed version of the platform (the distribution ``skillclassics``, else its actual name
    ``skillclassics-platform``), or :data:`FALLBACK_VERSION`."""
    for distribution in ("skillclassics", "skillclassics-platform"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return FALLBACK_VERSION


BUILD_INFO = Gauge(
    "skillclassics_build_info",
    "Constant 1, labelled with the service's name and the platform's version (set when the service "
    "starts serving).",
    ["service", "version"],
)
"""1 for each service process, with its version: ``count by (version)`` shows a rollout's progress."""

# -- rules shards (libs/match) --------------------------------------------------------------------------

MATCHES_LIVE = Gauge(
    "skillclassics_matches_live",
    "Matches a rules shard holds now that are not over: live, or waiting for their first move.",
    ["family", "shard"],
)
"""Up when a shard creates a match or recovers an unfinished one from its log, down when the match's end
is logged or the shard closes (shutdown, or its ownership lost: the shard that takes over counts them)."""
MATCHES_FINISHED = Counter(
    "skillclassics_matches_finished_total",
    "Matches that ended, by termination (libs/engines/base.py Termination: checkmate, timeout, "
    "disconnect_forfeit, aborted for a no-show, resignation, ...), counted when the end is durably logged.",
    ["family", "termination"],
)
"""Once per match, when the event that ends it is committed by the shard; never again when a restarted
shard replays the log."""
ACTIONS = Counter(
    "skillclassics_actions_total",
    "Actions accepted and durably logged (the players' actions and resignations, and the stand-ins' "
    "actions), by family.",
    ["family"],
)
"""Each action or resignation event once it is committed (a retry answered from the log is not counted
again; an action refused is not counted)."""
FIRST_MOVE_SECONDS = Histogram(
    "skillclassics_first_move_seconds",
    "From a match's creation (its table filled, or its pair made) to its first move.",
    ["family"],
    buckets=(0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0),
)
"""Observed when the first move of the game is committed; a match aborted for a no-show has none."""
RESULT_OUTBOX_BACKLOG = Gauge(
    "skillclassics_result_outbox_backlog",
    "Finished matches of a rules shard whose result is not yet delivered to every recipient (fairness, "
    "matchmaking): the result outbox (libs/match/reporting.py).",
    ["family", "shard"],
)
"""Set after each delivery pass of the shard's reporter: the results still undelivered (a recipient down
or refusing). Zero when every result reached everyone."""

# -- matchmaking ----------------------------------------------------------------------------------------

QUEUE_DEPTH = Gauge(
    "skillclassics_queue_depth",
    "Players waiting in the quick-match queue, by family.",
    ["family"],
)
"""Read when scraped, from the matchmaker's queue in memory (players being paired right now included)."""
PAIRING_WAIT_SECONDS = Histogram(
    "skillclassics_pairing_wait_seconds",
    "How long a player paired from the quick-match queue had waited in it, by family.",
    ["family"],
    buckets=(0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0),
)
"""Observed for each of the two players of a pair once the pair's match is stored."""

# -- fairness -------------------------------------------------------------------------------------------

FAIRNESS_DRAWS = Counter(
    "skillclassics_fairness_draws_total",
    "Draws the fairness service issued, by kind (dice, integer, coin, shuffle); a retry of a draw already "
    "issued is not counted again.",
    ["kind"],
)
"""One per draw newly issued (a draw of several dice counts once)."""
FAIRNESS_REVEALS = Counter(
    "skillclassics_fairness_reveals_total",
    "Matches whose fairness stream was finished at their end, from when their server seed may be revealed.",
)
"""Once per match, when ``Finish`` moves its stream to ``finished`` (a repeated ``Finish`` is not
counted)."""

# -- clock ----------------------------------------------------------------------------------------------

CLOCK_TIMERS_ARMED = Gauge(
    "skillclassics_clock_timers_armed",
    "Timers the clock service holds now: armed, or fired and waiting for their owner's acknowledgement.",
)
"""Read when scraped, from the schedulers in memory."""
CLOCK_EXPIRY_LATENESS_SECONDS = Histogram(
    "skillclassics_clock_expiry_lateness_seconds",
    "How late each timer fired, relative to its due instant (timers due while the service was down fire "
    "at its start, as late as the outage).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
"""Observed for each timer as it fires."""

GAME_METRIC_NAMES: tuple[str, ...] = (
    # libs/runtime/metrics.py: every service
    "grpc_server_started_total",
    "grpc_server_handled_total",
    "grpc_server_handling_seconds",
    "grpc_server_in_flight",
    "skillclassics_rpc_refused_total",
    "skillclassics_rpc_undecodable_total",
    "skillclassics_service_info",
    "skillclassics_stream_calls_handled_total",
    "skillclassics_stream_call_seconds",
    "skillclassics_group_commit_seconds",
    "skillclassics_group_commit_units",
    # services/gateway/limits.py
    "skillclassics_gateway_shed_total",
    "skillclassics_gateway_in_flight",
    # this module
    "skillclassics_build_info",
    "skillclassics_matches_live",
    "skillclassics_matches_finished_total",
    "skillclassics_actions_total",
    "skillclassics_first_move_seconds",
    "skillclassics_result_outbox_backlog",
    "skillclassics_queue_depth",
    "skillclassics_pairing_wait_seconds",
    "skillclassics_fairness_draws_total",
    "skillclassics_fairness_reveals_total",
    "skillclassics_clock_timers_armed",
    "skillclassics_clock_expiry_lateness_seconds",
)
"""Every metric the platform's services export, as Prometheus names them."""


class MatchMetrics:
    """The rules-shard metrics of one family and shard, their label children bound once."""

    def __init__(self, family: str, shard: int | str) -> None:
        self.family = family
        self.live = MATCHES_LIVE.labels(family, str(shard))
        self.actions = ACTIONS.labels(family)
        self.first_move = FIRST_MOVE_SECONDS.labels(family)
        self.outbox_backlog = RESULT_OUTBOX_BACKLOG.labels(family, str(shard))
        self._finished: dict[str, Counter] = {}

    def finished(self, termination: str) -> None:
        """One match of the family ended with ``termination`` (its end just committed)."""
        child = self._finished.get(termination)
        if child is None:
            child = self._finished[termination] = MATCHES_FINISHED.labels(self.family, termination)
        child.inc()


class ScrapedSum:
    """A gauge child read when scraped: the sum of a reading over every live source registered (several
    services of a kind may run in one process, as in the tests; a closed one is withdrawn)."""

    def __init__(self, gauge: Gauge, read: Callable[[Any], float]) -> None:
        self._sources: weakref.WeakSet[Any] = weakref.WeakSet()
        self._read = read
        gauge.set_function(self._total)

    def _total(self) -> float:
        return float(sum(self._read(source) for source in list(self._sources)))

    def add(self, source: Any) -> None:
        self._sources.add(source)

    def discard(self, source: Any) -> None:
        self._sources.discard(source)
