"""Chess for the clients: the board as text, moves typed in SAN or UCI, and bots; standard chess and
Skirmish Chess (docs/skirmish.md: every main-board capture is decided by a 5x5 duel).

Bots: ``random`` plays a uniformly random legal move (on either board, never a draw action); ``greedy``
mates when it can, else takes the most valuable piece it can capture (ties broken at random), else plays
at random; in a Skirmish Chess duel it takes the king when it can, else the most valuable piece, else
plays at random. ``duelist`` is the fair Skirmish Chess opponent: on the main board it mates when it can
and otherwise captures only when the duel's odds favour it (:func:`~libs.engines.skirmish.odds_pawns`
takes pawns from the defender's side), when the defender is the king, or when it has nothing else to
play; else a random quiet move. In duels it plays like ``greedy`` but avoids a move that lets the
opponent take its king next ply when it has another. In standard chess it plays like ``greedy``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import ClassVar

import chess
from skillclassics.chess.v1 import chess_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import FamilyClient, InputError, Strategy, format_ms
from libs.engines import skirmish

__all__ = [
    "DRAW_ACTIONS",
    "FAMILY",
    "PIECE_VALUES",
    "ChessClient",
    "duel_choice",
    "duelist_choice",
    "greedy_choice",
    "render_duel_board",
]

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

_VARIANTS = ("standard", "skirmish")
_PRESETS: dict[str, chess_pb2.SkirmishPreset.ValueType] = {
    "classic": chess_pb2.SKIRMISH_PRESET_CLASSIC,
    "fortress": chess_pb2.SKIRMISH_PRESET_FORTRESS,
    "spearhead": chess_pb2.SKIRMISH_PRESET_SPEARHEAD,
    "wings": chess_pb2.SKIRMISH_PRESET_WINGS,
    "center_clash": chess_pb2.SKIRMISH_PRESET_CENTER_CLASH,
    "random": chess_pb2.SKIRMISH_PRESET_RANDOM,
}
_PRESET_NAMES = {value: name for name, value in _PRESETS.items()}
_DRAW_RULES: dict[str, chess_pb2.SkirmishDrawRule.ValueType] = {
    "both_removed": chess_pb2.SKIRMISH_DRAW_RULE_BOTH_REMOVED,
    "both_stay": chess_pb2.SKIRMISH_DRAW_RULE_BOTH_STAY,
    "defender_wins": chess_pb2.SKIRMISH_DRAW_RULE_DEFENDER_WINS,
}
_DRAW_RULE_NAMES = {value: name for name, value in _DRAW_RULES.items()}
_ODDS = {"on": True, "off": False}
_SECONDS: dict[str, tuple[int, ...]] = {
    "duel_clock": (30, 60, 120),
    "duel_increment": (0, 2, 5),
    "countdown": (0, 3, 5),
}
"""The duel clocks, increments and countdowns (seconds) that lobby tables offer."""
_SKIRMISH_OPTIONS = ("preset", "odds", "draw_rule", *_SECONDS)
_OUTCOME_WORDS = {
    chess_pb2.DUEL_OUTCOME_ATTACKER_WON: "attacker won",
    chess_pb2.DUEL_OUTCOME_DEFENDER_WON: "defender won",
    chess_pb2.DUEL_OUTCOME_DRAW: "drawn",
}


class ChessClient(FamilyClient):
    """Chess: White is seat 0, Black seat 1. Standard chess, or Skirmish Chess (``variant=skirmish``)."""

    name = "chess"
    uses_chance = False
    strategies = ("random", "greedy", "duelist")
    option_names = ("ruleset", "variant", *_SKIRMISH_OPTIONS)
    option_help: ClassVar[Mapping[str, str]] = {
        "ruleset": "chess: contest (default) or fide",
        "variant": "chess: standard (default) or skirmish (Skirmish Chess, FIDE rules)",
        "preset": "Skirmish Chess: the duels' setup, " + ", ".join(_PRESETS) + " (default: classic)",
        "odds": "Skirmish Chess: odds (the weaker piece's side loses pawns in the duel), on (default) or off",
        "draw_rule": "Skirmish Chess: a drawn duel: both_stay (default), both_removed or defender_wins",
        "duel_clock": "Skirmish Chess: seconds per side for each duel, 30, 60 (default) or 120",
        "duel_increment": "Skirmish Chess: seconds added per duel move, 0 (default), 2 or 5",
        "countdown": "Skirmish Chess: seconds before each duel, 0 (default), 3 or 5",
    }
    option_choices: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "ruleset": tuple(_RULESETS),
        "variant": _VARIANTS,
        "preset": tuple(_PRESETS),
        "odds": tuple(_ODDS),
        "draw_rule": tuple(_DRAW_RULES),
        **{name: tuple(str(value) for value in values) for name, values in _SECONDS.items()},
    }
    quick_minutes = 3

    def options(self, settings: Mapping[str, str]) -> rules_pb2.MatchOptions:
        unknown = sorted(set(settings) - set(self.option_names))
        if unknown:
            raise InputError(
                f"chess has no option {', '.join(unknown)} (options: {', '.join(self.option_names)})"
            )
        variant = settings.get("variant", "standard").strip().lower()
        if variant not in _VARIANTS:
            raise InputError(f"chess variant must be standard or skirmish, not {variant!r}")
        text = settings.get("ruleset", "contest" if variant == "standard" else "fide").strip().lower()
        ruleset = _RULESETS.get(text)
        if ruleset is None:
            raise InputError(f"chess ruleset must be contest or fide, not {text!r}")
        if variant == "standard":
            given = sorted(name for name in _SKIRMISH_OPTIONS if name in settings)
            if given:
                raise InputError(f"{', '.join(given)}: only Skirmish Chess has it (variant=skirmish)")
            return rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=ruleset))
        if ruleset != chess_pb2.RULESET_FIDE:
            raise InputError("Skirmish Chess always plays the FIDE rules (no contest ruleset)")
        return rules_pb2.MatchOptions(
            chess=chess_pb2.ChessOptions(
                ruleset=chess_pb2.RULESET_FIDE,
                variant=chess_pb2.VARIANT_SKIRMISH,
                skirmish=_skirmish_options(settings),
            )
        )

    @property
    def may_draw_chance(self) -> bool:
        return True  # Skirmish Chess with random duel setups

    def draws_chance(self, options: rules_pb2.MatchOptions) -> bool:
        """Only Skirmish Chess with random duel setups draws (stream ``skirmish``)."""
        chess_options = options.chess
        return (
            chess_options.variant == chess_pb2.VARIANT_SKIRMISH
            and chess_options.skirmish.preset == chess_pb2.SKIRMISH_PRESET_RANDOM
        )

    def describe_options(self, options: rules_pb2.MatchOptions) -> str:
        chess_options = options.chess if options.WhichOneof("family") == "chess" else None
        if chess_options is not None and chess_options.variant == chess_pb2.VARIANT_SKIRMISH:
            return describe_skirmish(chess_options.skirmish)
        ruleset = chess_options.ruleset if chess_options is not None else 0
        return "FIDE rules" if ruleset == chess_pb2.RULESET_FIDE else "contest rules"

    def seat_label(self, seat: int) -> str:
        return {0: "White", 1: "Black"}.get(seat, f"seat {seat}")

    # -- rendering ---------------------------------------------------------------------------------------

    def render(self, update: rules_pb2.MatchUpdate, seat: int | None, *, ascii: bool = False) -> str:
        view = update.view.chess
        if view.variant == chess_pb2.VARIANT_SKIRMISH:
            return self._render_skirmish(update, seat, ascii=ascii)
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

    def _who(self, seat: int, viewer: int | None) -> str:
        return self.seat_label(seat) + (" (you)" if seat == viewer else "")

    def _render_skirmish(self, update: rules_pb2.MatchUpdate, seat: int | None, *, ascii: bool) -> str:
        view = update.view.chess
        board = chess.Board(view.fen) if view.fen else chess.Board()
        lines = render_board(board, flipped=seat == 1, ascii=ascii, last_move=view.last_move_uci)
        dueling = view.HasField("duel") and update.status in (
            rules_pb2.MATCH_STATUS_WAITING,
            rules_pb2.MATCH_STATUS_LIVE,
        )
        if dueling:
            duel = view.duel
            beside = render_duel_board(
                duel.fen,
                flipped=seat == duel.black_seat and seat != duel.white_seat,
                ascii=ascii,
                last_move=duel.moves_uci[-1] if duel.moves_uci else "",
            )
            if beside:
                title = "duel (5x5)"
                beside = [title.center(len(beside[0])), *beside]
                width = max(len(line) for line in lines)
                top = (len(lines) - len(beside)) // 2
                lines = [
                    (line.ljust(width) + "    " + beside[index - top]).rstrip()
                    if 0 <= index - top < len(beside)
                    else line
                    for index, line in enumerate(lines)
                ]
        moves = _move_list(list(view.moves_san))
        if moves:
            lines.append(f"moves: {moves}")
        if dueling:
            lines += self._duel_lines(update, seat)
        status = []
        live = update.status in (rules_pb2.MATCH_STATUS_WAITING, rules_pb2.MATCH_STATUS_LIVE)
        if live and not dueling:
            turn = 0 if board.turn == chess.WHITE else 1
            status.append(f"{self._who(turn, seat)} to move")
            if view.check:
                status.append("check")
        if view.HasField("draw_offer_by"):
            status.append(f"{self.seat_label(view.draw_offer_by)} offers a draw")
        if view.can_claim_draw:
            status.append("a draw can be claimed")
        material = view.material
        status.append(f"material {material.white}-{material.black}")
        lines.append("; ".join(status))
        if view.duels:
            shown = [_duel_record_text(record) for record in view.duels[-3:]]
            more = "... " if len(view.duels) > len(shown) else ""
            lines.append(f"duels ({len(view.duels)}): {more}{'; '.join(shown)}")
        return "\n".join(lines)

    def _duel_lines(self, update: rules_pb2.MatchUpdate, seat: int | None) -> list[str]:
        """The duel being played: its stakes, who plays which side, odds, clocks and moves."""
        duel = update.view.chess.duel
        board = chess.Board(update.view.chess.fen) if update.view.chess.fen else chess.Board()
        lines = [f"duel for {duel.capture_san}: {_stakes(board, duel)}"]
        preset = _PRESET_NAMES.get(duel.preset, "classic").replace("_", " ")
        sides = (
            f"duel White: {self._who(duel.white_seat, seat)}, the attacker; "
            f"duel Black: {self._who(duel.black_seat, seat)}, the defender; {preset} setup"
        )
        if duel.odds_removed:
            sides += f"; odds: {_odds_text(duel)} removed"
        lines.append(sides)
        if not duel.fen:
            lines.append("the duel's setup is being drawn")
            return lines
        white_to_move = duel.fen.split()[-1] != "b"
        mover = 0 if white_to_move else 1
        left = update.phase_deadline_ms - update.server_time_ms if update.phase_deadline_ms else None
        clocks = list(duel.clock_ms) + [0] * (2 - len(duel.clock_ms))
        if duel.counting_down:
            until = f" {format_ms(left)}" if left is not None else ""
            lines.append(
                f"duel clocks: White {format_ms(clocks[0])}, Black {format_ms(clocks[1])}; "
                f"countdown{until}: nobody moves yet"
            )
        else:
            if left is not None:
                clocks[mover] = left
            faces = [
                ("*" if side == mover else "") + f"{name} {format_ms(clocks[side])}"
                for side, name in enumerate(("White", "Black"))
            ]
            lines.append(f"duel clocks: {'   '.join(faces)}")
        moves = _move_list(list(duel.moves_san))
        lines.append(f"duel moves ({duel.ply}/{skirmish.MAX_PLIES}): {moves or 'none yet'}")
        if not duel.counting_down:
            mover_seat = duel.white_seat if white_to_move else duel.black_seat
            side = "White" if white_to_move else "Black"
            lines.append(f"duel: {self._who(mover_seat, seat)} to move ({side} in the duel)")
        return lines

    def describe_legal(self, update: rules_pb2.MatchUpdate) -> str:
        actions = list(update.legal_actions)
        if not actions:
            return "no moves for you now (not your turn)"
        view = update.view.chess
        if view.HasField("duel") and view.duel.fen:
            position = skirmish.Position.from_fen(view.duel.fen)
            moves = sorted(_duel_san(position, action) for action in actions if action not in DRAW_ACTIONS)
            return f"{len(moves)} legal duel moves: {' '.join(moves)}" if moves else "no duel moves"
        by_uci = {move.uci: move.san for move in view.legal_moves}
        moves = [by_uci.get(action, action) for action in actions if action not in DRAW_ACTIONS]
        draws = [_TYPED_NAMES.get(action, action) for action in actions if action in DRAW_ACTIONS]
        text = f"{len(moves)} legal moves: {' '.join(sorted(moves))}" if moves else "no moves"
        if draws:
            text += f"\ndraw actions: {' '.join(draws)}"
        return text

    def input_help(self) -> str:
        return (
            "type a move in SAN (Nf3, O-O, e8=Q) or UCI (g1f3, e7e8q); "
            "draw, accept, decline, claim (FIDE ruleset); "
            "in a Skirmish Chess duel, a 5x5 move (b2b3 or Nc3)"
        )

    def parse(self, text: str, update: rules_pb2.MatchUpdate | None = None) -> rules_pb2.Action:
        typed = text.strip()
        dueling = update is not None and update.view.chess.HasField("duel")
        draw = _TYPED_DRAWS.get(typed.lower())
        if draw is not None:
            if dueling:
                raise InputError(
                    "a duel is being played: type a duel move (b2b3 or Nc3); draws wait for the main board"
                )
            return rules_pb2.Action(chess=chess_pb2.ChessAction(draw=DRAW_ACTIONS[draw]))
        if not _MOVE_TEXT.fullmatch(typed):
            raise InputError(f"{typed!r} is not a move: {self.input_help()}")
        if dueling:
            return rules_pb2.Action(chess=chess_pb2.ChessAction(move=typed))
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
        if name == "duelist":
            return lambda update, seat: _play(duelist_choice(update, rng))
        raise InputError(f"chess bots are {', '.join(self.strategies)}, not {name!r}")

    def plies(self, update: rules_pb2.MatchUpdate) -> int | None:
        return update.view.chess.ply if update.view.WhichOneof("family") == "chess" else None

    def advantage(self, update: rules_pb2.MatchUpdate, seat: int) -> float | None:
        material = update.view.chess.material
        lead = int(material.white) - int(material.black)
        return float(lead if seat == 0 else -lead)


def _skirmish_options(settings: Mapping[str, str]) -> chess_pb2.SkirmishOptions:
    preset_text = settings.get("preset", "classic").strip().lower().replace("-", "_").replace(" ", "_")
    preset = _PRESETS.get(preset_text)
    if preset is None:
        raise InputError(f"Skirmish Chess preset must be {', '.join(_PRESETS)}, not {preset_text!r}")
    odds_text = settings.get("odds", "on").strip().lower()
    if odds_text not in _ODDS:
        raise InputError(f"Skirmish Chess odds must be on or off, not {odds_text!r}")
    rule_text = settings.get("draw_rule", "both_stay").strip().lower().replace("-", "_").replace(" ", "_")
    rule = _DRAW_RULES.get(rule_text)
    if rule is None:
        raise InputError(f"Skirmish Chess draw_rule must be {', '.join(_DRAW_RULES)}, not {rule_text!r}")
    seconds: dict[str, int] = {}
    for name, offered in _SECONDS.items():
        given = settings.get(name, str(offered[0] if name != "duel_clock" else 60)).strip().lower()
        given = given.removesuffix("s").strip()
        try:
            value = float(given)
        except ValueError:
            value = -1.0
        if value not in offered:
            choices = ", ".join(str(choice) for choice in offered)
            raise InputError(
                f"Skirmish Chess {name} must be {choices} (seconds; what lobby tables offer), not {given!r}"
            )
        seconds[name] = int(value)
    return chess_pb2.SkirmishOptions(
        preset=preset,
        no_odds=not _ODDS[odds_text],
        draw_rule=rule,
        clock_base_ms=seconds["duel_clock"] * 1000,
        clock_increment_ms=seconds["duel_increment"] * 1000,
        countdown_ms=seconds["countdown"] * 1000,
    )


def describe_skirmish(options: chess_pb2.SkirmishOptions) -> str:
    """Skirmish Chess options in a few words:
    ``Skirmish Chess, classic, odds, draw: both stay, duel 60+0 s``."""
    preset = _PRESET_NAMES.get(options.preset, "classic").replace("_", " ")
    odds = "no odds" if options.no_odds else "odds"
    rule = _DRAW_RULE_NAMES.get(options.draw_rule, "both_stay").replace("_", " ")
    clock = f"duel {(options.clock_base_ms or 60_000) / 1000:g}+{options.clock_increment_ms / 1000:g} s"
    text = f"Skirmish Chess, {preset}, {odds}, draw: {rule}, {clock}"
    if options.countdown_ms:
        text += f", countdown {options.countdown_ms / 1000:g} s"
    return text


def _stakes(board: chess.Board, duel: chess_pb2.Duel) -> str:
    """``White's bishop f1 attacks Black's knight b5`` (the squares from the main board)."""
    try:
        move = chess.Move.from_uci(duel.capture_uci)
    except ValueError:
        return f"{duel.attacker} attacks {duel.defender}"
    attacker = chess.Piece.from_symbol(duel.attacker) if duel.attacker else None
    defender = chess.Piece.from_symbol(duel.defender) if duel.defender else None
    target = move.to_square
    if (
        attacker is not None
        and attacker.piece_type == chess.PAWN
        and board.piece_at(target) is None
        and chess.square_file(move.from_square) != chess.square_file(target)
    ):  # en passant: the passed pawn stands beside the attacker
        target = chess.square(chess.square_file(target), chess.square_rank(move.from_square))

    def named(piece: chess.Piece | None, square: int) -> str:
        if piece is None:
            return f"the piece {chess.square_name(square)}"
        owner = "White" if piece.color == chess.WHITE else "Black"
        return f"{owner}'s {chess.piece_name(piece.piece_type)} {chess.square_name(square)}"

    return f"{named(attacker, move.from_square)} attacks {named(defender, target)}"


def _odds_text(duel: chess_pb2.Duel) -> str:
    """Which side's pawns the odds removed: ``Black's c4 d4`` (White starts on ranks 1-2)."""
    white = [square for square in duel.odds_removed if square[-1:] in ("1", "2")]
    black = [square for square in duel.odds_removed if square not in white]
    parts = []
    if white:
        parts.append(f"White's pawns {' '.join(white)}")
    if black:
        parts.append(f"Black's pawns {' '.join(black)}")
    return ", ".join(parts)


def _duel_record_text(record: chess_pb2.DuelRecord) -> str:
    """``exd5- (defender won, king captured)``."""
    outcome = _OUTCOME_WORDS.get(record.outcome, "undecided")
    end = record.end.replace("_", " ")
    return f"{record.capture_san} ({outcome}, {end})" if end else f"{record.capture_san} ({outcome})"


def _duel_san(position: skirmish.Position, uci: str) -> str:
    try:
        return skirmish.san(position, skirmish.move_from_uci(uci))
    except ValueError:
        return uci


def render_duel_board(
    fen: str, *, flipped: bool = False, ascii: bool = False, last_move: str = ""
) -> list[str]:
    """The 5x5 duel board as lines of text (duel White at the bottom unless ``flipped``), drawn like the
    main board; no lines when ``fen`` is empty (a random setup still being drawn) or unreadable."""
    try:
        position = skirmish.Position.from_fen(fen) if fen else None
    except ValueError:
        position = None
    if position is None:
        return []
    marked: set[str] = set()
    if len(last_move) >= 4:
        marked = {last_move[:2], last_move[2:4]}
    size = skirmish.SIZE
    ranks = range(size) if flipped else range(size - 1, -1, -1)
    files = list(range(size - 1, -1, -1)) if flipped else list(range(size))
    footer = "   " + "  ".join(skirmish.FILES[f] for f in files)
    lines = [footer]
    for rank in ranks:
        cells = []
        for file in files:
            square = rank * size + file
            letter = position.piece_at(square)
            if letter is None:
                glyph = "." if ascii else "·"
            else:
                glyph = letter if ascii else chess.Piece.from_symbol(letter).unicode_symbol()
            name = skirmish.square_name(square)
            cells.append(f"[{glyph}]" if name in marked else f" {glyph} ")
        lines.append(f"{rank + 1} " + "".join(cells) + f" {rank + 1}")
    lines.append(footer)
    return lines


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
    piece, else a random move (``None`` when there is no legal move). In a Skirmish Chess duel:
    :func:`duel_choice`."""
    if _dueling(update):
        return duel_choice(update, rng)
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


