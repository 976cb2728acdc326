"""The chess engine: rules, outcomes and views for the ``contest`` and ``fide`` rulesets, on python-chess.

State keeps a private python-chess :class:`chess.Board` that is never changed once the state is built.
``apply`` copies it, makes the move on the copy and computes everything that needs to change a board
(SAN of the move, checkmate, repetition) on that copy before it is frozen into the new state. Reads
that python-chess implements by pushing and popping moves (``san``, the moves a draw claim may name) run
on a scratch copy. A state can therefore be shared freely, across threads too. Copying beats rebuilding
the board from (initial FEN, moves) on every action: the cost is bounded by the moves that repetition
detection needs, not by the length of the game.

The copy keeps only the history the rules read: none in ``contest`` (repetition never matters there),
and in ``fide`` the moves since the last capture or pawn move (the halfmove clock), which is all that
threefold and fivefold repetition look at, since no position before an irreversible move can recur.

The end of the game is computed once, when the action that ends it is applied, and stored in the state:
the contest tiebreak needs the clocks of that action (:class:`ActionContext`), which no later call has.

A position's legal moves are listed at most once (:class:`_LegalMoves`, kept in the state), when first
asked for (by the view or the legal actions), and their SAN written at most once. ``apply`` reads the
incoming move and writes its SAN from that list when it is there (the rules service has always viewed a
position before a move is made from it); otherwise it generates only what python-chess's own
``resolve_move`` and ``Board.san`` would. Of the position it makes, ``apply`` only asks whether there is
a legal move at all, which python-chess answers at the first one it finds (a tenth of the cost of the
list): replaying a log, which never looks at the positions on the way, pays for no list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from operator import itemgetter

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
    Termination,
)
from libs.engines.chess.actions import (
    CLAIM_DRAW,
    DRAW_ACTIONS,
    AcceptDraw,
    ChessAction,
    ClaimDraw,
    DeclineDraw,
    Move,
    OfferDraw,
    parse_action,
)
from libs.engines.chess.dead import cannot_mate, is_blocked_dead
from libs.engines.chess.notation import COLOR_NAMES, color_of, is_uci_notation, resolve_move, seat_of
from libs.engines.chess.san import legal_moves_san, move_san
from libs.engines.chess.tiebreak import break_tie, material

SEATS = (0, 1)
"""Seat 0 plays White, seat 1 plays Black."""

DRAW_SCORE = (0.5, 0.5)

CONTEST_DRAWS_REFUSED = "draw offers and claims are not allowed in contest games"


class Ruleset(StrEnum):
    """Which rules a table plays."""

    CONTEST = "contest"
    """SkillClassics contest chess: no draws; drawn positions go to the tiebreak; repetition is ignored."""
    FIDE = "fide"
    """The FIDE laws: draw offers, threefold and fifty-move claims, automatic draws."""


@dataclass(frozen=True, slots=True)
class ChessOptions:
    """A chess table's rules.

    ``initial_fen`` starts the game from a position instead of the usual one; it is normalised to
    python-chess's FEN, and the usual position's FEN to ``None``. A FEN that is not a legal position,
    or one where the game is already over (no legal move, insufficient material, halfmove clock at
    150, and in ``fide`` a blocked dead position), raises :class:`InvalidOptionsError`.
    """

    ruleset: Ruleset = Ruleset.CONTEST
    initial_fen: str | None = None

    def __post_init__(self) -> None:
        try:
            ruleset = Ruleset(self.ruleset)
        except ValueError:
            choices = ", ".join(r.value for r in Ruleset)
            raise InvalidOptionsError(f"unknown chess ruleset {self.ruleset!r} (choose {choices})") from None
        object.__setattr__(self, "ruleset", ruleset)
        if self.initial_fen is not None:
            board = _board_from_fen(self.initial_fen)
            if ruleset is Ruleset.FIDE and is_blocked_dead(board):
                raise InvalidOptionsError(
                    f"FEN {self.initial_fen!r} is a dead position (locked pawns): a FIDE game would be over"
                )
            fen = board.fen()
            object.__setattr__(self, "initial_fen", None if fen == chess.STARTING_FEN else fen)

    def initial_board(self) -> chess.Board:
        """A fresh board at the starting position."""
        return chess.Board() if self.initial_fen is None else chess.Board(self.initial_fen)


def _board_from_fen(fen: str) -> chess.Board:
    if not isinstance(fen, str):
        raise InvalidOptionsError(f"initial_fen must be a string, not {type(fen).__name__}")
    try:
        board = chess.Board(fen)
    except ValueError as error:
        raise InvalidOptionsError(f"invalid FEN {fen!r}: {error}") from None
    status = board.status()
    if status != chess.STATUS_VALID:
        problems = ", ".join(
            flag.name.lower().replace("_", " ") for flag in chess.Status if flag.name and flag in status
        )
        raise InvalidOptionsError(f"FEN {fen!r} is not a legal chess position: {problems}")
    if not any(board.generate_legal_moves()):
        raise InvalidOptionsError(f"FEN {fen!r} has no legal move: the game would be over before it starts")
    if board.is_insufficient_material():
        raise InvalidOptionsError(f"FEN {fen!r} has insufficient material: the game would be over already")
    if board.halfmove_clock >= 150:
        raise InvalidOptionsError(f"FEN {fen!r} has a halfmove clock of 150 or more: the game would be over")
    return board


class _LegalMoves:
    """The legal moves of one position (one board that nobody changes any more), each list computed at
    most once, when first asked for: the moves sorted by UCI with their UCI, and their SAN.

    A :class:`ChessState` holds the memo of its own board and checks that it is that board's, so a state
    made with :func:`dataclasses.replace` on another board gets a fresh one. Threads may share it: each
    list is computed from the board alone and stored as one finished value, so two threads that ask at
    the same moment at worst both compute the same list.
    """

    __slots__ = ("_claims", "_listing", "_sans", "board")

    def __init__(self, board: chess.Board) -> None:
        self.board = board
        self._listing: tuple[tuple[chess.Move, ...], tuple[str, ...], dict[str, int]] | None = None
        self._sans: tuple[str, ...] | None = None
        self._claims: tuple[str, ...] | None = None

    def _list(self) -> tuple[tuple[chess.Move, ...], tuple[str, ...], dict[str, int]]:
        listing = self._listing
        if listing is None:
            pairs = sorted(
                ((move.uci(), move) for move in self.board.generate_legal_moves()), key=itemgetter(0)
            )
            ucis = tuple(uci for uci, _ in pairs)
            listing = (tuple(move for _, move in pairs), ucis, {uci: i for i, uci in enumerate(ucis)})
            self._listing = listing
        return listing

    @property
    def moves(self) -> tuple[chess.Move, ...]:
        """The legal moves, sorted by UCI."""
        return self._list()[0]

    @property
    def ucis(self) -> tuple[str, ...]:
        """The legal moves in UCI, sorted."""
        return self._list()[1]

    def sans(self) -> tuple[str, ...]:
        """The legal moves in SAN, in the order of :attr:`ucis`, with check and mate marks."""
        sans = self._sans
        if sans is None:
            scratch = self.board.copy(stack=False)  # SAN pushes and pops: never on the shared board
            sans = self._sans = tuple(legal_moves_san(scratch, self.moves))
        return sans

    def resolve(self, text: str) -> chess.Move:
        """The legal move ``text`` names, exactly as :func:`resolve_move` finds it (and with its errors):
        a legal move in UCI is looked up in the list if it is made (its promotion letter in either case);
        anything else goes to :func:`resolve_move`, which generates only the moves from its square."""
        listing = self._listing
        if listing is not None and is_uci_notation(text):
            found = listing[2].get(text.lower())  # squares are lower case already: this lowers the promotion
            if found is not None:
                return listing[0][found]
        return resolve_move(self.board, text)

    def has_moves(self) -> bool:
        """Whether the position has a legal move: from the list if it is made, otherwise python-chess
        stops at the first legal move it finds."""
        listing = self._listing
        if listing is not None:
            return bool(listing[0])
        return any(self.board.generate_legal_moves())

    def played_san(self, move: chess.Move, after: chess.Board, replies: bool) -> str:
        """The SAN of ``move``, one of the legal moves, given the board ``after`` it and whether the side
        to move there has a legal move (``replies``): what ``board.san_and_push`` writes, from the SAN
        list if it is made, else from the legal moves if they are listed, else as python-chess would."""
        if self._sans is not None:
            return self.san(move)
        check = after.is_check()
        listing = self._listing
        moves = listing[0] if listing is not None else None
        return move_san(self.board, move, moves, check=check, mate=check and not replies)

    def san(self, move: chess.Move) -> str:
        """The SAN of ``move``, one of the legal moves, exactly as ``Board.san`` writes it."""
        sans = self._sans
        if sans is not None:
            return sans[self._list()[2][move.uci()]]
        return self.board.copy(stack=False).san(move)

    def claim_moves(self) -> tuple[str, ...]:
        """The legal moves, in UCI and sorted, with which a draw claim would succeed (see
        :func:`_claim_moves`). Only for a board that keeps the FIDE history (the moves since the last
        capture or pawn move); computed at most once, and only where a cheap test says one may exist."""
        claims = self._claims
        if claims is None:
            claims = self._claims = _claim_moves(self.board, self)
        return claims


@dataclass(frozen=True, slots=True)
class ChessState:
    """A chess game: options, the moves made, any pending draw offer and, once over, the outcome.

    Build it with :meth:`ChessEngine.new_game` and :meth:`ChessEngine.apply`; never construct it by
    hand. States compare by value: options, moves, draw offer, outcome and clocks (the board and the
    memo of its legal moves are derived from those and take no part).
    """

    options: ChessOptions
    moves_uci: tuple[str, ...]
    """The moves of this game in UCI."""
    moves_san: tuple[str, ...]
    """The same moves in SAN, with check and mate marks."""
    draw_offer: int | None
    """The seat whose draw offer is pending (FIDE ruleset), or ``None``."""
    result: Outcome | None
    """The outcome the board or the players produced, or ``None`` while play goes on. Outcomes decided
    outside the board (timeout, resignation, forfeit, abort) belong to the runtime, not to the state."""
    remaining_ms: tuple[int, ...] | None
    """Each seat's clock as of the last action (``None`` before any), as the contest tiebreak read it."""
    claimable_draw: Termination | None
    """The draw the side to move could claim on the position as it stands (FIDE ruleset, ``claim_draw``
    without a move): ``THREEFOLD_REPETITION`` (this position has occurred three times) or ``FIFTY_MOVES``
    (fifty moves by each side, 100 half-moves, without a capture or pawn move); ``None`` otherwise, and
    once the game is over. A claim that some move would complete is not counted here: it must name the
    move (``claim_draw <move>``; :attr:`ChessView.claim_moves`). Computed once per position because
    python-chess checks a repetition by popping and pushing moves."""
    _board: chess.Board = field(repr=False, compare=False)
    _legal: _LegalMoves = field(repr=False, compare=False)
    """The legal moves of ``_board``, computed once (see :class:`_LegalMoves`)."""

    def __post_init__(self) -> None:
        if self._legal.board is not self._board:  # dataclasses.replace with another board
            object.__setattr__(self, "_legal", _LegalMoves(self._board))

    @property
    def ply_count(self) -> int:
        """Half-moves played in this game."""
        return len(self.moves_uci)

    @property
    def first_mover(self) -> int:
        """The seat that moved first in this game (White, unless the initial FEN had Black to move)."""
        return seat_of(self._board.turn) if self.ply_count % 2 == 0 else 1 - seat_of(self._board.turn)

    @property
    def fen(self) -> str:
        """The current position in FEN."""
        return self._board.fen()

    def board(self) -> chess.Board:
        """A copy of the current board, with the history the rules keep; the caller may change it."""
        return self._board.copy()


