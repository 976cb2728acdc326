"""What the clients know of each game family, one small module per family.

A family module (``clients/families/<name>.py``) defines a :class:`FamilyClient` subclass and exposes
an instance as ``FAMILY``. It turns the family's part of a ``MatchUpdate`` into text, typed input into a
``rules.v1.Action``, and offers bot strategies. Everything generic (clocks, results, seats, resigning)
lives here, so the command line, the bots and the demo work for any family in :data:`FAMILY_MODULES`.

To plug a family in: write its module and add one line to :data:`FAMILY_MODULES`.
"""

from __future__ import annotations

import importlib
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import ClassVar, Final

from skillclassics.rules.v1 import rules_pb2

__all__ = [
    "FAMILY_MODULES",
    "FamilyClient",
    "InputError",
    "Strategy",
    "UnknownFamily",
    "clock_line",
    "family",
    "family_names",
    "family_of_match",
    "format_ms",
    "plies_played",
    "resign_action",
    "result_line",
    "seat_names",
    "with_capped_bonus",
]

FAMILY_MODULES: Final[Mapping[str, str]] = {
    "backgammon": "clients.families.backgammon",
    "chess": "clients.families.chess",
    "generals": "clients.families.generals",
    "gin": "clients.families.gin",
    "go": "clients.families.go",
}
"""Every family the clients know, and the module that describes it (imported on first use)."""


class InputError(ValueError):
    """Typed input that cannot be read as an action; the message says what was expected."""


class UnknownFamily(KeyError):
    """A family the clients have no module for."""

    def __str__(self) -> str:
        known = ", ".join(sorted(FAMILY_MODULES))
        return f"unknown game family {self.args[0]!r} (known: {known})"


Strategy = Callable[[rules_pb2.MatchUpdate, int], rules_pb2.Action | None]
"""A bot's mind: the action to take in ``update`` as ``seat``, or ``None`` when there is nothing to do.

It is called only with updates in which the seat has legal actions (or, where a family says so with
:meth:`FamilyClient.should_act`, an action it never lists); it may keep state (a random
generator). It returns one of ``update.legal_actions`` as an action.
"""


def resign_action() -> rules_pb2.Action:
    """Resigning, in every family."""
    return rules_pb2.Action(resign=rules_pb2.Resign())


