"""Who may call what: the platform's authorisation table, in one place, and the check every call passes.

Nothing inside the cluster is trusted. Every backend call arrives over mutual TLS (:mod:`libs.runtime.tls`)
with the caller's identity in its certificate; before any handler runs, the runtime's interceptor looks
the method up in :data:`POLICY` and checks that the caller's service may call it, and, where a method is
only safe for one caller, the request's constraint (:class:`OwnsMatch`: the caller is the rules shard
that owns the match the request names; :class:`OwnTimers`: a rules shard arms and watches only its own
timers). A method missing from the table is refused to everyone. Refusals are ``PERMISSION_DENIED``
with the reason (``UNAUTHENTICATED`` with no certificate at all) and counted in
``skillclassics_rpc_refused_total``.

What the services check beyond this (the state a call must find: a fairness stream's draws in order, a
result reported once for a match matchmaking created) is theirs; docs/security.md has the whole model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from libs.match.ids import MatchId, MatchIdError
from libs.runtime.errors import ErrorReason, PermissionDenied, Unauthenticated, shown
from libs.runtime.identity import OPERATOR, Identity
from libs.runtime.metrics import RPC_REFUSED

GATEWAY = "gateway"
MATCHMAKING = "matchmaking"
FAIRNESS = "fairness"
CLOCK = "clock"
RULES = "rules-*"
"""Any shard of any rules service (``rules-<family>-<shard>``)."""
ANYONE = "*"
"""Any caller, with or without a certificate: the health service, and the gateway's public methods."""


class Constraint(Protocol):
    """A check of the request, for a caller whose service may call the method."""

    def refusal(self, caller: Identity, request: Any) -> str | None:
        """Why ``caller`` may not make ``request`` (``None``: it may)."""


@dataclass(frozen=True, slots=True)
class OwnsMatch:
    """The caller is the rules shard that owns the match the request names (by its id's family and
    shard, :mod:`libs.match.ids`)."""

    field: str = "match_id"

    def refusal(self, caller: Identity, request: Any) -> str | None:
        match_id = str(getattr(request, self.field))
        try:
            parsed = MatchId.parse(match_id)
        except MatchIdError:
            return f"{self.field} {shown(match_id)} is not a match id of the form <family>.<shard>.<unique>"
        if not caller.owns_shard(parsed.family, parsed.shard):
            owner = f"rules-{parsed.family}-{parsed.shard}"
            return f"only {owner}, the rules shard that owns match {match_id}, may do this; you are {caller}"
        return None


@dataclass(frozen=True, slots=True)
class OwnTimers:
    """The caller names itself as the owner of the timers the request is about."""

    field: str = "owner"

    def refusal(self, caller: Identity, request: Any) -> str | None:
        owner = str(getattr(request, self.field))
        if owner != caller.name:
            return f"{caller} may only use its own timers, not {shown(owner)}'s"
        return None


Rule = Mapping[str, Constraint | None]
"""For one method: each service that may call it (or :data:`RULES`, :data:`ANYONE`), and the
constraint its calls must meet (``None``: none)."""

_FAIRNESS = "/skillclassics.fairness.v1.FairnessService/"
_CLOCK = "/skillclassics.clock.v1.ClockService/"
_RULES = "/skillclassics.rules.v1.RulesService/"
_MATCHMAKING = "/skillclassics.matchmaking.v1.MatchmakingService/"
_GATEWAY = "/skillclassics.gateway.v1.GatewayService/"
_OWNER = OwnsMatch()