@dataclass(frozen=True, slots=True)
class ChessView:
    """What a player or a spectator sees. Chess hides nothing, so every seat gets the same view."""

    fen: str
    initial_fen: str | None
    ruleset: Ruleset
    moves_san: tuple[str, ...]
    moves_uci: tuple[str, ...]
    last_move: str | None
    """The last move in UCI, or ``None`` before the first."""
    is_check: bool
    """Whether the side to move (or the mated side) is in check."""
    material: tuple[int, int]
    """Material of White and Black at P=1 N=3 B=3 R=5 Q=9."""
    to_move: int | None
    """The seat to move, or ``None`` once the game is over."""
    legal_moves_uci: tuple[str, ...]
    """The legal moves of the side to move, sorted (empty once the game is over)."""
    legal_moves_san: tuple[str, ...]
    """The same moves in SAN, in the same order as ``legal_moves_uci``."""
    draw_offer: int | None
    """The seat whose draw offer is pending, or ``None``."""
    can_claim_draw: bool
    """Whether a claim on the position as it stands (``claim_draw``) would succeed now (FIDE ruleset):
    the position has occurred three times, or fifty moves have passed without a capture or pawn move."""
    ply_count: int
    halfmove_clock: int
    """Half-moves since the last capture or pawn move (the fifty- and seventy-five-move rules count these)."""
    outcome: Outcome | None
    claim_moves: tuple[str, ...] = ()
    """The legal moves (UCI, sorted) with which a claim would succeed (FIDE ruleset): ``claim_draw <move>``
    draws when that move would make the position occur a third time or complete the fifty moves, and the
    move is not played. Empty in ``contest`` and once the game is over."""


