"""The Game of the Generals (Salpakan) engine, for the match runtime.

Seat 0 is White (home ranks 1-3), seat 1 Black (home ranks 6-8). A game, as a state machine
(:class:`Phase`)::

    SETUP  --setup <placements> / ready (either seat, in any order)--> SETUP
           --both ready--> (draw "first": coin) --> PLAY (the drawn seat moves first)
           --setup deadline (on_phase_deadline)--> (draw "setup": shuffle, per seat with missing pieces)
                                                  --> (draw "first") --> PLAY
    PLAY   --b3-b4 (the seat to move)--> PLAY (the other seat) or OVER (flag, perpetual, no challenges)
           --draw (either seat) / decline--> PLAY;  --accept--> OVER (draw agreed)

Everything random comes in through :meth:`GeneralsEngine.apply_chance` from the fairness stream:

- ``ChanceRequest("setup", n, "shuffle", 1, 27)``: the n-th completion at the setup deadline (n counts
  from 0; the seats with missing pieces are completed in seat order). The 27 values permute the seat's
  home squares in :data:`~libs.engines.generals.board.HOME` order; the missing pieces, in rank order
  (``5*`` first, ``FLG`` last), go on the empty squares in the shuffled order, first empty square first.
- ``ChanceRequest("first", 0, "coin", 1, 0)``: the first mover, value 0 White, 1 Black.

Ranks are hidden: :meth:`GeneralsEngine.view` shows a seat its own ranks only, and nothing a seat is
shown (view, legal actions, error messages) depends on the opponent's ranks beyond what a challenge
visibly does (which squares it emptied). See ``docs/generals.md`` for the rules as implemented.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import NamedTuple

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
from libs.engines.generals.board import (
    BY_NAME,
    FAR_SETS,
    HOME,
    NAMES,
    NEIGHBORS,
    SEAT_LETTERS,
    SEAT_NAMES,
    SEATS,
    SQUARES,
    Placements,
    check_setup,
    missing,
    missing_text,
    parse_placements,
    placements_text,
)
from libs.engines.generals.pieces import CHALLENGE_TABLE, CODES, FLG, PIECES_PER_SIDE, Challenge

SETUP_WITHIN_MS = 300_000
"""The setup phase's deadline: five minutes for both seats at once."""
SETUP_STREAM = "setup"
FIRST_STREAM = "first"
FIRST_REQUEST = ChanceRequest(FIRST_STREAM, 0, "coin", 1, 0)
"""The draw of the first mover once both seats are ready: value 0, White moves first; 1, Black."""
HOME_SIZE = 27
DRAW_OFFERS = 3
"""Draw offers each player may make in a game."""
SHUTTLE_DRAW = 5
"""The 5-move perpetual: the 5th consecutive back-and-forth move of a chased piece draws."""
CHASE_DRAW = 16
"""The 16-move perpetual: the 16th consecutive move of a chased piece draws."""
QUIET_DRAW = 60
"""No challenges: 60 moves in a row (30 by each side) without a challenge draw."""
WARN_WITHIN = 3
"""A warning is shown when a perpetual draw is this many moves of the chased player away, or the
no-challenge draw this many moves of each side (twice as many moves in all) away."""

SETUP = "setup"
READY = "ready"
DRAW = "draw"
ACCEPT = "accept"
DECLINE = "decline"
OFFER_CODES = {DRAW: -1, ACCEPT: -2, DECLINE: -3}
"""How :attr:`Step.frm` records an offer action (moves have a square there)."""
OFFER_WORDS = {code: word for word, code in OFFER_CODES.items()}
DEADLINE = "deadline"
"""In :func:`replay`: the setup phase's deadline passing."""

NO_RUN = (-1, 0, 0, -1)
"""A seat without a chase run (see :attr:`GeneralsState.runs`)."""


class Phase(StrEnum):
    """Where the game is."""

    SETUP = "setup"
    """Both seats arrange their pieces (and then the fairness stream draws what is needed)."""
    PLAY = "play"
    OVER = "over"


@dataclass(frozen=True, slots=True)
class GeneralsOptions:
    """A Generals table's rules: there are no switches. The tournament rules are the only ruleset; the
    per-move clock (30 s, 60 s or 120 s, three strikes) is the runtime's time control, not an engine
    option, and the setup deadline is fixed at five minutes (:data:`SETUP_WITHIN_MS`)."""


