"""What every game engine provides, and the values engines and the match runtime exchange.

An engine is pure: no I/O, no clock reads, no randomness of its own. The match runtime (``libs/match``)
owns time, persistence and delivery; it hands the engine everything else it needs as arguments:

- ``apply(state, seat, action, context)`` validates and applies one action and returns the new state, or
  raises :class:`MalformedActionError` (the action cannot be read) or :class:`IllegalActionError` (this
  position forbids it). ``context`` carries the clocks as of the action, for rules that read them
  (the contest chess tiebreak's "more time left").
- ``outcome(state)`` is the end of the game, or ``None``; ``is_over(state)`` is just that.
- ``timeout_outcome(state, seat)`` and ``resignation_outcome(state, seat)`` say what it means that
  ``seat`` ran out of time or resigned (a loss, or a draw where the ruleset says the opponent could not
  have won).
- ``view(state, seat)`` is what ``seat`` may see (``None``: a spectator); hidden information never leaves
  an engine except through a view computed for the player allowed to see it.
- ``legal_actions(state, seat)`` lists, sorted, the actions ``seat`` may take now, in the family's own
  notation.
- ``chance_needed(state)`` is the random draw the game waits for (a shuffle, the first dealer), or
  ``None``; the runtime obtains it from the fairness service, logs it, and hands it back through
  ``apply_chance(state, request, values)``. Engines without chance return ``None`` and never see
  ``apply_chance``. While a draw is pending no seat may act.

Seats are numbered from 0; seat 0 moves first unless the family's rules say otherwise (White in chess).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar, runtime_checkable


class RulesError(ValueError):
    """An action the engine refuses; the message says why in words a player understands."""


class MalformedActionError(RulesError):
    """The action cannot be read at all (bad syntax, unknown kind)."""


class IllegalActionError(RulesError):
    """The action is well formed but this position forbids it."""


class NotYourTurnError(IllegalActionError):
    """The action may be legal, but not from this seat now (it is the other seat's turn, or nobody's:
    the match waits for a draw from the fairness stream)."""


class GameOverError(IllegalActionError):
    """The game is over: no action is legal any more."""


class InvalidOptionsError(RulesError):
    """The family's options for a new match are not supported."""


class Termination(StrEnum):
    """Why a game ended. Draw-like terminations carry ``winner=None``."""

    CHECKMATE = "checkmate"
    TIMEOUT = "timeout"
    RESIGNATION = "resignation"
    DISCONNECT = "disconnect_forfeit"
    ABORTED = "aborted"
    """No-show before the game went live: no winner, entry fees refunded."""
    TIEBREAK = "tiebreak"
    """A drawn position turned into a win by the ruleset's tiebreak (``Outcome.cause`` says which)."""
    STALEMATE = "stalemate"
    INSUFFICIENT_MATERIAL = "insufficient_material"
    SEVENTYFIVE_MOVES = "seventyfive_moves"
    FIVEFOLD_REPETITION = "fivefold_repetition"
    THREEFOLD_REPETITION = "threefold_repetition"
    FIFTY_MOVES = "fifty_moves"
    DRAW_AGREED = "draw_agreed"
    DEAD_POSITION = "dead_position"
    TIMEOUT_VS_INSUFFICIENT_MATERIAL = "timeout_vs_insufficient_material"
    HANDS_WON = "hands_won"
    """A match of several hands (gin rummy) won by taking the required number of hands."""
    BEAR_OFF = "bear_off"
    """A backgammon game (the whole match, in money play) won by bearing off every checker."""
    DOUBLE_DROPPED = "double_dropped"
    """A backgammon game ended by a refused double (or beaver): the dropper loses the stake before it."""
    RESIGNATION_ACCEPTED = "resignation_accepted"
    """A backgammon game ended by a resign offer (single, gammon or backgammon) that was accepted."""
    MATCH_POINTS = "match_points"
    """A backgammon match to N points won by reaching N (``Outcome.cause``: how its last game ended)."""
    CONTINUE_TIMEOUT = "continue_timeout"
    """A match of several games ended because a player did not confirm the next game in time."""
    SCORED = "scored"
    """A game decided by counting the board (go)."""
    FLAG_CAPTURED = "flag_captured"
    """A Game of the Generals game won by capturing the enemy Flag (or lost by a Flag that challenged
    and was captured)."""
    FLAG_REACHED = "flag_reached"
    """A Game of the Generals game won by a Flag on the far rank: unopposed at once, or after surviving
    the opponent's next move."""
    PERPETUAL_CHASE = "perpetual_chase"
    """A Game of the Generals draw by the 5-move or the 16-move perpetual (``Outcome.detail`` says which)."""
    NO_CHALLENGES = "no_challenges"
    """A Game of the Generals draw: 30 moves by each side without a challenge."""
    KING_CAPTURED = "king_captured"
    """A Skirmish Chess game lost by the side whose king was lost in a duel (taken as the stake, or it
    attacked and lost)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The end of a game: a termination reason and a winner (``None`` for a draw or an abort)."""

    termination: Termination
    winner: int | None
    """The winning seat, or ``None`` for a draw or an abort."""
    cause: Termination | None = None
    """For a tiebreak: the drawn position that started it (stalemate, insufficient material, ...)."""
    tiebreak_step: str | None = None
    """For a tiebreak: the step that decided it (``material``, ``moves``, ``time``, ``white``)."""
    detail: str = ""
    """A sentence for people, e.g. ``"stalemate; Black wins the tiebreak on material, 9 to 5"``."""
    score: tuple[float, ...] = field(default=())
    """Points per seat (1 / 0.5 / 0 in chess), empty for an abort."""

    @property
    def is_draw(self) -> bool:
        return self.winner is None and self.termination is not Termination.ABORTED


