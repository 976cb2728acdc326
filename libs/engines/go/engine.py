"""The go engine: a game on 9x9, 13x13 or 19x19, with handicap, komi, simple ko and a count phase.

Seat 0 is Black, seat 1 White. Black moves first; in a handicap game Black's stones are on the board
from the start and White moves first.

A game, as a state machine (:class:`Phase`)::

    PLAY --a point--> PLAY (the other seat)
         --pass--> PLAY (the other seat), or COUNT after two passes in a row
    COUNT --accept (both seats, in any order)--> OVER (Termination.SCORED)
          --resume (either seat)--> PLAY (the seat that would have moved after the second pass)
          --no answer within 2 minutes (on_phase_deadline)--> OVER (the count stands)

Actions are text: a point in GTP style (``D4``, case-insensitive), ``pass``, and during the count
``accept`` and ``resume``. Resignation is the runtime's business (:meth:`GoEngine.resignation_outcome`).
States are frozen and share nothing mutable; see ``docs/go.md`` for the rules as implemented.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from libs.engines.base import (
    ActionContext,
    ChanceRequest,
    GameOverError,
    IllegalActionError,
    InvalidOptionsError,
    MalformedActionError,
    NotYourTurnError,
    Outcome,
    PhaseDeadline,
    Termination,
)
from libs.engines.go.board import BLACK, SIZES, Board, parse_point
from libs.engines.go.handicap import MAX_HANDICAP, MIN_HANDICAP, handicap_points
from libs.engines.go.scoring import Score, Scoring, score_board

SEATS = (0, 1)
SEAT_NAMES = ("Black", "White")
PASS = "pass"
ACCEPT = "accept"
RESUME = "resume"
PASS_POINT = -1
"""A pass in :attr:`GoState.moves`."""
COUNT_WITHIN_MS = 120_000
"""000: no answer to the count within 2 minutes and the count stands."""
DEFAULT_KOMI = {9: 5.5, 13: 7.5, 19: 7.5}
HANDICAP_KOMI = 0.5
MAX_KOMI = 400.0


class Phase(StrEnum):
    """Where the game is."""

    PLAY = "play"
    """The player to move plays a point or passes."""
    COUNT = "count"
    """Two passes in a row: both players ``accept`` the count, or either ``resume``s play."""
    OVER = "over"


@dataclass(frozen=True, slots=True)
class GoOptions:
    """A go table's rules (see ``docs/go.md``, "Options").

    ``komi`` ``None`` means the default: 0.5 with a handicap, else 5.5 on 9x9 and 7.5 on 13x13 and
    19x19; after construction it always holds the komi in force (a float). A string ``scoring`` is
    converted to :class:`Scoring`. Refused (:class:`InvalidOptionsError`): a size other than 9, 13 or 19,
    a handicap other than 0 or 2-9, a komi that is not a multiple of 0.5 (or beyond ±400), an unknown
    scoring.
    """

    size: int = 19
    handicap: int = 0
    komi: float | None = None
    scoring: Scoring = Scoring.AREA

    def __post_init__(self) -> None:
        if not _whole(self.size) or self.size not in SIZES:
            raise InvalidOptionsError(f"the board is 9, 13 or 19 lines, not {self.size!r}")
        if not _whole(self.handicap) or not (
            self.handicap == 0 or MIN_HANDICAP <= self.handicap <= MAX_HANDICAP
        ):
            raise InvalidOptionsError(
                f"the handicap is 0 (none) or {MIN_HANDICAP} to {MAX_HANDICAP} stones, not {self.handicap!r}"
            )
        komi = self.komi
        if komi is None:
            komi = HANDICAP_KOMI if self.handicap else DEFAULT_KOMI[self.size]
        if (
            isinstance(komi, bool)
            or not isinstance(komi, int | float)
            or komi != komi
            or abs(komi) > MAX_KOMI
            or komi * 2 != int(komi * 2)
        ):
            raise InvalidOptionsError(f"komi must be a multiple of 0.5 (like 6.5 or 7), not {self.komi!r}")
        object.__setattr__(self, "komi", float(komi))
        try:
            scoring = Scoring(self.scoring)
        except ValueError:
            raise InvalidOptionsError(
                f"unknown scoring {self.scoring!r} (choose area or territory)"
            ) from None
        object.__setattr__(self, "scoring", scoring)

    @property
    def first_seat(self) -> int:
        """The seat that moves first: White (1) in a handicap game, else Black (0)."""
        return 1 if self.handicap else 0


@dataclass(frozen=True, slots=True)
class GoState:
    """A go game. Build it with :meth:`GoEngine.new_game` and :meth:`~GoEngine.apply`; never by hand."""

    options: GoOptions
    board: Board
    phase: Phase
    turn: int
    """The seat to play (in the count: the seat that will play if the game resumes)."""
    passes: int
    """Passes in a row just played (0, 1; 2 during the count)."""
    prisoners: tuple[int, int]
    """Stones captured by Black (seat 0) and by White (seat 1)."""
    moves: tuple[int, ...]
    """Every move in order, colours alternating from :attr:`GoOptions.first_seat`: a point, or
    :data:`PASS_POINT`."""
    accepted: tuple[bool, bool] = (False, False)
    """During the count: which seats have accepted it."""
    score: Score | None = None
    """During the count and after it: the count."""
    result: Outcome | None = None


@dataclass(frozen=True, slots=True)
class GoView:
    """The game as everybody sees it (go has no hidden information: every seat and spectators get the
    same view)."""

    size: int
    rows: tuple[str, ...]
    """The board, top row (``size``) first, column A on the left: ``X`` Black, ``O`` White, ``.`` empty."""
    handicap: int
    komi: float
    scoring: Scoring
    phase: Phase
    to_move: int | None
    """The seat expected to act (:meth:`GoEngine.to_move`); ``None`` once over."""
    turn: int | None
    """The seat whose turn it is to play a stone (during the count: the one who plays if it resumes)."""
    prisoners: tuple[int, int]
    """Stones captured by Black and by White."""
    ko: str | None
    """The point the player to move may not retake at once, or ``None``."""
    last_move: str | None
    """The last move: a point, ``pass``, or ``None`` before the first move."""
    last_seat: int | None
    """The seat that made the last move, or ``None`` before the first move."""
    last_captured: tuple[str, ...]
    """The stones the last move captured."""
    move_number: int
    """Moves played (passes included; handicap stones not)."""
    passes: int
    """Passes in a row."""
    legal_points: tuple[str, ...]
    """During play: the points the player to move may play, sorted (``pass`` is always allowed too)."""
    accepted: tuple[bool, bool]
    """During the count: which seats accepted it."""
    score: Score | None
    """During the count and after it: each colour's score by parts."""
    message: str
    """One sentence for people about where the game is."""