def _dueling(update: rules_pb2.MatchUpdate) -> bool:
    view = update.view.chess
    return view.variant == chess_pb2.VARIANT_SKIRMISH and view.HasField("duel") and bool(view.duel.fen)


def duel_choice(update: rules_pb2.MatchUpdate, rng: random.Random, *, safe: bool = False) -> str | None:
    """A duel move in 5x5 UCI: the king's capture if there is one, else the capture of the most valuable
    piece, else a random move; with ``safe``, moves after which the opponent could take the mover's king
    are left out while another move exists. ``None`` when there is no legal move."""
    moves = _moves(update)
    if not moves:
        return None
    try:
        position = skirmish.Position.from_fen(update.view.chess.duel.fen)
        parsed = [(uci, skirmish.move_from_uci(uci)) for uci in moves]
    except ValueError:
        return rng.choice(moves)
    kings = [uci for uci, move in parsed if skirmish.captures_king(position, move)]
    if kings:
        return rng.choice(kings)
    if safe:
        opponent = not position.white_to_move
        safe_moves = [
            (uci, move)
            for uci, move in parsed
            if not skirmish.can_capture_king(skirmish.apply_move(position, move), opponent)
        ]
        parsed = safe_moves or parsed
    best_value, best = 0, []
    for uci, move in parsed:
        target = position.piece_at(move.to_sq)
        value = skirmish.VALUES[target.upper()] if target is not None else 0
        if value > best_value:
            best_value, best = value, [uci]
        elif value and value == best_value:
            best.append(uci)
    return rng.choice(best or [uci for uci, _ in parsed])


