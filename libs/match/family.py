"""What a game family plugs into the match runtime: its engine and the codecs around it.

The runtime never looks inside a family's options, actions or views: it stores them as JSON through
these codecs and sends them as the family's own protobuf messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import Engine

if TYPE_CHECKING:
    from libs.match.model import MatchRecord

JsonObject = Mapping[str, Any]

MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class LobbyClocks:
    """The clocks a family's lobby tables and quick-match queue offer: a main time from ``minutes`` plus
    an increment from ``increment_seconds`` (each move in chess, each turn in gin), or, where the family
    offers it, byo-yomi from ``byo_yomi`` after the main time; nothing else set. The one declaration of
    them: matchmaking checks requests against it and the message lists it."""

    family: str
    minutes: tuple[int, ...]
    increment_seconds: tuple[int, ...] = (0,)
    per: str = "per player"
    """What the main time is for, in the message ("per player", "per player for the match")."""
    byo_yomi: tuple[tuple[int, int], ...] = ()
    """Byo-yomi offered after any of the main times, as (periods, seconds per period); none by default."""
    per_move_seconds: tuple[int, ...] = ()
    """A per-move clock instead (no main time, a fresh period each move; running out is a strike, the
    ``strikes``-th loses): the seconds a move may take. When set, it is the only kind offered."""
    strikes: int = 3
    capped_bonus: tuple[tuple[int, int, int, int], ...] = ()
    """Capped-bonus clocks also offered (seed 002), as (main seconds, bonus seconds, within seconds, cap
    seconds): the bonus is added after a move made within that many seconds, the clock never exceeding
    the cap (``TimeControl.increment_within_ms`` and ``cap_ms``); none by default."""

    def problem(self, control: rules_pb2.TimeControl) -> str | None:
        """Why ``control`` is not one of these clocks (``None``: it is)."""
        if self.capped_bonus and (control.increment_within_ms or control.cap_ms):
            offered = {
                (base * 1000, bonus * 1000, within * 1000, cap * 1000)
                for base, bonus, within, cap in self.capped_bonus
            }
            given = (control.base_ms, control.increment_ms, control.increment_within_ms, control.cap_ms)
            if given in offered and not (control.periods or control.period_ms):
                return None
        if self.per_move_seconds:
            per_move = (
                control.base_ms == 0
                and control.periods == self.strikes
                and control.period_ms in {s * 1000 for s in self.per_move_seconds}
                and not (control.increment_ms or control.increment_within_ms or control.cap_ms)
            )
            if per_move:
                return None
            seconds = ", ".join(str(s) for s in self.per_move_seconds)
            return (
                f"{self.family} lobby clocks are a fresh {seconds} s per move (base_ms 0, periods "
                f"{self.strikes}, period_ms the move's time): running out is a strike, strike "
                f"{self.strikes} loses"
            )
        main = control.base_ms in {m * MINUTE_MS for m in self.minutes}
        if control.periods or control.period_ms:
            byo_yomi = (control.periods, control.period_ms) in {
                (periods, seconds * 1000) for periods, seconds in self.byo_yomi
            }
            plain = not (control.increment_ms or control.increment_within_ms or control.cap_ms)
            if plain and main and byo_yomi:
                return None
        else:
            plain = not (control.increment_within_ms or control.cap_ms)
            increment = control.increment_ms in {s * 1000 for s in self.increment_seconds}
            if plain and main and increment:
                return None
        minutes = ", ".join(str(m) for m in self.minutes)
        if self.increment_seconds == (0,):
            extra = "with no increment"
        else:
            extra = "plus " + ", ".join(str(s) for s in self.increment_seconds) + " s per turn"
        if self.byo_yomi:
            periods = ", ".join(f"{count} x {seconds} s" for count, seconds in self.byo_yomi)
            extra += f", or byo-yomi of {periods} after the main time"
        if self.capped_bonus:
            capped = "; ".join(
                f"{base} s + {bonus} s when moved within {within} s, capped at {cap} s"
                for base, bonus, within, cap in self.capped_bonus
            )
            extra += f", or the capped-bonus clocks {capped}"
        return f"{self.family} lobby clocks are {minutes} minutes {self.per} {extra}"

    def pool_key(self, control: rules_pb2.TimeControl) -> str:
        """The clock's part of a quick-match pool key: only players asking for the very same clock pair.
        (``base+increment`` as before for the plain clocks, so the keys of entries already queued keep
        their meaning; the capped bonus and byo-yomi or per-move periods are added when set.)"""
        key = f"{control.base_ms}+{control.increment_ms}"
        if control.increment_within_ms or control.cap_ms:
            key += f"/within{control.increment_within_ms}/cap{control.cap_ms}"
        if control.periods or control.period_ms:
            key += f"/{control.periods}x{control.period_ms}"
        return key


class Family(Protocol):
    """One game family as the runtime sees it."""

    name: str
    """The family's name, as in match ids (``chess``)."""
    record_format: str
    """The notation of finished games (``pgn`` for chess, ``sgf`` for go)."""
    uses_chance: bool
    """Whether every match draws from a fairness stream (then matches need a commitment). A family where
    only some options draw (Skirmish Chess's random duel setups) says ``False`` here and defines
    ``draws_chance(options)`` (:func:`draws_chance`)."""
    hides_information: bool
    """Whether seats see different views (gin's hands); ``False`` (chess) lets one view serve all."""

    @property
    def engine(self) -> Engine[Any, Any, Any]:
        """The family's pure rules engine."""
        ...

    def options_from_proto(self, options: rules_pb2.MatchOptions) -> Any:
        """The engine options from the request (``InvalidOptionsError`` when unsupported)."""
        ...

    lobby_clocks: LobbyClocks
    """The clocks its lobby tables and queue offer."""

    def lobby_pool(self, options: Any) -> str:
        """The options' part of a quick-match pool key, when the lobby offers these options (decoded by
        :meth:`options_from_proto`); ``InvalidOptionsError`` saying what it offers otherwise. Direct
        matches (``CreateMatch``) may use any options the engine supports; the lobby only these."""
        ...

    def options_to_json(self, options: Any) -> JsonObject: ...

    def options_to_proto(self, options: Any) -> rules_pb2.MatchOptions: ...

    def options_from_json(self, data: JsonObject) -> Any: ...

    def action_from_proto(self, action: rules_pb2.Action) -> Any:
        """The engine action from the request (``MalformedActionError`` when unreadable)."""
        ...

    def action_to_json(self, action: Any) -> JsonObject: ...

    def action_from_json(self, data: JsonObject) -> Any: ...

    def describe(self, state_before: Any, action: Any) -> str:
        """The action in the family's notation, as the record shows it (a SAN move in chess)."""
        ...

    def view_to_proto(self, view: Any) -> rules_pb2.View: ...

    def export_record(self, record: MatchRecord) -> str:
        """The finished (or current) game in :attr:`record_format`."""
        ...