class GoEngine:
    """Go for the match runtime (see :class:`libs.engines.base.Engine`). Actions are text."""

    family: str = "go"
    hides_information: bool = False

    def new_game(self, options: GoOptions | None = None) -> GoState:
        """A new game (default options: 19x19, no handicap, komi 7.5, area scoring)."""
        options = GoOptions() if options is None else options
        if not isinstance(options, GoOptions):
            raise InvalidOptionsError(f"expected GoOptions, got {type(options).__name__}")
        board = Board.empty(options.size)
        if options.handicap:
            board = board.with_stones(handicap_points(options.size, options.handicap), BLACK)
        return GoState(
            options=options,
            board=board,
            phase=Phase.PLAY,
            turn=options.first_seat,
            passes=0,
            prisoners=(0, 0),
            moves=(),
        )

    def to_move(self, state: GoState) -> int | None:
        """The seat to act: the player to move; during the count the first seat that has not accepted
        (either seat may answer first); ``None`` once the game is over."""
        if state.result is not None:
            return None
        if state.phase is Phase.COUNT:
            return next((seat for seat in SEATS if not state.accepted[seat]), None)
        return state.turn

    def outcome(self, state: GoState) -> Outcome | None:
        return state.result

    def is_over(self, state: GoState) -> bool:
        return state.result is not None

    def chance_needed(self, state: GoState) -> ChanceRequest | None:
        """Go has no chance."""
        return None

    def apply_chance(self, state: GoState, request: ChanceRequest, values: tuple[int, ...]) -> GoState:
        raise ValueError("go waits for no draw")

    def phase_deadline(self, state: GoState) -> PhaseDeadline | None:
        """During the count no clock runs; the players have 2 minutes to accept or resume (000)."""
        if state.result is not None or state.phase is not Phase.COUNT:
            return None
        pending = [seat for seat in SEATS if not state.accepted[seat]]
        return PhaseDeadline(COUNT_WITHIN_MS, pending[0] if len(pending) == 1 else None)

    def on_phase_deadline(self, state: GoState) -> GoState:
        """Nobody resumed within 2 minutes: the count stands and decides the game (000)."""
        if state.result is not None or state.phase is not Phase.COUNT:
            return state
        return _finish(state, "the count stood after 2 minutes without an answer")

    def apply(self, state: GoState, seat: int, action: str, context: ActionContext) -> GoState:
        """The state after ``seat`` takes ``action`` (``context`` is not read: no clock rules).

        :raises MalformedActionError: the action cannot be read (or is not a point of this board).
        :raises GameOverError: the game is over.
        :raises NotYourTurnError: it is the other seat's turn.
        :raises IllegalActionError: the point is occupied, suicide or a ko retake; a move during the
            count; ``accept``/``resume`` outside it.
        """
        _check_seat(seat)
        if not isinstance(action, str):
            raise MalformedActionError(f"a go action is text (a point like D4, or pass), not {action!r}")
        if state.result is not None:
            raise GameOverError(f"the game is over ({state.result.detail})")
        word = action.strip().lower()
        if state.phase is Phase.COUNT:
            if word == ACCEPT:
                if state.accepted[seat]:
                    raise NotYourTurnError("you have accepted the count: waiting for the opponent")
                accepted = (True, state.accepted[1]) if seat == 0 else (state.accepted[0], True)
                if all(accepted):
                    return _finish(_with_accepted(state, accepted), "both players accepted the count")
                return _with_accepted(state, accepted)
            if word == RESUME:
                return _resume(state)
            _parse(state, word, action)  # a malformed action is reported as such
            raise IllegalActionError("the game is being counted: accept the count or resume play")
        if seat != state.turn:
            raise NotYourTurnError(f"it is {SEAT_NAMES[state.turn]}'s turn")
        if word in (ACCEPT, RESUME):
            raise IllegalActionError(f"there is no count to {word}: it starts after two passes in a row")
        point = _parse(state, word, action)
        if point == PASS_POINT:
            return _pass(state)
        return _play(state, seat, point)

    def legal_actions(self, state: GoState, seat: int) -> list[str]:
        """Every action ``seat`` may take now, sorted: during play the legal points and ``pass``; during
        the count ``accept`` (unless already accepted) and ``resume``; nothing once over."""
        _check_seat(seat)
        if state.result is not None:
            return []
        if state.phase is Phase.COUNT:
            return [RESUME] if state.accepted[seat] else [ACCEPT, RESUME]
        if seat != state.turn:
            return []
        names = state.board.geometry.names
        actions = [names[p] for p in state.board.legal_points(seat + 1)]
        actions.append(PASS)  # lower case sorts after every upper-case point name
        return actions

    def legal_points(self, state: GoState) -> list[str]:
        """The points the player to move may play (empty outside play), in name order."""
        if state.result is not None or state.phase is not Phase.PLAY:
            return []
        names = state.board.geometry.names
        return [names[p] for p in state.board.legal_points(state.turn + 1)]

    def timeout_outcome(self, state: GoState, seat: int) -> Outcome:
        """``seat`` ran out of time: it loses."""
        _check_seat(seat)
        return _win(Termination.TIMEOUT, 1 - seat, f"{SEAT_NAMES[seat]} ran out of time")

    def resignation_outcome(self, state: GoState, seat: int) -> Outcome:
        """``seat`` resigned: it loses."""
        _check_seat(seat)
        return _win(Termination.RESIGNATION, 1 - seat, f"{SEAT_NAMES[seat]} resigned")

    def view(self, state: GoState, seat: int | None) -> GoView:
        """The game as everybody sees it (``seat`` is checked, then ignored: nothing is hidden)."""
        if seat is not None:
            _check_seat(seat)
        board = state.board
        names = board.geometry.names
        over = state.result is not None
        last = state.moves[-1] if state.moves else None
        return GoView(
            size=board.size,
            rows=board.rows(),
            handicap=state.options.handicap,
            komi=_komi(state),
            scoring=state.options.scoring,
            phase=Phase.OVER if over else state.phase,
            to_move=self.to_move(state),
            turn=None if over else state.turn,
            prisoners=state.prisoners,
            ko=None if board.ko is None or state.phase is not Phase.PLAY else names[board.ko],
            last_move=None if last is None else PASS if last == PASS_POINT else names[last],
            last_seat=None if last is None else move_color(state.options, len(state.moves) - 1),
            last_captured=tuple(names[p] for p in board.captured),
            move_number=len(state.moves),
            passes=state.passes,
            legal_points=tuple(self.legal_points(state)),
            accepted=state.accepted,
            score=state.score,
            message=_message(state),
        )


