"""The monitoring under ``deploy/``: alerts, ServiceMonitors and the Grafana dashboard, checked against the
metrics the services export and the manifests they scrape.

- every YAML and JSON file parses; the PrometheusRule of ``deploy/k8s/components/monitoring`` carries
  exactly the groups of the plain rule file ``deploy/monitoring/prometheus/rules.yml``;
- every alert has a severity, a summary, a description and a runbook_url into docs/operations.md whose
  anchor exists;
- every PromQL expression (the alerts' and the dashboard's) is parsed here (:func:`parse_promql`: balanced
  brackets, known functions, aggregations and keywords, well-formed selectors), and every metric it reads is
  one the services export (:data:`METRICS`, which must agree with ``GAME_METRIC_NAMES`` of
  ``libs/runtime/game_metrics.py`` and with the collectors of the code), with only that metric's labels (or
  the scrape's target labels) in its selectors and groupings;
- the ServiceMonitors and the PrometheusRule are checked against the parts of the Prometheus Operator's CRD
  schemas they use (the Kubernetes schemas of tests/deploy/test_production.py have no CRDs), and the
  ServiceMonitors scrape every service's metrics port exactly once, through the base's Services;
- with ``promtool`` installed (Debian's package ``prometheus``), ``promtool check rules`` on both rule sets
  and on the dashboard's expressions, and ``promtool test rules`` on the alerts' unit tests; without it those
  are skipped with a message (the rest always runs).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from libs.runtime.ports import DEFAULT_PORTS

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
RULES_FILE = MONITORING / "prometheus" / "rules.yml"
RULES_TESTS = MONITORING / "prometheus" / "rules.test.yml"
SCRAPE_CONFIG = MONITORING / "prometheus" / "scrape-config.yml"
DASHBOARD = MONITORING / "grafana" / "skillclassics.json"
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
COMPONENT = K8S / "components" / "monitoring"
PRODUCTION = K8S / "overlays" / "prod"
OPERATIONS = ROOT / "docs" / "operations.md"
NAMESPACE = "skillclassics"

Doc = dict[str, Any]


# -- what the services export --------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    kind: str
    """counter, gauge or histogram (read as <name>_bucket, _sum and _count)."""
    labels: frozenset[str]
    game: bool = False
    """Declared in ``GAME_METRIC_NAMES`` of libs/runtime/game_metrics.py (the others predate it)."""


def _m(kind: str, *labels: str, game: bool = False) -> Metric:
    return Metric(kind, frozenset(labels), game)


METRICS: dict[str, Metric] = {
    "skillclassics_build_info": _m("gauge", "service", "version", game=True),
    "skillclassics_matches_live": _m("gauge", "family", "shard", game=True),
    "skillclassics_matches_finished_total": _m("counter", "family", "termination", game=True),
    "skillclassics_actions_total": _m("counter", "family", game=True),
    "skillclassics_first_move_seconds": _m("histogram", "family", game=True),
    "skillclassics_queue_depth": _m("gauge", "family", game=True),
    "skillclassics_pairing_wait_seconds": _m("histogram", "family", game=True),
    "skillclassics_fairness_draws_total": _m("counter", "kind", game=True),
    "skillclassics_fairness_reveals_total": _m("counter", game=True),
    "skillclassics_clock_timers_armed": _m("gauge", game=True),
    "skillclassics_clock_expiry_lateness_seconds": _m("histogram", game=True),
    "skillclassics_result_outbox_backlog": _m("gauge", "family", "shard", game=True),
    "skillclassics_group_commit_seconds": _m("histogram", "stage"),
    "grpc_server_handled_total": _m("counter", "grpc_service", "grpc_method", "grpc_type", "grpc_code"),
    "grpc_server_handling_seconds": _m("histogram", "grpc_service", "grpc_method", "grpc_type"),
    "grpc_server_started_total": _m("counter", "grpc_service", "grpc_method", "grpc_type"),
    "skillclassics_gateway_shed_total": _m("counter", "priority", "kind"),
    "skillclassics_service_info": _m("gauge", "service"),
    "up": _m("gauge"),
}
"""The metrics the alerts and the dashboard may read, with their labels: the contract with the services'
code, which :func:`test_the_contract_is_what_the_services_export` holds them to."""

TARGET_LABELS = frozenset({"job", "instance", "namespace", "pod"})
"""Labels Prometheus attaches to every series of a target: the ServiceMonitors of components/monitoring
and deploy/monitoring/prometheus/scrape-config.yml both set them (``job`` = the pod's
app.kubernetes.io/name). The Operator's ``service`` target label is dropped by the ServiceMonitors, so
that ``service`` is the services' own label."""

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

COLLECTOR_MODULES = ("libs.runtime.metrics", "services.gateway.limits", "libs.runtime.game_metrics")
"""Where the collectors of :data:`METRICS` live."""


def series_metric(name: str) -> tuple[str, Metric] | None:
    """The metric a series name belongs to (``x_bucket`` to histogram ``x``), if it is one we export."""
    if name in METRICS and METRICS[name].kind != "histogram":
        return name, METRICS[name]
    for suffix in HISTOGRAM_SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and base in METRICS and METRICS[base].kind == "histogram":
            return base, METRICS[base]
    return None


def _game_metric_names() -> tuple[str, ...]:
    try:
        from libs.runtime import game_metrics
    except ImportError as error:
        pytest.fail(
            "libs/runtime/game_metrics.py cannot be imported, so the metrics the alerts and the Grafana "
            f"dashboard read cannot be checked against what the services export ({error}). It must define "
            "the tuple GAME_METRIC_NAMES naming " + ", ".join(n for n, m in METRICS.items() if m.game)
        )
    names = getattr(game_metrics, "GAME_METRIC_NAMES", None)
    if not isinstance(names, tuple) or not all(isinstance(name, str) for name in names):
        pytest.fail("libs/runtime/game_metrics.py must define GAME_METRIC_NAMES, a tuple of metric names")
    return names


@dataclass(frozen=True)
class Collected:
    kind: str
    labels: frozenset[str]
    module: str