class FamilyClient(ABC):
    """One game family as the clients see it. Subclasses set :attr:`name` and implement the methods."""

    name: str = ""
    uses_chance: bool = False
    """Whether the family's matches draw from a fairness stream (so a proof can be fetched afterwards)."""
    strategies: tuple[str, ...] = ("random", "greedy")
    """The bot strategies :meth:`strategy` accepts; the first is the default."""
    option_names: tuple[str, ...] = ()
    """The option settings :meth:`options` accepts (command-line flags ``--<name>``, ``_`` written ``-``)."""
    option_help: ClassVar[Mapping[str, str]] = MappingProxyType({})
    """A few words per option name for command-line help (``"gin: standard, straight or oklahoma"``)."""
    option_choices: ClassVar[Mapping[str, tuple[str, ...]]] = MappingProxyType({})
    """The values an option takes, where they are a short list (the command line offers them as choices)."""
    quick_minutes: float = 5
    """The shortest lobby clock, minutes per player (what bots and the demo play by default)."""
    demo_settings: ClassVar[Mapping[str, str]] = MappingProxyType({})
    """The option settings ``make demo`` plays (a short game: go's 9x9 board); none: the defaults."""

    # -- setting a table up ----------------------------------------------------------------------------

    @abstractmethod
    def options(self, settings: Mapping[str, str]) -> rules_pb2.MatchOptions:
        """The match options for ``settings`` (names of :attr:`option_names`); :class:`InputError` if a
        setting does not apply to this family or its value is not understood."""

    def time_control(self, minutes: float, increment_s: float = 0) -> rules_pb2.TimeControl:
        """The clock of a table with ``minutes`` per player and ``increment_s`` added per move."""
        return rules_pb2.TimeControl(base_ms=round(minutes * 60_000), increment_ms=round(increment_s * 1000))

    @property
    def may_draw_chance(self) -> bool:
        """Whether some of the family's matches draw from a fairness stream (all of them, or those with
        some options: :meth:`draws_chance`)."""
        return self.uses_chance

    def draws_chance(self, options: rules_pb2.MatchOptions) -> bool:
        """Whether a match with ``options`` draws from a fairness stream (so it has a proof to check):
        :attr:`uses_chance`, unless the family decides per options (Skirmish Chess's random setups)."""
        return self.uses_chance

    def describe_options(self, options: rules_pb2.MatchOptions) -> str:
        """The options in a few words (for table listings)."""
        return ""

    # -- seats -----------------------------------------------------------------------------------------

    def seat_label(self, seat: int) -> str:
        """What a seat is called in this family (White and Black in chess)."""
        return f"seat {seat}"

    # -- rendering and reading ---------------------------------------------------------------------------

    @abstractmethod
    def render(self, update: rules_pb2.MatchUpdate, seat: int | None, *, ascii: bool = False) -> str:
        """The view of ``update`` as text for the player in ``seat`` (``None``: a spectator)."""

    @abstractmethod
    def describe_legal(self, update: rules_pb2.MatchUpdate) -> str:
        """The viewer's legal actions in ``update`` as a player would type them."""

    @abstractmethod
    def parse(self, text: str, update: rules_pb2.MatchUpdate | None = None) -> rules_pb2.Action:
        """The action typed as ``text`` (``update``: the match as last seen, to resolve shortcuts);
        :class:`InputError` when it cannot be read. Legality is the server's to judge."""

    def needs_turn(self, action: rules_pb2.Action) -> bool:
        """Whether ``action`` can only be played on one's turn (else it is sent at once)."""
        return action.WhichOneof("kind") != "resign"

    def should_act(self, update: rules_pb2.MatchUpdate, seat: int) -> bool:
        """Whether a bot in ``seat`` should be asked for an action on ``update``: by default when the update
        lists legal actions for it. A family with an action it never lists (Game of the Generals' ``setup``,
        during the setup phase) says so here, and its strategies handle such updates too."""
        return bool(update.legal_actions)

    def input_help(self) -> str:
        """How to type actions of this family (one or two lines)."""
        return ""

    # -- bots ------------------------------------------------------------------------------------------

    @abstractmethod
    def strategy(self, name: str, rng: random.Random) -> Strategy:
        """The bot strategy called ``name`` (one of :attr:`strategies`), drawing from ``rng``."""

    def plies(self, update: rules_pb2.MatchUpdate) -> int | None:
        """How many moves the game has had, when the view says so (``None``: count the actions)."""
        return None

    def advantage(self, update: rules_pb2.MatchUpdate, seat: int) -> float | None:
        """How far ahead ``seat`` is (material in chess; positive: ahead), when the family can tell."""
        return None


def family_names() -> tuple[str, ...]:
    """The families the clients know, sorted."""
    return tuple(sorted(FAMILY_MODULES))


_loaded: dict[str, FamilyClient] = {}


def family(name: str) -> FamilyClient:
    """The client module of family ``name``; :class:`UnknownFamily` if there is none."""
    found = _loaded.get(name)
    if found is not None:
        return found
    module_name = FAMILY_MODULES.get(name)
    if module_name is None:
        raise UnknownFamily(name)
    loaded = importlib.import_module(module_name).FAMILY
    if not isinstance(loaded, FamilyClient):
        raise TypeError(f"{module_name}.FAMILY is not a FamilyClient")
    _loaded[name] = loaded
    return loaded


def family_of_match(match_id: str) -> FamilyClient:
    """The family a match id names (``chess.0.abc`` is chess)."""
    return family(match_id.split(".", 1)[0])