class Step(NamedTuple):
    """One action of the play phase, as the state's history (and the record) keeps it."""

    seat: int
    frm: int
    """The square moved from, or a negative :data:`OFFER_CODES` value for ``draw``/``accept``/``decline``."""
    to: int
    """The square moved to (-1 for an offer action)."""
    attacker: int
    """The moving piece's rank id (0 for an offer action)."""
    defender: int
    """The challenged piece's rank id, 0 when the move was no challenge."""
    result: int
    """The :class:`Challenge` value, 0 when the move was no challenge."""

    @property
    def is_move(self) -> bool:
        return self.frm >= 0

    @property
    def notation(self) -> str:
        """The action as a player writes it (``b3-b4``, ``draw``)."""
        if self.frm < 0:
            return OFFER_WORDS[self.frm]
        return f"{NAMES[self.frm]}-{NAMES[self.to]}"


@dataclass(frozen=True, slots=True)
class GeneralsState:
    """A game. Build it with :meth:`GeneralsEngine.new_game`, :meth:`~GeneralsEngine.apply`,
    :meth:`~GeneralsEngine.apply_chance` and :meth:`~GeneralsEngine.on_phase_deadline`; never by hand.
    It holds every rank: never show it to a player (show :meth:`GeneralsEngine.view`)."""

    options: GeneralsOptions
    phase: Phase
    board: tuple[int, ...]
    """72 cells by square index: 0 empty, else ``seat << 4 | rank id``. During the setup it holds both
    seats' arrangements as they stand."""
    ready: tuple[bool, bool] = (False, False)
    to_complete: tuple[int, ...] = ()
    """Seats whose arrangement waits for its completion draw (after the setup deadline), in seat order."""
    completed: tuple[int, ...] = ()
    """Seats whose arrangement was completed at random at the setup deadline."""
    setup_draws: int = 0
    """Completion draws made (the next one's index)."""
    first: int | None = None
    """The seat that moved first, once drawn."""
    turn: int | None = None
    """During play: the seat to move."""
    initial: tuple[int, ...] = ()
    """The board when play began (empty before)."""
    history: tuple[Step, ...] = ()
    """Every action of the play phase, in order."""
    last: Step | None = None
    """The last move (offers aside)."""
    plies: int = 0
    """Moves played."""
    quiet: int = 0
    """Moves in a row without a challenge (the no-challenge draw at :data:`QUIET_DRAW`)."""
    runs: tuple[tuple[int, int, int, int], tuple[int, int, int, int]] = (NO_RUN, NO_RUN)
    """Each seat's chase run: ``(square the piece stands on, moves in the run, moves in its trailing
    back-and-forth, square it came from)``; :data:`NO_RUN` when its last move was not a chased move."""
    offer: int | None = None
    """The seat whose draw offer is pending."""
    offers_left: tuple[int, int] = (DRAW_OFFERS, DRAW_OFFERS)
    flag_pending: int | None = None
    """The square of a Flag on its far rank beside an enemy piece: its owner (the seat that is not to
    move) wins if it is still there after the opponent's next move."""
    result: Outcome | None = None


class SeenPiece(NamedTuple):
    """A piece as a viewer sees it."""

    square: str
    seat: int
    rank: str | None
    """Its code, or ``None`` when the viewer may not see it."""


class LastMove(NamedTuple):
    """The last move as everybody sees it: never a rank."""

    seat: int
    frm: str
    to: str
    challenge: bool
    result: str | None
    """For a challenge: ``attacker`` (the attacker won and stands on ``to``), ``defender`` (the attacker
    was removed) or ``both`` (both removed); ``None`` for a plain move."""
    removed: tuple[str, ...]
    """The squares a piece was removed from by the challenge: ``to`` (the defender's), ``frm`` (the
    attacker's, which never arrived), or both, in that order."""


class ChaseCount(NamedTuple):
    """A seat's chase run (see ``docs/generals.md``, "Draws")."""

    square: str | None
    """Where the chased piece stands (``None``: no run)."""
    moves: int
    """Consecutive chased moves of that piece (the 16-move perpetual draws at 16)."""
    shuttle: int
    """Of those, the trailing back-and-forth moves between two squares (the 5-move perpetual at 5)."""


class DrawWarning(NamedTuple):
    """An automatic draw :data:`WARN_WITHIN` moves away or nearer."""

    rule: str
    """``5-move``, ``16-move`` or ``no-challenges``."""
    seat: int | None
    """The seat whose chased piece it is about (``None`` for no-challenges)."""
    moves_left: int
    """Moves that draw the game: that seat's chased moves; for no-challenges, moves of both sides."""
    text: str