def _collectors() -> dict[str, Collected]:
    """The prometheus_client collectors defined at module level in :data:`COLLECTOR_MODULES`, by the name
    they export (a counter's with ``_total``)."""
    import importlib

    from prometheus_client.metrics import MetricWrapperBase

    found: dict[str, Collected] = {}
    for module_name in COLLECTOR_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue  # game_metrics: reported by _game_metric_names
        for value in vars(module).values():
            if not isinstance(value, MetricWrapperBase):
                continue
            kind = str(getattr(value, "_type", ""))
            name = str(getattr(value, "_name", ""))
            labels = frozenset(getattr(value, "_labelnames", ()))
            if kind == "counter":
                name += "_total"
            elif kind == "info":
                name += "_info"
                kind = "gauge"
                labels = frozenset()  # the info's keys are labels too: not checked
            found[name] = Collected(kind, labels, module_name)
    return found


def test_the_contract_is_what_the_services_export() -> None:
    """Every metric of :data:`METRICS` is exported: the game metrics are in ``GAME_METRIC_NAMES``, the
    others are collectors of the runtime or the gateway; where the collector is found, its type and labels
    are the contract's."""
    game_names = set(_game_metric_names())
    collected = _collectors()
    for name, metric in METRICS.items():
        if name == "up":
            continue  # Prometheus's own
        if metric.game:
            assert name in game_names or f"{name}_bucket" in game_names, (
                f"{name} is not in GAME_METRIC_NAMES of libs/runtime/game_metrics.py: the alerts and the "
                "dashboard read it"
            )
        else:
            assert name in collected or name in game_names, (
                f"{name}: no collector of {', '.join(COLLECTOR_MODULES)} exports it any more"
            )
        if name in collected:
            found = collected[name]
            assert found.kind == metric.kind, (
                f"{name} is a {found.kind} in {found.module}, not a {metric.kind}"
            )
            if found.kind != "gauge" or found.labels or metric.labels:
                assert found.labels == metric.labels, (
                    f"{name} has the labels {sorted(found.labels)} in {found.module}, the alerts and the "
                    f"dashboard expect {sorted(metric.labels)}"
                )


# -- PromQL --------------------------------------------------------------------------------------------

