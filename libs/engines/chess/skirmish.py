"""Skirmish Chess: FIDE chess on the main board, every capture decided by a 5x5 duel (docs/skirmish.md).

A legal capture does not resolve at once. It starts a duel (:mod:`libs.engines.skirmish`) in which the
attacker's owner plays White and the defender's owner Black, whatever their colours on the main board.
The duel decides the capture: the attacker wins (the capture happens, with its promotion), the defender
wins (the attacking piece is removed, the defender stays), or a draw does what the table's draw rule
says (both removed, both stay, or as if the defender had won).

How the match runtime sees it (docs/match-runtime.md, "Phases"): while a duel is on, the game is in a
timed phase with clocks of its own (:class:`~libs.engines.base.PhaseDeadline` with ``per_move``), so the
main clocks stop; the deadline is the duel mover's own duel clock (or the countdown before the duel),
and a deadline that passes ends the countdown or loses the duel on time. Each duel move is charged the
``ActionContext.phase_elapsed_ms`` the runtime measured, and earns the duel increment. A random duel
setup is drawn from the match's fairness stream (stream ``skirmish``, one 20-item shuffle per candidate;
a candidate where White could take Black's king on move one is drawn again).

Situations ordinary chess never reaches, and what they do here (each tested, drawn in docs/skirmish.md):

- A failed capture can leave a king attackable by the side to move (a pinned piece that captured along
  the pin and lost, say). Capturing that king is then a legal capture attempt for any piece that attacks
  it, whatever the capturer's own king is facing: a duel with the king as the stake. A king that loses a
  duel (as the stake, or as an attacker) is removed, and its side loses the game at once
  (``KING_CAPTURED``). So no game ever goes on with a king missing; a draw that removes both pieces
  removes a king that was one of them, with the same effect.
- A failed en passant removes the capturing pawn only; a failed promotion capture removes the pawn and
  promotes nothing; a rook removed by a failed capture (or by a draw that removes both) takes its
  castling right with it.
- After every resolved capture the main board is judged as after any move: checkmate, stalemate, the
  dead positions, the seventy-five-move rule and fivefold repetition. A capture attempt, whatever its
  outcome, is irreversible: the fifty-move count starts again and earlier positions are not compared
  for repetition once the attacker or the defender was removed or the capture was drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

import chess

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
from libs.engines.chess.actions import AcceptDraw, ClaimDraw, DeclineDraw, Move, OfferDraw, parse_action
from libs.engines.chess.dead import is_blocked_dead
from libs.engines.chess.engine import _check_seat, _draw, _win
from libs.engines.chess.notation import COLOR_NAMES, color_of, resolve_move, seat_of
from libs.engines.chess.tiebreak import material
from libs.engines.skirmish import (
    PRESET_NAMES,
    RANDOM_SHUFFLE_SIZE,
    Duel,
    DuelEnd,
    Position,
    apply_odds,
    new_duel,
    parse_move,
    play,
    preset_position,
    random_position,
    square_name,
    time_out,
    white_can_take_king,
)
from libs.engines.skirmish import san as duel_san

SKIRMISH_STREAM = "skirmish"
"""The fairness stream of random duel setups: draw n is the n-th candidate of the match (from 0)."""

DEFAULT_DUEL_CLOCK_MS = 60_000
MAX_DUEL_CLOCK_MS = 600_000
MAX_DUEL_INCREMENT_MS = 60_000
MAX_COUNTDOWN_MS = 30_000
DUEL_ACTIONS_REFUSED = "a duel is being played: only duel moves (and resigning) are possible until it ends"


class DrawRule(StrEnum):
    """What a drawn duel does to the capture it decides."""

    BOTH_REMOVED = "both_removed"
    BOTH_STAY = "both_stay"
    DEFENDER_WINS = "defender_wins"


class DuelOutcome(StrEnum):
    """How a duel ended for its capture, and the mark its SAN gets (``+``, ``-``, ``=``)."""

    ATTACKER_WON = "attacker_won"
    DEFENDER_WON = "defender_won"
    DRAW = "draw"

    @property
    def mark(self) -> str:
        return {"attacker_won": "+", "defender_won": "-", "draw": "="}[self.value]


@dataclass(frozen=True, slots=True)
class SkirmishChessOptions:
    """A Skirmish Chess table's options (the main clock is the match's time control)."""

    preset: str = "classic"
    """One of :data:`~libs.engines.skirmish.PRESET_NAMES` (``random``: drawn for each duel)."""
    odds: bool = True
    """The weaker piece's side of each capture pair starts its duel with pawns removed."""
    draw_rule: DrawRule = DrawRule.BOTH_STAY
    duel_clock_ms: int = DEFAULT_DUEL_CLOCK_MS
    """Each side's duel clock, fresh for every duel."""
    duel_increment_ms: int = 0
    countdown_ms: int = 0
    """A pause before each duel in which nobody moves (0: none)."""
    initial_fen: str | None = None
    """A main-board starting position (tests, analysis); lobby and quick-match tables refuse it."""

    def __post_init__(self) -> None:
        if self.initial_fen is not None:
            try:
                board = chess.Board(self.initial_fen)
            except ValueError as error:
                raise InvalidOptionsError(f"invalid FEN {self.initial_fen!r}: {error}") from None
            if board.king(chess.WHITE) is None or board.king(chess.BLACK) is None:
                raise InvalidOptionsError(f"FEN {self.initial_fen!r} needs both kings")
            object.__setattr__(
                self, "initial_fen", None if board.fen() == chess.STARTING_FEN else board.fen()
            )
        if self.preset not in PRESET_NAMES:
            raise InvalidOptionsError(
                f"unknown skirmish preset {self.preset!r} (choose {', '.join(PRESET_NAMES)})"
            )
        try:
            object.__setattr__(self, "draw_rule", DrawRule(self.draw_rule))
        except ValueError:
            rules = ", ".join(rule.value for rule in DrawRule)
            raise InvalidOptionsError(f"unknown draw rule {self.draw_rule!r} (choose {rules})") from None
        if not 1_000 <= self.duel_clock_ms <= MAX_DUEL_CLOCK_MS:
            raise InvalidOptionsError(
                "the duel clock must be 1 s to "
                f"{MAX_DUEL_CLOCK_MS // 60_000} min, not {self.duel_clock_ms} ms"
            )
        if not 0 <= self.duel_increment_ms <= MAX_DUEL_INCREMENT_MS:
            raise InvalidOptionsError(
                "the duel increment must be 0 to "
                f"{MAX_DUEL_INCREMENT_MS // 1000} s, not {self.duel_increment_ms} ms"
            )
        if not 0 <= self.countdown_ms <= MAX_COUNTDOWN_MS:
            raise InvalidOptionsError(
                f"the countdown must be 0 to {MAX_COUNTDOWN_MS // 1000} s, not {self.countdown_ms} ms"
            )