@dataclass(frozen=True, slots=True)
class GeneralsView:
    """What one seat (or a spectator, ``viewer`` ``None``) may see. Two states that differ only in
    ranks the viewer may not see give equal views."""

    viewer: int | None
    phase: Phase
    to_move: int | None
    turn: int | None
    """During play: the seat to move."""
    first: int | None
    ready: tuple[bool, bool]
    awaiting_chance: bool
    """The game waits for a draw from the fairness stream (nobody can act)."""
    pieces: tuple[SeenPiece, ...]
    """The pieces the viewer may see, by square index. During the setup: the viewer's own only (the
    opponent's appear once both arrangements are final)."""
    rows: tuple[tuple[str, ...], ...]
    """The board, absolute: rank 8 first, file a on the left; a cell is ``""`` (empty), ``W``/``B`` (a
    piece whose rank the viewer may not see) or ``W:PVT`` (a piece with its rank)."""
    missing: tuple[str, ...]
    """During the setup: the viewer's pieces not yet placed, in rank order."""
    last_move: LastMove | None
    lost: tuple[tuple[str, ...], tuple[str, ...]]
    """The ranks each seat lost, in the order lost, where the viewer may see them (its own; every seat's
    once the game is over); otherwise empty."""
    lost_counts: tuple[int, int]
    moves_played: int
    quiet_moves: int
    """Moves in a row without a challenge."""
    chase: tuple[ChaseCount, ChaseCount]
    warnings: tuple[DrawWarning, ...]
    draw_offer: int | None
    offers_left: tuple[int, int]
    flag_pending: str | None
    """The viewer's own Flag standing on the far rank beside an enemy piece (it wins if it survives the
    opponent's next move); ``None`` otherwise, and always for the opponent."""
    outcome: Outcome | None
    message: str