GO = GoEngine()
"""The go engine (it holds no state; one instance serves every match)."""


def replay(options: GoOptions, steps: Sequence[tuple[int, str]]) -> GoState:
    """The state after ``steps``, ``(seat, action)`` pairs applied with :meth:`~GoEngine.apply` to a new
    game."""
    state = GO.new_game(options)
    context = ActionContext(remaining_ms=(0, 0))
    for seat, action in steps:
        state = GO.apply(state, int(seat), action, context)
    return state


def parse_action(text: str) -> str:
    """An action in its canonical form: ``pass``, ``accept``, ``resume`` (lower case) or a point name in
    upper case (``d4`` -> ``D4``). Whether the point is on the board is the engine's check (it depends on
    the size).

    :raises MalformedActionError: neither a word nor a column letter followed by a row number.
    """
    if not isinstance(text, str):
        raise MalformedActionError(f"a go action is text (a point like D4, or pass), not {text!r}")
    word = text.strip().lower()
    if word in (PASS, ACCEPT, RESUME):
        return word
    if len(word) >= 2 and word[0].isalpha() and word[0].isascii() and word[1:].isdigit():
        return word.upper()
    raise MalformedActionError(f"{text!r} is not a go action: play a point like D4, pass, accept or resume")


def move_color(options: GoOptions, index: int) -> int:
    """The seat that played ``moves[index]`` (colours alternate from the first mover)."""
    return (options.first_seat + index) % 2


