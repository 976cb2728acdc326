"""The backgammon engine: a money game or a match to N points, for the match runtime.

Every die comes in through :meth:`BackgammonEngine.apply_chance` from the fairness stream ``dice``: the
n-th draw of the match (from 0) is ``ChanceRequest("dice", n, "dice", 2, 0)``, two values 1 to 6. The
opening roll of each game is such a draw (``values[0]`` White's die, ``values[1]`` Black's; a tie is drawn
again, with the next index); every later roll is the mover's two dice.

A game, as a state machine (:class:`Phase`)::

    OPENING --dice--> MOVE (the higher die plays both numbers)
    ROLL_OR_DOUBLE --roll--> ROLLING --dice--> MOVE --play--> ROLL_OR_DOUBLE or ROLLING (the opponent)
                   --double--> DOUBLED --take--> ROLLING
                                       --beaver--> DOUBLED (the doubler answers)
                                       --drop--> the game ends
    ROLL_OR_DOUBLE / MOVE --resign <level>--> RESIGN_OFFERED --accept--> the game ends; --reject--> back
    the game ends --> BETWEEN_GAMES (a match: both seats "continue") --> OPENING; or OVER

A turn starts in ROLL_OR_DOUBLE only when its player may double (the table uses the cube, it is centred or
theirs, not the Crawford game, no automatic roll); otherwise it starts in ROLLING (the roll is automatic).
A roll with no legal play forfeits the turn at once (the record and the view say so). With
``auto_bearoff``, once no contact is left the server plays :func:`best_bearoff` right after the dice.

States are frozen and share nothing mutable. See ``docs/backgammon.md`` for the rules as implemented.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from libs.engines.backgammon.actions import (
    BackgammonAction,
    PlayText,
    Resign,
    ResignLevel,
    Simple,
    Word,
    parse_action,
)
from libs.engines.backgammon.board import BLACK, WHITE, Position, Variant, game_value, has_contact, pip_count
from libs.engines.backgammon.cube import (
    Cube,
    automatic_double,
    beaver,
    drop_stake,
    may_double,
    offer_double,
    take,
)
from libs.engines.backgammon.match import MAX_MATCH_TO, MatchScore
from libs.engines.backgammon.moves import Play, best_bearoff, legal_plays
from libs.engines.backgammon.notation import parse_play
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

SEATS = (WHITE, BLACK)
SEAT_NAMES = ("White", "Black")
DICE_STREAM = "dice"
MAX_AUTOMATIC_DOUBLES = 6
FORFEIT_MESSAGE = "no legal play, turn forfeited"
CONTINUE_WITHIN_MS = 120_000
"""002: after each game of a match both players press "continue" within 2 minutes, or the match ends."""


def dice_request(index: int) -> ChanceRequest:
    """The ``index``-th dice draw of a match (opening rolls included)."""
    return ChanceRequest(DICE_STREAM, index, "dice", 2, 0)


class Phase(StrEnum):
    """Where the game (or the match) is."""

    OPENING = "opening"
    """Waiting for the opening roll (one die each) from the fairness stream."""
    ROLL_OR_DOUBLE = "roll_or_double"
    """The player to move may ``roll`` or ``double`` (or offer to resign)."""
    ROLLING = "rolling"
    """Waiting for the mover's dice from the fairness stream."""
    MOVE = "move"
    """The player to move picks one of the legal plays (or offers to resign)."""
    DOUBLED = "doubled"
    """A double (or a beaver) waits for ``take``, ``drop`` (or ``beaver``)."""
    RESIGN_OFFERED = "resign_offered"
    """A resign offer waits for ``accept`` or ``reject``."""
    BETWEEN_GAMES = "between_games"
    """A game of a match is over: both players ``continue`` before the next opening roll."""
    OVER = "over"
    """The match (in money play: the game) is over."""