class ChessEngine:
    """Chess for the match runtime (see :class:`libs.engines.base.Engine`).

    Actions may be given as :class:`Move`, :class:`OfferDraw`, :class:`AcceptDraw`,
    :class:`DeclineDraw`, :class:`ClaimDraw`, or as text that :func:`parse_action` reads.
    """

    family: str = "chess"

    def new_game(self, options: ChessOptions | None = None) -> ChessState:
        """A new game with ``options`` (default: contest rules from the usual position)."""
        options = ChessOptions() if options is None else options
        if not isinstance(options, ChessOptions):
            raise InvalidOptionsError(f"expected ChessOptions, got {type(options).__name__}")
        board = options.initial_board()
        return ChessState(
            options=options,
            moves_uci=(),
            moves_san=(),
            draw_offer=None,
            result=None,
            remaining_ms=None,
            claimable_draw=_position_claim(board, True) if options.ruleset is Ruleset.FIDE else None,
            _board=board,
            _legal=_LegalMoves(board),
        )

    def to_move(self, state: ChessState) -> int | None:
        """The seat to move, or ``None`` once the game is over."""
        return None if state.result is not None else seat_of(state._board.turn)

    def outcome(self, state: ChessState) -> Outcome | None:
        """How the game ended on the board or by the players' draw actions, or ``None``."""
        return state.result

    def is_over(self, state: ChessState) -> bool:
        """Whether the game has ended (:meth:`outcome` is not ``None``)."""
        return state.result is not None

    def apply(
        self, state: ChessState, seat: int, action: ChessAction | str, context: ActionContext
    ) -> ChessState:
        """The state after ``seat`` takes ``action``.

        :raises MalformedActionError: the action cannot be read.
        :raises IllegalActionError: the game is over, it is not ``seat``'s turn, the move is not legal
            (a move named in a draw claim too), or a draw action is not available (always so in the
            contest ruleset). A claim naming a legal move is never refused: if it is wrong, the move is
            played.
        """
        _check_seat(seat)
        if len(context.remaining_ms) != 2:
            raise ValueError(f"a chess context needs two clocks, got {context.remaining_ms!r}")
        if isinstance(action, str):
            action = parse_action(action)
        if state.result is not None:
            raise GameOverError(f"the game is over ({state.result.detail})")
        match action:
            case Move():
                return self._move(state, seat, action, context)
            case OfferDraw() | AcceptDraw() | DeclineDraw() | ClaimDraw():
                if state.options.ruleset is Ruleset.CONTEST:
                    raise IllegalActionError(CONTEST_DRAWS_REFUSED)
                return self._draw_action(state, seat, action, context)
            case _:
                raise MalformedActionError(f"not a chess action: {action!r}")

    def legal_actions(self, state: ChessState, seat: int) -> list[str]:
        """What ``seat`` may do now, sorted: its legal moves in UCI when it is its turn, and in the FIDE
        ruleset the draw actions open to it (``offer_draw``, ``accept_draw``, ``decline_draw``, and
        ``claim_draw`` when a claim on the position as it stands would succeed). Claims naming a move
        (``claim_draw <move>``) are not listed: every legal move may be named in one, and the moves with
        which it would succeed are :attr:`ChessView.claim_moves`. Empty once the game is over."""
        _check_seat(seat)
        if state.result is not None:
            return []
        turn = seat_of(state._board.turn) == seat
        actions = list(state._legal.ucis) if turn else []  # sorted already
        if state.options.ruleset is Ruleset.FIDE:
            if state.draw_offer is None:
                actions.append(OfferDraw.notation)
            elif state.draw_offer != seat:
                actions += [AcceptDraw.notation, DeclineDraw.notation]
            if turn and state.claimable_draw is not None:
                actions.append(CLAIM_DRAW)
            actions.sort()
        return actions

    def move_san(self, state: ChessState, notation: str) -> str:
        """The SAN, with its check or mate mark, of the legal move that ``notation`` (UCI or SAN) names in
        ``state``'s position: what ``Board.san`` writes.

        :raises MalformedActionError: ``notation`` is neither UCI nor SAN.
        :raises IllegalActionError: no legal move matches it (see :func:`resolve_move`).
        """
        legal = state._legal
        return legal.san(legal.resolve(notation))

    def resignation_outcome(self, state: ChessState, seat: int) -> Outcome:
        """What it means that ``seat`` resigned: the opponent wins; in the FIDE ruleset it is a draw
        instead when the opponent has insufficient material to mate (seed 001: "a resignation by one
        player results in a draw if their opponent has no way to checkmate them")."""
        _check_seat(seat)
        opponent = 1 - seat
        resigned, other = COLOR_NAMES[seat], COLOR_NAMES[opponent]
        fide = state.options.ruleset is Ruleset.FIDE
        if fide and cannot_mate(state._board, color_of(opponent)):
            return Outcome(
                termination=Termination.DEAD_POSITION,
                winner=None,
                detail=f"{resigned} resigned, but {other} cannot checkmate: draw",
                score=DRAW_SCORE,
            )
        return _win(Termination.RESIGNATION, opponent, f"{resigned} resigned")

    def timeout_outcome(self, state: ChessState, seat: int) -> Outcome:
        """What it means that ``seat`` ran out of time: the opponent wins; in the FIDE ruleset it is a
        draw instead when the opponent has insufficient material to mate (a lone king, king and knight,
        king and bishops of one colour)."""
        _check_seat(seat)
        opponent = 1 - seat
        flagged, other = COLOR_NAMES[seat], COLOR_NAMES[opponent]
        fide = state.options.ruleset is Ruleset.FIDE
        if fide and cannot_mate(state._board, color_of(opponent)):
            return Outcome(
                termination=Termination.TIMEOUT_VS_INSUFFICIENT_MATERIAL,
                winner=None,
                detail=f"{flagged} ran out of time, but {other} cannot checkmate: draw",
                score=DRAW_SCORE,
            )
        return _win(Termination.TIMEOUT, opponent, f"{flagged} ran out of time; {other} wins")

    def view(self, state: ChessState, seat: int | None) -> ChessView:
        """The game as anyone sees it (``seat`` ``None`` is a spectator; every seat sees the same)."""
        if seat is not None:
            _check_seat(seat)
        board = state._board
        over = state.result is not None
        legal = state._legal
        fide = state.options.ruleset is Ruleset.FIDE
        return ChessView(
            fen=board.fen(),
            initial_fen=state.options.initial_fen,
            ruleset=state.options.ruleset,
            moves_san=state.moves_san,
            moves_uci=state.moves_uci,
            last_move=state.moves_uci[-1] if state.moves_uci else None,
            is_check=board.is_check(),
            material=material(board),
            to_move=self.to_move(state),
            legal_moves_uci=() if over else legal.ucis,
            legal_moves_san=() if over else legal.sans(),
            draw_offer=state.draw_offer,
            can_claim_draw=not over and state.claimable_draw is not None,
            ply_count=state.ply_count,
            halfmove_clock=board.halfmove_clock,
            outcome=state.result,
            claim_moves=legal.claim_moves() if fide and not over else (),
        )

    def chance_needed(self, state: ChessState) -> ChanceRequest | None:
        """Chess has no chance."""
        return None

    def apply_chance(self, state: ChessState, request: ChanceRequest, values: tuple[int, ...]) -> ChessState:
        raise ValueError("chess draws nothing from a fairness stream")

    def _move(self, state: ChessState, seat: int, action: Move, context: ActionContext) -> ChessState:
        board = state._board
        if seat_of(board.turn) != seat:
            raise NotYourTurnError(f"it is {COLOR_NAMES[seat_of(board.turn)]}'s turn")
        return self._play(state, seat, state._legal.resolve(action.notation), context)

    def _play(self, state: ChessState, seat: int, move: chess.Move, context: ActionContext) -> ChessState:
        """The state after ``seat``, to move, makes ``move``, one of the legal moves."""
        board = state._board
        legal = state._legal
        fide = state.options.ruleset is Ruleset.FIDE
        after = _successor(board, board.halfmove_clock if fide else 0)
        after.push(move)
        after_legal = _LegalMoves(after)  # listed when first asked for
        replies = after_legal.has_moves()
        san = legal.played_san(move, after, replies)
        plies = state.ply_count + 1
        result = _board_outcome(after, replies, state.options.ruleset, plies, state.first_mover, context)
        # A move declines the opponent's pending offer; the offerer's own move leaves it standing.
        draw_offer = state.draw_offer if state.draw_offer == seat else None
        return ChessState(
            options=state.options,
            moves_uci=(*state.moves_uci, move.uci()),
            moves_san=(*state.moves_san, san),
            draw_offer=draw_offer,
            result=result,
            remaining_ms=tuple(context.remaining_ms),
            claimable_draw=_position_claim(after, True) if fide and result is None else None,
            _board=after,
            _legal=after_legal,
        )

    def _draw_action(
        self,
        state: ChessState,
        seat: int,
        action: OfferDraw | AcceptDraw | DeclineDraw | ClaimDraw,
        context: ActionContext,
    ) -> ChessState:
        me, opponent = COLOR_NAMES[seat], COLOR_NAMES[1 - seat]
        draw_offer: int | None = state.draw_offer
        result: Outcome | None = None
        match action:
            case OfferDraw():
                if state.draw_offer == seat:
                    raise IllegalActionError("you have already offered a draw")
                if state.draw_offer is not None:
                    raise IllegalActionError(f"{opponent} has offered a draw: accept or decline it")
                draw_offer = seat
            case AcceptDraw() | DeclineDraw():
                if state.draw_offer != 1 - seat:
                    verb = "accept" if isinstance(action, AcceptDraw) else "decline"
                    raise IllegalActionError(f"there is no draw offer from {opponent} to {verb}")
                draw_offer = None
                if isinstance(action, AcceptDraw):
                    result = _draw(Termination.DRAW_AGREED, f"{me} accepted {opponent}'s draw offer")
            case ClaimDraw():
                turn = seat_of(state._board.turn)
                if turn != seat:
                    raise IllegalActionError(
                        f"only the player to move can claim a draw, and it is {COLOR_NAMES[turn]}'s turn"
                    )
                if action.move is not None:
                    return self._claim_with_move(state, seat, action.move, context)
                claim = state.claimable_draw
                if claim is None:
                    raise IllegalActionError(_refusal(state))
                draw_offer = None
                result = _draw(claim, f"{me} claimed a draw by {_RULE_NAMES[claim]}")
        return ChessState(
            options=state.options,
            moves_uci=state.moves_uci,
            moves_san=state.moves_san,
            draw_offer=draw_offer,
            result=result,
            remaining_ms=tuple(context.remaining_ms),
            claimable_draw=state.claimable_draw if result is None else None,
            _board=state._board,
            _legal=state._legal,
        )

    def _claim_with_move(
        self, state: ChessState, seat: int, notation: str, context: ActionContext
    ) -> ChessState:
        """A claim naming the move ``seat`` is about to make (FIDE 9.2.1.1, 9.3.1): the move must be legal.
        The claim is judged on the position the move makes; if it holds, the game is drawn and the move is
        not played (the claimant writes it down, does not make it); if not, the move is played, exactly as
        if it had been made without a claim, and the game goes on (or ends on the board)."""
        move = state._legal.resolve(notation)  # a move's own errors; nothing changes
        played = self._play(state, seat, move, context)
        after = played._board
        if played.result is None:
            claim = played.claimable_draw  # the same test, on the position after the move
        else:  # fivefold or seventy-five: the claim holds all the same; mate or stalemate: it does not
            claim = _position_claim(_successor(after, len(after.move_stack)), played._legal.has_moves())
        if claim is None:
            return played
        san = played.moves_san[-1]
        if claim is Termination.THREEFOLD_REPETITION:
            what = "repeat the position a third time"
        else:
            what = "complete fifty moves without a capture or pawn move"
        return ChessState(
            options=state.options,
            moves_uci=state.moves_uci,
            moves_san=state.moves_san,
            draw_offer=None,
            result=_draw(
                claim,
                f"{COLOR_NAMES[seat]} claimed a draw by {_RULE_NAMES[claim]} with {san}, which would "
                f"{what} (not played)",
            ),
            remaining_ms=tuple(context.remaining_ms),
            claimable_draw=None,
            _board=state._board,
            _legal=state._legal,
        )