@dataclass(frozen=True, slots=True)
class DuelSummary:
    """A finished duel, as the record keeps it."""

    capture_uci: str
    capture_san: str
    """The main-board move in SAN with its outcome mark (``Bxe5+``, ``Bxe5-``, ``Bxe5=``)."""
    outcome: DuelOutcome
    end: DuelEnd
    preset: str
    start_fen: str
    """The 5x5 position the duel started from, odds applied."""
    odds_removed: tuple[str, ...]
    moves_san: tuple[str, ...]
    moves_uci: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PendingCapture:
    """A capture attempt whose duel is being set up or played."""

    move: chess.Move
    san: str
    """The move's SAN without any mark (``Bxe5``)."""
    attacker: str
    """The attacking piece's symbol (upper case: White's on the main board)."""
    defender: str
    captured_square: int
    """The defender's square on the main board (for en passant, the passed pawn's square)."""
    attacker_seat: int
    duel: Duel | None
    """``None`` while a random setup is being drawn."""
    start_fen: str = ""
    odds_removed: tuple[str, ...] = ()
    clocks_ms: tuple[int, int] = (0, 0)
    """The duel White's and Black's clocks as of the latest duel event."""
    counting_down: bool = False

    @property
    def defender_seat(self) -> int:
        return 1 - self.attacker_seat

    def seat_of_duel_side(self, white: bool) -> int:
        return self.attacker_seat if white else self.defender_seat