@dataclass(frozen=True, slots=True)
class ActionContext:
    """What the runtime knows when an action is applied, for rules that need it."""

    remaining_ms: tuple[int, ...]
    """Each seat's clock as of the action, after the mover's time was charged."""
    phase_elapsed_ms: int = 0
    """For an action in a timed phase (:class:`PhaseDeadline`): how long its count had run when the action
    came (since the phase began, or for a ``per_move`` phase since its latest event). An engine with a
    clock of the phase's own (a Skirmish Chess duel's clocks) charges it to the seat that acted."""
    stand_in: bool = False
    """The action is a stand-in's, played for a seat whose player is away (docs/match-runtime.md,
    "Stand-ins"): an engine whose scoring depends on it (backgammon match play) reads it."""


@dataclass(frozen=True, slots=True)
class ChanceRequest:
    """One draw a game needs from its fairness stream (docs/fairness.md, section 6).

    The stream name and the index are fixed by the rules of the game (for example stream ``shuffle``,
    index = the number of deals so far), never chosen per match, so a proof can be audited.
    """

    stream: str
    index: int
    kind: str
    """``dice``, ``integer``, ``coin`` or ``shuffle``."""
    count: int
    bound: int
    """The exclusive upper bound of integers, or the number of items of a shuffle (0 otherwise)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "index": self.index,
            "kind": self.kind,
            "count": self.count,
            "bound": self.bound,
        }

    @classmethod
    def from_json(cls, data: Any) -> ChanceRequest:
        return cls(data["stream"], int(data["index"]), data["kind"], int(data["count"]), int(data["bound"]))


State = TypeVar("State")
Options = TypeVar("Options", contravariant=True)
View = TypeVar("View", covariant=True)


class Engine(Protocol[State, Options, View]):
    """The verbs of every game engine (see the module docstring)."""

    family: str

    def new_game(self, options: Options) -> State: ...

    def to_move(self, state: State) -> int | None:
        """The seat whose turn it is, or ``None`` once the game is over."""
        ...

    def apply(self, state: State, seat: int, action: Any, context: ActionContext) -> State: ...

    def legal_actions(self, state: State, seat: int) -> Sequence[str]: ...

    def outcome(self, state: State) -> Outcome | None: ...

    def timeout_outcome(self, state: State, seat: int) -> Outcome: ...

    def resignation_outcome(self, state: State, seat: int) -> Outcome:
        """What it means that ``seat`` resigned (a loss, or a draw where the opponent could not win)."""
        ...

    def view(self, state: State, seat: int | None) -> View: ...

    def chance_needed(self, state: State) -> ChanceRequest | None:
        """The draw the game waits for before anyone can act, or ``None``."""
        ...

    def apply_chance(self, state: State, request: ChanceRequest, values: tuple[int, ...]) -> State:
        """The state once ``request`` was drawn with ``values`` (only called when it was needed)."""
        ...


@dataclass(frozen=True, slots=True)
class PhaseDeadline:
    """A phase of the game that no player's clock times and that has a deadline of its own (a pause
    between the games of a match, a count to agree on, a setup both seats make at once).

    While the engine says its state is in such a phase, the runtime stops every clock; when
    ``within_ms`` have passed since the phase began and the game is still in it, the runtime logs a
    ``deadline`` event and asks :meth:`TimesPhases.on_phase_deadline` what happens (the match may end, or
    go on, or need a draw). The same mechanism serves every family (docs/match-runtime.md, "Phases").
    """

    within_ms: int
    seat: int | None = None
    """The seat whose inaction the deadline is about, when there is one (for the record and logs)."""
    per_move: bool = False
    """The count starts again at every event of the phase (an action, a deadline, a draw) instead of
    running from the phase's start: ``within_ms`` is then the time the seat to move has left on a clock
    of the phase's own (the engine keeps it, charging each action's ``ActionContext.phase_elapsed_ms``)."""


@runtime_checkable
class TimesPhases(Protocol):
    """An engine with phases timed by a deadline instead of the players' clocks (:class:`PhaseDeadline`)."""

    def phase_deadline(self, state: Any) -> PhaseDeadline | None:
        """The deadline of the phase ``state`` is in, or ``None`` (the players' clocks time the game)."""
        ...

    def on_phase_deadline(self, state: Any) -> Any:
        """The state once the phase's deadline passed with the game still in it (it may be over)."""
        ...