_RULE_NAMES = {
    Termination.THREEFOLD_REPETITION: "threefold repetition",
    Termination.FIFTY_MOVES: "the fifty-move rule",
}


def _refusal(state: ChessState) -> str:
    """Why ``claim_draw`` without a move is refused in ``state``, with the way to claim with a move when
    some move would complete a repetition or the fifty moves."""
    text = (
        "no draw can be claimed on this position: it has not occurred three times, and fifty moves have "
        "not passed without a capture or pawn move"
    )
    claim_moves = state._legal.claim_moves()
    if claim_moves:
        text += (
            f"; to claim with the move you are about to make, name it (e.g. {CLAIM_DRAW} {claim_moves[0]}): "
            "if the claim is wrong, the move is played"
        )
    return text


def _successor(board: chess.Board, history: int) -> chess.Board:
    """``board.copy(stack=history)``, the last ``history`` moves of the history included, but sharing the
    move objects instead of copying each one (about 3.5 µs a move): no board of a state is ever changed
    once the state is built, and :meth:`ChessState.board` hands out copies."""
    after = board.copy(stack=False)
    if history:
        after.move_stack = board.move_stack[-history:]
        after._stack = board._stack[-history:]  # what Board.copy does: the saved states are shared too
    return after


def _check_seat(seat: object) -> None:
    if seat not in SEATS or isinstance(seat, bool):
        raise ValueError(f"chess has seats 0 (White) and 1 (Black), not {seat!r}")