@dataclass(frozen=True, slots=True)
class SkirmishChessState:
    """A Skirmish Chess game. Build it with :class:`SkirmishChessEngine`; never by hand."""

    options: SkirmishChessOptions
    moves_uci: tuple[str, ...]
    """Every main-board move, capture attempts included, in UCI."""
    moves_san: tuple[str, ...]
    """The same in SAN; a capture carries its duel's outcome mark instead of a check mark."""
    duels: tuple[DuelSummary, ...]
    pending: PendingCapture | None
    draw_offer: int | None
    result: Outcome | None
    draws_used: int
    """Draws taken from the ``skirmish`` stream so far (the next one's index)."""
    _board: chess.Board = field(repr=False, compare=False)

    @property
    def fen(self) -> str:
        return self._board.fen()

    @property
    def ply_count(self) -> int:
        return len(self.moves_uci)

    def board(self) -> chess.Board:
        """A copy of the main board (the caller may change it)."""
        return self._board.copy()


@dataclass(frozen=True, slots=True)
class DuelView:
    """The duel being played, as everyone sees it (Skirmish Chess hides nothing)."""

    capture_uci: str
    capture_san: str
    attacker: str
    defender: str
    white_seat: int
    black_seat: int
    preset: str
    fen: str
    """The 5x5 position with its side to move; empty while a random setup is being drawn."""
    odds_removed: tuple[str, ...]
    moves_san: tuple[str, ...]
    moves_uci: tuple[str, ...]
    ply: int
    clocks_ms: tuple[int, int]
    counting_down: bool
    legal_moves: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SkirmishChessView:
    """What a player or a spectator sees (every seat sees the same)."""

    fen: str
    moves_san: tuple[str, ...]
    moves_uci: tuple[str, ...]
    is_check: bool
    material: tuple[int, int]
    to_move: int | None
    legal_moves_uci: tuple[str, ...]
    """The main-board moves of the side to move (empty during a duel and once the game is over)."""
    legal_moves_san: tuple[str, ...]
    draw_offer: int | None
    can_claim_draw: bool
    ply_count: int
    duel: DuelView | None
    duels: tuple[DuelSummary, ...]
    outcome: Outcome | None


