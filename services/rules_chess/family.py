"""The chess family for the match runtime: the engine and its codecs (protobuf and the log's JSON)."""

from __future__ import annotations

from datetime import UTC, datetime

from skillclassics.chess.v1 import chess_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import InvalidOptionsError, MalformedActionError
from libs.engines.chess import (
    ChessAction,
    ChessOptions,
    ChessView,
    Move,
    Ruleset,
    export_pgn,
    parse_action,
)
from libs.engines.chess.skirmish import (
    DrawRule,
    DuelOutcome,
    SkirmishChessOptions,
    SkirmishChessState,
    SkirmishChessView,
)
from libs.engines.chess.skirmish_pgn import export_skirmish_pgn
from libs.engines.chess.variants import CHESS_VARIANTS, AnyChessOptions, AnyChessState, ChessVariantsEngine
from libs.match.family import JsonObject, LobbyClocks
from libs.match.model import MatchRecord

_RULESET_FROM_PROTO = {
    chess_pb2.RULESET_UNSPECIFIED: Ruleset.CONTEST,
    chess_pb2.RULESET_CONTEST: Ruleset.CONTEST,
    chess_pb2.RULESET_FIDE: Ruleset.FIDE,
}
_RULESET_TO_PROTO = {Ruleset.CONTEST: chess_pb2.RULESET_CONTEST, Ruleset.FIDE: chess_pb2.RULESET_FIDE}
_PRESET_FROM_PROTO = {
    chess_pb2.SKIRMISH_PRESET_UNSPECIFIED: "classic",
    chess_pb2.SKIRMISH_PRESET_CLASSIC: "classic",
    chess_pb2.SKIRMISH_PRESET_FORTRESS: "fortress",
    chess_pb2.SKIRMISH_PRESET_SPEARHEAD: "spearhead",
    chess_pb2.SKIRMISH_PRESET_WINGS: "wings",
    chess_pb2.SKIRMISH_PRESET_CENTER_CLASH: "center_clash",
    chess_pb2.SKIRMISH_PRESET_RANDOM: "random",
}
_PRESET_TO_PROTO = {
    name: value
    for value, name in _PRESET_FROM_PROTO.items()
    if value != chess_pb2.SKIRMISH_PRESET_UNSPECIFIED
}
_DRAW_RULE_FROM_PROTO = {
    chess_pb2.SKIRMISH_DRAW_RULE_UNSPECIFIED: DrawRule.BOTH_STAY,
    chess_pb2.SKIRMISH_DRAW_RULE_BOTH_REMOVED: DrawRule.BOTH_REMOVED,
    chess_pb2.SKIRMISH_DRAW_RULE_BOTH_STAY: DrawRule.BOTH_STAY,
    chess_pb2.SKIRMISH_DRAW_RULE_DEFENDER_WINS: DrawRule.DEFENDER_WINS,
}
_DRAW_RULE_TO_PROTO = {
    rule: value
    for value, rule in _DRAW_RULE_FROM_PROTO.items()
    if value != chess_pb2.SKIRMISH_DRAW_RULE_UNSPECIFIED
}
_DUEL_OUTCOME_TO_PROTO = {
    DuelOutcome.ATTACKER_WON: chess_pb2.DUEL_OUTCOME_ATTACKER_WON,
    DuelOutcome.DEFENDER_WON: chess_pb2.DUEL_OUTCOME_DEFENDER_WON,
    DuelOutcome.DRAW: chess_pb2.DUEL_OUTCOME_DRAW,
}
LOBBY_DUEL_CLOCKS_MS = (30_000, 60_000, 120_000)
"""The duel clocks Skirmish Chess lobby tables offer (each side, fresh for every duel)."""
LOBBY_DUEL_INCREMENTS_MS = (0, 2_000, 5_000)
LOBBY_COUNTDOWNS_MS = (0, 3_000, 5_000)

_DRAW_FROM_PROTO = {
    chess_pb2.DRAW_ACTION_OFFER: "offer_draw",
    chess_pb2.DRAW_ACTION_ACCEPT: "accept_draw",
    chess_pb2.DRAW_ACTION_DECLINE: "decline_draw",
    chess_pb2.DRAW_ACTION_CLAIM: "claim_draw",
}