def _capture_pair(board: chess.Board, move: chess.Move) -> tuple[str, str] | None:
    """The attacker's and defender's letters of a capture on the main board (``None``: not a capture)."""
    if not board.is_capture(move):
        return None
    attacker = board.piece_at(move.from_square)
    square = move.to_square
    if board.is_en_passant(move):
        square = chess.square(chess.square_file(move.to_square), chess.square_rank(move.from_square))
    defender = board.piece_at(square)
    if attacker is None or defender is None:
        return None
    return attacker.symbol(), defender.symbol()


def duelist_choice(update: rules_pb2.MatchUpdate, rng: random.Random) -> str | None:
    """The duelist bot's move in UCI. Standard chess: :func:`greedy_choice`. Skirmish Chess, main board:
    a quiet mate if there is one, else the king's capture, else a capture the odds favour
    (:func:`~libs.engines.skirmish.odds_pawns` takes pawns from the defender's side; a mate first, then
    the most valuable defender), else a random quiet move, else the capture with the best odds. In a
    duel: :func:`duel_choice`, avoiding moves that hand the opponent the mover's king."""
    view = update.view.chess
    if view.variant != chess_pb2.VARIANT_SKIRMISH:
        return greedy_choice(update, rng)
    if view.HasField("duel"):
        return duel_choice(update, rng, safe=True) if view.duel.fen else None
    moves = _moves(update)
    if not moves:
        return None
    board = chess.Board(view.fen)
    quiet: list[str] = []
    quiet_mates: list[str] = []
    kings: list[str] = []
    favoured: list[tuple[int, int, str]] = []  # (mates, defender value, move): the higher the better
    others: list[tuple[int, str]] = []  # (the odds for the attacker, move)
    for uci in moves:
        move = chess.Move.from_uci(uci)
        pair = _capture_pair(board, move)
        board.push(move)
        try:
            mates = board.is_checkmate()
        except (AttributeError, ValueError):  # a board without a king
            mates = False
        board.pop()
        if pair is None:
            quiet.append(uci)
            if mates:
                quiet_mates.append(uci)
            continue
        attacker, defender = pair
        if defender.upper() == "K":
            kings.append(uci)
            continue
        white_loses, black_loses = skirmish.odds_pawns(attacker, defender)
        if black_loses > 0:
            favoured.append((int(mates), skirmish.VALUES[defender.upper()], uci))
        else:
            others.append((black_loses - white_loses, uci))
    if quiet_mates:
        return rng.choice(quiet_mates)
    if kings:
        return rng.choice(kings)
    if favoured:
        top = max(score[:2] for score in favoured)
        return rng.choice([uci for *score, uci in favoured if tuple(score) == top])
    if quiet:
        return rng.choice(quiet)
    best = max(odds for odds, _ in others)
    return rng.choice([uci for odds, uci in others if odds == best])


FAMILY = ChessClient()