class SkirmishChessEngine:
    """Skirmish Chess for the match runtime (the protocol of :mod:`libs.engines.base`, with timed
    phases). Actions are text: a main-board move in UCI or SAN, a draw word, or during a duel a duel move
    in the 5x5 board's UCI (``b2b3``) or SAN."""

    family: str = "chess"

    def new_game(self, options: SkirmishChessOptions | None = None) -> SkirmishChessState:
        options = SkirmishChessOptions() if options is None else options
        if not isinstance(options, SkirmishChessOptions):
            raise InvalidOptionsError(f"expected SkirmishChessOptions, got {type(options).__name__}")
        board = chess.Board() if options.initial_fen is None else chess.Board(options.initial_fen)
        return SkirmishChessState(options, (), (), (), None, None, None, 0, board)

    # -- whose turn, and what is legal -------------------------------------------------------------------

    def to_move(self, state: SkirmishChessState) -> int | None:
        if state.result is not None:
            return None
        pending = state.pending
        if pending is not None:
            duel = pending.duel
            return (
                pending.attacker_seat
                if duel is None
                else pending.seat_of_duel_side(duel.position.white_to_move)
            )
        return seat_of(state._board.turn)

    def legal_actions(self, state: SkirmishChessState, seat: int) -> list[str]:
        """During a duel: the duel mover's duel moves (none in the countdown). Otherwise the main-board
        moves of the side to move, and the draw actions open to ``seat``."""
        _check_seat(seat)
        if state.result is not None:
            return []
        pending = state.pending
        if pending is not None:
            if pending.duel is None or pending.counting_down or self.to_move(state) != seat:
                return []
            return [move.uci for move in pending.duel.legal]
        turn = seat_of(state._board.turn) == seat
        actions = [move.uci() for move in main_moves(state._board)] if turn else []
        if state.draw_offer is None:
            actions.append(OfferDraw.notation)
        elif state.draw_offer != seat:
            actions += [AcceptDraw.notation, DeclineDraw.notation]
        if turn and _claimable(state._board) is not None:
            actions.append(ClaimDraw.notation)
        return sorted(actions)

    # -- applying actions --------------------------------------------------------------------------------

    def apply(
        self, state: SkirmishChessState, seat: int, action: object, context: ActionContext
    ) -> SkirmishChessState:
        _check_seat(seat)
        if state.result is not None:
            raise GameOverError(f"the game is over ({state.result.detail})")
        text = action if isinstance(action, str) else getattr(action, "notation", None)
        if not isinstance(text, str):
            raise MalformedActionError(f"not a Skirmish Chess action: {action!r}")
        if state.pending is not None:
            return self._duel_move(state, seat, text.strip(), context)
        parsed = parse_action(text)
        if isinstance(parsed, Move):
            return self._main_move(state, seat, parsed.notation)
        return self._draw_action(state, seat, parsed)

    def _main_move(self, state: SkirmishChessState, seat: int, notation: str) -> SkirmishChessState:
        board = state._board
        if seat_of(board.turn) != seat:
            raise NotYourTurnError(f"it is {COLOR_NAMES[seat_of(board.turn)]}'s turn")
        move = _resolve_main(board, notation)
        draw_offer = state.draw_offer if state.draw_offer == seat else None
        if not board.is_capture(move):
            # The history the rules read: the moves since the last capture attempt or pawn move.
            after = board.copy(stack=board.halfmove_clock)
            san = _main_san(board.copy(stack=False), move)
            after.push(move)
            return _judged(
                replace(
                    state,
                    moves_uci=(*state.moves_uci, move.uci()),
                    moves_san=(*state.moves_san, san),
                    draw_offer=draw_offer,
                    _board=after,
                )
            )
        return self._start_duel(replace(state, draw_offer=draw_offer), seat, move)

    def _start_duel(self, state: SkirmishChessState, seat: int, move: chess.Move) -> SkirmishChessState:
        board = state._board
        captured = _captured_square(board, move)
        attacker = board.piece_at(move.from_square)
        defender = board.piece_at(captured)
        assert attacker is not None
        assert defender is not None
        pending = PendingCapture(
            move=move,
            san=capture_san(board, move),
            attacker=attacker.symbol(),
            defender=defender.symbol(),
            captured_square=captured,
            attacker_seat=seat,
            duel=None,
        )
        started = replace(state, moves_uci=(*state.moves_uci, move.uci()), pending=pending)
        if state.options.preset == "random":
            return started  # chance_needed asks for the setup
        return self._set_up(started, preset_position(state.options.preset))

    def _set_up(self, state: SkirmishChessState, position: Position) -> SkirmishChessState:
        pending = state.pending
        assert pending is not None
        options = state.options
        removed: tuple[str, ...] = ()
        if options.odds:
            position, squares = apply_odds(position, pending.attacker, pending.defender)
            removed = tuple(square_name(sq) for sq in squares)
        duel = new_duel(position)
        set_up = replace(
            pending,
            duel=duel,
            start_fen=position.fen(),
            odds_removed=removed,
            clocks_ms=(options.duel_clock_ms, options.duel_clock_ms),
            counting_down=options.countdown_ms > 0 and duel.result is None,
        )
        return self._resolve_if_over(replace(state, pending=set_up))

    def _duel_move(
        self, state: SkirmishChessState, seat: int, text: str, context: ActionContext
    ) -> SkirmishChessState:
        pending = state.pending
        assert pending is not None
        if text in (OfferDraw.notation, AcceptDraw.notation, DeclineDraw.notation, ClaimDraw.notation):
            raise IllegalActionError(DUEL_ACTIONS_REFUSED)
        duel = pending.duel
        if duel is None:
            raise NotYourTurnError("the duel's setup is being drawn: wait for it")
        if pending.counting_down:
            raise NotYourTurnError("the duel has not started yet: wait for the countdown to end")
        white = duel.position.white_to_move
        mover = pending.seat_of_duel_side(white)
        if seat != mover:
            raise NotYourTurnError(f"it is {COLOR_NAMES[mover]}'s move in the duel")
        move = parse_move(duel.position, text)
        side = 0 if white else 1
        clocks = list(pending.clocks_ms)
        left = clocks[side] - context.phase_elapsed_ms
        if left <= 0:
            # The deadline fell in the very millisecond of the move: the clock decides.
            return self._resolve_if_over(replace(state, pending=replace(pending, duel=time_out(duel))))
        clocks[side] = left + state.options.duel_increment_ms
        played = replace(pending, duel=play(duel, move), clocks_ms=(clocks[0], clocks[1]))
        return self._resolve_if_over(replace(state, pending=played))

    def _draw_action(self, state: SkirmishChessState, seat: int, action: object) -> SkirmishChessState:
        me, opponent = COLOR_NAMES[seat], COLOR_NAMES[1 - seat]
        draw_offer = state.draw_offer
        result: Outcome | None = None
        if isinstance(action, OfferDraw):
            if draw_offer == seat:
                raise IllegalActionError("you have already offered a draw")
            if draw_offer is not None:
                raise IllegalActionError(f"{opponent} has offered a draw: accept or decline it")
            draw_offer = seat
        elif isinstance(action, AcceptDraw | DeclineDraw):
            if draw_offer != 1 - seat:
                verb = "accept" if isinstance(action, AcceptDraw) else "decline"
                raise IllegalActionError(f"there is no draw offer from {opponent} to {verb}")
            draw_offer = None
            if isinstance(action, AcceptDraw):
                result = _draw(Termination.DRAW_AGREED, f"{me} accepted {opponent}'s draw offer")
        elif isinstance(action, ClaimDraw):
            if getattr(action, "move", None):
                raise IllegalActionError(
                    "in Skirmish Chess a draw is claimed on the position as it stands, not with a move"
                )
            turn = seat_of(state._board.turn)
            if turn != seat:
                raise IllegalActionError(
                    f"only the player to move can claim a draw, and it is {COLOR_NAMES[turn]}'s turn"
                )
            claim = _claimable(state._board)
            if claim is None:
                raise IllegalActionError(
                    "no draw can be claimed: the position has not occurred three times, and fifty moves "
                    "have not passed without a capture attempt or pawn move"
                )
            draw_offer = None
            rule = (
                "threefold repetition" if claim is Termination.THREEFOLD_REPETITION else "the fifty-move rule"
            )
            result = _draw(claim, f"{me} claimed a draw by {rule}")
        else:
            raise MalformedActionError(f"not a Skirmish Chess action: {action!r}")
        return replace(state, draw_offer=draw_offer, result=result)

    # -- duels ending ------------------------------------------------------------------------------------

    def _resolve_if_over(self, state: SkirmishChessState) -> SkirmishChessState:
        pending = state.pending
        assert pending is not None
        assert pending.duel is not None
        result = pending.duel.result
        if result is None:
            return state
        if result.winner is True:
            outcome = DuelOutcome.ATTACKER_WON
        elif result.winner is False:
            outcome = DuelOutcome.DEFENDER_WON
        else:
            outcome = DuelOutcome.DRAW
        return _resolved(state, pending, outcome, result.end)

    # -- timed phases and chance -------------------------------------------------------------------------

    def phase_deadline(self, state: SkirmishChessState) -> PhaseDeadline | None:
        """During a duel: the countdown, or the duel mover's own duel clock (counted from the latest duel
        event). ``None`` on the main board: the main clocks time it."""
        pending = state.pending
        if pending is None or state.result is not None:
            return None
        options = state.options
        duel = pending.duel
        if duel is None:
            # The setup is being drawn (nothing is due meanwhile); the countdown or the first clock
            # starts when it is logged.
            within = options.countdown_ms or options.duel_clock_ms
            return PhaseDeadline(within, pending.attacker_seat, per_move=True)
        if pending.counting_down:
            return PhaseDeadline(options.countdown_ms, pending.attacker_seat, per_move=True)
        white = duel.position.white_to_move
        return PhaseDeadline(
            pending.clocks_ms[0 if white else 1], pending.seat_of_duel_side(white), per_move=True
        )

    def on_phase_deadline(self, state: SkirmishChessState) -> SkirmishChessState:
        """The countdown ended (the duel starts), or the duel mover's clock ran out (it loses the duel)."""
        pending = state.pending
        if pending is None or pending.duel is None:
            raise ValueError("no duel deadline can fall now")
        if pending.counting_down:
            return replace(state, pending=replace(pending, counting_down=False))
        duel = pending.duel
        side = 0 if duel.position.white_to_move else 1
        clocks = (0, pending.clocks_ms[1]) if side == 0 else (pending.clocks_ms[0], 0)
        return self._resolve_if_over(
            replace(state, pending=replace(pending, duel=time_out(duel), clocks_ms=clocks))
        )

    def chance_needed(self, state: SkirmishChessState) -> ChanceRequest | None:
        pending = state.pending
        if state.result is not None or pending is None or pending.duel is not None:
            return None
        return ChanceRequest(SKIRMISH_STREAM, state.draws_used, "shuffle", 1, RANDOM_SHUFFLE_SIZE)

    def apply_chance(
        self, state: SkirmishChessState, request: ChanceRequest, values: tuple[int, ...]
    ) -> SkirmishChessState:
        if request != self.chance_needed(state):
            raise ValueError(f"the game does not need draw {request}")
        drawn = replace(state, draws_used=state.draws_used + 1)
        position = random_position(values)
        pending = state.pending
        assert pending is not None
        if state.options.odds:
            played, _ = apply_odds(position, pending.attacker, pending.defender)
        else:
            played = position
        if white_can_take_king(played):
            return drawn  # Black is protected from a king capture on move one: draw again
        return self._set_up(drawn, position)

    # -- outcomes ----------------------------------------------------------------------------------------

    def outcome(self, state: SkirmishChessState) -> Outcome | None:
        return state.result

    def is_over(self, state: SkirmishChessState) -> bool:
        return state.result is not None

    def resignation_outcome(self, state: SkirmishChessState, seat: int) -> Outcome:
        _check_seat(seat)
        other = 1 - seat
        if _lone_king(state._board, color_of(other)):
            return _draw(
                Termination.DEAD_POSITION,
                f"{COLOR_NAMES[seat]} resigned, but {COLOR_NAMES[other]} has a lone king and cannot win: "
                "draw",
            )
        return _win(Termination.RESIGNATION, other, f"{COLOR_NAMES[seat]} resigned")

    def timeout_outcome(self, state: SkirmishChessState, seat: int) -> Outcome:
        _check_seat(seat)
        other = 1 - seat
        if _lone_king(state._board, color_of(other)):
            return _draw(
                Termination.TIMEOUT_VS_INSUFFICIENT_MATERIAL,
                f"{COLOR_NAMES[seat]} ran out of time, but {COLOR_NAMES[other]} has a lone king and cannot "
                "win: draw",
            )
        return _win(
            Termination.TIMEOUT, other, f"{COLOR_NAMES[seat]} ran out of time; {COLOR_NAMES[other]} wins"
        )

    # -- views -------------------------------------------------------------------------------------------

    def view(self, state: SkirmishChessState, seat: int | None) -> SkirmishChessView:
        if seat is not None:
            _check_seat(seat)
        board = state._board
        over = state.result is not None
        on_main = not over and state.pending is None
        moves = main_moves(board) if on_main else ()
        scratch = board.copy(stack=False)
        return SkirmishChessView(
            fen=board.fen(),
            moves_san=state.moves_san,
            moves_uci=state.moves_uci,
            is_check=board.is_check(),
            material=material(board),
            to_move=self.to_move(state),
            legal_moves_uci=tuple(move.uci() for move in moves),
            legal_moves_san=tuple(_main_san(scratch, move) for move in moves),
            draw_offer=state.draw_offer,
            can_claim_draw=on_main and _claimable(board) is not None,
            ply_count=state.ply_count,
            duel=None if over else _duel_view(state),
            duels=state.duels,
            outcome=state.result,
        )

    def move_san(self, state: SkirmishChessState, notation: str) -> str:
        """How ``notation`` reads in ``state``: a main-board move in SAN (a capture without its mark,
        which its duel gives it), or a duel move as ``duel: <5x5 SAN>``."""
        pending = state.pending
        if pending is not None and pending.duel is not None and not pending.counting_down:
            duel_move = parse_move(pending.duel.position, notation)
            return f"duel: {duel_san(pending.duel.position, duel_move)}"
        move = _resolve_main(state._board, notation)
        return _main_san(state._board.copy(stack=False), move)


