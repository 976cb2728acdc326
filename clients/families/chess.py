"""Chess for the clients: the board as text, moves typed in SAN or UCI, and two bots.

Bots: ``random`` plays a uniformly random legal move; ``greedy`` mates when it can, else takes the most
valuable piece it can capture (ties broken at random), else plays at random.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import ClassVar

import chess
from skillclassics.chess.v1 import chess_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import FamilyClient, InputError, Strategy

__all__ = ["DRAW_ACTIONS", "FAMILY", "PIECE_VALUES", "ChessClient", "greedy_choice"]

DRAW_ACTIONS: dict[str, chess_pb2.DrawAction.ValueType] = {
    "offer_draw": chess_pb2.DRAW_ACTION_OFFER,
    "accept_draw": chess_pb2.DRAW_ACTION_ACCEPT,
    "decline_draw": chess_pb2.DRAW_ACTION_DECLINE,
    "claim_draw": chess_pb2.DRAW_ACTION_CLAIM,
}
"""The draw actions as ``legal_actions`` lists them (FIDE ruleset), and their protocol values."""

_TYPED_DRAWS = {
    "draw": "offer_draw",
    "offer": "offer_draw",
    "accept": "accept_draw",
    "decline": "decline_draw",
    "claim": "claim_draw",
    **{name: name for name in DRAW_ACTIONS},
}
_TYPED_NAMES = {
    "offer_draw": "draw",
    "accept_draw": "accept",
    "decline_draw": "decline",
    "claim_draw": "claim",
}

PIECE_VALUES: Mapping[int, int] = {
    chess.PAWN: 1,
    chess.KNIGHT: 3,
    chess.BISHOP: 3,
    chess.ROOK: 5,
    chess.QUEEN: 9,
    chess.KING: 0,
}

_RULESETS = {"contest": chess_pb2.RULESET_CONTEST, "fide": chess_pb2.RULESET_FIDE}
_MOVE_TEXT = re.compile(r"[a-h1-8KQRBNqrbnOo0x=+#\-]{2,10}")


class ChessClient(FamilyClient):
    """Chess: White is seat 0, Black seat 1."""

    name = "chess"
    uses_chance = False
    option_names = ("ruleset",)
    option_help: ClassVar[Mapping[str, str]] = {"ruleset": "chess: contest (default) or fide"}
    option_choices: ClassVar[Mapping[str, tuple[str, ...]]] = {"ruleset": tuple(_RULESETS)}
    quick_minutes = 3

    def options(self, settings: Mapping[str, str]) -> rules_pb2.MatchOptions:
        unknown = sorted(set(settings) - set(self.option_names))
        if unknown:
            raise InputError(f"chess has no option {', '.join(unknown)} (options: ruleset)")
        text = settings.get("ruleset", "contest").strip().lower()
        ruleset = _RULESETS.get(text)
        if ruleset is None:
            raise InputError(f"chess ruleset must be contest or fide, not {text!r}")
        return rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=ruleset))

    def describe_options(self, options: rules_pb2.MatchOptions) -> str:
        ruleset = options.chess.ruleset if options.WhichOneof("family") == "chess" else 0
        return "FIDE rules" if ruleset == chess_pb2.RULESET_FIDE else "contest rules"

    def seat_label(self, seat: int) -> str:
        return {0: "White", 1: "Black"}.get(seat, f"seat {seat}")

    # -- rendering ---------------------------------------------------------------------------------------

    def render(self, update: rules_pb2.MatchUpdate, seat: int | None, *, ascii: bool = False) -> str:
        view = update.view.chess
        board = chess.Board(view.fen) if view.fen else chess.Board()
        lines = render_board(board, flipped=seat == 1, ascii=ascii, last_move=view.last_move_uci)
        moves = _move_list(list(view.moves_san))
        if moves:
            lines.append(f"moves: {moves}")
        status = []
        if update.status in (rules_pb2.MATCH_STATUS_WAITING, rules_pb2.MATCH_STATUS_LIVE):
            turn = 0 if board.turn == chess.WHITE else 1
            mover = f"{self.seat_label(turn)} to move" + (" (you)" if seat == turn else "")
            status.append(mover)
            if view.check:
                status.append("check")
        if view.HasField("draw_offer_by"):
            status.append(f"{self.seat_label(view.draw_offer_by)} offers a draw")
        if view.can_claim_draw:
            status.append("a draw can be claimed")
        material = view.material
        status.append(f"material {material.white}-{material.black}")
        lines.append("; ".join(status))
        return "\n".join(lines)

    def describe_legal(self, update: rules_pb2.MatchUpdate) -> str:
        actions = list(update.legal_actions)
        if not actions:
            return "no moves for you now (not your turn)"
        by_uci = {move.uci: move.san for move in update.view.chess.legal_moves}
        moves = [by_uci.get(action, action) for action in actions if action not in DRAW_ACTIONS]
        draws = [_TYPED_NAMES.get(action, action) for action in actions if action in DRAW_ACTIONS]
        text = f"{len(moves)} legal moves: {' '.join(sorted(moves))}" if moves else "no moves"
        if draws:
            text += f"\ndraw actions: {' '.join(draws)}"
        return text

    def input_help(self) -> str:
        return (
            "type a move in SAN (Nf3, O-O, e8=Q) or UCI (g1f3, e7e8q); "
            "draw, accept, decline, claim (FIDE ruleset)"
        )

    def parse(self, text: str, update: rules_pb2.MatchUpdate | None = None) -> rules_pb2.Action:
        typed = text.strip()
        draw = _TYPED_DRAWS.get(typed.lower())
        if draw is not None:
            return rules_pb2.Action(chess=chess_pb2.ChessAction(draw=DRAW_ACTIONS[draw]))
        if not _MOVE_TEXT.fullmatch(typed):
            raise InputError(f"{typed!r} is not a move: {self.input_help()}")
        if typed.startswith(("0-0", "o-o")):
            typed = typed.replace("0", "O").replace("o", "O")
        return rules_pb2.Action(chess=chess_pb2.ChessAction(move=typed))

    def needs_turn(self, action: rules_pb2.Action) -> bool:
        if action.WhichOneof("kind") == "chess":
            return action.chess.WhichOneof("kind") == "move"
        return super().needs_turn(action)

    # -- bots --------------------------------------------------------------------------------------------

    def strategy(self, name: str, rng: random.Random) -> Strategy:
        if name == "random":
            return lambda update, seat: _play(_random_move(update, rng))
        if name == "greedy":
            return lambda update, seat: _play(greedy_choice(update, rng))
        raise InputError(f"chess bots are {', '.join(self.strategies)}, not {name!r}")

    def plies(self, update: rules_pb2.MatchUpdate) -> int | None:
        return update.view.chess.ply if update.view.WhichOneof("family") == "chess" else None

    def advantage(self, update: rules_pb2.MatchUpdate, seat: int) -> float | None:
        material = update.view.chess.material
        lead = int(material.white) - int(material.black)
        return float(lead if seat == 0 else -lead)


def render_board(
    board: chess.Board, *, flipped: bool = False, ascii: bool = False, last_move: str = ""
) -> list[str]:
    """The board as lines of text, White at the bottom unless ``flipped``; the last move's squares are
    marked with brackets."""
    marked: set[int] = set()
    if last_move:
        try:
            move = chess.Move.from_uci(last_move)
            marked = {move.from_square, move.to_square}
        except ValueError:
            pass
    ranks = range(8) if flipped else range(7, -1, -1)
    files = list(range(7, -1, -1)) if flipped else list(range(8))
    footer = "   " + "  ".join(chess.FILE_NAMES[f] for f in files)
    lines = [footer]
    for rank in ranks:
        cells = []
        for file in files:
            square = chess.square(file, rank)
            piece = board.piece_at(square)
            if piece is None:
                glyph = "." if ascii else "·"
            else:
                glyph = piece.symbol() if ascii else piece.unicode_symbol()
            cells.append(f"[{glyph}]" if square in marked else f" {glyph} ")
        lines.append(f"{rank + 1} " + "".join(cells) + f" {rank + 1}")
    lines.append(footer)
    return lines


def _move_list(moves_san: list[str], last: int = 12) -> str:
    """The last ``last`` full moves, numbered: ``... 11. Nf3 Nc6 12. Bb5``."""
    numbered = []
    for index in range(0, len(moves_san), 2):
        pair = " ".join(moves_san[index : index + 2])
        numbered.append(f"{index // 2 + 1}. {pair}")
    shown = numbered[-last:]
    return ("... " if len(numbered) > last else "") + " ".join(shown)


def _moves(update: rules_pb2.MatchUpdate) -> list[str]:
    return [action for action in update.legal_actions if action not in DRAW_ACTIONS]


def _play(move: str | None) -> rules_pb2.Action | None:
    return None if move is None else rules_pb2.Action(chess=chess_pb2.ChessAction(move=move))


def _random_move(update: rules_pb2.MatchUpdate, rng: random.Random) -> str | None:
    moves = _moves(update)
    return rng.choice(moves) if moves else None


def greedy_choice(update: rules_pb2.MatchUpdate, rng: random.Random) -> str | None:
    """The greedy bot's move in UCI: a mate if there is one, else the capture of the most valuable
    piece, else a random move (``None`` when there is no legal move)."""
    moves = _moves(update)
    if not moves:
        return None
    board = chess.Board(update.view.chess.fen)
    mates: list[str] = []
    best_value, best = 0, []
    for uci in moves:
        move = chess.Move.from_uci(uci)
        if board.is_capture(move):
            captured = board.piece_type_at(move.to_square) or chess.PAWN  # None: en passant
            value = PIECE_VALUES[captured]
            if value > best_value:
                best_value, best = value, [uci]
            elif value == best_value:
                best.append(uci)
        board.push(move)
        if board.is_checkmate():
            mates.append(uci)
        board.pop()
    if mates:
        return rng.choice(mates)
    if best:
        return rng.choice(best)
    return rng.choice(moves)


FAMILY = ChessClient()