class GeneralsEngine:
    """Game of the Generals for the match runtime (see :class:`libs.engines.base.Engine`). Actions are
    text: ``setup <placements>``, ``ready``, ``b3-b4``, ``draw``, ``accept``, ``decline``."""

    family: str = "generals"
    hides_information: bool = True

    def new_game(self, options: GeneralsOptions | None = None) -> GeneralsState:
        options = GeneralsOptions() if options is None else options
        if not isinstance(options, GeneralsOptions):
            raise InvalidOptionsError(f"expected GeneralsOptions, got {type(options).__name__}")
        return GeneralsState(options=options, phase=Phase.SETUP, board=(0,) * SQUARES)

    def to_move(self, state: GeneralsState) -> int | None:
        """During the setup the first seat not ready (either seat may act first; while a draw is awaited,
        seat 0); during play the seat to move; ``None`` once over."""
        if state.result is not None:
            return None
        if state.phase is Phase.SETUP:
            return next((seat for seat in SEATS if not state.ready[seat]), 0)
        return state.turn

    def outcome(self, state: GeneralsState) -> Outcome | None:
        return state.result

    def is_over(self, state: GeneralsState) -> bool:
        return state.result is not None

    # -- chance ------------------------------------------------------------------------------------------

    def chance_needed(self, state: GeneralsState) -> ChanceRequest | None:
        """A completion shuffle per seat left incomplete at the setup deadline, then the first-mover coin
        once both seats are ready; ``None`` otherwise."""
        if state.result is not None or state.phase is not Phase.SETUP:
            return None
        if state.to_complete:
            return setup_request(state.setup_draws)
        if all(state.ready):
            return FIRST_REQUEST
        return None

    def apply_chance(
        self, state: GeneralsState, request: ChanceRequest, values: tuple[int, ...]
    ) -> GeneralsState:
        """The state once ``request`` was drawn with ``values``.

        :raises ValueError: ``request`` is not the pending draw, or ``values`` do not fit it.
        """
        expected = self.chance_needed(state)
        if expected is None:
            raise ValueError("this game waits for no draw")
        if request != expected:
            raise ValueError(f"this game waits for {expected}, not {request}")
        values = tuple(values)
        if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
            raise ValueError(f"draw values are integers, not {values!r}")
        if request.stream == SETUP_STREAM:
            if sorted(values) != list(range(HOME_SIZE)):
                raise ValueError(f"a setup shuffle is a permutation of 0 to 26, not {values!r}")
            seat = state.to_complete[0]
            board = complete_setup(state.board, seat, values)
            return replace(
                state, board=board, to_complete=state.to_complete[1:], setup_draws=state.setup_draws + 1
            )
        if len(values) != 1 or values[0] not in (0, 1):
            raise ValueError(f"a coin is one value, 0 or 1, not {values!r}")
        first = values[0]
        return replace(state, phase=Phase.PLAY, first=first, turn=first, initial=state.board)

    # -- the setup deadline ------------------------------------------------------------------------------

    def phase_deadline(self, state: GeneralsState) -> PhaseDeadline | None:
        """Five minutes for the setup, both seats at once, while a seat is not ready (the seat named is
        the only one not ready, if only one is)."""
        if state.result is not None or state.phase is not Phase.SETUP or all(state.ready):
            return None
        waiting = [seat for seat in SEATS if not state.ready[seat]]
        return PhaseDeadline(SETUP_WITHIN_MS, waiting[0] if len(waiting) == 1 else None)

    def on_phase_deadline(self, state: GeneralsState) -> GeneralsState:
        """The setup time is over: every seat not ready is made ready, and those with pieces missing wait
        for a completion draw each (:meth:`chance_needed`)."""
        if state.result is not None or state.phase is not Phase.SETUP or all(state.ready):
            return state
        late = [seat for seat in SEATS if not state.ready[seat]]
        short = tuple(seat for seat in late if _count(state.board, seat) < PIECES_PER_SIDE)
        return replace(state, ready=(True, True), to_complete=short, completed=state.completed + short)

    # -- actions -----------------------------------------------------------------------------------------

    def apply(self, state: GeneralsState, seat: int, action: str, context: ActionContext) -> GeneralsState:
        """The state after ``seat`` takes ``action`` (``context`` is not read: the clock is the runtime's).

        :raises MalformedActionError: the action cannot be read.
        :raises GameOverError: the game is over.
        :raises NotYourTurnError: a move out of turn, or any action while a draw is awaited.
        :raises IllegalActionError: anything else the position forbids (the message says what).
        """
        _check_seat(seat)
        parsed = _read(action)
        kind = parsed.kind
        if state.result is not None:
            raise GameOverError(f"the game is over ({state.result.detail})")
        if state.phase is Phase.SETUP:
            return _setup_action(state, seat, kind, parsed.placements)
        if kind in (SETUP, READY):
            raise IllegalActionError("the setup is over: the game is being played")
        if kind == "move":
            if seat != state.turn:
                raise NotYourTurnError(f"it is {SEAT_NAMES[1 - seat]}'s turn to move")
            return _move(state, seat, parsed.frm, parsed.to)
        return _offer_action(state, seat, kind)

    def legal_actions(self, state: GeneralsState, seat: int) -> list[str]:
        """What ``seat`` may do now, sorted. During the setup only ``ready`` (when all 21 pieces are
        placed and the seat is not ready): ``setup <placements>`` is always open to a seat not ready
        but never listed (there are far too many). During play the moves of the seat to move and the
        offer actions open to ``seat``. Nothing while a draw is awaited or once the game is over."""
        _check_seat(seat)
        if state.result is not None or self.chance_needed(state) is not None:
            return []
        if state.phase is Phase.SETUP:
            if not state.ready[seat] and _count(state.board, seat) == PIECES_PER_SIDE:
                return [READY]
            return []
        actions = legal_moves(state.board, seat) if seat == state.turn else []
        if state.offer is None:
            if state.offers_left[seat] > 0:
                actions.append(DRAW)
        elif state.offer != seat:
            actions += [ACCEPT, DECLINE]
        actions.sort()
        return actions

    def timeout_outcome(self, state: GeneralsState, seat: int) -> Outcome:
        """``seat`` took its third strike (the per-move clock is the runtime's): it loses."""
        _check_seat(seat)
        return _win(Termination.TIMEOUT, 1 - seat, f"{SEAT_NAMES[seat]} took a third strike")

    def resignation_outcome(self, state: GeneralsState, seat: int) -> Outcome:
        """``seat`` resigned: it loses."""
        _check_seat(seat)
        return _win(Termination.RESIGNATION, 1 - seat, f"{SEAT_NAMES[seat]} resigned")

    def view(self, state: GeneralsState, seat: int | None) -> GeneralsView:
        """What ``seat`` may see (``None``: a spectator, who sees no rank while the game is on)."""
        if seat is not None:
            _check_seat(seat)
        return _view(self, state, seat)


GENERALS = GeneralsEngine()
"""The Generals engine (it holds no state; one instance serves every match)."""


def setup_request(index: int) -> ChanceRequest:
    """The ``index``-th setup-completion draw (a shuffle of a seat's 27 home squares)."""
    return ChanceRequest(SETUP_STREAM, index, "shuffle", 1, HOME_SIZE)


def complete_setup(board: tuple[int, ...], seat: int, permutation: Sequence[int]) -> tuple[int, ...]:
    """``board`` with ``seat``'s missing pieces placed from a shuffle: ``permutation`` (of 0 to 26) orders
    the seat's home squares (``HOME[seat][permutation[0]]`` first); the missing pieces, in rank order, go
    on the empty ones in that order."""
    home = HOME[seat]
    own = [(s, board[s] & 15) for s in home if board[s]]
    lacking = missing(own)
    empty = [home[k] for k in permutation if not board[home[k]]]
    cells = list(board)
    for square, rank in zip(empty, lacking, strict=False):
        cells[square] = seat << 4 | rank
    return tuple(cells)