SKIRMISH_CHESS = SkirmishChessEngine()


# -- the main board ---------------------------------------------------------------------------------------


def main_moves(board: chess.Board) -> tuple[chess.Move, ...]:
    """The main-board moves of the side to move, sorted by UCI: the legal chess moves, and every move
    that captures the opponent's king where a failed capture left it attackable (a capture attempt that
    any piece attacking the king may make; docs/skirmish.md)."""
    moves = set(board.generate_legal_moves())
    king = board.king(not board.turn)
    if king is not None:
        moves.update(board.generate_pseudo_legal_moves(chess.BB_ALL, chess.BB_SQUARES[king]))
    return tuple(sorted(moves, key=chess.Move.uci))


def _resolve_main(board: chess.Board, notation: str) -> chess.Move:
    king = board.king(not board.turn)
    if king is not None and board.is_attacked_by(board.turn, king):
        # A king capture may be one python-chess does not call legal (the capturer pinned, or its own king
        # in check): look it up among the main-board moves first.
        for move in main_moves(board):
            if notation in (move.uci(), _main_san(board.copy(stack=False), move).rstrip("+#")):
                return move
    return resolve_move(board, notation)


def _captured_square(board: chess.Board, move: chess.Move) -> int:
    if board.is_en_passant(move):
        return move.to_square + (-8 if board.turn == chess.WHITE else 8)
    return move.to_square