def _position_claim(board: chess.Board, has_moves: bool) -> Termination | None:
    """The draw that may be claimed on ``board``'s position as it stands, if any (threefold repetition
    first): the position has occurred three times (``Board.is_repetition(3)``, python-chess's count over
    the moves since the last irreversible one), or 100 half-moves have passed without a capture or pawn
    move and the side to move has a legal move (``has_moves``), as ``Board.is_fifty_moves`` says.

    ``board`` must not be shared yet: python-chess counts repetitions by popping and pushing moves.
    """
    # A position occurs a third time at the earliest eight plies after its first occurrence.
    if board.halfmove_clock >= 8 and board.is_repetition(3):
        return Termination.THREEFOLD_REPETITION
    if board.halfmove_clock >= 100 and has_moves:
        return Termination.FIFTY_MOVES
    return None


def _claim_moves(board: chess.Board, legal: _LegalMoves) -> tuple[str, ...]:
    """The legal moves of ``board`` (UCI, sorted) with which a claim would succeed: those after which
    :func:`_position_claim` holds. ``board`` is only read (the checks run on a scratch copy).

    A capture or pawn move is never one: it makes a position that cannot have occurred before and
    restarts the halfmove clock. Castling, or a move that loses a castling right (the rest of
    python-chess's ``is_irreversible``), cannot repeat a position either, but may be the 100th quiet
    half-move. A repetition needs a position with the opponent to move whose pieces stand as in two
    earlier positions (:func:`_twice_seen`, read from the saved states without popping a move), and a move
    that leaves the occupied squares as they were there (a few bit operations per move); only such a move
    is made on the scratch board, where python-chess's ``is_repetition(3)`` decides. The fifty moves need
    a halfmove clock of 99 or more; then every quiet move is made. Usually there is nothing to try.
    """
    reversible = min(board.halfmove_clock, len(board.move_stack))
    twice = _twice_seen(board, not board.turn) if reversible >= 7 else frozenset()
    fifty = board.halfmove_clock >= 99
    if not twice and not fifty:
        return ()
    occupied = board.occupied
    scratch: chess.Board | None = None
    found = []
    for move in legal.moves:
        if board.is_zeroing(move):
            continue  # a capture or pawn move: no repetition, and the halfmove clock restarts
        # A quiet move that is not castling (castling needs a right, so it is irreversible) vacates its
        # origin and fills its target.
        repeats = (
            bool(twice)
            and ((occupied & ~chess.BB_SQUARES[move.from_square]) | chess.BB_SQUARES[move.to_square]) in twice
            and not board.is_irreversible(move)
        )
        if not repeats and not fifty:
            continue
        if scratch is None:
            scratch = _successor(board, len(board.move_stack))
        scratch.push(move)
        try:
            # After a quiet move at 99, a mate or stalemate is not a claim: the move ends the game.
            if (repeats and scratch.is_repetition(3)) or (fifty and any(scratch.generate_legal_moves())):
                found.append(move.uci())
        finally:
            scratch.pop()
    return tuple(found)  # legal.moves is sorted by UCI