class ChessFamily:
    """Chess as the runtime sees it."""

    name = "chess"
    record_format = "pgn"
    hides_information = False
    uses_chance = False

    lobby_clocks = LobbyClocks("chess", minutes=(3, 5, 10, 20, 30))

    def __init__(self, engine: ChessVariantsEngine = CHESS_VARIANTS) -> None:
        self.engine = engine

    def lobby_pool(self, options: AnyChessOptions) -> str:
        """Standard tables: the ruleset, from the usual position. Skirmish Chess tables: every preset, odds
        on or off, every draw rule, the duel clocks of :data:`LOBBY_DUEL_CLOCKS_MS` with the increments of
        :data:`LOBBY_DUEL_INCREMENTS_MS` and the countdowns of :data:`LOBBY_COUNTDOWNS_MS`."""
        if isinstance(options, SkirmishChessOptions):
            problems = []
            if options.duel_clock_ms not in LOBBY_DUEL_CLOCKS_MS:
                problems.append(f"duel clocks of {_seconds(LOBBY_DUEL_CLOCKS_MS)} s")
            if options.duel_increment_ms not in LOBBY_DUEL_INCREMENTS_MS:
                problems.append(f"duel increments of {_seconds(LOBBY_DUEL_INCREMENTS_MS)} s")
            if options.countdown_ms not in LOBBY_COUNTDOWNS_MS:
                problems.append(f"countdowns of {_seconds(LOBBY_COUNTDOWNS_MS)} s")
            if problems:
                raise InvalidOptionsError("Skirmish Chess lobby tables offer " + "; ".join(problems))
            if options.initial_fen is not None:
                raise InvalidOptionsError("lobby Skirmish Chess tables start from the initial position")
            odds = "odds" if options.odds else "no-odds"
            clock = f"{options.duel_clock_ms // 1000}+{options.duel_increment_ms // 1000}"
            countdown = f"cd{options.countdown_ms // 1000}"
            return f"skirmish/{options.preset}/{odds}/{options.draw_rule.value}/{clock}/{countdown}"
        if options.initial_fen is not None:
            raise InvalidOptionsError("lobby chess tables start from the initial position (no initial_fen)")
        return options.ruleset.value

    def draws_chance(self, options: AnyChessOptions) -> bool:
        """Only Skirmish Chess with random duel setups draws (from the ``skirmish`` stream)."""
        return isinstance(options, SkirmishChessOptions) and options.preset == "random"

    def options_from_proto(self, options: rules_pb2.MatchOptions) -> AnyChessOptions:
        which = options.WhichOneof("family")
        if which not in (None, "chess"):
            raise InvalidOptionsError(f"{which} options cannot configure a chess match")
        proto = options.chess
        if proto.variant == chess_pb2.VARIANT_SKIRMISH:
            if proto.ruleset == chess_pb2.RULESET_CONTEST:
                raise InvalidOptionsError(
                    "Skirmish Chess plays the FIDE laws on the main board (no contest ruleset)"
                )
            duel = proto.skirmish
            preset = _PRESET_FROM_PROTO.get(duel.preset)
            rule = _DRAW_RULE_FROM_PROTO.get(duel.draw_rule)
            if preset is None or rule is None:
                raise InvalidOptionsError("unknown skirmish preset or draw rule")
            return SkirmishChessOptions(
                preset=preset,
                odds=not duel.no_odds,
                draw_rule=rule,
                duel_clock_ms=duel.clock_base_ms or 60_000,
                duel_increment_ms=duel.clock_increment_ms,
                countdown_ms=duel.countdown_ms,
                initial_fen=proto.initial_fen or None,
            )
        if proto.variant not in (chess_pb2.VARIANT_UNSPECIFIED, chess_pb2.VARIANT_STANDARD):
            raise InvalidOptionsError(f"unknown chess variant {proto.variant}")
        if proto.HasField("skirmish"):
            raise InvalidOptionsError("skirmish options need the Skirmish Chess variant")
        ruleset = _RULESET_FROM_PROTO.get(proto.ruleset)
        if ruleset is None:
            raise InvalidOptionsError(f"unknown chess ruleset {proto.ruleset}")
        return ChessOptions(ruleset, proto.initial_fen or None)

    def options_to_proto(self, options: AnyChessOptions) -> rules_pb2.MatchOptions:
        if isinstance(options, SkirmishChessOptions):
            return rules_pb2.MatchOptions(
                chess=chess_pb2.ChessOptions(
                    ruleset=chess_pb2.RULESET_FIDE,
                    variant=chess_pb2.VARIANT_SKIRMISH,
                    skirmish=chess_pb2.SkirmishOptions(
                        preset=_PRESET_TO_PROTO[options.preset],
                        no_odds=not options.odds,
                        draw_rule=_DRAW_RULE_TO_PROTO[options.draw_rule],
                        clock_base_ms=options.duel_clock_ms,
                        clock_increment_ms=options.duel_increment_ms,
                        countdown_ms=options.countdown_ms,
                    ),
                    initial_fen=options.initial_fen or "",
                )
            )
        return rules_pb2.MatchOptions(
            chess=chess_pb2.ChessOptions(
                ruleset=_RULESET_TO_PROTO[options.ruleset], initial_fen=options.initial_fen or ""
            )
        )

    def options_to_json(self, options: AnyChessOptions) -> JsonObject:
        if isinstance(options, SkirmishChessOptions):
            return {
                "variant": "skirmish",
                "preset": options.preset,
                "odds": options.odds,
                "draw_rule": options.draw_rule.value,
                "duel_clock_ms": options.duel_clock_ms,
                "duel_increment_ms": options.duel_increment_ms,
                "countdown_ms": options.countdown_ms,
                "initial_fen": options.initial_fen,
            }
        return {"ruleset": options.ruleset.value, "initial_fen": options.initial_fen}

    def options_from_json(self, data: JsonObject) -> AnyChessOptions:
        if data.get("variant") == "skirmish":
            return SkirmishChessOptions(
                preset=data["preset"],
                odds=bool(data["odds"]),
                draw_rule=DrawRule(data["draw_rule"]),
                duel_clock_ms=int(data["duel_clock_ms"]),
                duel_increment_ms=int(data["duel_increment_ms"]),
                countdown_ms=int(data["countdown_ms"]),
                initial_fen=data.get("initial_fen"),
            )
        return ChessOptions(Ruleset(data["ruleset"]), data.get("initial_fen"))

    def action_from_proto(self, action: rules_pb2.Action) -> ChessAction:
        chess_action = action.chess
        which = chess_action.WhichOneof("kind")
        if which == "move":
            if chess_action.claim_move:
                raise MalformedActionError("claim_move goes with a draw claim, not with a move")
            return parse_action(chess_action.move.strip())
        if which == "draw":
            notation = _DRAW_FROM_PROTO.get(chess_action.draw)
            if notation is None:
                raise MalformedActionError("draw must be OFFER, ACCEPT, DECLINE or CLAIM")
            claim_move = chess_action.claim_move.strip()
            if claim_move:
                if chess_action.draw != chess_pb2.DRAW_ACTION_CLAIM:
                    raise MalformedActionError("claim_move goes only with DRAW_ACTION_CLAIM")
                return parse_action(f"{notation} {claim_move}")
            return parse_action(notation)
        raise MalformedActionError("a chess action needs a move or a draw action")

    def action_to_json(self, action: ChessAction) -> JsonObject:
        return {"notation": action.notation}

    def action_from_json(self, data: JsonObject) -> ChessAction:
        return parse_action(data["notation"])

    def is_move(self, action: ChessAction) -> bool | None:
        """Only a move is a move: draw offers, answers and claims leave the turn and the clock alone. A
        claim made with a move (FIDE) is a move when it was wrong and the move was played: ``None`` lets
        the runtime tell by the turn."""
        if isinstance(action, Move):
            return True
        return None if getattr(action, "move", None) else False

    def moved(self, before: AnyChessState, after: AnyChessState) -> bool:
        """A claim made with its move was a move when the move was played (the claim was wrong)."""
        return after.ply_count > before.ply_count

    def describe(self, state_before: AnyChessState, action: ChessAction) -> str:
        """A move in SAN (with check marks; a Skirmish Chess capture without its mark, which its duel
        gives it, and a duel move as ``duel: <SAN>``); a draw action by its name."""
        notation: str = action.notation
        if notation.split(" ", 1)[0] in _DRAW_FROM_PROTO.values():
            return notation
        return self.engine.move_san(state_before, notation)

    def view_to_proto(self, view: ChessView | SkirmishChessView) -> rules_pb2.View:
        if isinstance(view, SkirmishChessView):
            return _skirmish_view_to_proto(view)
        # Filled in place: a ChessView built first and passed to View(chess=...) would be copied whole, and
        # LegalMove messages built first would be copied again into the repeated field.
        out = rules_pb2.View()
        proto = out.chess
        proto.fen = view.fen
        proto.ruleset = _RULESET_TO_PROTO[view.ruleset]
        proto.moves_san.extend(view.moves_san)
        proto.moves_uci.extend(view.moves_uci)
        proto.last_move_uci = view.last_move or ""
        proto.check = view.is_check
        proto.material.white, proto.material.black = view.material  # present even when both are 0
        add_legal_move = proto.legal_moves.add
        for uci, san in zip(view.legal_moves_uci, view.legal_moves_san, strict=True):
            add_legal_move(uci=uci, san=san)
        proto.can_claim_draw = view.can_claim_draw
        proto.ply = view.ply_count
        proto.variant = chess_pb2.VARIANT_STANDARD
        proto.claim_moves.extend(getattr(view, "claim_moves", ()))
        if view.draw_offer is not None:
            proto.draw_offer_by = view.draw_offer
        return out

    def export_record(self, record: MatchRecord) -> str:
        """PGN with the players, the time control, ``[%clk]`` after every move and the result's reason
        (Skirmish Chess: in parts, with every duel in a comment; libs/engines/chess/skirmish_pgn.py)."""
        headers = _pgn_headers(record)
        state = record.game
        clocks = [mark.remaining_ms for mark in record.clock_marks][: state.ply_count]
        if isinstance(state, SkirmishChessState):
            return export_skirmish_pgn(state, headers, clocks, record.outcome)
        return export_pgn(state, headers, clocks, record.outcome)


