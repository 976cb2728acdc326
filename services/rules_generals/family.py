"""The Game of the Generals family for the match runtime: the engine and its codecs (protobuf and the log's
JSON).

Hidden information: every view is computed by the engine for its viewer (``hides_information = True``),
the log's actions are described to both seats without a setup's placements (``describe``), and the record,
which reveals every rank, is only made once the match is over (docs/generals.md, "Service").

Lobby tables (``docs/generals.md``, "Service"): the tournament rules (the only ruleset) with the per-move
clock of seed ``004``: a fresh 30, 60 or 120 s for each move, running out is a strike, the third loses.
"""

from __future__ import annotations

from datetime import UTC, datetime

from skillclassics.generals.v1 import generals_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import InvalidOptionsError, MalformedActionError
from libs.engines.generals import (
    GENERALS,
    GeneralsEngine,
    GeneralsOptions,
    GeneralsState,
    GeneralsView,
    Phase,
    describe,
    export_record,
    is_move,
    parse_action,
)
from libs.match.family import JsonObject, LobbyClocks
from libs.match.model import MatchRecord

_PHASE_TO_PROTO = {
    Phase.SETUP: generals_pb2.PHASE_SETUP,
    Phase.PLAY: generals_pb2.PHASE_PLAY,
    Phase.OVER: generals_pb2.PHASE_OVER,
}


class GeneralsFamily:
    """Game of the Generals as the runtime sees it."""

    name = "generals"
    record_format = "txt"
    hides_information = True
    uses_chance = True

    lobby_clocks = LobbyClocks("generals", minutes=(0,), per_move_seconds=(30, 60, 120), strikes=3)
    """Seed 004: "Pick 30 seconds, 1 minute (the default) or 2 minutes. Every move gets a fresh clock.
    Going over counts as a strike and starts a new one; the third strike loses the game." """

    def __init__(self, engine: GeneralsEngine = GENERALS) -> None:
        self.engine = engine

    def lobby_pool(self, options: GeneralsOptions) -> str:
        """One ruleset: every table is a tournament table."""
        return "tournament"

    def is_move(self, action: str) -> bool:
        """Only a piece moving is a move (it ends the turn and its move clock); setup actions and draw
        offers are not."""
        return is_move(action)

    def options_from_proto(self, options: rules_pb2.MatchOptions) -> GeneralsOptions:
        which = options.WhichOneof("family")
        if which not in (None, "generals"):
            raise InvalidOptionsError(f"{which} options cannot configure a Game of the Generals match")
        return GeneralsOptions()

    def options_to_proto(self, options: GeneralsOptions) -> rules_pb2.MatchOptions:
        return rules_pb2.MatchOptions(generals=generals_pb2.GeneralsOptions())

    def options_to_json(self, options: GeneralsOptions) -> JsonObject:
        return {}

    def options_from_json(self, data: JsonObject) -> GeneralsOptions:
        return GeneralsOptions()

    def action_from_proto(self, action: rules_pb2.Action) -> str:
        if action.WhichOneof("kind") != "generals":
            raise MalformedActionError(
                "a Game of the Generals action needs the generals field (e.g. 'b3-b4', 'ready', 'setup ...')"
            )
        return parse_action(action.generals.action)

    def action_to_json(self, action: str) -> JsonObject:
        # The log keeps the whole action (a setup's placements too): it is never sent to a seat as is.
        return {"notation": action}

    def action_from_json(self, data: JsonObject) -> str:
        return parse_action(data["notation"])

    def describe(self, state_before: GeneralsState, action: str) -> str:
        """What both seats are told: the action, but a setup without its placements (``setup``)."""
        return describe(state_before, action)

    def view_to_proto(self, view: GeneralsView) -> rules_pb2.View:
        proto = generals_pb2.GeneralsView(
            phase=_PHASE_TO_PROTO[view.phase],
            ready=[seat for seat in (0, 1) if view.ready[seat]],
            awaiting_chance=view.awaiting_chance,
            pieces=[
                generals_pb2.Piece(square=piece.square, seat=piece.seat, rank=piece.rank or "")
                for piece in view.pieces
            ],
            missing=view.missing,
            lost=[
                generals_pb2.Losses(count=view.lost_counts[seat], ranks=view.lost[seat]) for seat in (0, 1)
            ],
            moves_played=view.moves_played,
            quiet_moves=view.quiet_moves,
            chase=[
                generals_pb2.ChaseCount(square=chase.square or "", moves=chase.moves, shuttle=chase.shuttle)
                for chase in view.chase
            ],
            warnings=[
                generals_pb2.DrawWarning(
                    rule=warning.rule, seat=warning.seat, moves_left=warning.moves_left, text=warning.text
                )
                for warning in view.warnings
            ],
            offers_left=view.offers_left,
            flag_pending=view.flag_pending or "",
            message=view.message,
        )
        if view.turn is not None:
            proto.turn = view.turn
        if view.first is not None:
            proto.first = view.first
        if view.draw_offer is not None:
            proto.draw_offer = view.draw_offer
        last = view.last_move
        if last is not None:
            proto.last_move.CopyFrom(
                generals_pb2.LastMove(
                    seat=last.seat,
                    to=last.to,
                    challenge=last.challenge,
                    result=last.result or "",
                    removed=last.removed,
                    **{"from": last.frm},
                )
            )
        return rules_pb2.View(generals=proto)

    def export_record(self, record: MatchRecord) -> str:
        """The record (docs/generals.md, "Record"): every rank, so it is made only once the match is over
        (``GetRecord`` serves finished matches only). Comment lines name the players, the date, the clock
        and the fairness commitment."""
        setup = record.setup
        started = datetime.fromtimestamp(setup.created_at_ms / 1000, tz=UTC)
        control = setup.time_control
        header = [
            "# Game of the Generals, tournament rules",
            f"# Match: {setup.match_id}",
            f"# Date: {started:%Y-%m-%d %H:%M:%S} UTC",
            f"# White: {setup.players[0]}",
            f"# Black: {setup.players[1]}",
            f"# Clock: {control.period_ms // 1000} s per move, strike {control.periods} loses",
            f"# Fairness commitment: {setup.fairness_commitment}",
        ]
        return "\n".join(header) + "\n" + export_record(record.game, record.outcome)


FAMILY = GeneralsFamily()
"""The family as its rules service declares it: what matchmaking and the tools read of it
(``services.families``), so that they name no family themselves."""