def _twice_seen(board: chess.Board, turn: chess.Color) -> frozenset[int]:
    """The occupied squares (as a bitboard) of each arrangement of pieces that stands in two or more of the
    positions in ``board``'s history with ``turn`` to move, the current one included if it has.

    A sound pre-filter for a position with ``turn`` to move that has occurred twice: python-chess's
    transposition key adds castling rights and a legal en-passant square to the pieces and the side to
    move, so equal keys have equal pieces. It reads the saved states alone, without popping a move.
    """
    # The kings are the occupied squares that hold no other piece: equal elsewhere, equal there too.
    seen = set()
    twice = set()
    if board.turn == turn:
        white, black = board.occupied_co
        seen.add((board.pawns, board.knights, board.bishops, board.rooks, board.queens, white, black))
    for s in board._stack:
        if s.turn != turn:
            continue
        key = (s.pawns, s.knights, s.bishops, s.rooks, s.queens, s.occupied_w, s.occupied_b)
        if key in seen:
            twice.add(s.occupied)
        seen.add(key)
    return frozenset(twice)


def _board_outcome(
    board: chess.Board,
    has_moves: bool,
    ruleset: Ruleset,
    plies: int,
    first_mover: int,
    context: ActionContext,
) -> Outcome | None:
    """The end of the game in ``board``, just after a move, under ``ruleset``; ``None`` if play goes on.
    ``has_moves`` says whether the side to move has a legal move.

    Checked in order: checkmate, stalemate, insufficient material, (FIDE only) a blocked dead position,
    seventy-five moves, and (FIDE only) fivefold repetition. ``board`` must not be shared yet: the
    repetition check pushes and pops.
    """
    side = COLOR_NAMES[seat_of(board.turn)]
    if not has_moves:
        if board.is_check():
            winner = 1 - seat_of(board.turn)
            return _win(Termination.CHECKMATE, winner, f"checkmate; {COLOR_NAMES[winner]} wins")
        cause = Termination.STALEMATE
    elif board.is_insufficient_material():
        cause = Termination.INSUFFICIENT_MATERIAL
    elif ruleset is Ruleset.FIDE and is_blocked_dead(board):
        return _draw(
            Termination.DEAD_POSITION,
            "dead position: the pawns are locked and neither king can ever capture one, so no checkmate "
            "is possible",
        )
    elif board.halfmove_clock >= 150:
        cause = Termination.SEVENTYFIVE_MOVES
    elif ruleset is Ruleset.FIDE and board.is_fivefold_repetition():
        return _draw(Termination.FIVEFOLD_REPETITION, "fivefold repetition: a position occurred five times")
    else:
        return None
    if ruleset is Ruleset.CONTEST:
        return break_tie(cause, board, plies, first_mover, context.remaining_ms)
    if cause is Termination.STALEMATE:
        return _draw(cause, f"stalemate: {side} has no legal move and is not in check")
    if cause is Termination.INSUFFICIENT_MATERIAL:
        # FIDE's dead position, as far as it is detected: neither side has the material to mate.
        return _draw(Termination.DEAD_POSITION, "dead position: neither side has the material to checkmate")
    return _draw(cause, "seventy-five-move rule: 75 moves each without a capture or pawn move")