# ---------------------------------------------------------------------------------------------------------
# Moves


def _parse(state: GoState, word: str, action: str) -> int:
    if word == PASS:
        return PASS_POINT
    point = state.board.geometry.by_name.get(word.upper())
    if point is not None:
        return point
    if word in (ACCEPT, RESUME):
        return PASS_POINT
    if not word or not word[0].isalpha() or not word[1:].isdigit():
        raise MalformedActionError(
            f"{action!r} is not a go action: play a point like D4, or pass"
            + (" (during the count: accept or resume)" if state.phase is Phase.COUNT else "")
        )
    return parse_point(state.board.size, word)


def _play(state: GoState, seat: int, point: int) -> GoState:
    board = state.board.play(point, seat + 1)
    prisoners = state.prisoners
    if board.captured:
        taken = len(board.captured)
        prisoners = (
            (prisoners[0] + taken, prisoners[1]) if seat == 0 else (prisoners[0], prisoners[1] + taken)
        )
    return GoState(state.options, board, Phase.PLAY, 1 - seat, 0, prisoners, (*state.moves, point))


def _pass(state: GoState) -> GoState:
    passes = state.passes + 1
    board = state.board.passed()
    moves = (*state.moves, PASS_POINT)
    turn = 1 - state.turn
    if passes < 2:
        return GoState(state.options, board, Phase.PLAY, turn, passes, state.prisoners, moves)
    return GoState(
        state.options,
        board,
        Phase.COUNT,
        turn,
        passes,
        state.prisoners,
        moves,
        accepted=(False, False),
        score=count(board, state.options, state.prisoners),
    )


