"""What matchmaking knows of each game family: the family's own declaration (the one that its rules
service runs, found through ``services.families``: matchmaking names no family), from which it reads
which options and clocks the lobby offers and whether matches need a fairness commitment, and whether it
has a stand-in (then its tables may choose seed 002's disconnect policy). There is no second decoder here:
options are read by the family's ``options_from_proto``, the lobby's limits by its ``lobby_pool`` and
``lobby_clocks``, the stand-in by ``PlaysForAbsentSeats``.

Only families whose rules service exists are offered; asking for any other is ``INVALID_ARGUMENT``
(``UNKNOWN_FAMILY``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import InvalidOptionsError
from libs.match.family import Family, PlaysForAbsentSeats, draws_chance
from libs.runtime.errors import ErrorReason, InvalidArgument, Violation
from services.families import rules_families
from services.matchmaking.store import FORFEIT, STAND_IN

STAND_IN_AFTER_MS = 120_000
"""Seed 002: a player who lost their connection "has 2 minutes, in which to re-enter the game"; then "the
computer will take the ejected player's place" (the match's ``stand_in_after_ms``)."""

_POLICY_COLUMN: dict[mm_pb.DisconnectPolicy.ValueType, str] = {
    mm_pb.DISCONNECT_POLICY_FORFEIT: FORFEIT,
    mm_pb.DISCONNECT_POLICY_STAND_IN: STAND_IN,
}
_COLUMN_POLICY = {column: policy for policy, column in _POLICY_COLUMN.items()}


def effective_policy(policy: mm_pb.DisconnectPolicy.ValueType) -> mm_pb.DisconnectPolicy.ValueType:
    """``policy`` as a table shows and stores it: unspecified is the forfeit rule."""
    return mm_pb.DISCONNECT_POLICY_FORFEIT if policy == mm_pb.DISCONNECT_POLICY_UNSPECIFIED else policy


def policy_column(policy: mm_pb.DisconnectPolicy.ValueType) -> str:
    """A ``DisconnectPolicy`` (unspecified: the forfeit rule) as the ``disconnect_policy`` columns of
    ``mm_tables`` and ``mm_matches`` keep it: ``forfeit`` or ``stand_in``."""
    return _POLICY_COLUMN[effective_policy(policy)]


def policy_of_column(column: str) -> mm_pb.DisconnectPolicy.ValueType:
    """The ``DisconnectPolicy`` of a ``disconnect_policy`` column (never unspecified)."""
    return _COLUMN_POLICY[column]


@dataclass(frozen=True, slots=True)
class FamilyRules:
    """One family as matchmaking sees it: its declaration and the lobby checks read from it."""

    family: Family

    @property
    def name(self) -> str:
        return self.family.name

    @property
    def uses_chance(self) -> bool:
        """Whether every one of its matches draws from a fairness stream."""
        return self.family.uses_chance

    def draws_chance(self, options: rules_pb2.MatchOptions | bytes) -> bool:
        """Whether a match with ``options`` draws from a fairness stream (then a commitment is made before
        creation): always for a family that uses chance, for some options (Skirmish Chess's random duel
        setups) in a family that says so per match."""
        if self.family.uses_chance:
            return True
        if not hasattr(self.family, "draws_chance"):
            return False
        if isinstance(options, bytes):
            options = rules_pb2.MatchOptions.FromString(options)
        return draws_chance(self.family, self.family.options_from_proto(options))

    def check_options(self, options: rules_pb2.MatchOptions) -> str:
        """The options' pool key, when the lobby offers them; ``InvalidArgument`` saying why not."""
        which = options.WhichOneof("family")
        if which not in (None, self.name):
            raise InvalidArgument(
                f"{which} options cannot configure a {self.name} table",
                reason=ErrorReason.ERROR_REASON_WRONG_FAMILY,
                violations=[Violation(f"options.{which}", f"is not {self.name}'s options")],
            )
        try:
            return self.family.lobby_pool(self.family.options_from_proto(options))
        except InvalidOptionsError as error:
            raise InvalidArgument(
                str(error),
                reason=ErrorReason.ERROR_REASON_OPTIONS_NOT_OFFERED,
                violations=[Violation("options", f"are not offered on {self.name} lobby tables")],
            ) from None

    @property
    def has_stand_in(self) -> bool:
        """Whether the family plays for absent seats (its declaration is ``PlaysForAbsentSeats``, as the
        rules service decides it too): only then may a table choose the stand-in policy."""
        return isinstance(self.family, PlaysForAbsentSeats)

    def stand_in_after_ms(self, policy: mm_pb.DisconnectPolicy.ValueType) -> int:
        """The match's ``stand_in_after_ms`` for a table's disconnect ``policy`` (0: the platform's forfeit
        rule); ``InvalidArgument`` for the stand-in policy of a family without a stand-in."""
        if policy != mm_pb.DISCONNECT_POLICY_STAND_IN:
            return 0
        if not self.has_stand_in:
            offering = ", ".join(name for name, rules in FAMILIES.items() if rules.has_stand_in)
            raise InvalidArgument(
                f"{self.name} has no stand-in: its tables keep the forfeit rule (a player disconnected for "
                f"60 s after play has begun forfeits); the stand-in policy is offered for {offering}",
                reason=ErrorReason.ERROR_REASON_OPTIONS_NOT_OFFERED,
                violations=[Violation("disconnect_policy", f"{self.name} has no stand-in")],
            )
        return STAND_IN_AFTER_MS

    def check_lobby_clock(self, control: rules_pb2.TimeControl) -> None:
        """``InvalidArgument`` unless ``control`` is one of the family's lobby clocks."""
        problem = self.family.lobby_clocks.problem(control)
        if problem is not None:
            raise InvalidArgument(
                problem,
                reason=ErrorReason.ERROR_REASON_TIME_CONTROL_NOT_OFFERED,
                violations=[Violation("time_control", f"is not one of the {self.name} lobby clocks")],
            )


FAMILIES: Mapping[str, FamilyRules] = {name: FamilyRules(family) for name, family in rules_families().items()}
"""Every family with a rules service (``services.families``: each read from its own declaration)."""


def family_rules(name: str) -> FamilyRules:
    found = FAMILIES.get(name)
    if found is None:
        offered = ", ".join(sorted(FAMILIES))
        raise InvalidArgument(
            f"unknown or unavailable game family {name!r} (offered: {offered})",
            reason=ErrorReason.ERROR_REASON_UNKNOWN_FAMILY,
            violations=[Violation("family", f"must be one of {offered}")],
        )
    return found


def queue_pool_key(request: mm_pb.EnterQueueRequest) -> str:
    """The quick-match pool of a queue request: only seekers of the same family, options, clock, fee and
    disconnect policy are paired. ``InvalidArgument`` with the reason when the family's lobby does not
    offer its options, clock or policy (the fee and currency are the caller's to check).

    Matchmaking also computes it again for every entry it loads from the database, so an entry queued
    before a change of the key (a deploy that added a clock field to it) pairs with the entries made
    after."""
    family = family_rules(request.family)
    options_key = family.check_options(request.options)
    family.check_lobby_clock(request.time_control)
    family.stand_in_after_ms(request.disconnect_policy)
    clock = family.family.lobby_clocks.pool_key(request.time_control)
    pool = f"{family.name}|{options_key}|{clock}|{request.entry_fee_minor}{request.currency}"
    if effective_policy(request.disconnect_policy) == mm_pb.DISCONNECT_POLICY_STAND_IN:
        pool += "|stand-in"  # (the forfeit rule adds nothing: the keys of entries queued before stay)
    return pool