FUNCTIONS = frozenset(
    [
        "abs",
        "absent",
        "absent_over_time",
        "avg_over_time",
        "ceil",
        "changes",
        "clamp",
        "clamp_max",
        "clamp_min",
        "count_over_time",
        "day_of_month",
        "day_of_week",
        "day_of_year",
        "days_in_month",
        "delta",
        "deriv",
        "exp",
        "floor",
        "histogram_count",
        "histogram_fraction",
        "histogram_quantile",
        "histogram_sum",
        "holt_winters",
        "hour",
        "idelta",
        "increase",
        "irate",
        "label_join",
        "label_replace",
        "last_over_time",
        "ln",
        "log10",
        "log2",
        "max_over_time",
        "min_over_time",
        "minute",
        "month",
        "predict_linear",
        "present_over_time",
        "quantile_over_time",
        "rate",
        "resets",
        "round",
        "scalar",
        "sgn",
        "sort",
        "sort_desc",
        "sqrt",
        "stddev_over_time",
        "stdvar_over_time",
        "sum_over_time",
        "time",
        "timestamp",
        "vector",
        "year",
    ]
)
AGGREGATIONS = frozenset(
    [
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
    ]
)
GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
SET_OPERATORS = frozenset({"and", "or", "unless"})
RANGE_FUNCTIONS = frozenset(name for name in FUNCTIONS if name.endswith("_over_time")) | {
    "rate",
    "irate",
    "increase",
    "delta",
    "idelta",
    "deriv",
    "changes",
    "resets",
    "predict_linear",
    "holt_winters",
}
BINARY = frozenset({"+", "-", "*", "/", "%", "^", "==", "!=", "<=", ">=", "<", ">"})
COMPARISONS = frozenset({"==", "!=", "<=", ">=", "<", ">"})
MATCH_OPERATORS = frozenset({"=", "!=", "=~", "!~"})
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<duration>[0-9]+(?:ms|s|m|h|d|w|y)(?:[0-9]+(?:ms|s|m|h|d|w|y))*(?![A-Za-z0-9_]))
  | (?P<number>(?:[0-9]*\.[0-9]+|[0-9]+\.?)(?:[eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|Inf|NaN)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|==|!=|<=|>=|[-+*/%^<>=])
  | (?P<punct>[(){}\[\],:@])
    """,
    re.VERBOSE,
)


@dataclass
class Token:
    kind: str
    text: str
    at: int


def tokenize(expr: str) -> list[Token]:
    tokens: list[Token] = []
    at = 0
    while at < len(expr):
        found = _TOKEN.match(expr, at)
        if found is None:
            raise PromQLError(f"unexpected character {expr[at]!r} at {at}")
        kind = found.lastgroup or ""
        if kind not in ("space", "comment"):
            tokens.append(Token(kind, found.group(), at))
        at = found.end()
    return tokens


class PromQLError(ValueError):
    pass


@dataclass
class Selector:
    metric: str
    matchers: list[tuple[str, str, str]]
    """(label, operator, value)."""
    range: str | None = None


@dataclass
class Parsed:
    selectors: list[Selector] = field(default_factory=list)
    grouping: list[tuple[str, list[str]]] = field(default_factory=list)
    """(keyword, labels) of every by/without/on/ignoring/group_left/group_right clause."""
    functions: list[str] = field(default_factory=list)


class _Parser:
    """A recursive-descent parser of the PromQL we write: precedence climbing over binary operators, with
    aggregations, function calls, selectors, ranges, subqueries, offsets and vector matching. It knows the
    grammar well enough to refuse what Prometheus refuses in the shapes we use; it checks no types beyond
    "a range function takes a range"."""

    PRECEDENCE = (
        ("or",),
        ("and", "unless"),
        ("==", "!=", "<=", ">=", "<", ">"),
        ("+", "-"),
        ("*", "/", "%", "atan2"),
        ("^",),
    )

    def __init__(self, expr: str) -> None:
        self.tokens = tokenize(expr)
        self.i = 0
        self.out = Parsed()

    # helpers
    def peek(self, offset: int = 0) -> Token | None:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def at(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token.text == text and token.kind != "string"

    def take(self, text: str | None = None, kind: str | None = None) -> Token:
        token = self.peek()
        if token is None:
            raise PromQLError(f"unexpected end, expected {text or kind}")
        if (text is not None and (token.text != text or token.kind == "string")) or (
            kind is not None and token.kind != kind
        ):
            raise PromQLError(f"expected {text or kind} at {token.at}, found {token.text!r}")
        self.i += 1
        return token

    def parse(self) -> Parsed:
        if not self.tokens:
            raise PromQLError("empty expression")
        self.expression(0)
        if self.peek() is not None:
            token = self.peek()
            assert token is not None
            raise PromQLError(f"unexpected {token.text!r} at {token.at}")
        return self.out

    # grammar
    def expression(self, level: int) -> str:
        """Parses one expression of precedence ``level`` or tighter; returns its type: scalar, vector,
        range or string."""
        if level == len(self.PRECEDENCE):
            return self.unary()
        left = self.expression(level + 1)
        while True:
            token = self.peek()
            if token is None or token.kind == "string" or token.text not in self.PRECEDENCE[level]:
                return left
            operator = self.take().text
            if operator in COMPARISONS and self.at("bool"):
                self.take("bool")
            self.vector_matching()
            right = self.expression(level + 1 if operator != "^" else level)
            if operator in SET_OPERATORS and "scalar" in (left, right):
                raise PromQLError(f"{operator} needs vectors on both sides")
            if "range" in (left, right) or "string" in (left, right):
                raise PromQLError(f"{operator} on a range vector or a string")
            left = "scalar" if left == right == "scalar" else "vector"

    def vector_matching(self) -> None:
        if self.at("on") or self.at("ignoring"):
            keyword = self.take().text
            self.out.grouping.append((keyword, self.label_list()))
            if self.at("group_left") or self.at("group_right"):
                keyword = self.take().text
                labels = self.label_list() if self.at("(") else []
                self.out.grouping.append((keyword, labels))

    def label_list(self) -> list[str]:
        self.take("(")
        labels: list[str] = []
        while not self.at(")"):
            labels.append(self.take(kind="ident").text)
            if not self.at(")"):
                self.take(",")
        self.take(")")
        return labels

    def unary(self) -> str:
        if self.at("-") or self.at("+"):
            self.take()
            kind = self.unary()
            if kind in ("range", "string"):
                raise PromQLError("unary minus on a range vector or a string")
            return kind
        return self.postfix(self.primary())

    def postfix(self, kind: str) -> str:
        while True:
            if self.at("["):
                if kind != "vector":
                    raise PromQLError("a range or subquery of something that is not an instant vector")
                self.take("[")
                self.take(kind="duration")
                if self.at(":"):
                    self.take(":")
                    if not self.at("]"):
                        self.take(kind="duration")
                self.take("]")
                kind = "range"
            elif self.at("offset"):
                self.take("offset")
                if self.at("-"):
                    self.take("-")
                self.take(kind="duration")
            elif self.at("@"):
                self.take("@")
                token = self.take()
                if token.kind != "number" and token.text not in ("start", "end"):
                    raise PromQLError(f"@ needs a time, found {token.text!r}")
                if token.text in ("start", "end"):
                    self.take("(")
                    self.take(")")
            else:
                return kind

    def primary(self) -> str:
        token = self.peek()
        if token is None:
            raise PromQLError("unexpected end of expression")
        if token.text == "(" and token.kind == "punct":
            self.take("(")
            kind = self.expression(0)
            self.take(")")
            return kind
        if token.kind == "number":
            self.take()
            return "scalar"
        if token.kind == "string":
            self.take()
            return "string"
        if token.kind == "duration":
            raise PromQLError(f"a duration {token.text!r} where a value was expected, at {token.at}")
        if token.text == "{":
            raise PromQLError(f"a selector without a metric name at {token.at}: name the metric")
        if token.kind != "ident":
            raise PromQLError(f"unexpected {token.text!r} at {token.at}")
        name = token.text
        following = self.peek(1)
        opens = following is not None and following.text == "(" and following.kind == "punct"
        if name in AGGREGATIONS and (
            opens or (following is not None and following.text in ("by", "without"))
        ):
            return self.aggregation()
        if opens:
            return self.call()
        if name in GROUPING | SET_OPERATORS | {"bool", "offset", "atan2"}:
            raise PromQLError(f"the keyword {name!r} where a value was expected, at {token.at}")
        return self.selector()

    def aggregation(self) -> str:
        name = self.take(kind="ident").text
        if self.at("by") or self.at("without"):
            keyword = self.take().text
            self.out.grouping.append((keyword, self.label_list()))
            self.arguments(name, aggregation=True)
        else:
            self.arguments(name, aggregation=True)
            if self.at("by") or self.at("without"):
                keyword = self.take().text
                self.out.grouping.append((keyword, self.label_list()))
        return "vector"

    def call(self) -> str:
        token = self.take(kind="ident")
        name = token.text
        if name not in FUNCTIONS:
            raise PromQLError(f"unknown function {name!r} at {token.at}")
        self.out.functions.append(name)
        kinds = self.arguments(name, aggregation=False)
        if name in RANGE_FUNCTIONS and (not kinds or kinds[0] != "range"):
            raise PromQLError(f"{name} takes a range vector, as in {name}(metric[5m])")
        if name == "histogram_quantile" and (len(kinds) != 2 or kinds[0] != "scalar" or kinds[1] != "vector"):
            raise PromQLError("histogram_quantile(φ, vector)")
        if name in ("time", "scalar", "pi"):
            return "scalar"
        return "vector"

    def arguments(self, name: str, aggregation: bool) -> list[str]:
        self.take("(")
        kinds: list[str] = []
        while not self.at(")"):
            kinds.append(self.expression(0))
            if not self.at(")"):
                self.take(",")
        self.take(")")
        if aggregation:
            expected = 2 if name in ("count_values", "bottomk", "topk", "quantile") else 1
            if len(kinds) != expected:
                raise PromQLError(f"{name} takes {expected} argument(s), got {len(kinds)}")
            if kinds[-1] != "vector":
                raise PromQLError(f"{name} aggregates an instant vector")
        return kinds

    def selector(self) -> str:
        name = self.take(kind="ident").text
        matchers: list[tuple[str, str, str]] = []
        if self.at("{"):
            self.take("{")
            while not self.at("}"):
                label = self.take(kind="ident").text
                operator = self.take(kind="op").text
                if operator not in MATCH_OPERATORS:
                    raise PromQLError(f"{label}{operator}: not a label matcher")
                value = self.take(kind="string").text
                matchers.append((label, operator, _unquote(value)))
                if not self.at("}"):
                    self.take(",")
            self.take("}")
        self.out.selectors.append(Selector(name, matchers))
        return "vector"


def _unquote(literal: str) -> str:
    if literal.startswith("`"):
        return literal[1:-1]
    return bytes(literal[1:-1], "utf-8").decode("unicode_escape")


def parse_promql(expr: str) -> Parsed:
    """Parses ``expr``; raises :class:`PromQLError` where it is not PromQL we would write."""
    _check_brackets(expr)
    return _Parser(expr).parse()


def _check_brackets(expr: str) -> None:
    """Balanced (), [] and {}, outside string literals: the first thing a broken edit breaks."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[tuple[str, int]] = []
    for token in tokenize(expr):
        if token.kind != "punct":
            continue
        if token.text in "([{":
            stack.append((token.text, token.at))
        elif token.text in pairs:
            if not stack or stack[-1][0] != pairs[token.text]:
                raise PromQLError(f"unbalanced {token.text!r} at {token.at}")
            stack.pop()
    if stack:
        raise PromQLError(f"unclosed {stack[-1][0]!r} at {stack[-1][1]}")


def check_expression(expr: str, where: str) -> Parsed:
    """Parses ``expr`` and checks that it reads only exported metrics, with their own labels: in its
    matchers, and in its groupings (a label no metric of the expression has groups nothing)."""
    try:
        parsed = parse_promql(expr)
    except PromQLError as error:
        pytest.fail(f"{where}: not valid PromQL: {error}\n{expr}")
    assert parsed.selectors, f"{where}: reads no metric"
    available: set[str] = set(TARGET_LABELS)
    for selector in parsed.selectors:
        found = series_metric(selector.metric)
        assert found is not None, (
            f"{where}: {selector.metric} is no metric the services export (tests/deploy/test_monitoring.py "
            "METRICS, libs/runtime/game_metrics.py)"
        )
        _, metric = found
        labels = metric.labels | TARGET_LABELS
        if selector.metric.endswith("_bucket") and metric.kind == "histogram":
            labels |= {"le"}
        available |= labels
        for label, operator, value in selector.matchers:
            assert label in labels, (
                f"{where}: {selector.metric} has no label {label!r} (it has {sorted(metric.labels)}, plus "
                f"the target labels {sorted(TARGET_LABELS)})"
            )
            if operator in ("=~", "!~"):
                try:
                    re.compile(value)
                except re.error as error:
                    pytest.fail(f"{where}: {label}{operator}{value!r}: {error}")
    for keyword, group in parsed.grouping:
        for label in group:
            assert label in available, f"{where}: {keyword} ({label}): no metric of the expression has it"
    if "histogram_quantile" in parsed.functions:
        assert any(s.metric.endswith("_bucket") for s in parsed.selectors), f"{where}: quantile of no buckets"
        assert any(keyword == "by" and "le" in group for keyword, group in parsed.grouping) or not any(
            keyword in ("by", "without") for keyword, _ in parsed.grouping
        ), f"{where}: histogram_quantile over an aggregation that drops `le`"
    return parsed


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("sum(rate(up[5m])", "unclosed"),
        ("sum(rate(up[5m]))}", "unbalanced"),
        ('rate(up{job="a"[5m]})', "expected"),
        ('rate(up{job="a"[5m)})', "unbalanced"),
        ("ratee(up[5m])", "unknown function"),
        ("rate(up)", "range vector"),
        ("sum by (job) (up) and", "end"),
        ('up{job="a" job="b"}', "expected"),
        ('up{job=="a"}', "not a label matcher"),
        ('{job="a"}', "without a metric name"),
        ("up[5m] + 1", "range"),
        ("histogram_quantile(up, 0.9)", "histogram_quantile"),
        ("topk(up)", "argument"),
        ("up > 5mm", "unexpected"),
    ],
)
def test_the_parser_refuses_broken_promql(expr: str, problem: str) -> None:
    with pytest.raises(PromQLError, match=problem):
        parse_promql(expr)