def legal_moves(board: tuple[int, ...], seat: int) -> list[str]:
    """Every move of ``seat``'s pieces on ``board`` (``b3-b4``), in square order (not sorted as text)."""
    moves: list[str] = []
    for i in range(SQUARES):
        v = board[i]
        if v and v >> 4 == seat:
            name = NAMES[i]
            for j in NEIGHBORS[i]:
                w = board[j]
                if not w or w >> 4 != seat:
                    moves.append(f"{name}-{NAMES[j]}")
    return moves


def parse_action(text: str) -> str:
    """An action in canonical form: ``ready``, ``draw``, ``accept``, ``decline`` (lower case), a move
    ``b3-b4`` (lower case), or ``setup`` followed by its placements in square order (``setup a1=FLG``).

    :raises MalformedActionError: not a Generals action.
    """
    parsed = _read(text)
    kind = parsed.kind
    if kind == "move":
        return f"{NAMES[parsed.frm]}-{NAMES[parsed.to]}"
    if kind == SETUP:
        body = placements_text(parsed.placements)
        return f"{SETUP} {body}" if body else SETUP
    return kind


def is_move(action: str) -> bool:
    """Whether ``action`` is a move (what the per-move clock times); setup actions and offers are not."""
    return _read(action).kind == "move"


def describe(state_before: GeneralsState, action: str) -> str:
    """The action as both players may be told it: canonical, but a ``setup`` never shows its placements."""
    canonical = parse_action(action)
    return SETUP if canonical.startswith(SETUP) else canonical


def replay(options: GeneralsOptions | None, steps: Sequence[object]) -> GeneralsState:
    """The state after ``steps`` from a new game: ``(seat, action)`` pairs applied with
    :meth:`~GeneralsEngine.apply`, the string :data:`DEADLINE` for the setup deadline passing, and
    tuples of integers handed to the pending draw."""
    state = GENERALS.new_game(options)
    context = ActionContext(remaining_ms=(0, 0))
    for step in steps:
        if step == DEADLINE:
            state = GENERALS.on_phase_deadline(state)
        elif isinstance(step, tuple) and len(step) == 2 and isinstance(step[1], str):
            state = GENERALS.apply(state, int(step[0]), step[1], context)
        elif isinstance(step, tuple):
            request = GENERALS.chance_needed(state)
            if request is None:
                raise ValueError(f"no draw is pending for {step!r}")
            state = GENERALS.apply_chance(state, request, tuple(int(v) for v in step))
        else:
            raise ValueError(f"not a replay step: {step!r}")
    return state


def chased_by(state: GeneralsState) -> int | None:
    """The square of the piece whose move chases the pieces beside it: the last move's piece, if it still
    stands where that move ended (``None`` before the first move, or after an attacker was removed)."""
    last = state.last
    if last is None or last.result in (Challenge.DEFENDER, Challenge.BOTH):
        return None
    return last.to


def draw_warnings(state: GeneralsState) -> tuple[DrawWarning, ...]:
    """The automatic draws :data:`WARN_WITHIN` moves away or nearer (see ``docs/generals.md``)."""
    if state.result is not None or state.phase is not Phase.PLAY:
        return ()
    warnings: list[DrawWarning] = []
    chaser = chased_by(state)
    for seat in SEATS:
        end, length, shuttle, _ = state.runs[seat]
        if length == 0:
            continue
        if seat == state.turn and (chaser is None or end not in NEIGHBORS[chaser]):
            continue  # its piece is not chased now: its next move cannot extend the run
        name = f"{SEAT_NAMES[seat]}'s piece on {NAMES[end]}"
        left = SHUTTLE_DRAW - shuttle
        if left <= WARN_WITHIN:
            warnings.append(
                DrawWarning(
                    "5-move",
                    seat,
                    left,
                    f"5-move perpetual: {left} more back-and-forth move{_s(left)} of {name}, while chased, "
                    "draw the game",
                )
            )
        left = CHASE_DRAW - length
        if left <= WARN_WITHIN:
            warnings.append(
                DrawWarning(
                    "16-move",
                    seat,
                    left,
                    f"16-move perpetual: {left} more move{_s(left)} of {name}, while chased, draw the game",
                )
            )
    left = QUIET_DRAW - state.quiet
    if left <= 2 * WARN_WITHIN:
        warnings.append(
            DrawWarning(
                "no-challenges",
                None,
                left,
                f"no challenges: {left} more move{_s(left)} without a challenge draw the game",
            )
        )
    return tuple(warnings)


# ---------------------------------------------------------------------------------------------------------
# Reading actions


class _Parsed(NamedTuple):
    kind: str
    """``move``, ``setup``, ``ready``, ``draw``, ``accept`` or ``decline``."""
    frm: int = -1
    to: int = -1
    placements: Placements = ()