def capture_san(board: chess.Board, move: chess.Move) -> str:
    """A capture attempt's SAN without a check mark (its duel's outcome mark replaces it); a capture of
    a king is written with its origin square (``Bb5xe8``)."""
    return _main_san(board.copy(stack=False), move).rstrip("+#")


def _main_san(scratch: chess.Board, move: chess.Move) -> str:
    """SAN as python-chess writes it; a capture of a king (which python-chess's SAN cannot judge for
    check) is written plainly."""
    king = scratch.king(not scratch.turn)
    if king is not None and move.to_square == king:
        piece = scratch.piece_at(move.from_square)
        assert piece is not None
        origin = chess.square_name(move.from_square)
        prefix = origin[0] if piece.piece_type == chess.PAWN else piece.symbol().upper() + origin
        promotion = "" if move.promotion is None else "=" + chess.piece_symbol(move.promotion).upper()
        return f"{prefix}x{chess.square_name(move.to_square)}{promotion}"
    return scratch.san(move)


def _resolved(
    state: SkirmishChessState, pending: PendingCapture, outcome: DuelOutcome, end: DuelEnd
) -> SkirmishChessState:
    """The game once ``pending``'s duel ended with ``outcome``: the main board changed as the outcome
    (and for a draw the table's rule) says, the move's SAN marked, the duel summarised, and the main
    board judged."""
    duel = pending.duel
    assert duel is not None
    summary = DuelSummary(
        capture_uci=pending.move.uci(),
        capture_san=pending.san + outcome.mark,
        outcome=outcome,
        end=end,
        preset=state.options.preset,
        start_fen=pending.start_fen,
        odds_removed=pending.odds_removed,
        moves_san=duel.moves_san,
        moves_uci=duel.moves_uci,
    )
    after, king_lost = board_after_duel(state._board, pending.move, outcome, state.options.draw_rule)
    base = replace(
        state,
        moves_san=(*state.moves_san, summary.capture_san),
        duels=(*state.duels, summary),
        pending=None,
        _board=after,
    )
    if king_lost is None:
        return _judged(base)
    loser = seat_of(king_lost)
    winner = 1 - loser
    if king_lost == state._board.turn:
        how = (
            "attacked and lost its duel" if outcome is not DuelOutcome.DRAW else "was removed by a drawn duel"
        )
    else:
        how = "was taken in a duel" if outcome is DuelOutcome.ATTACKER_WON else "was removed by a drawn duel"
    detail = f"{COLOR_NAMES[loser]}'s king {how}; {COLOR_NAMES[winner]} wins"
    return replace(base, result=_win(Termination.KING_CAPTURED, winner, detail))