def test_the_parser_reads_what_prometheus_reads() -> None:
    parsed = parse_promql(
        'sum by (job) (rate(a_total{x=~"1|2", y!="z"}[5m] offset 1m)) / ignoring (y) group_left '
        "sum without (le) (b) > bool 0.5 or on (job) -vector(1) unless max_over_time(c[1h:5m]) == -1e3"
    )
    assert [s.metric for s in parsed.selectors] == ["a_total", "b", "c"]
    assert parsed.selectors[0].matchers == [("x", "=~", "1|2"), ("y", "!=", "z")]
    for clause in (("by", ["job"]), ("ignoring", ["y"]), ("group_left", []), ("on", ["job"])):
        assert clause in parsed.grouping, clause


def test_the_metric_check_refuses_unknown_metrics_and_labels() -> None:
    refused = (AssertionError, pytest.fail.Exception)
    with pytest.raises(refused, match="no metric the services export"):
        check_expression("rate(skillclassics_matches_total[5m])", "test")
    with pytest.raises(refused, match="has no label 'shard'"):
        check_expression('skillclassics_queue_depth{shard="0"}', "test")
    with pytest.raises(refused, match="no metric of the expression has it"):
        check_expression("sum by (termination) (skillclassics_queue_depth)", "test")
    with pytest.raises(refused, match="no metric the services export"):
        check_expression("skillclassics_queue_depth_bucket", "test")
    check_expression(
        "histogram_quantile(0.9, sum by (le, family) "
        '(rate(skillclassics_first_move_seconds_bucket{family="go"}[5m])))',
        "test",
    )


# -- the alerts ----------------------------------------------------------------------------------------

ALERTS = {
    "ShardDown": "critical",
    "ResultOutboxBacklogGrowing": "warning",
    "ClockExpiryLate": "warning",
    "HighErrorRatio": "critical",
    "GatewayShedding": "warning",
    "MatchmakingQueueStuck": "warning",
    "GroupCommitSlow": "warning",
}
REFUSALS = (
    "FAILED_PRECONDITION",
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "UNAUTHENTICATED",
    "RESOURCE_EXHAUSTED",
)
FAILURES = ("UNKNOWN", "INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED", "DATA_LOSS")


