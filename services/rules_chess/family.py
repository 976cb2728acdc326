"""The chess family for the match runtime: the engine and its codecs (protobuf and the log's JSON)."""

from __future__ import annotations

from datetime import UTC, datetime

from skillclassics.chess.v1 import chess_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import InvalidOptionsError, MalformedActionError
from libs.engines.chess import (
    CHESS,
    ChessAction,
    ChessEngine,
    ChessOptions,
    ChessState,
    ChessView,
    Move,
    Ruleset,
    export_pgn,
    parse_action,
)
from libs.match.family import JsonObject, LobbyClocks
from libs.match.model import MatchRecord

_RULESET_FROM_PROTO = {
    chess_pb2.RULESET_UNSPECIFIED: Ruleset.CONTEST,
    chess_pb2.RULESET_CONTEST: Ruleset.CONTEST,
    chess_pb2.RULESET_FIDE: Ruleset.FIDE,
}
_RULESET_TO_PROTO = {Ruleset.CONTEST: chess_pb2.RULESET_CONTEST, Ruleset.FIDE: chess_pb2.RULESET_FIDE}
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

    def __init__(self, engine: ChessEngine = CHESS) -> None:
        self.engine = engine

    def lobby_pool(self, options: ChessOptions) -> str:
        if options.initial_fen is not None:
            raise InvalidOptionsError("lobby chess tables start from the initial position (no initial_fen)")
        return options.ruleset.value

    def options_from_proto(self, options: rules_pb2.MatchOptions) -> ChessOptions:
        which = options.WhichOneof("family")
        if which not in (None, "chess"):
            raise InvalidOptionsError(f"{which} options cannot configure a chess match")
        ruleset = _RULESET_FROM_PROTO.get(options.chess.ruleset)
        if ruleset is None:
            raise InvalidOptionsError(f"unknown chess ruleset {options.chess.ruleset}")
        return ChessOptions(ruleset, options.chess.initial_fen or None)

    def options_to_proto(self, options: ChessOptions) -> rules_pb2.MatchOptions:
        return rules_pb2.MatchOptions(
            chess=chess_pb2.ChessOptions(
                ruleset=_RULESET_TO_PROTO[options.ruleset], initial_fen=options.initial_fen or ""
            )
        )

    def options_to_json(self, options: ChessOptions) -> JsonObject:
        return {"ruleset": options.ruleset.value, "initial_fen": options.initial_fen}

    def options_from_json(self, data: JsonObject) -> ChessOptions:
        return ChessOptions(Ruleset(data["ruleset"]), data.get("initial_fen"))

    def action_from_proto(self, action: rules_pb2.Action) -> ChessAction:
        chess_action = action.chess
        which = chess_action.WhichOneof("kind")
        if which == "move":
            return parse_action(chess_action.move.strip())
        if which == "draw":
            notation = _DRAW_FROM_PROTO.get(chess_action.draw)
            if notation is None:
                raise MalformedActionError("draw must be OFFER, ACCEPT, DECLINE or CLAIM")
            return parse_action(notation)
        raise MalformedActionError("a chess action needs a move or a draw action")

    def action_to_json(self, action: ChessAction) -> JsonObject:
        return {"notation": action.notation}

    def action_from_json(self, data: JsonObject) -> ChessAction:
        return parse_action(data["notation"])

    def is_move(self, action: ChessAction) -> bool:
        """Only a move is a move: draw offers, answers and claims leave the turn and the clock alone."""
        return isinstance(action, Move)

    def describe(self, state_before: ChessState, action: ChessAction) -> str:
        """A move in SAN (with check marks); a draw action by its name."""
        notation: str = action.notation
        if notation in _DRAW_FROM_PROTO.values():
            return notation
        return self.engine.move_san(state_before, notation)

    def view_to_proto(self, view: ChessView) -> rules_pb2.View:
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
        if view.draw_offer is not None:
            proto.draw_offer_by = view.draw_offer
        return out

    def export_record(self, record: MatchRecord) -> str:
        """PGN with the players, the time control, ``[%clk]`` after every move and the result's reason."""
        setup = record.setup
        started = datetime.fromtimestamp(setup.created_at_ms / 1000, tz=UTC)
        control = setup.time_control
        headers = {
            "Event": f"SkillClassics {record.options.ruleset.value} game",
            "Site": "SkillClassics",
            "Date": started.strftime("%Y.%m.%d"),
            "White": setup.players[0],
            "Black": setup.players[1],
            "TimeControl": f"{control.base_ms // 1000}+{control.increment_ms // 1000}",
            "UTCDate": started.strftime("%Y.%m.%d"),
            "UTCTime": started.strftime("%H:%M:%S"),
            "GameId": setup.match_id,
        }
        state: ChessState = record.game
        clocks = [mark.remaining_ms for mark in record.clock_marks][: state.ply_count]
        return export_pgn(state, headers, clocks, record.outcome)