def board_after_duel(
    board: chess.Board, move: chess.Move, outcome: DuelOutcome, draw_rule: DrawRule
) -> tuple[chess.Board, chess.Color | None]:
    """The main board after the capture attempt ``move`` in ``board`` was decided by a duel, and the
    colour of a king the duel removed (its side has lost), if one did.

    Attacker won: the capture as chess makes it (promotion, en passant, castling rights). Defender won,
    or a draw under ``defender_wins``: the attacker is removed from its square. A draw under
    ``both_removed``: the attacker and the defender are removed. A draw under ``both_stay``: nothing
    moves. Every outcome passes the turn."""
    attacker = board.piece_at(move.from_square)
    captured = _captured_square(board, move)
    defender = board.piece_at(captured)
    assert attacker is not None
    assert defender is not None
    effect = outcome
    if outcome is DuelOutcome.DRAW and draw_rule is DrawRule.DEFENDER_WINS:
        effect = DuelOutcome.DEFENDER_WON
    if effect is DuelOutcome.ATTACKER_WON:
        after = board.copy(stack=False)
        if defender.piece_type == chess.KING:
            after.remove_piece_at(captured)
            after.set_piece_at(move.to_square, after.remove_piece_at(move.from_square))
            after.turn = not board.turn
            return after, defender.color
        after.push(move)
        return chess.Board(after.fen()), None
    if effect is DuelOutcome.DEFENDER_WON:
        lost = attacker.color if attacker.piece_type == chess.KING else None
        return _edited(board, [move.from_square]), lost
    if draw_rule is DrawRule.BOTH_REMOVED:
        lost = next((p.color for p in (attacker, defender) if p.piece_type == chess.KING), None)
        return _edited(board, [move.from_square, captured]), lost
    return _edited(board, []), None