def _pgn_headers(record: MatchRecord) -> dict[str, str]:
    setup = record.setup
    started = datetime.fromtimestamp(setup.created_at_ms / 1000, tz=UTC)
    control = setup.time_control
    options = record.options
    kind = "Skirmish Chess" if isinstance(options, SkirmishChessOptions) else options.ruleset.value
    return {
        "Event": f"SkillClassics {kind} game",
        "Site": "SkillClassics",
        "Date": started.strftime("%Y.%m.%d"),
        "White": setup.players[0],
        "Black": setup.players[1],
        "TimeControl": f"{control.base_ms // 1000}+{control.increment_ms // 1000}",
        "UTCDate": started.strftime("%Y.%m.%d"),
        "UTCTime": started.strftime("%H:%M:%S"),
        "GameId": setup.match_id,
    }


def _seconds(values: tuple[int, ...]) -> str:
    return "/".join(str(value // 1000) for value in values)


def _skirmish_view_to_proto(view: SkirmishChessView) -> rules_pb2.View:
    out = rules_pb2.View()
    proto = out.chess
    proto.fen = view.fen
    proto.ruleset = chess_pb2.RULESET_FIDE
    proto.variant = chess_pb2.VARIANT_SKIRMISH
    proto.moves_san.extend(view.moves_san)
    proto.moves_uci.extend(view.moves_uci)
    proto.last_move_uci = view.moves_uci[-1] if view.moves_uci else ""
    proto.check = view.is_check
    proto.material.white, proto.material.black = view.material
    for uci, san in zip(view.legal_moves_uci, view.legal_moves_san, strict=True):
        proto.legal_moves.add(uci=uci, san=san)
    proto.can_claim_draw = view.can_claim_draw
    proto.ply = view.ply_count
    if view.draw_offer is not None:
        proto.draw_offer_by = view.draw_offer
    duel = view.duel
    if duel is not None:
        proto.duel.capture_uci = duel.capture_uci
        proto.duel.capture_san = duel.capture_san
        proto.duel.attacker = duel.attacker
        proto.duel.defender = duel.defender
        proto.duel.white_seat = duel.white_seat
        proto.duel.black_seat = duel.black_seat
        proto.duel.fen = duel.fen
        proto.duel.preset = _PRESET_TO_PROTO[duel.preset]
        proto.duel.odds_removed.extend(duel.odds_removed)
        proto.duel.moves_san.extend(duel.moves_san)
        proto.duel.moves_uci.extend(duel.moves_uci)
        proto.duel.ply = duel.ply
        proto.duel.clock_ms.extend(duel.clocks_ms)
        proto.duel.counting_down = duel.counting_down
        proto.duel.legal_moves.extend(duel.legal_moves)
    for summary in view.duels:
        proto.duels.add(
            capture_san=summary.capture_san,
            outcome=_DUEL_OUTCOME_TO_PROTO[summary.outcome],
            end=summary.end.value,
            start_fen=summary.start_fen,
            moves_san=summary.moves_san,
        )
    return out


FAMILY = ChessFamily()
"""The family as its rules service declares it: what matchmaking and the tools read of it
(``services.families``), so that they name no family themselves."""