def _resume(state: GoState) -> GoState:
    return GoState(state.options, state.board, Phase.PLAY, state.turn, 0, state.prisoners, state.moves)


def _with_accepted(state: GoState, accepted: tuple[bool, bool]) -> GoState:
    return GoState(
        state.options,
        state.board,
        state.phase,
        state.turn,
        state.passes,
        state.prisoners,
        state.moves,
        accepted=accepted,
        score=state.score,
    )


def count(board: Board, options: GoOptions, prisoners: tuple[int, int]) -> Score:
    """The count of ``board`` under the table's scoring and komi."""
    return score_board(board, _options_komi(options), options.scoring, prisoners)


def _finish(state: GoState, how: str) -> GoState:
    score = state.score
    if score is None:
        score = count(state.board, state.options, state.prisoners)
    winner = score.winner
    outcome = Outcome(
        termination=Termination.SCORED,
        winner=winner,
        detail=f"{score.detail()}; {how}",
        score=(0.5, 0.5) if winner is None else _score_pair(winner),
    )
    return GoState(
        state.options,
        state.board,
        Phase.OVER,
        state.turn,
        state.passes,
        state.prisoners,
        state.moves,
        accepted=state.accepted,
        score=score,
        result=outcome,
    )


# ---------------------------------------------------------------------------------------------------------
# Helpers


def _message(state: GoState) -> str:
    if state.result is not None:
        return state.result.detail
    if state.phase is Phase.COUNT:
        assert state.score is not None
        waiting = [SEAT_NAMES[seat] for seat in SEATS if not state.accepted[seat]]
        return (
            f"two passes: the count says {state.score.detail()}; {' and '.join(waiting)} to accept or resume"
        )
    names = state.board.geometry.names
    mover = SEAT_NAMES[state.turn]
    if not state.moves:
        if state.options.handicap:
            return f"Black has {state.options.handicap} handicap stones; White to play"
        return "Black to play"
    last = state.moves[-1]
    previous = SEAT_NAMES[1 - state.turn]
    if last == PASS_POINT:
        return f"{previous} passed; {mover} to play (a second pass starts the count)"
    taken = len(state.board.captured)
    captured = f", capturing {taken} stone{'s' if taken != 1 else ''}" if taken else ""
    return f"{previous} played {names[last]}{captured}; {mover} to play"


def _komi(state: GoState) -> float:
    return _options_komi(state.options)


def _options_komi(options: GoOptions) -> float:
    assert options.komi is not None
    return options.komi


def _win(termination: Termination, winner: int, how: str) -> Outcome:
    return Outcome(
        termination=termination,
        winner=winner,
        detail=f"{how}; {SEAT_NAMES[winner]} wins",
        score=_score_pair(winner),
    )


def _score_pair(winner: int) -> tuple[float, float]:
    return (1.0, 0.0) if winner == 0 else (0.0, 1.0)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_seat(seat: object) -> None:
    if seat not in SEATS or isinstance(seat, bool):
        raise ValueError(f"go has seats 0 (Black) and 1 (White), not {seat!r}")