def _edited(board: chess.Board, removed: Sequence[int]) -> chess.Board:
    """``board`` with the pieces on ``removed`` taken off and the turn passed: no en passant, the
    fifty-move count from zero, castling rights that lost their rook (or king) dropped, no history."""
    after = board.copy(stack=False)
    for square in removed:
        after.remove_piece_at(square)
    after.turn = not board.turn
    after.ep_square = None
    after.halfmove_clock = 0
    if board.turn == chess.BLACK:
        after.fullmove_number = board.fullmove_number + 1
    after.castling_rights = after.clean_castling_rights()
    return chess.Board(after.fen())


def _judged(state: SkirmishChessState) -> SkirmishChessState:
    """``state`` with the main board's end, if the position just made ends the game (FIDE laws with
    Skirmish Chess's moves): checkmate, stalemate, a dead position, seventy-five moves, fivefold."""
    board = state._board
    side = COLOR_NAMES[seat_of(board.turn)]
    result: Outcome | None = None
    if not main_moves(board):
        if board.is_check():
            winner = 1 - seat_of(board.turn)
            result = _win(Termination.CHECKMATE, winner, f"checkmate; {COLOR_NAMES[winner]} wins")
        else:
            result = _draw(Termination.STALEMATE, f"stalemate: {side} has no legal move and is not in check")
    elif _lone_king(board, chess.WHITE) and _lone_king(board, chess.BLACK):
        result = _draw(Termination.DEAD_POSITION, "dead position: two lone kings can never capture anything")
    elif is_blocked_dead(board):
        result = _draw(
            Termination.DEAD_POSITION,
            "dead position: the pawns are locked and neither king can ever capture one, so no capture or "
            "checkmate is possible",
        )
    elif board.halfmove_clock >= 150:
        result = _draw(
            Termination.SEVENTYFIVE_MOVES,
            "seventy-five-move rule: 75 moves each without a capture attempt or pawn move",
        )
    elif board.is_fivefold_repetition():
        result = _draw(Termination.FIVEFOLD_REPETITION, "fivefold repetition: a position occurred five times")
    return state if result is None else replace(state, result=result)


def _claimable(board: chess.Board) -> Termination | None:
    """A claim on the position as it stands: it occurred three times, or fifty moves passed."""
    if board.halfmove_clock >= 8 and board.is_repetition(3):
        return Termination.THREEFOLD_REPETITION
    if board.halfmove_clock >= 100:
        return Termination.FIFTY_MOVES
    return None


def _lone_king(board: chess.Board, color: chess.Color) -> bool:
    return board.occupied_co[color] == board.kings & board.occupied_co[color]


def _duel_view(state: SkirmishChessState) -> DuelView | None:
    pending = state.pending
    if pending is None:
        return None
    duel = pending.duel
    return DuelView(
        capture_uci=pending.move.uci(),
        capture_san=pending.san,
        attacker=pending.attacker,
        defender=pending.defender,
        white_seat=pending.attacker_seat,
        black_seat=pending.defender_seat,
        preset=state.options.preset,
        fen="" if duel is None else duel.position.fen(),
        odds_removed=pending.odds_removed,
        moves_san=() if duel is None else duel.moves_san,
        moves_uci=() if duel is None else duel.moves_uci,
        ply=0 if duel is None else duel.ply,
        clocks_ms=pending.clocks_ms,
        counting_down=pending.counting_down,
        legal_moves=() if duel is None or pending.counting_down else tuple(m.uci for m in duel.legal),
    )