@runtime_checkable
class PlaysForAbsentSeats(Protocol):
    """A family with a stand-in: a server-side player that takes an absent player's turns when the
    match's disconnect policy says so (``stand_in_after_ms``; docs/match-runtime.md, "Stand-ins"). It must
    be deterministic in the state (a replayed log plays the same actions)."""

    def stand_in(self, state: Any, seat: int) -> Any | None:
        """The action the stand-in plays for ``seat`` now (a family action), or ``None`` when it does
        nothing (not ``seat``'s turn, or a step only the player may take)."""
        ...


@runtime_checkable
class SaysWhatIsAMove(Protocol):
    """A family whose actions are not all moves, and that says which are (chess: a draw offer, accept or
    claim is not a move).

    A move ends its seat's turn: it counts in the seat's moves, presses the clock and gets a clock mark.
    Any other action leaves the clock alone; if it ends the game (a draw agreed or claimed) the clock just
    stops at that instant. A family without this method counts an action as a move when it passes the
    turn or ends the game.
    """

    def is_move(self, action: Any) -> bool | None:
        """Whether ``action`` is a move; ``None`` when only its result can tell
        (:class:`JudgesMovesByResult`)."""
        ...


@runtime_checkable
class JudgesMovesByResult(Protocol):
    """A family some of whose actions are moves or not depending on what they did."""

    def moved(self, before: Any, after: Any) -> bool:
        """For an action :meth:`is_move` could not judge alone: whether going from game state ``before``
        to ``after`` made a move (a FIDE claim made with its move is one only when it was wrong and the
        move was played)."""
        ...


def draws_chance(family: Family, options: Any) -> bool:
    """Whether a match of ``family`` with ``options`` (the family's decoded options) draws from a fairness
    stream: the family's ``draws_chance(options)`` when it has one, otherwise ``uses_chance``."""
    decide = getattr(family, "draws_chance", None)
    return bool(decide(options)) if decide is not None else family.uses_chance


def may_draw_chance(family: Family) -> bool:
    """Whether any match of ``family`` may draw (then its rules service needs the fairness service's
    address to serve those matches)."""
    return family.uses_chance or hasattr(family, "draws_chance")