class EventKind(StrEnum):
    """What one entry of a game's record is."""

    OPENING_TIE = "opening_tie"
    PLAY = "play"
    AUTO_PLAY = "auto_play"
    """A play the server made (automatic bear-off)."""
    FORFEIT = "forfeit"
    DOUBLE = "double"
    TAKE = "take"
    DROP = "drop"
    BEAVER = "beaver"
    RESIGN = "resign"
    ACCEPT = "accept"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class BackgammonOptions:
    """A backgammon table's rules (see ``docs/backgammon.md``, "Options").

    A string variant is converted to :class:`Variant`. Refused (:class:`InvalidOptionsError`): an unknown
    variant, ``match_to`` outside 0 to 25, ``automatic_doubles`` outside 0 to 6; beavers, automatic doubles
    or Jacoby without the cube or in match play (they are money-play rules, 001); Jacoby without gammons
    (it would change nothing).
    """

    variant: Variant = Variant.STANDARD
    cube: bool = False
    beavers: bool = False
    automatic_doubles: int = 0
    jacoby: bool = False
    gammons: bool = False
    match_to: int = 0
    auto_roll: bool = False
    auto_bearoff: bool = False

    def __post_init__(self) -> None:
        try:
            variant = Variant(self.variant)
        except ValueError:
            choices = ", ".join(v.value for v in Variant)
            raise InvalidOptionsError(
                f"unknown backgammon variant {self.variant!r} (choose {choices})"
            ) from None
        object.__setattr__(self, "variant", variant)
        for name in ("cube", "beavers", "jacoby", "gammons", "auto_roll", "auto_bearoff"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidOptionsError(f"{name} must be true or false, not {getattr(self, name)!r}")
        if not _whole(self.match_to) or not 0 <= self.match_to <= MAX_MATCH_TO:
            raise InvalidOptionsError(
                f"match_to must be 0 (a single game) or a whole number up to {MAX_MATCH_TO}, "
                f"not {self.match_to!r}"
            )
        if not _whole(self.automatic_doubles) or not 0 <= self.automatic_doubles <= MAX_AUTOMATIC_DOUBLES:
            raise InvalidOptionsError(
                f"automatic_doubles must be a whole number from 0 to {MAX_AUTOMATIC_DOUBLES}, "
                f"not {self.automatic_doubles!r}"
            )
        money_rules = [
            name
            for name, on in (
                ("beavers", self.beavers),
                ("automatic doubles", self.automatic_doubles > 0),
                ("the Jacoby rule", self.jacoby),
            )
            if on
        ]
        if money_rules and self.match_to > 0:
            raise InvalidOptionsError(
                f"{' and '.join(money_rules)} are money-play rules, not used in match play"
            )
        if money_rules and not self.cube:
            raise InvalidOptionsError(f"{' and '.join(money_rules)} need the doubling cube (cube=true)")
        if self.jacoby and not self.gammons:
            raise InvalidOptionsError("the Jacoby rule only matters when gammons are scored (gammons=true)")


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a game's record."""

    seat: int
    kind: EventKind
    dice: tuple[int, int] | None = None
    """The dice of a play or a forfeit; of an opening tie, the two dice drawn (White's first)."""
    play: str = ""
    """A play's canonical notation."""
    steps: tuple[str, ...] = ()
    """A play's single-die checker moves in the mover's numbering, 25 the bar and 0 off, ``*`` a hit
    (``("13/8", "13/11")``): the match file's form."""
    value: int = 0
    """A double or beaver: the value offered; a drop: the points lost; a resign offer: its level (1-3);
    an opening tie: the cube after it."""


@dataclass(frozen=True, slots=True)
class GameResult:
    """One finished game."""

    number: int
    """1 for the first game of the match."""
    winner: int
    termination: Termination
    """``BEAR_OFF``, ``DOUBLE_DROPPED`` or ``RESIGNATION_ACCEPTED``."""
    level: int
    """1 single, 2 gammon, 3 backgammon, as scored (after the gammons option and the Jacoby rule)."""
    cube: int
    """The cube's value the game was decided at (a drop: the stake before the refused double)."""
    points: int
    score_before: tuple[int, int]
    score_after: tuple[int, int]
    crawford: bool
    events: tuple[Event, ...]
    detail: str


@dataclass(frozen=True, slots=True)
class ResignOffer:
    seat: int
    level: ResignLevel
    resume: Phase
    """The phase the game returns to if the offer is rejected (``ROLL_OR_DOUBLE`` or ``MOVE``)."""


@dataclass(frozen=True, slots=True)
class BackgammonView:
    """The match as everybody sees it (backgammon has no hidden information: every seat and spectators
    get the same view)."""

    variant: Variant
    match_to: int
    game_number: int
    phase: Phase
    to_move: int | None
    choices: tuple[str, ...]
    """What the player to move may do: some of ``roll``, ``double``, ``move``, ``take``, ``drop``,
    ``beaver``, ``resign``, ``accept``, ``reject``, ``continue``."""
    position: Position
    pip_counts: tuple[int, int]
    dice: tuple[int, int] | None
    """The dice of the turn being played (``None`` before the roll)."""
    legal_plays: tuple[str, ...]
    """The mover's legal plays, canonical notation, in the order their 1-based indexes refer to."""
    cube_value: int
    cube_owner: int | None
    """``None``: centred."""
    cube_offered: int
    """The value a pending double or beaver proposes (0: none)."""
    cube_enabled: bool
    match_score: tuple[int, int]
    is_crawford: bool
    resign_offer: tuple[int, str] | None
    """A pending resign offer: the offering seat and its level."""
    last_mover: int | None
    last_dice: tuple[int, int] | None
    last_play: str | None
    """The last play of this game (canonical notation), ``None`` if none yet or the last turn was
    forfeited."""
    last_forfeited: bool
    message: str
    """A sentence about the last turn (``"no legal play, turn forfeited"``), or empty."""
    continue_pending: tuple[int, ...]
    """Between games: the seats that still must ``continue``."""
    games: tuple[GameResult, ...]


@dataclass(frozen=True, slots=True)
class BackgammonState:
    """A backgammon match (or money game). Build it with :meth:`BackgammonEngine.new_game`,
    :meth:`~BackgammonEngine.apply` and :meth:`~BackgammonEngine.apply_chance`; never by hand."""

    options: BackgammonOptions
    phase: Phase
    game_number: int
    position: Position
    cube: Cube
    match: MatchScore
    turn: int | None
    """The seat whose turn it is (``None`` before the opening roll of a game)."""
    dice: tuple[int, int] | None
    rolls: int
    """Dice draws so far in the match (the next draw's index)."""
    resign_offer: ResignOffer | None
    resigned_this_turn: bool
    """The player to move already made a resign offer this turn (one per turn: it was rejected)."""
    confirmed: tuple[bool, bool]
    """Between games: which seats have said ``continue``."""
    events: tuple[Event, ...]
    """The record of the game in progress."""
    games: tuple[GameResult, ...]
    last: Event | None
    """The last play, auto play or forfeit of this game."""
    result: Outcome | None
    stood_in: tuple[bool, bool] = (False, False)
    """Per seat: a stand-in played for it in this game (002: in a match, points its stand-in won do not
    count)."""

    @property
    def plays(self) -> tuple[Play, ...]:
        """The legal plays of the pending turn (phase ``MOVE``), sorted by notation; ``()`` otherwise.

        Not stored: they follow from the position, the mover and the dice, and :func:`legal_plays` keeps
        the recent ones cached, so a live match does not hold its turn's plays (about a third of its
        memory when they were stored; docs/backgammon.md, "Memory")."""
        if self.phase is not Phase.MOVE or self.dice is None or self.turn is None:
            return ()
        return legal_plays(self.position, self.turn, self.dice)


class BackgammonEngine:
    """Backgammon for the match runtime (see :class:`libs.engines.base.Engine`).

    Actions may be given as :data:`BackgammonAction` values or as text :func:`parse_action` reads.
    """

    family: str = "backgammon"
    hides_information: bool = False

    def new_game(self, options: BackgammonOptions | None = None) -> BackgammonState:
        """A new match (default options: one standard game, no cube), waiting for the opening roll."""
        options = BackgammonOptions() if options is None else options
        if not isinstance(options, BackgammonOptions):
            raise InvalidOptionsError(f"expected BackgammonOptions, got {type(options).__name__}")
        return BackgammonState(
            options=options,
            phase=Phase.OPENING,
            game_number=1,
            position=Position.start(options.variant),
            cube=Cube(),
            match=MatchScore(match_to=options.match_to),
            turn=None,
            dice=None,
            rolls=0,
            resign_offer=None,
            resigned_this_turn=False,
            confirmed=(False, False),
            events=(),
            games=(),
            last=None,
            result=None,
        )

    def to_move(self, state: BackgammonState) -> int | None:
        """The seat to act: the mover, the seat answering a double or resign offer, between games a seat
        that still must ``continue`` (the lower first; either may confirm first); while the dice are
        rolled, the seat whose dice they are (``None`` during an opening roll and once the match is over)."""
        if state.result is not None:
            return None
        phase = state.phase
        if phase is Phase.DOUBLED:
            assert state.cube.offered_by is not None
            return 1 - state.cube.offered_by
        if phase is Phase.RESIGN_OFFERED:
            assert state.resign_offer is not None
            return 1 - state.resign_offer.seat
        if phase is Phase.BETWEEN_GAMES:
            return next((seat for seat in SEATS if not state.confirmed[seat]), None)
        return state.turn

    def outcome(self, state: BackgammonState) -> Outcome | None:
        """The end of the match (money play: of the game), or ``None``."""
        return state.result

    def is_over(self, state: BackgammonState) -> bool:
        return state.result is not None

    def phase_deadline(self, state: BackgammonState) -> PhaseDeadline | None:
        """Between the games of a match no clock runs; both players have 2 minutes to continue (002)."""
        if state.result is not None or state.phase is not Phase.BETWEEN_GAMES:
            return None
        pending = [seat for seat in SEATS if not state.confirmed[seat]]
        return PhaseDeadline(CONTINUE_WITHIN_MS, pending[0] if len(pending) == 1 else None)

    def on_phase_deadline(self, state: BackgammonState) -> BackgammonState:
        """Nobody pressed continue in time: the match ends (002). A player who did not loses it to one who
        did; when neither did, the match is aborted and both stakes are refunded (as when both players
        lose their connections, 002)."""
        pending = [seat for seat in SEATS if not state.confirmed[seat]]
        if len(pending) == 2:
            outcome = Outcome(
                Termination.ABORTED,
                None,
                detail="neither player continued the match within 2 minutes; stakes refunded",
            )
        else:
            (late,) = pending
            winner = 1 - late
            outcome = Outcome(
                termination=Termination.CONTINUE_TIMEOUT,
                winner=winner,
                detail=f"{SEAT_NAMES[late]} did not continue the match within 2 minutes; "
                f"{SEAT_NAMES[winner]} wins the match",
                score=_score_pair(winner, 1.0),
            )
        return replace(state, phase=Phase.OVER, turn=None, result=outcome)

    def chance_needed(self, state: BackgammonState) -> ChanceRequest | None:
        """The next dice draw during an opening roll or a roll; ``None`` otherwise."""
        if state.result is None and state.phase in (Phase.OPENING, Phase.ROLLING):
            return dice_request(state.rolls)
        return None

    def apply_chance(
        self, state: BackgammonState, request: ChanceRequest, values: tuple[int, ...]
    ) -> BackgammonState:
        """The state once ``request`` was drawn with ``values`` (two dice, 1 to 6).

        :raises ValueError: ``request`` is not the pending draw, or ``values`` are not two dice.
        """
        expected = self.chance_needed(state)
        if expected is None:
            raise ValueError("this backgammon match waits for no draw")
        if request != expected:
            raise ValueError(f"this backgammon match waits for {expected}, not {request}")
        values = tuple(values)
        if len(values) != 2 or any(
            isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 6 for v in values
        ):
            raise ValueError(f"a dice draw is two values from 1 to 6, not {values!r}")
        dice = (values[0], values[1])
        state = replace(state, rolls=state.rolls + 1)
        if state.phase is Phase.OPENING:
            return _opening(state, dice)
        assert state.turn is not None
        return _rolled(state, state.turn, dice)

    def apply(
        self, state: BackgammonState, seat: int, action: BackgammonAction | str, context: ActionContext
    ) -> BackgammonState:
        """The state after ``seat`` takes ``action`` (``context`` is not read: no clock rules).

        :raises MalformedActionError: the action cannot be read.
        :raises GameOverError: the match is over.
        :raises NotYourTurnError: the dice are being rolled, or another seat is to act.
        :raises IllegalActionError: the action is not allowed now (the message says why).
        """
        _check_seat(seat)
        if isinstance(action, str):
            action = parse_action(action)
        if not isinstance(action, Simple | Resign | PlayText):
            raise MalformedActionError(f"not a backgammon action: {action!r}")
        if context.stand_in and not state.stood_in[seat]:
            state = replace(
                state, stood_in=(True, state.stood_in[1]) if seat == 0 else (state.stood_in[0], True)
            )
        if state.result is not None:
            raise GameOverError(f"the match is over ({state.result.detail})")
        phase = state.phase
        if phase in (Phase.OPENING, Phase.ROLLING):
            raise NotYourTurnError("the dice are being rolled: wait for them")
        if phase is Phase.BETWEEN_GAMES:
            if action != Simple(Word.CONTINUE):
                raise IllegalActionError("the game is over: say 'continue' to start the next game")
            if state.confirmed[seat]:
                raise NotYourTurnError("you have confirmed: waiting for the opponent to continue")
            return _continue(state, seat)
        to_move = self.to_move(state)
        if to_move != seat:
            raise NotYourTurnError(f"it is {SEAT_NAMES[to_move]}'s turn" if to_move is not None else "wait")
        if phase is Phase.ROLL_OR_DOUBLE:
            return _decide(state, seat, action)
        if phase is Phase.MOVE:
            return _move(state, seat, action)
        if phase is Phase.DOUBLED:
            return _answer_double(state, seat, action)
        return _answer_resign(state, seat, action)

    def legal_actions(self, state: BackgammonState, seat: int) -> list[str]:
        """Every action ``seat`` may take now, sorted; empty when it may do nothing."""
        _check_seat(seat)
        if state.result is not None or state.phase in (Phase.OPENING, Phase.ROLLING):
            return []
        if state.phase is Phase.BETWEEN_GAMES:
            return [] if state.confirmed[seat] else [Word.CONTINUE.value]
        if self.to_move(state) != seat:
            return []
        actions: list[str]
        if state.phase is Phase.ROLL_OR_DOUBLE:
            actions = [Word.DOUBLE.value, Word.ROLL.value, *_resign_actions(state)]
        elif state.phase is Phase.MOVE:
            actions = [play.notation for play in state.plays] + _resign_actions(state)
        elif state.phase is Phase.DOUBLED:
            actions = [Word.DROP.value, Word.TAKE.value]
            if state.options.beavers and not state.cube.beavered:
                actions.append(Word.BEAVER.value)
        else:
            actions = [Word.ACCEPT.value, Word.REJECT.value]
        actions.sort()
        return actions

    def timeout_outcome(self, state: BackgammonState, seat: int) -> Outcome:
        """``seat`` ran out of time: it loses the match, as by a plain resignation."""
        _check_seat(seat)
        return _forfeit(state, seat, Termination.TIMEOUT, "ran out of time")

    def resignation_outcome(self, state: BackgammonState, seat: int) -> Outcome:
        """``seat`` resigned (the runtime's plain resignation, not a resign offer): it loses the whole
        match at its worst (money play: a backgammon at the cube's value where gammons are scored; match
        play: the opponent is credited the points it still needed)."""
        _check_seat(seat)
        return _forfeit(state, seat, Termination.RESIGNATION, "resigned")

    def view(self, state: BackgammonState, seat: int | None) -> BackgammonView:
        """The match as everybody sees it (``seat`` is checked, then ignored: nothing is hidden)."""
        if seat is not None:
            _check_seat(seat)
        to_move = self.to_move(state)
        last = state.last
        offer = state.resign_offer
        return BackgammonView(
            variant=state.options.variant,
            match_to=state.options.match_to,
            game_number=state.game_number,
            phase=Phase.OVER if state.result is not None else state.phase,
            to_move=to_move,
            choices=_choices(state),
            position=state.position,
            pip_counts=(pip_count(state.position, WHITE), pip_count(state.position, BLACK)),
            dice=state.dice,
            legal_plays=tuple(play.notation for play in state.plays),
            cube_value=state.cube.value,
            cube_owner=state.cube.owner,
            cube_offered=state.cube.offered_value,
            cube_enabled=state.options.cube and not state.match.crawford_game,
            match_score=state.match.score,
            is_crawford=state.match.crawford_game,
            resign_offer=None if offer is None else (offer.seat, offer.level.value),
            last_mover=None if last is None else last.seat,
            last_dice=None if last is None else last.dice,
            last_play=None if last is None or last.kind is EventKind.FORFEIT else last.play,
            last_forfeited=last is not None and last.kind is EventKind.FORFEIT,
            message=_message(state),
            continue_pending=tuple(seat for seat in SEATS if not state.confirmed[seat])
            if state.phase is Phase.BETWEEN_GAMES and state.result is None
            else (),
            games=state.games,
        )


BACKGAMMON = BackgammonEngine()
"""The backgammon engine (it holds no state; one instance serves every match)."""


def replay(options: BackgammonOptions, steps: Sequence[tuple[int, str] | tuple[int, ...]]) -> BackgammonState:
    """The state after ``steps`` from a new match: ``(seat, action)`` pairs applied with
    :meth:`~BackgammonEngine.apply`, and dice tuples ``(d1, d2)`` handed to the pending draw."""
    state = BACKGAMMON.new_game(options)
    context = ActionContext(remaining_ms=(0, 0))
    for step in steps:
        if len(step) == 2 and isinstance(step[1], str):
            state = BACKGAMMON.apply(state, int(step[0]), step[1], context)
        else:
            request = BACKGAMMON.chance_needed(state)
            if request is None:
                raise ValueError(f"no draw is pending for {step!r}")
            state = BACKGAMMON.apply_chance(state, request, tuple(int(v) for v in step))
    return state


# ---------------------------------------------------------------------------------------------------------
# Turns


def _opening(state: BackgammonState, dice: tuple[int, int]) -> BackgammonState:
    if dice[0] == dice[1]:
        cube = state.cube
        options = state.options
        if options.cube and options.automatic_doubles > cube.automatic and not state.match.crawford_game:
            cube = automatic_double(cube)
        event = Event(WHITE, EventKind.OPENING_TIE, dice=dice, value=cube.value)
        return replace(state, cube=cube, events=(*state.events, event))
    mover = WHITE if dice[0] > dice[1] else BLACK
    return _rolled(state, mover, dice)


def _rolled(state: BackgammonState, seat: int, dice: tuple[int, int]) -> BackgammonState:
    """``seat``'s dice are ``dice``: list its plays, forfeit the turn or play it automatically."""
    plays = legal_plays(state.position, seat, dice)
    if not plays:
        event = Event(seat, EventKind.FORFEIT, dice=dice)
        after = replace(state, turn=seat, dice=dice, events=(*state.events, event), last=event)
        return _start_turn(after, 1 - seat)
    state = replace(state, phase=Phase.MOVE, turn=seat, dice=dice)
    if state.options.auto_bearoff and not has_contact(state.position):
        play = best_bearoff(plays, seat)
        if play is not None:
            return _play(state, seat, play, EventKind.AUTO_PLAY)
    return state


def _start_turn(state: BackgammonState, seat: int) -> BackgammonState:
    options = state.options
    decide = not options.auto_roll and may_double(
        state.cube, seat, enabled=options.cube, crawford=state.match.crawford_game
    )
    return replace(
        state,
        phase=Phase.ROLL_OR_DOUBLE if decide else Phase.ROLLING,
        turn=seat,
        dice=None,
        resign_offer=None,
        resigned_this_turn=False,
    )


def _play(state: BackgammonState, seat: int, play: Play, kind: EventKind) -> BackgammonState:
    assert state.dice is not None
    steps = tuple(f"{move.start}/{move.end}{'*' if move.hit else ''}" for move in play.moves)
    event = Event(seat, kind, dice=state.dice, play=play.notation, steps=steps)
    position = play.result
    state = replace(state, position=position, events=(*state.events, event), last=event)
    if position.off[seat] >= position.checkers(seat):
        level = _scored_level(state, game_value(position, seat))
        names = {1: "a single game", 2: "a gammon", 3: "a backgammon"}
        return _end_game(
            state,
            seat,
            Termination.BEAR_OFF,
            level,
            state.cube.value,
            f"{SEAT_NAMES[seat]} bears off all checkers and wins {names[level]}",
        )
    return _start_turn(state, 1 - seat)


def _decide(state: BackgammonState, seat: int, action: BackgammonAction) -> BackgammonState:
    if isinstance(action, Resign):
        return _offer_resign(state, seat, action.level)
    if action == Simple(Word.ROLL):
        return replace(state, phase=Phase.ROLLING)
    if action == Simple(Word.DOUBLE):
        cube = offer_double(state.cube, seat, enabled=state.options.cube, crawford=state.match.crawford_game)
        event = Event(seat, EventKind.DOUBLE, value=cube.offered_value)
        return replace(state, phase=Phase.DOUBLED, cube=cube, events=(*state.events, event))
    if isinstance(action, PlayText):
        raise IllegalActionError("roll first ('roll'), or double ('double')")
    raise IllegalActionError(f"'{action}' is not allowed now: 'roll' or 'double'")


def _move(state: BackgammonState, seat: int, action: BackgammonAction) -> BackgammonState:
    if isinstance(action, Resign):
        return _offer_resign(state, seat, action.level)
    if isinstance(action, PlayText):
        # The canonical notation (what legal_actions lists) is found directly; anything else is read.
        play = next((play for play in state.plays if play.notation == action.text), None)
        if play is None:
            play = parse_play(action.text, state.plays, dice=state.dice)
        return _play(state, seat, play, EventKind.PLAY)
    if action in (Simple(Word.ROLL), Simple(Word.DOUBLE)):
        raise IllegalActionError(f"the dice are rolled ({_dice_text(state.dice)}): play them")
    raise IllegalActionError(f"'{action}' is not allowed now: play your roll ({_dice_text(state.dice)})")


def _answer_double(state: BackgammonState, seat: int, action: BackgammonAction) -> BackgammonState:
    cube = state.cube
    if action == Simple(Word.TAKE):
        event = Event(seat, EventKind.TAKE, value=cube.offered_value)
        assert state.turn is not None
        return replace(state, phase=Phase.ROLLING, cube=take(cube, seat), events=(*state.events, event))
    if action == Simple(Word.DROP):
        stake = drop_stake(cube, seat)
        event = Event(seat, EventKind.DROP, value=stake)
        state = replace(state, events=(*state.events, event))
        what = "beaver" if cube.beavered else "double"
        return _end_game(
            state,
            1 - seat,
            Termination.DOUBLE_DROPPED,
            1,
            stake,
            f"{SEAT_NAMES[seat]} drops the {what} to {cube.offered_value}; {SEAT_NAMES[1 - seat]} wins",
        )
    if action == Simple(Word.BEAVER):
        if not state.options.beavers:
            raise IllegalActionError("this table does not play beavers: take or drop")
        cube = beaver(cube, seat)
        event = Event(seat, EventKind.BEAVER, value=cube.offered_value)
        return replace(state, cube=cube, events=(*state.events, event))
    answers = "take, drop or beaver" if state.options.beavers and not cube.beavered else "take or drop"
    raise IllegalActionError(f"answer the cube offered at {cube.offered_value}: {answers}")


def _offer_resign(state: BackgammonState, seat: int, level: ResignLevel) -> BackgammonState:
    if state.resigned_this_turn:
        raise IllegalActionError("you already offered to resign this turn")
    allowed = _resign_levels(state)
    if level not in allowed:
        raise IllegalActionError(
            f"a {level.value} is scored as a single game at this table: offer 'resign single'"
        )
    offer = ResignOffer(seat, level, state.phase)
    event = Event(seat, EventKind.RESIGN, value=level.points)
    return replace(
        state,
        phase=Phase.RESIGN_OFFERED,
        resign_offer=offer,
        resigned_this_turn=True,
        events=(*state.events, event),
    )


def _answer_resign(state: BackgammonState, seat: int, action: BackgammonAction) -> BackgammonState:
    offer = state.resign_offer
    assert offer is not None
    if action == Simple(Word.ACCEPT):
        state = replace(
            state, events=(*state.events, Event(seat, EventKind.ACCEPT, value=offer.level.points))
        )
        level = _scored_level(state, offer.level.points)
        return _end_game(
            state,
            seat,
            Termination.RESIGNATION_ACCEPTED,
            level,
            state.cube.value,
            f"{SEAT_NAMES[offer.seat]} resigns a {offer.level.value} and {SEAT_NAMES[seat]} accepts",
        )
    if action == Simple(Word.REJECT):
        event = Event(seat, EventKind.REJECT, value=offer.level.points)
        return replace(state, phase=offer.resume, resign_offer=None, events=(*state.events, event))
    raise IllegalActionError(
        f"{SEAT_NAMES[offer.seat]} offers to resign a {offer.level.value}: accept or reject"
    )


def _resign_levels(state: BackgammonState) -> tuple[ResignLevel, ...]:
    if _scored_level(state, 3) == 1:
        return (ResignLevel.SINGLE,)
    return (ResignLevel.SINGLE, ResignLevel.GAMMON, ResignLevel.BACKGAMMON)


def _resign_actions(state: BackgammonState) -> list[str]:
    if state.resigned_this_turn:
        return []
    return [str(Resign(level)) for level in _resign_levels(state)]


def _scored_level(state: BackgammonState, level: int) -> int:
    """``level`` (1-3) as this table scores it: always 1 without gammons, and under the Jacoby rule
    while nobody has doubled."""
    options = state.options
    if not options.gammons or (options.jacoby and not state.cube.doubled):
        return 1
    return level


# ---------------------------------------------------------------------------------------------------------
# Games and the match


def _end_game(
    state: BackgammonState, winner: int, termination: Termination, level: int, cube: int, how: str
) -> BackgammonState:
    points = level * cube
    before = state.match
    detail = f"{how} ({points} point{'s' if points != 1 else ''})"
    if state.stood_in[winner] and not before.is_money:
        # 002: a game a stand-in won (or finished winning) counts no points in a match.
        points = 0
        detail += "; won with a stand-in playing: no points counted"
    match = before.add(winner, points)
    game = GameResult(
        number=state.game_number,
        winner=winner,
        termination=termination,
        level=level,
        cube=cube,
        points=points,
        score_before=before.score,
        score_after=match.score,
        crawford=before.crawford_game,
        events=state.events,
        detail=detail,
    )
    state = replace(
        state,
        match=match,
        games=(*state.games, game),
        phase=Phase.BETWEEN_GAMES,
        dice=None,
        resign_offer=None,
        resigned_this_turn=False,
        confirmed=(False, False),
        cube=replace(state.cube, offered_by=None, offered_value=0, beavered=False),
    )
    if not match.over:
        return state
    if match.is_money:
        outcome = Outcome(
            termination=termination, winner=winner, detail=detail, score=_score_pair(winner, float(points))
        )
    else:
        final = f"{SEAT_NAMES[winner]} wins the match {match.score[winner]} to {match.score[1 - winner]}"
        outcome = Outcome(
            termination=Termination.MATCH_POINTS,
            winner=winner,
            cause=termination,
            detail=f"{final}; last game: {detail}",
            score=(float(match.score[0]), float(match.score[1])),
        )
    return replace(state, phase=Phase.OVER, turn=None, result=outcome)


def _continue(state: BackgammonState, seat: int) -> BackgammonState:
    confirmed = (True, state.confirmed[1]) if seat == 0 else (state.confirmed[0], True)
    if not all(confirmed):
        return replace(state, confirmed=confirmed)
    return replace(
        state,
        phase=Phase.OPENING,
        game_number=state.game_number + 1,
        position=Position.start(state.options.variant),
        cube=Cube(),
        turn=None,
        dice=None,
        resign_offer=None,
        resigned_this_turn=False,
        confirmed=(False, False),
        events=(),
        last=None,
        stood_in=(False, False),
    )


def _forfeit(state: BackgammonState, seat: int, termination: Termination, verb: str) -> Outcome:
    winner = 1 - seat
    match = state.match
    if match.is_money:
        points = _scored_level(state, 3) * state.cube.value
        plural = "s" if points != 1 else ""
        detail = f"{SEAT_NAMES[seat]} {verb}; {SEAT_NAMES[winner]} wins ({points} point{plural})"
        return Outcome(
            termination=termination, winner=winner, detail=detail, score=_score_pair(winner, points)
        )
    score = list(match.score)
    score[winner] = max(score[winner], match.match_to)
    detail = (
        f"{SEAT_NAMES[seat]} {verb}; {SEAT_NAMES[winner]} wins the match {score[winner]} to {score[seat]}"
    )
    return Outcome(
        termination=termination, winner=winner, detail=detail, score=(float(score[0]), float(score[1]))
    )


# ---------------------------------------------------------------------------------------------------------
# Views and helpers


def _choices(state: BackgammonState) -> tuple[str, ...]:
    if state.result is not None:
        return ()
    phase = state.phase
    resign = () if state.resigned_this_turn else ("resign",)
    if phase is Phase.ROLL_OR_DOUBLE:
        return ("roll", "double", *resign)
    if phase is Phase.MOVE:
        return ("move", *resign)
    if phase is Phase.DOUBLED:
        beavers = state.options.beavers and not state.cube.beavered
        return ("take", "drop", "beaver") if beavers else ("take", "drop")
    if phase is Phase.RESIGN_OFFERED:
        return ("accept", "reject")
    if phase is Phase.BETWEEN_GAMES:
        return ("continue",)
    return ()


def _message(state: BackgammonState) -> str:
    if state.result is not None:
        return state.result.detail
    if state.phase is Phase.BETWEEN_GAMES and state.games:
        return state.games[-1].detail
    last = state.last
    if last is not None and last.kind is EventKind.FORFEIT:
        return f"{SEAT_NAMES[last.seat]} rolled {_dice_text(last.dice)}: {FORFEIT_MESSAGE}"
    return ""


def _dice_text(dice: tuple[int, int] | None) -> str:
    return "-" if dice is None else f"{dice[0]}-{dice[1]}"


def _score_pair(winner: int, points: float) -> tuple[float, float]:
    return (float(points), 0.0) if winner == 0 else (0.0, float(points))


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_seat(seat: object) -> None:
    if seat not in SEATS or isinstance(seat, bool):
        raise ValueError(f"backgammon has seats 0 (White) and 1 (Black), not {seat!r}")