def _win(termination: Termination, winner: int, detail: str) -> Outcome:
    return Outcome(
        termination=termination, winner=winner, detail=detail, score=(1.0, 0.0) if winner == 0 else (0.0, 1.0)
    )


def _draw(termination: Termination, detail: str) -> Outcome:
    return Outcome(termination=termination, winner=None, detail=detail, score=DRAW_SCORE)


CHESS = ChessEngine()
"""The chess engine (it holds no state; one instance serves every game)."""

_PERFT_CONTEXT = ActionContext(remaining_ms=(0, 0))


def perft(state: ChessState, depth: int) -> int:
    """The number of move sequences of ``depth`` plies from ``state``, walked through the engine's own
    :meth:`~ChessEngine.legal_actions` and :meth:`~ChessEngine.apply` (draw actions are not moves and
    are not counted). A game the engine ends (mate, stalemate, insufficient material, ...) has no
    continuations, so this may be lower than a pure move-generation perft in such lines.
    """
    if depth < 0:
        raise ValueError(f"depth cannot be negative: {depth}")
    if depth == 0:
        return 1
    seat = CHESS.to_move(state)
    if seat is None:
        return 0
    total = 0
    for notation in _moves_only(CHESS.legal_actions(state, seat)):
        total += perft(CHESS.apply(state, seat, Move(notation), _PERFT_CONTEXT), depth - 1)
    return total


def _moves_only(actions: Sequence[str]) -> list[str]:
    return [action for action in actions if action not in DRAW_ACTIONS]