# -- generic text ----------------------------------------------------------------------------------------


def format_ms(ms: int) -> str:
    """A clock face: ``4:59``, ``1:02:03``, and tenths under ten seconds (``0:07.3``)."""
    ms = max(0, ms)
    if ms < 10_000:
        return f"0:{ms // 1000:02d}.{ms % 1000 // 100}"
    seconds = ms // 1000
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def clock_line(
    update: rules_pb2.MatchUpdate,
    fam: FamilyClient,
    names: Mapping[int, str],
    now_ms: int | None = None,
    viewer: int | None = None,
) -> str:
    """Every seat's clock; a running clock counts down from the update's server time to ``now_ms``
    (Unix ms; ``None``: as the update gives it). The seat to move is marked with ``*``. In a phase timed
    by its own deadline (a Skirmish Chess duel, a go count, a Generals setup) the deadline counts down
    too."""
    parts = []
    for clock in sorted(update.clocks, key=lambda c: c.seat):
        remaining = clock.remaining_ms
        if clock.running and now_ms is not None and update.status == rules_pb2.MATCH_STATUS_LIVE:
            remaining -= max(0, now_ms - update.server_time_ms)
        label = fam.seat_label(clock.seat)
        name = names.get(clock.seat, "")
        who = f"{label} ({name})" if name else label
        if viewer == clock.seat:
            who += " [you]"
        marker = "*" if update.HasField("to_move") and update.to_move == clock.seat else " "
        periods = f" +{clock.periods_left}p" if clock.periods_left else ""
        parts.append(f"{marker}{who} {format_ms(remaining)}{periods}")
    if update.phase_deadline_ms and update.status == rules_pb2.MATCH_STATUS_LIVE:
        # A phase timed by its own deadline (a duel's clock, a count, a setup): the clocks above are stopped.
        elapsed = 0 if now_ms is None else max(0, now_ms - update.server_time_ms)
        parts.append(f"deadline {format_ms(update.phase_deadline_ms - update.server_time_ms - elapsed)}")
    return "   ".join(parts)


def plies_played(update: rules_pb2.MatchUpdate, fam: FamilyClient, counted: int) -> int:
    """The game's length in moves: the family's own count when its view has one, else ``counted``."""
    plies = fam.plies(update)
    return counted if plies is None else plies


_TERMINATION_WORDS = {
    value: name.removeprefix("TERMINATION_").lower().replace("_", " ")
    for name, value in rules_pb2.Termination.items()
} | {rules_pb2.TERMINATION_SCORED: "the count"}


def result_line(result: rules_pb2.Result, fam: FamilyClient, names: Mapping[int, str]) -> str:
    """One line saying how a match ended: who won (or that it was drawn or aborted) and why."""
    how = _TERMINATION_WORDS.get(result.termination, "unknown")
    detail = result.detail or how
    if result.termination == rules_pb2.TERMINATION_ABORTED:
        return f"aborted, no winner: {detail}"
    if result.HasField("winner"):
        seat = result.winner
        name = names.get(seat, "")
        who = f"{fam.seat_label(seat)} ({name})" if name else fam.seat_label(seat)
        return f"{who} wins by {how}: {detail}"
    return f"draw by {how}: {detail}"


def seat_names(seats: Sequence[rules_pb2.SeatAssignment]) -> dict[int, str]:
    """Player ids by seat."""
    return {assignment.seat: assignment.player_id for assignment in seats}


def with_capped_bonus(control: rules_pb2.TimeControl, within_s: float, cap_s: float) -> rules_pb2.TimeControl:
    """``control`` with seed 002's capped bonus: its increment only for a move made within ``within_s``
    (0: every move), the clock never above ``cap_s`` (0: no cap)."""
    control.increment_within_ms = round(within_s * 1000)
    control.cap_ms = round(cap_s * 1000)
    return control