def _load_yaml(path: Path) -> list[Doc]:
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    for doc in docs:
        assert isinstance(doc, dict), f"{path.relative_to(ROOT)}: a document that is not a mapping"
    return docs


def _monitoring_files() -> list[Path]:
    return sorted(p for p in MONITORING.rglob("*") if p.is_file())


@cache
def _rule_groups() -> list[Doc]:
    (doc,) = _load_yaml(RULES_FILE)
    assert set(doc) == {"groups"}, f"{RULES_FILE}: a rule file holds `groups` only"
    groups: list[Doc] = doc["groups"]
    return groups


def _rules() -> Iterator[Doc]:
    for group in _rule_groups():
        yield from group["rules"]


def _component_docs() -> list[Doc]:
    docs: list[Doc] = []
    for path in sorted(COMPONENT.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs.extend(_load_yaml(path))
    return docs


def _prometheus_rule() -> Doc:
    (rule,) = [doc for doc in _component_docs() if doc["kind"] == "PrometheusRule"]
    return rule


def test_every_monitoring_file_parses() -> None:
    files = _monitoring_files()
    assert {RULES_FILE, RULES_TESTS, SCRAPE_CONFIG, DASHBOARD} <= set(files)
    for path in files:
        where = str(path.relative_to(ROOT))
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix in (".yml", ".yaml"):
            assert _load_yaml(path), f"{where}: empty"
        else:
            pytest.fail(f"{where}: an unexpected file (YAML or JSON only)")
    for path in sorted(COMPONENT.glob("*")):
        assert path.suffix == ".yaml", f"{path}: YAML only in the component"
        assert _load_yaml(path)


def test_the_prometheus_rule_is_the_plain_rule_file() -> None:
    assert _prometheus_rule()["spec"] == {"groups": _rule_groups()}, (
        "deploy/k8s/components/monitoring/prometheusrule.yaml and deploy/monitoring/prometheus/rules.yml "
        "must hold the same groups: change both together"
    )


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of ``markdown``."""
    anchors: set[str] = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        anchor = slug
        n = 1
        while anchor in anchors:
            anchor = f"{slug}-{n}"
            n += 1
        anchors.add(anchor)
    return anchors


def test_every_alert_is_documented_and_labelled() -> None:
    rules = list(_rules())
    assert {rule.get("alert") for rule in rules} == set(ALERTS), "the alerts are those of docs/operations.md"
    names = [group["name"] for group in _rule_groups()]
    assert len(names) == len(set(names)), "group names are unique"
    assert OPERATIONS.is_file(), "docs/operations.md documents the alerts"
    anchors = _anchors(OPERATIONS.read_text())
    for rule in rules:
        name = rule["alert"]
        assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, name
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]+", name), name
        assert rule["labels"].get("severity") == ALERTS[name], f"{name}: severity {ALERTS[name]}"
        annotations = rule["annotations"]
        for key in ("summary", "description", "runbook_url"):
            assert str(annotations.get(key, "")).strip(), f"{name}: annotation {key}"
        assert annotations["runbook_url"] == f"docs/operations.md#{name.lower()}", f"{name}: runbook_url"
        assert name.lower() in anchors, f"{name}: docs/operations.md has no section #{name.lower()}"
        assert DURATION.match(str(rule["for"])), f"{name}: for"
        for text in (*rule["labels"].values(), *annotations.values()):
            assert isinstance(text, str), f"{name}: labels and annotations are strings"
            assert text.count("{{") == text.count("}}"), f"{name}: unbalanced template {text!r}"
            for variable in re.findall(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)", text):
                assert variable in _output_labels(rule["expr"]), (
                    f"{name}: {text!r} uses $labels.{variable}, which the alert's series do not carry"
                )


def _output_labels(expr: str) -> set[str]:
    """Roughly, the labels an alert's series carry: the outermost aggregation's `by` labels if the
    expression starts with one, else every label its metrics have."""
    parsed = parse_promql(expr)
    stripped = expr.strip().lstrip("(")
    labels: set[str] = set()
    first = re.match(r"(sum|max|min|avg|count) by \(([^)]*)\)", stripped)
    quantile = re.match(r"histogram_quantile\([0-9.]+, sum by \(([^)]*)\)", stripped)
    if first:
        labels = {label.strip() for label in first[2].split(",")}
    elif quantile:
        labels = {label.strip() for label in quantile[1].split(",")} - {"le"}
    else:
        for selector in parsed.selectors:
            found = series_metric(selector.metric)
            if found:
                labels |= found[1].labels | TARGET_LABELS
    return labels


@pytest.mark.parametrize("name", sorted(ALERTS))
def test_alert_expressions_read_exported_metrics(name: str) -> None:
    (rule,) = [rule for rule in _rules() if rule["alert"] == name]
    check_expression(rule["expr"], f"alert {name}")


def test_alert_expressions_say_what_the_issue_says() -> None:
    rules = {rule["alert"]: rule for rule in _rules()}

    def selectors(name: str) -> list[Selector]:
        return parse_promql(rules[name]["expr"]).selectors

    # ShardDown: the rules shards' scrape targets, nothing else.
    for selector in selectors("ShardDown"):
        assert selector.metric == "up"
        (matcher,) = selector.matchers
        assert matcher[:2] == ("job", "=~")
        jobs = {name for name in DEFAULT_PORTS}
        matched = {job for job in jobs if re.fullmatch(matcher[2], job)}
        assert matched == {job for job in jobs if job.startswith("rules-")}, matched
    assert rules["ShardDown"]["for"] == "1m"
    # HighErrorRatio: exactly the failure codes over all codes, health checks out of both sides.
    handled = selectors("HighErrorRatio")
    assert [s.metric for s in handled] == ["grpc_server_handled_total"] * 2
    codes = [value for label, op, value in handled[0].matchers if label == "grpc_code" and op == "=~"]
    assert len(codes) == 1, codes
    assert set(codes[0].split("|")) == set(FAILURES), codes
    assert not [m for m in handled[1].matchers if m[0] == "grpc_code"], "the denominator is every call"
    for selector in handled:
        assert ("grpc_service", "!=", "grpc.health.v1.Health") in selector.matchers
    assert not set(REFUSALS) & set(codes[0].split("|"))
    assert "0.05" in rules["HighErrorRatio"]["expr"]
    assert rules["HighErrorRatio"]["for"] == "5m"
    assert "skillclassics_gateway_shed_total[5m]" in rules["GatewayShedding"]["expr"]
    assert rules["GatewayShedding"]["expr"].strip().endswith("> 1")
    assert "deriv(skillclassics_result_outbox_backlog[10m])" in rules["ResultOutboxBacklogGrowing"]["expr"]
    assert rules["ResultOutboxBacklogGrowing"]["for"] == "10m"
    for name, threshold in (("ClockExpiryLate", "> 0.5"), ("GroupCommitSlow", "> 1")):
        assert "histogram_quantile(0.99," in rules[name]["expr"], name
        assert rules[name]["expr"].strip().endswith(threshold), name
    assert '{stage="wait"}' in rules["GroupCommitSlow"]["expr"]


# -- the Prometheus Operator's objects -----------------------------------------------------------------

_DURATION_PATTERN = re.compile(
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
_RELABEL_ACTIONS = {
    "replace",
    "keep",
    "drop",
    "hashmod",
    "labelmap",
    "labeldrop",
    "labelkeep",
    "lowercase",
    "uppercase",
    "keepequal",
    "dropequal",
}

Schema = Mapping[str, Any]
_STRING_MAP: Schema = {"type": "map", "values": {"type": "string"}}
_LABEL_SELECTOR: Schema = {
    "type": "object",
    "properties": {
        "matchLabels": _STRING_MAP,
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
}
_METADATA: Schema = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "namespace": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
}
_RELABEL: Schema = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": sorted(_RELABEL_ACTIONS)},
        "sourceLabels": {"type": "array", "items": {"type": "string"}},
        "separator": {"type": "string"},
        "targetLabel": {"type": "string"},
        "regex": {"type": "string"},
        "modulus": {"type": "integer"},
        "replacement": {"type": "string"},
    },
}
SERVICE_MONITOR: Schema = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["monitoring.coreos.com/v1"]},
        "kind": {"type": "string", "enum": ["ServiceMonitor"]},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "properties": {
                "jobLabel": {"type": "string"},
                "targetLabels": {"type": "array", "items": {"type": "string"}},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "selector": _LABEL_SELECTOR,
                "namespaceSelector": {
                    "type": "object",
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "sampleLimit": {"type": "integer"},
                "endpoints": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "scheme": {"type": "string", "enum": ["http", "https", "HTTP", "HTTPS"]},
                            "interval": {"type": "string", "pattern": _DURATION_PATTERN.pattern},
                            "scrapeTimeout": {"type": "string", "pattern": _DURATION_PATTERN.pattern},
                            "honorLabels": {"type": "boolean"},
                            "relabelings": {"type": "array", "items": _RELABEL},
                            "metricRelabelings": {"type": "array", "items": _RELABEL},
                        },
                    },
                },
            },
        },
    },
}
"""The part of the Prometheus Operator's ServiceMonitor CRD schema (monitoring.coreos.com/v1) that we use:
unknown fields are refused, as a strict schema check would (the API server would prune them silently)."""

_RULE: Schema = {
    "type": "object",
    "required": ["expr"],
    "properties": {
        "alert": {"type": "string"},
        "record": {"type": "string"},
        "expr": {"type": "string"},
        "for": {"type": "string", "pattern": _DURATION_PATTERN.pattern},
        "keep_firing_for": {"type": "string", "pattern": _DURATION_PATTERN.pattern},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
}
PROMETHEUS_RULE: Schema = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["monitoring.coreos.com/v1"]},
        "kind": {"type": "string", "enum": ["PrometheusRule"]},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "interval": {"type": "string", "pattern": _DURATION_PATTERN.pattern},
                            "limit": {"type": "integer"},
                            "rules": {"type": "array", "items": _RULE},
                        },
                    },
                },
            },
        },
    },
}
"""Likewise for the PrometheusRule CRD."""


def validate(value: Any, schema: Schema, where: str) -> None:
    kind = schema["type"]
    if kind == "string":
        assert isinstance(value, str), f"{where}: a string expected, found {value!r}"
        if "enum" in schema:
            assert value in schema["enum"], f"{where}: {value!r} is not one of {schema['enum']}"
        if "pattern" in schema:
            assert re.match(schema["pattern"], value), (
                f"{where}: {value!r} does not match {schema['pattern']}"
            )
    elif kind == "integer":
        assert isinstance(value, int), f"{where}: an integer expected, found {value!r}"
        assert not isinstance(value, bool), f"{where}: an integer expected, found {value!r}"
    elif kind == "boolean":
        assert isinstance(value, bool), f"{where}: a boolean expected, found {value!r}"
    elif kind == "object":
        assert isinstance(value, dict), f"{where}: an object expected, found {value!r}"
        unknown = set(value) - set(schema.get("properties", {}))
        assert not unknown, f"{where}: unknown field(s) {sorted(unknown)}"
        for required in schema.get("required", []):
            assert required in value, f"{where}: {required} is required"
        for key, item in value.items():
            validate(item, schema["properties"][key], f"{where}.{key}")
    elif kind == "map":
        assert isinstance(value, dict), f"{where}: a map expected, found {value!r}"
        for key, item in value.items():
            assert isinstance(key, str), f"{where}: keys are strings"
            validate(item, schema["values"], f"{where}.{key}")
    elif kind == "array":
        assert isinstance(value, list), f"{where}: an array expected, found {value!r}"
        for n, item in enumerate(value):
            validate(item, schema["items"], f"{where}[{n}]")
    else:
        pytest.fail(f"{where}: the schema's type {kind!r} is not known here")


def test_the_schema_check_refuses_what_the_crds_refuse() -> None:
    monitor: Doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "x"},
        "spec": {"selector": {}, "endpoints": [{"port": "metrics", "interval": "15s"}]},
    }
    validate(monitor, SERVICE_MONITOR, "ok")
    for broken, problem in [
        ({**monitor, "spec": {**monitor["spec"], "endpoint": []}}, "unknown field"),
        ({**monitor, "spec": {"selector": {}, "endpoints": [{"port": 9150}]}}, "a string expected"),
        ({**monitor, "spec": {"selector": {}, "endpoints": [{"interval": "15 s"}]}}, "does not match"),
        ({**monitor, "spec": {"endpoints": []}}, "selector is required"),
    ]:
        with pytest.raises(AssertionError, match=problem):
            validate(broken, SERVICE_MONITOR, "broken")


def test_the_component_objects_follow_the_crd_schemas() -> None:
    (kustomization,) = _load_yaml(COMPONENT / "kustomization.yaml")
    assert kustomization["kind"] == "Component"
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
    assert "namespace" not in kustomization, "the overlay sets the namespace"
    docs = _component_docs()
    kinds = sorted(doc["kind"] for doc in docs)
    assert kinds == ["PrometheusRule"] + ["ServiceMonitor"] * len(DEFAULT_PORTS), kinds
    for doc in docs:
        schema = SERVICE_MONITOR if doc["kind"] == "ServiceMonitor" else PROMETHEUS_RULE
        validate(doc, schema, f"{doc['kind']}/{doc['metadata']['name']}")
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "skillclassics"
    names = [doc["metadata"]["name"] for doc in docs if doc["kind"] == "ServiceMonitor"]
    assert len(names) == len(set(names))


# -- what the ServiceMonitors scrape -------------------------------------------------------------------


def _kustomize_command() -> list[str] | None:
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    return None


@cache
def _rendered_production() -> tuple[Doc, ...]:
    command = _kustomize_command()
    assert command is not None
    done = subprocess.run(
        [*command, str(PRODUCTION)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def _base_docs() -> list[Doc]:
    docs: list[Doc] = []
    for path in sorted(BASE.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs.extend(_load_yaml(path))
    return docs


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def _scraped(docs: list[Doc] | tuple[Doc, ...], where: str) -> dict[str, list[str]]:
    """For every serving workload, what scrapes it: ``monitor/service:port`` for every ServiceMonitor
    endpoint that reaches its pods' metrics port, as the Prometheus Operator resolves it (Services in the
    monitor's namespace selected by its labels; their port named as the endpoint's; that port's target
    being the container's metrics port). Checks the target's `job` on the way."""
    workloads = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]
    services = [d for d in docs if d["kind"] == "Service"]
    found: dict[str, list[str]] = {w["metadata"]["name"]: [] for w in workloads}
    for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):
        spec = monitor["spec"]
        namespace = monitor["metadata"].get("namespace")
        assert "namespaceSelector" not in spec, f"{where}: a ServiceMonitor looks in its own namespace only"
        for service in services:
            if service["metadata"].get("namespace") != namespace:
                continue
            if not _selects(spec["selector"].get("matchLabels", {}), service["metadata"].get("labels", {})):
                continue
            for endpoint in spec["endpoints"]:
                ports = [p for p in service["spec"]["ports"] if p.get("name") == endpoint["port"]]
                for port in ports:
                    for workload in workloads:
                        pod = workload["spec"]["template"]
                        if not _selects(service["spec"].get("selector") or {}, pod["metadata"]["labels"]):
                            continue
                        (container,) = pod["spec"]["containers"]
                        named = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
                        target = port.get("targetPort", port["port"])
                        number = named.get(target) if isinstance(target, str) else target
                        name = workload["metadata"]["name"]
                        assert number == named.get("metrics") == DEFAULT_PORTS[name].metrics, (
                            f"{where}: ServiceMonitor/{monitor['metadata']['name']} scrapes "
                            f"Service/{service['metadata']['name']} port {port['name']}, which is not "
                            f"{name}'s metrics port"
                        )
                        assert endpoint.get("path", "/metrics") == "/metrics"
                        assert endpoint.get("scheme", "http").lower() == "http", (
                            "the metrics port is plain HTTP"
                        )
                        job = service["metadata"]["labels"].get(spec.get("jobLabel", ""))
                        assert job == name, (
                            f"{where}: {name}'s series would get job={job!r}: the alerts expect the "
                            "workload's name (jobLabel: app.kubernetes.io/name)"
                        )
                        drops = [r for r in endpoint.get("relabelings", []) if r.get("action") == "labeldrop"]
                        assert any(re.fullmatch(r["regex"], "service") for r in drops), (
                            f"{where}: drop the Operator's `service` target label (it would rename the "
                            "services' own `service` label to exported_service)"
                        )
                        found[name].append(
                            f"{monitor['metadata']['name']}/{service['metadata']['name']}:{port['name']}"
                        )
    return found


def _check_every_service_scraped_once(docs: list[Doc] | tuple[Doc, ...], where: str) -> None:
    scraped = _scraped(docs, where)
    assert set(scraped) == set(DEFAULT_PORTS), f"{where}: {sorted(scraped)}"
    for name, by in scraped.items():
        assert len(by) == 1, f"{where}: {name} is scraped {len(by)} times: {by}"


def test_service_monitors_scrape_every_service_once() -> None:
    """On the base's files with the component's (a namespace set on both, as the overlay does)."""
    docs = []
    for doc in [*_base_docs(), *_component_docs()]:
        doc = json.loads(json.dumps(doc))
        if doc["kind"] != "Namespace":
            doc["metadata"]["namespace"] = NAMESPACE
        docs.append(doc)
    _check_every_service_scraped_once(docs, "base + components/monitoring")


def test_the_production_overlay_has_the_monitoring() -> None:
    (kustomization,) = _load_yaml(PRODUCTION / "kustomization.yaml")
    assert "../../components/monitoring" in kustomization.get("components", [])
    if _kustomize_command() is None:
        pytest.skip(
            "neither kubectl nor kustomize is installed: the rendered production overlay is not checked"
        )
    docs = _rendered_production()
    _check_every_service_scraped_once(docs, "overlays/prod")
    (rule,) = [doc for doc in docs if doc["kind"] == "PrometheusRule"]
    assert rule["spec"] == {"groups": _rule_groups()}
    for doc in docs:
        if doc["kind"] in ("ServiceMonitor", "PrometheusRule"):
            validate(
                doc, SERVICE_MONITOR if doc["kind"] == "ServiceMonitor" else PROMETHEUS_RULE, "production"
            )
            assert doc["metadata"]["namespace"] == NAMESPACE


def test_the_plain_scrape_config_sets_the_same_labels() -> None:
    """scrape-config.yml (Prometheus without the Operator) keeps only the metrics port of the annotated
    pods and sets job, namespace and pod as the ServiceMonitors do."""
    (config,) = _load_yaml(SCRAPE_CONFIG)
    assert config["rule_files"] == ["rules.yml"]
    (job,) = config["scrape_configs"]
    relabel = job["relabel_configs"]
    targets = {r.get("target_label"): r["source_labels"] for r in relabel if r.get("target_label")}
    assert targets["job"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_name"]
    assert targets["namespace"] == ["__meta_kubernetes_namespace"]
    assert targets["pod"] == ["__meta_kubernetes_pod_name"]
    keeps = {r["source_labels"][0]: r["regex"] for r in relabel if r.get("action") == "keep"}
    assert keeps == {
        "__meta_kubernetes_pod_annotation_prometheus_io_scrape": "true",
        "__meta_kubernetes_pod_container_port_name": "metrics",
    }
    for workload in (d for d in _base_docs() if d["kind"] in ("Deployment", "StatefulSet")):
        template = workload["spec"]["template"]["metadata"]
        assert template["labels"]["app.kubernetes.io/name"] == workload["metadata"]["name"]
        assert template["annotations"]["prometheus.io/scrape"] == "true"


# -- the dashboard -------------------------------------------------------------------------------------

GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
PANELS = (
    "Live matches per family and shard",
    "Matches finished per family and termination",
    "No-show aborts, disconnect forfeits and flags",
    "Actions per second per family",
    "Time from table full to first move",
    "Queue depth per family",
    "Pairing wait p95 per family",
    "Fairness draws and reveals",
    "Clock timers armed",
    "Clock expiry lateness p99",
    "Result outbox backlog",
    "Group-commit wait p99",
    "gRPC error ratio per service",
    "gRPC p99 latency per method (unary)",
    "Gateway shed calls",
    "Build info",
)


@cache
def _dashboard() -> Doc:
    dashboard: Doc = json.loads(DASHBOARD.read_text())
    return dashboard


def _panels() -> list[Doc]:
    panels: list[Doc] = []
    for panel in _dashboard()["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


def _dashboard_expressions() -> list[tuple[str, str]]:
    """(where, expression with Grafana's variables replaced) for every target of every panel."""
    found = []
    for panel in _panels():
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(f"[{variable}]", f"[{value}]")
            found.append((f"panel {panel['title']!r} target {target['refId']}", expr))
    return found


def test_the_dashboard_is_well_formed() -> None:
    dashboard = _dashboard()
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert dashboard["uid"]
    assert dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("family", "shard"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        query = variables[name]["query"]["query"]
        found = re.fullmatch(r"label_values\((.+), (\w+)\)", query)
        assert found, query
        assert found[2] == name, query
        check_expression(found[1], f"variable {name}")
    ids = [panel["id"] for panel in _panels()]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    titles = [panel["title"] for panel in _panels() if panel["type"] != "row"]
    assert set(PANELS) <= set(titles), sorted(set(PANELS) - set(titles))
    cells: set[tuple[int, int]] = set()
    for panel in _dashboard()["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] < grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not mine & cells, f"panel {panel['title']!r} overlaps another"
        cells |= mine
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], panel["title"]
            used = set(re.findall(r"\$\{?(\w+)", target["expr"]))
            assert used <= set(variables) | {v.strip("$") for v in GRAFANA_VARIABLES}, (panel["title"], used)


def test_dashboard_expressions_read_exported_metrics() -> None:
    expressions = _dashboard_expressions()
    assert expressions
    for where, expr in expressions:
        check_expression(expr, where)
    text = " ".join(expr for _, expr in expressions)
    for metric in METRICS:
        if metric not in ("skillclassics_service_info", "grpc_server_started_total"):
            assert metric in text, f"the dashboard shows nothing of {metric}"
    assert 'termination=~"aborted|disconnect_forfeit|timeout"' in text


# -- docs ----------------------------------------------------------------------------------------------


def test_operations_doc_covers_the_monitoring() -> None:
    text = OPERATIONS.read_text()
    for mention in (
        "deploy/monitoring/grafana/skillclassics.json",
        "deploy/monitoring/prometheus/rules.yml",
        "components/monitoring",
        "scrape-config.yml",
    ):
        assert mention in text, f"docs/operations.md does not mention {mention}"
    for panel in PANELS:
        assert panel in text, f"docs/operations.md does not describe the panel {panel!r}"


# -- promtool ------------------------------------------------------------------------------------------


def _promtool() -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(
            "promtool is not installed (Debian: apt-get install prometheus): the rules are checked by "
            "this file's own parser only"
        )
    return promtool


def _run(command: list[str], cwd: Path | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, cwd=cwd)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}\n{done.stderr}"


def test_promtool_checks_the_rules() -> None:
    promtool = _promtool()
    _run([promtool, "check", "rules", str(RULES_FILE)])
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "prometheusrule.yml"
        path.write_text(yaml.safe_dump(_prometheus_rule()["spec"]))
        _run([promtool, "check", "rules", str(path)])


def test_promtool_runs_the_alerts_unit_tests() -> None:
    promtool = _promtool()
    _run([promtool, "test", "rules", RULES_TESTS.name], cwd=RULES_TESTS.parent)


def test_every_alert_has_a_unit_test() -> None:
    (tests,) = _load_yaml(RULES_TESTS)
    assert tests["rule_files"] == [RULES_FILE.name]
    tested = {case["alertname"] for test in tests["tests"] for case in test.get("alert_rule_test", [])}
    assert tested == set(ALERTS), f"alerts without a unit test: {sorted(set(ALERTS) - tested)}"
    for test in tests["tests"]:
        for series in test["input_series"]:
            check_expression(series["series"], f"{RULES_TESTS.name}: input series")


def test_promtool_parses_the_dashboard_expressions() -> None:
    promtool = _promtool()
    rules = [
        {"record": f"dashboard:expression_{n}", "expr": expr}
        for n, (_, expr) in enumerate(_dashboard_expressions())
    ]
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "dashboard.yml"
        path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
        _run([promtool, "check", "rules", str(path)])
