"""What matchmaking knows of each game family: the family's own declaration (the one that its rules
service runs), from which it reads which options and clocks the lobby offers and whether matches need a
fairness commitment. There is no second decoder here: options are read by the family's
``options_from_proto``, the lobby's limits by its ``lobby_pool`` and ``lobby_clocks``.

Only families whose rules service exists are offered; asking for any other is ``INVALID_ARGUMENT``
(``UNKNOWN_FAMILY``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import InvalidOptionsError
from libs.match.family import Family, draws_chance
from libs.runtime.errors import ErrorReason, InvalidArgument, Violation
from services.rules_backgammon.family import BackgammonFamily
from services.rules_chess.family import ChessFamily
from services.rules_generals.family import GeneralsFamily
from services.rules_gin.family import GinFamily
from services.rules_go.family import GoFamily


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

    def check_lobby_clock(self, control: rules_pb2.TimeControl) -> None:
        """``InvalidArgument`` unless ``control`` is one of the family's lobby clocks."""
        problem = self.family.lobby_clocks.problem(control)
        if problem is not None:
            raise InvalidArgument(
                problem,
                reason=ErrorReason.ERROR_REASON_TIME_CONTROL_NOT_OFFERED,
                violations=[Violation("time_control", f"is not one of the {self.name} lobby clocks")],
            )


FAMILIES: Mapping[str, FamilyRules] = {
    family.name: FamilyRules(family)
    for family in (ChessFamily(), BackgammonFamily(), GinFamily(), GoFamily(), GeneralsFamily())
}


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