POLICY: dict[str, Rule] = {
    # The health service: the kubelet (on the plaintext health port), and every workload.
    "/grpc.health.v1.Health/Check": {ANYONE: None},
    "/grpc.health.v1.Health/Watch": {ANYONE: None},
    "/grpc.health.v1.Health/List": {ANYONE: None},
    # Reflection describes the services to operators (off in production: GRPC_REFLECTION=false).
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": {OPERATOR: None},
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": {OPERATOR: None},
    # Fairness: matchmaking commits before a match exists; the shard that owns the match draws from its
    # stream and finishes it once the match has ended; players' seeds and proofs come through the gateway.
    _FAIRNESS + "Commit": {MATCHMAKING: None},
    _FAIRNESS + "AddClientSeed": {GATEWAY: None},
    _FAIRNESS + "Draw": {RULES: _OWNER},
    _FAIRNESS + "Finish": {RULES: _OWNER},
    _FAIRNESS + "Reveal": {RULES: _OWNER, GATEWAY: None, OPERATOR: None},
    _FAIRNESS + "GetCommitment": {RULES: _OWNER, GATEWAY: None, MATCHMAKING: None, OPERATOR: None},
    # Clock: each rules shard arms, cancels, acknowledges and watches only its own timers.
    _CLOCK + "Arm": {RULES: OwnTimers()},
    _CLOCK + "Cancel": {RULES: OwnTimers()},
    _CLOCK + "Ack": {RULES: OwnTimers()},
    _CLOCK + "WatchExpirations": {RULES: OwnTimers()},
    _CLOCK + "Now": {RULES: None, OPERATOR: None},
    # Rules: matchmaking creates matches (and reads each shard's load to place them); only the gateway
    # reads seat views and submits players' actions (it has checked the player's token and seat);
    # operators read records, listings and loads.
    _RULES + "CreateMatch": {MATCHMAKING: None},
    _RULES + "SubmitAction": {GATEWAY: None},
    _RULES + "Watch": {GATEWAY: None},
    _RULES + "GetMatch": {GATEWAY: None},
    _RULES + "SetPresence": {GATEWAY: None},
    _RULES + "RenewPresence": {GATEWAY: None},
    _RULES + "Exchange": {GATEWAY: None},
    _RULES + "ListMatches": {OPERATOR: None},
    _RULES + "GetRecord": {GATEWAY: None, OPERATOR: None},
    _RULES + "GetLoad": {MATCHMAKING: None, OPERATOR: None},
    # Matchmaking: the gateway acts for its authenticated players; the shard that owns a match reports
    # its result; operators read.
    _MATCHMAKING + "CreateTable": {GATEWAY: None},
    _MATCHMAKING + "ListTables": {GATEWAY: None, OPERATOR: None},
    _MATCHMAKING + "JoinTable": {GATEWAY: None},
    _MATCHMAKING + "LeaveTable": {GATEWAY: None},
    _MATCHMAKING + "EnterQueue": {GATEWAY: None},
    _MATCHMAKING + "LeaveQueue": {GATEWAY: None},
    _MATCHMAKING + "WatchLobby": {GATEWAY: None},
    _MATCHMAKING + "ReportResult": {RULES: _OWNER},
    _MATCHMAKING + "GetRatings": {GATEWAY: None, OPERATOR: None},
    _MATCHMAKING + "GetMatchHistory": {GATEWAY: None, OPERATOR: None},
    # A player's saved formations are theirs alone: only the gateway, for its authenticated player.
    _MATCHMAKING + "SaveFormation": {GATEWAY: None},
    _MATCHMAKING + "ListFormations": {GATEWAY: None},
    _MATCHMAKING + "DeleteFormation": {GATEWAY: None},
    # The gateway is the players' door: each method checks the player's bearer token itself.
    **{
        _GATEWAY + name: {ANYONE: None}
        for name in (
            "WhoAmI",
            "CreateTable",
            "ListTables",
            "JoinTable",
            "LeaveTable",
            "EnterQueue",
            "LeaveQueue",
            "WatchLobby",
            "GetRatings",
            "GetMatchHistory",
            "SaveFormation",
            "ListFormations",
            "DeleteFormation",
            "SubmitAction",
            "WatchMatch",
            "GetMatch",
            "GetRecord",
            "GetFairnessProof",
            "AddClientSeed",
            "Play",
        )
    },
}
"""Every method of every service, and who may call it."""


def needs_request(method: str) -> bool:
    """Whether authorising ``method`` reads its request (some caller's rule has a constraint)."""
    return any(constraint is not None for constraint in POLICY.get(method, {}).values())


def is_open(method: str) -> bool:
    """Whether anyone may call ``method``, with or without a certificate."""
    return ANYONE in POLICY.get(method, {})


class Authorizer:
    """Checks calls against :data:`POLICY` (a server of the platform has one; without mutual TLS, as in
    local debugging, it has none and every caller is trusted)."""

    def __init__(self, policy: Mapping[str, Rule] | None = None) -> None:
        self._policy = POLICY if policy is None else policy

    def check(self, method: str, caller: Identity | None, request: Any) -> None:
        """Refuse (raise) unless ``caller`` may call ``method`` with ``request``; ``request`` may be
        ``None`` for a method whose rules have no constraint."""
        rule = self._policy.get(method)
        if rule is None:
            service, name = _refused(method, caller, "unlisted")
            raise PermissionDenied(
                f"{name} of {service} is not open to any caller",
                reason=ErrorReason.ERROR_REASON_CALLER_NOT_ALLOWED,
            )
        if ANYONE in rule:
            return
        if caller is None:
            _, name = _refused(method, caller, "no_certificate")
            raise Unauthenticated(
                f"{name} needs a client certificate of a SkillClassics service",
                reason=ErrorReason.ERROR_REASON_CERTIFICATE_REQUIRED,
            )
        kind = RULES if caller.is_rules_shard else caller.service
        if kind not in rule:
            service, name = _refused(method, caller, "not_allowed")
            allowed = ", ".join(sorted(rule))
            raise PermissionDenied(
                f"{caller} may not call {name} of {service} (only {allowed})",
                reason=ErrorReason.ERROR_REASON_CALLER_NOT_ALLOWED,
            )
        constraint = rule[kind]
        if constraint is not None:
            reason = constraint.refusal(caller, request)
            if reason is not None:
                _refused(method, caller, "constraint")
                raise PermissionDenied(reason, reason=ErrorReason.ERROR_REASON_CALLER_NOT_ALLOWED)


def _refused(method: str, caller: Identity | None, reason: str) -> tuple[str, str]:
    """Count a refusal of ``method`` (``/<service>/<name>``); its service and name, for the reason."""
    service, _, name = method.lstrip("/").partition("/")
    who = "none" if caller is None else (RULES if caller.is_rules_shard else caller.service)
    RPC_REFUSED.labels(service, name, who, reason).inc()
    return service, name