def _read(action: object) -> _Parsed:
    if not isinstance(action, str):
        raise MalformedActionError(f"a Generals action is text (like b3-b4 or ready), not {action!r}")
    text = action.strip()
    word, _, rest = text.partition(" ")
    lowered = word.lower()
    if lowered == SETUP:
        return _Parsed(SETUP, placements=parse_placements(rest))
    if rest.strip():
        raise MalformedActionError(_unreadable(action))
    if lowered in (READY, DRAW, ACCEPT, DECLINE):
        return _Parsed(lowered)
    frm_text, dash, to_text = lowered.partition("-")
    if dash:
        frm = BY_NAME.get(frm_text)
        to = BY_NAME.get(to_text)
        if frm is not None and to is not None:
            return _Parsed("move", frm, to)
    raise MalformedActionError(_unreadable(action))


def _unreadable(action: str) -> str:
    return (
        f"{action!r} is not a Generals action: move with from-to (like b3-b4), or write setup a1=FLG ..., "
        "ready, draw, accept or decline"
    )


# ---------------------------------------------------------------------------------------------------------
# The setup


def _setup_action(state: GeneralsState, seat: int, kind: str, argument: Placements) -> GeneralsState:
    if state.to_complete or all(state.ready):
        raise NotYourTurnError("the setup is over: waiting for a draw from the fairness stream")
    if kind not in (SETUP, READY):
        raise IllegalActionError(
            "the pieces are still being set up: moves and draw offers start once both players are ready"
        )
    if state.ready[seat]:
        raise IllegalActionError("you are ready: your arrangement can no longer change")
    if kind == READY:
        placed = [(s, state.board[s] & 15) for s in HOME[seat] if state.board[s]]
        if len(placed) < PIECES_PER_SIDE:
            raise IllegalActionError(
                f"place all 21 pieces before you are ready ({len(placed)} placed; missing: "
                f"{missing_text(placed)})"
            )
        ready = (True, state.ready[1]) if seat == 0 else (state.ready[0], True)
        return replace(state, ready=ready)
    reasons = check_setup(seat, argument)
    if reasons:
        raise IllegalActionError("not a setup: " + "; ".join(reasons))
    cells = list(state.board)
    for s in HOME[seat]:
        cells[s] = 0
    for s, r in argument:
        cells[s] = seat << 4 | r
    return replace(state, board=tuple(cells))


def _count(board: tuple[int, ...], seat: int) -> int:
    return sum(1 for s in HOME[seat] if board[s])


# ---------------------------------------------------------------------------------------------------------
# Play


def _move(state: GeneralsState, seat: int, frm: int, to: int) -> GeneralsState:
    board = state.board
    mover = board[frm]
    if not mover or mover >> 4 != seat:
        raise IllegalActionError(f"you have no piece on {NAMES[frm]}")
    if to not in NEIGHBORS[frm]:
        raise IllegalActionError(f"{NAMES[frm]}-{NAMES[to]} is not one square forward, back, left or right")
    target = board[to]
    if target and target >> 4 == seat:
        raise IllegalActionError(f"{NAMES[to]} holds one of your own pieces")
    attacker = mover & 15
    cells = list(board)
    cells[frm] = 0
    if target:
        defender = target & 15
        result = int(CHALLENGE_TABLE[attacker - 1][defender - 1])
        if result == Challenge.ATTACKER:
            cells[to] = mover
        elif result == Challenge.BOTH:
            cells[to] = 0
    else:
        defender = 0
        result = 0
        cells[to] = mover
    step = Step(seat, frm, to, attacker, defender, result)
    # The chase run of the mover (docs/generals.md, "Draws").
    chaser = chased_by(state)
    runs = state.runs
    if target or chaser is None or frm not in NEIGHBORS[chaser]:
        run = NO_RUN
    else:
        end, length, shuttle, back = runs[seat]
        if length and end == frm:
            run = (to, length + 1, shuttle + 1 if to == back else 1, frm)
        else:
            run = (to, 1, 1, frm)
    runs = (run, runs[1]) if seat == 0 else (runs[0], run)
    quiet = 0 if target else state.quiet + 1
    offer = state.offer if state.offer == seat else None  # a move declines the opponent's offer
    new_board = tuple(cells)
    outcome = _after_move(state, seat, step, new_board, run, quiet)
    pending = None
    if outcome is None and attacker == FLG and result in (0, Challenge.ATTACKER) and to in FAR_SETS[seat]:
        pending = to
    return replace(
        state,
        phase=Phase.PLAY if outcome is None else Phase.OVER,
        board=new_board,
        turn=1 - seat,
        history=(*state.history, step),
        last=step,
        plies=state.plies + 1,
        quiet=quiet,
        runs=runs,
        offer=None if outcome is not None else offer,
        flag_pending=pending,
        result=outcome,
    )


