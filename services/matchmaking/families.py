"""What matchmaking knows of each game family: which options and lobby clocks it accepts, whether its
matches need a fairness commitment, and where its rules shards are.

Only families whose rules service exists are offered; asking for any other is ``INVALID_ARGUMENT``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from skillclassics.gin.v1 import gin_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import InvalidOptionsError
from libs.engines.chess import ChessOptions, Ruleset
from libs.runtime.errors import InvalidArgument

MINUTE_MS = 60_000
CHESS_LOBBY_MINUTES = (3, 5, 10, 20, 30)


@dataclass(frozen=True, slots=True)
class FamilyRules:
    """One family as matchmaking sees it."""

    name: str
    uses_chance: bool
    """Whether its matches draw from a fairness stream (then a commitment is made before creation)."""
    check_options: Callable[[rules_pb2.MatchOptions], str]
    """Validates the options (``InvalidArgument`` with the reason) and returns a short key for pools."""
    check_lobby_clock: Callable[[rules_pb2.TimeControl], None]


def _chess_options(options: rules_pb2.MatchOptions) -> str:
    which = options.WhichOneof("family")
    if which not in (None, "chess"):
        raise InvalidArgument(f"{which} options cannot configure a chess table")
    chess = options.chess
    if chess.initial_fen:
        raise InvalidArgument("lobby chess tables start from the initial position (no initial_fen)")
    ruleset = {0: Ruleset.CONTEST, 1: Ruleset.CONTEST, 2: Ruleset.FIDE}.get(chess.ruleset)
    if ruleset is None:
        raise InvalidArgument(f"unknown chess ruleset {chess.ruleset}")
    try:
        ChessOptions(ruleset)
    except InvalidOptionsError as error:
        raise InvalidArgument(str(error)) from None
    return ruleset.value


def _chess_lobby_clock(control: rules_pb2.TimeControl) -> None:
    minutes = CHESS_LOBBY_MINUTES
    plain = not (control.increment_ms or control.increment_within_ms or control.cap_ms or control.periods)
    if not plain or control.base_ms not in {m * MINUTE_MS for m in minutes}:
        allowed = ", ".join(str(m) for m in minutes)
        raise InvalidArgument(f"chess lobby clocks are {allowed} minutes per player with no increment")


GIN_LOBBY_MINUTES = (5, 10, 15, 20, 30)
GIN_LOBBY_INCREMENT_SECONDS = (0, 5, 10)
_GIN_VARIANTS = {
    gin_pb2.VARIANT_UNSPECIFIED: "standard",
    gin_pb2.VARIANT_STANDARD: "standard",
    gin_pb2.VARIANT_STRAIGHT: "straight",
    gin_pb2.VARIANT_OKLAHOMA: "oklahoma",
}


def _gin_options(options: rules_pb2.MatchOptions) -> str:
    which = options.WhichOneof("family")
    if which not in (None, "gin"):
        raise InvalidArgument(f"{which} options cannot configure a gin rummy table")
    variant = _GIN_VARIANTS.get(options.gin.variant)
    if variant is None:
        raise InvalidArgument(f"unknown gin variant {options.gin.variant} (standard, straight or oklahoma)")
    if options.gin.hands_to_win not in (0, 3):
        raise InvalidArgument("lobby gin matches are best of five: the first to 3 hand wins (hands_to_win 3)")
    return variant


def _gin_lobby_clock(control: rules_pb2.TimeControl) -> None:
    plain = not (control.increment_within_ms or control.cap_ms or control.periods)
    minutes_ok = control.base_ms in {m * MINUTE_MS for m in GIN_LOBBY_MINUTES}
    increment_ok = control.increment_ms in {s * 1000 for s in GIN_LOBBY_INCREMENT_SECONDS}
    if not (plain and minutes_ok and increment_ok):
        minutes = ", ".join(str(m) for m in GIN_LOBBY_MINUTES)
        seconds = ", ".join(str(s) for s in GIN_LOBBY_INCREMENT_SECONDS)
        raise InvalidArgument(
            f"gin lobby clocks are {minutes} minutes per player for the match, plus {seconds} s per turn"
        )


FAMILIES: Mapping[str, FamilyRules] = {
    "chess": FamilyRules(
        "chess", uses_chance=False, check_options=_chess_options, check_lobby_clock=_chess_lobby_clock
    ),
    "gin": FamilyRules(
        "gin", uses_chance=True, check_options=_gin_options, check_lobby_clock=_gin_lobby_clock
    ),
}


def family_rules(name: str) -> FamilyRules:
    found = FAMILIES.get(name)
    if found is None:
        offered = ", ".join(sorted(FAMILIES))
        raise InvalidArgument(f"unknown or unavailable game family {name!r} (offered: {offered})")
    return found