def _after_move(
    state: GeneralsState,
    seat: int,
    step: Step,
    board: tuple[int, ...],
    run: tuple[int, int, int, int],
    quiet: int,
) -> Outcome | None:
    """How the move ends the game, if it does: wins first (a Flag captured, the mover's Flag reaching the
    far rank unopposed, then the opponent's Flag surviving on its far rank), then draws."""
    me, other = SEAT_NAMES[seat], SEAT_NAMES[1 - seat]
    frm, to = NAMES[step.frm], NAMES[step.to]
    if step.defender == FLG:
        how = "with its own Flag" if step.attacker == FLG else f"from {frm}"
        return _win(Termination.FLAG_CAPTURED, seat, f"{me} captured {other}'s Flag on {to} {how}")
    if step.attacker == FLG and step.result == Challenge.DEFENDER:
        return _win(
            Termination.FLAG_CAPTURED, 1 - seat, f"{me}'s Flag challenged {to} from {frm} and was captured"
        )
    if (
        step.attacker == FLG
        and step.result in (0, Challenge.ATTACKER)
        and step.to in FAR_SETS[seat]
        and not any(board[j] and board[j] >> 4 != seat for j in NEIGHBORS[step.to])
    ):
        how = f"{me}'s Flag reached {to} on the far rank with no enemy beside it"
        return _win(Termination.FLAG_REACHED, seat, how)
    if state.flag_pending is not None:
        square = NAMES[state.flag_pending]
        return _win(
            Termination.FLAG_REACHED,
            1 - seat,
            f"{other}'s Flag on {square} survived {me}'s move on the far rank",
        )
    if run[2] >= SHUTTLE_DRAW:
        return _draw(
            Termination.PERPETUAL_CHASE,
            f"5-move perpetual: {me}'s chased piece moved back and forth between {frm} and {to} "
            f"{SHUTTLE_DRAW} times",
        )
    if run[1] >= CHASE_DRAW:
        return _draw(
            Termination.PERPETUAL_CHASE,
            f"16-move perpetual: {me}'s chased piece, now on {to}, moved {CHASE_DRAW} times in a row",
        )
    if quiet >= QUIET_DRAW:
        return _draw(
            Termination.NO_CHALLENGES,
            f"no challenges: {QUIET_DRAW // 2} moves by each side without a challenge",
        )
    return None


def _offer_action(state: GeneralsState, seat: int, kind: str) -> GeneralsState:
    me, other = SEAT_NAMES[seat], SEAT_NAMES[1 - seat]
    offers_left = state.offers_left
    result: Outcome | None = None
    if kind == DRAW:
        if state.offer == seat:
            raise IllegalActionError("you have already offered a draw: wait for the answer")
        if state.offer is not None:
            raise IllegalActionError(f"{other} has offered a draw: accept or decline it")
        if offers_left[seat] <= 0:
            raise IllegalActionError(f"you have made your {DRAW_OFFERS} draw offers for this game")
        offer: int | None = seat
        offers_left = (
            (offers_left[0] - 1, offers_left[1]) if seat == 0 else (offers_left[0], offers_left[1] - 1)
        )
    else:
        if state.offer != 1 - seat:
            raise IllegalActionError(f"there is no draw offer from {other} to {kind}")
        offer = None
        if kind == ACCEPT:
            result = _draw(Termination.DRAW_AGREED, f"{me} accepted {other}'s draw offer")
    step = Step(seat, OFFER_CODES[kind], -1, 0, 0, 0)
    return replace(
        state,
        phase=Phase.OVER if result is not None else state.phase,
        history=(*state.history, step),
        offer=offer,
        offers_left=offers_left,
        result=result,
    )


# ---------------------------------------------------------------------------------------------------------
# Views


_RESULT_WORDS = {Challenge.ATTACKER: "attacker", Challenge.DEFENDER: "defender", Challenge.BOTH: "both"}


def last_move_seen(step: Step | None) -> LastMove | None:
    """The last move as everybody may see it."""
    if step is None:
        return None
    frm, to = NAMES[step.frm], NAMES[step.to]
    if not step.result:
        return LastMove(step.seat, frm, to, False, None, ())
    result = Challenge(step.result)
    removed = {Challenge.ATTACKER: (to,), Challenge.DEFENDER: (frm,), Challenge.BOTH: (to, frm)}[result]
    return LastMove(step.seat, frm, to, True, _RESULT_WORDS[result], removed)


def lost_pieces(state: GeneralsState) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The rank ids each seat lost, in the order lost."""
    lost: tuple[list[int], list[int]] = ([], [])
    for step in state.history:
        if not step.result:
            continue
        if step.result != Challenge.DEFENDER:
            lost[1 - step.seat].append(step.defender)
        if step.result != Challenge.ATTACKER:
            lost[step.seat].append(step.attacker)
    return tuple(lost[0]), tuple(lost[1])


def _view(engine: GeneralsEngine, state: GeneralsState, seat: int | None) -> GeneralsView:
    over = state.result is not None
    setup = state.phase is Phase.SETUP and not over
    final = all(state.ready) and not state.to_complete
    pieces: list[SeenPiece] = []
    cells: list[str] = [""] * SQUARES
    for i in range(SQUARES):
        v = state.board[i]
        if not v:
            continue
        owner = v >> 4
        if setup and owner != seat and not final:
            continue  # the opponent's arrangement is not final: not even its squares are shown
        known = over or owner == seat
        rank = CODES[v & 15] if known else None
        pieces.append(SeenPiece(NAMES[i], owner, rank))
        cells[i] = f"{SEAT_LETTERS[owner]}:{rank}" if rank else SEAT_LETTERS[owner]
    rows = tuple(tuple(cells[r * 9 : r * 9 + 9]) for r in range(7, -1, -1))
    lost_ids = lost_pieces(state)
    lost = tuple(tuple(CODES[r] for r in lost_ids[s]) if over or s == seat else () for s in SEATS)
    if seat is not None and setup:
        own = [(s, state.board[s] & 15) for s in HOME[seat] if state.board[s]]
        lacking = tuple(CODES[r] for r in missing(own))
    else:
        lacking = ()
    pending = None
    if state.flag_pending is not None and seat is not None and state.turn == 1 - seat and not over:
        pending = NAMES[state.flag_pending]
    chase = tuple(
        ChaseCount(NAMES[end] if length else None, length, shuttle) for end, length, shuttle, _ in state.runs
    )
    return GeneralsView(
        viewer=seat,
        phase=Phase.OVER if over else state.phase,
        to_move=engine.to_move(state),
        turn=None if over else state.turn,
        first=state.first,
        ready=state.ready,
        awaiting_chance=engine.chance_needed(state) is not None,
        pieces=tuple(pieces),
        rows=rows,
        missing=lacking,
        last_move=last_move_seen(state.last),
        lost=(lost[0], lost[1]),
        lost_counts=(len(lost_ids[0]), len(lost_ids[1])),
        moves_played=state.plies,
        quiet_moves=state.quiet,
        chase=(chase[0], chase[1]),
        warnings=draw_warnings(state),
        draw_offer=state.offer,
        offers_left=state.offers_left,
        flag_pending=pending,
        outcome=state.result,
        message=_message(engine, state, seat, pending),
    )


def _message(engine: GeneralsEngine, state: GeneralsState, seat: int | None, pending: str | None) -> str:
    if state.result is not None:
        return state.result.detail
    if state.phase is Phase.SETUP:
        if engine.chance_needed(state) is not None:
            return "the setup is over: waiting for a draw from the fairness stream"
        ready = [SEAT_NAMES[s] for s in SEATS if state.ready[s]]
        waiting = " and ".join(SEAT_NAMES[s] for s in SEATS if not state.ready[s])
        said = f"{' and '.join(ready)} ready; " if ready else ""
        return f"setup: {said}{waiting} to arrange {'its' if len(ready) == 1 else 'their'} pieces"
    assert state.turn is not None
    parts: list[str] = []
    last = last_move_seen(state.last)
    if last is not None:
        who = SEAT_NAMES[last.seat]
        if not last.challenge:
            parts.append(f"{who} moved {last.frm}-{last.to}")
        elif last.result == "attacker":
            parts.append(f"{who} challenged {last.to} from {last.frm} and won")
        elif last.result == "defender":
            parts.append(f"{who} challenged {last.to} from {last.frm} and lost")
        else:
            parts.append(f"{who} challenged {last.to} from {last.frm}: both pieces removed")
    if state.offer is not None:
        parts.append(f"{SEAT_NAMES[state.offer]} offers a draw")
    if pending is not None:
        parts.append(f"your Flag on {pending} wins if it survives this move")
    parts.append(f"{SEAT_NAMES[state.turn]} to move")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------------------
# Helpers


def _win(termination: Termination, winner: int, how: str) -> Outcome:
    return Outcome(
        termination=termination,
        winner=winner,
        detail=f"{how}; {SEAT_NAMES[winner]} wins",
        score=(1.0, 0.0) if winner == 0 else (0.0, 1.0),
    )


def _draw(termination: Termination, how: str) -> Outcome:
    return Outcome(termination=termination, winner=None, detail=f"{how}; the game is drawn", score=(0.5, 0.5))


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _check_seat(seat: object) -> None:
    if seat not in SEATS or isinstance(seat, bool):
        raise ValueError(f"Game of the Generals has seats 0 (White) and 1 (Black), not {seat!r}")
