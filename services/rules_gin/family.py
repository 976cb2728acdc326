"""The gin rummy family for the match runtime: the engine and its codecs (protobuf and the log's JSON)."""

from __future__ import annotations

from datetime import UTC, datetime

from skillclassics.gin.v1 import gin_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import InvalidOptionsError, MalformedActionError
from libs.engines.gin import (
    GIN,
    GinEngine,
    GinOptions,
    GinState,
    GinView,
    HandEnd,
    HandResult,
    Phase,
    Variant,
    hand_log,
    parse_action,
)
from libs.engines.gin.actions import GinAction
from libs.engines.gin.standin import stand_in_action
from libs.match.family import JsonObject, LobbyClocks
from libs.match.model import MatchRecord

_VARIANT_FROM_PROTO = {
    gin_pb2.VARIANT_UNSPECIFIED: Variant.STANDARD,
    gin_pb2.VARIANT_STANDARD: Variant.STANDARD,
    gin_pb2.VARIANT_STRAIGHT: Variant.STRAIGHT,
    gin_pb2.VARIANT_OKLAHOMA: Variant.OKLAHOMA,
}
_VARIANT_TO_PROTO = {
    Variant.STANDARD: gin_pb2.VARIANT_STANDARD,
    Variant.STRAIGHT: gin_pb2.VARIANT_STRAIGHT,
    Variant.OKLAHOMA: gin_pb2.VARIANT_OKLAHOMA,
}
_PHASE_TO_PROTO = {
    Phase.DEALING: gin_pb2.PHASE_DEALING,
    Phase.UPCARD_OFFER: gin_pb2.PHASE_UPCARD_OFFER,
    Phase.DRAW: gin_pb2.PHASE_DRAW,
    Phase.DISCARD: gin_pb2.PHASE_DISCARD,
    Phase.MATCH_OVER: gin_pb2.PHASE_MATCH_OVER,
}
_END_TO_PROTO = {
    HandEnd.KNOCK: gin_pb2.HAND_END_KNOCK,
    HandEnd.UNDERCUT: gin_pb2.HAND_END_UNDERCUT,
    HandEnd.GIN: gin_pb2.HAND_END_GIN,
    HandEnd.BIG_GIN: gin_pb2.HAND_END_BIG_GIN,
    HandEnd.VOID: gin_pb2.HAND_END_VOID,
}


def _melds(melds: tuple[tuple[str, ...], ...]) -> list[gin_pb2.Meld]:
    return [gin_pb2.Meld(cards=meld) for meld in melds]


def hand_result_to_proto(hand: HandResult) -> gin_pb2.HandResult:
    proto = gin_pb2.HandResult(
        hand_number=hand.hand_number,
        end=_END_TO_PROTO[hand.end],
        points=hand.points,
        dealer=hand.dealer,
        upcard=hand.upcard,
        knock_limit=hand.knock_limit,
        hands=[
            gin_pb2.HandReveal(
                seat=reveal.seat,
                cards=reveal.cards,
                melds=_melds(reveal.melds),
                deadwood=reveal.deadwood,
                deadwood_points=reveal.deadwood_points,
                laid_off=reveal.laid_off,
            )
            for reveal in hand.hands
        ],
    )
    if hand.ender is not None:
        proto.ender = hand.ender
    if hand.winner is not None:
        proto.winner = hand.winner
    return proto


class GinFamily:
    """Gin rummy as the runtime sees it."""

    name = "gin"
    record_format = "txt"
    hides_information = True
    uses_chance = True

    lobby_clocks = LobbyClocks(
        "gin", minutes=(5, 10, 15, 20, 30), increment_seconds=(0, 5, 10), per="per player for the match"
    )
    LOBBY_HANDS_TO_WIN = 3
    """Lobby matches are best of five: the first to 3 hands wins."""

    def __init__(self, engine: GinEngine = GIN) -> None:
        self.engine = engine

    def lobby_pool(self, options: GinOptions) -> str:
        if options.hands_to_win != self.LOBBY_HANDS_TO_WIN:
            raise InvalidOptionsError(
                "lobby gin matches are best of five: the first to 3 hand wins (hands_to_win 3)"
            )
        return options.variant.value

    def stand_in(self, state: GinState, seat: int) -> GinAction | None:
        """The stand-in's action for an absent ``seat`` (libs/engines/gin/standin.py)."""
        text = stand_in_action(state, seat)
        return None if text is None else parse_action(text)

    def options_from_proto(self, options: rules_pb2.MatchOptions) -> GinOptions:
        which = options.WhichOneof("family")
        if which not in (None, "gin"):
            raise InvalidOptionsError(f"{which} options cannot configure a gin rummy match")
        variant = _VARIANT_FROM_PROTO.get(options.gin.variant)
        if variant is None:
            raise InvalidOptionsError(f"unknown gin variant {options.gin.variant}")
        return GinOptions(variant, options.gin.hands_to_win or 3)

    def options_to_proto(self, options: GinOptions) -> rules_pb2.MatchOptions:
        variant = _VARIANT_TO_PROTO[options.variant]
        return rules_pb2.MatchOptions(
            gin=gin_pb2.GinOptions(variant=variant, hands_to_win=options.hands_to_win)
        )

    def options_to_json(self, options: GinOptions) -> JsonObject:
        return {"variant": options.variant.value, "hands_to_win": options.hands_to_win}

    def options_from_json(self, data: JsonObject) -> GinOptions:
        return GinOptions(Variant(data["variant"]), int(data["hands_to_win"]))

    def action_from_proto(self, action: rules_pb2.Action) -> GinAction:
        if action.WhichOneof("kind") != "gin":
            raise MalformedActionError("a gin rummy action needs the gin field (e.g. 'stock', 'discard 7H')")
        return parse_action(action.gin.action)

    def action_to_json(self, action: GinAction) -> JsonObject:
        return {"notation": action.notation}

    def action_from_json(self, data: JsonObject) -> GinAction:
        return parse_action(data["notation"])

    def describe(self, state_before: GinState, action: GinAction) -> str:
        """The action in its notation (``take``, ``discard 7H``, ``knock 3C``...)."""
        return str(action.notation)

    def view_to_proto(self, view: GinView) -> rules_pb2.View:
        proto = gin_pb2.GinView(
            variant=_VARIANT_TO_PROTO[view.variant],
            hands_to_win=view.hands_to_win,
            hand_number=view.hand_number,
            phase=_PHASE_TO_PROTO[view.phase],
            hand=view.hand,
            melds=_melds(view.melds),
            deadwood=view.deadwood,
            deadwood_points=view.deadwood_points,
            discard_pile=view.discard_pile,
            stock_count=view.stock_count,
            seats=[
                gin_pb2.SeatCards(seat=s.seat, card_count=s.card_count, known_cards=s.known_cards)
                for s in view.seats
            ],
            knock_limit=view.knock_limit,
            hand_wins=view.hand_wins,
            points=view.points,
            hands=[hand_result_to_proto(hand) for hand in view.hands],
            taken_from_discard=view.taken_from_discard or "",
        )
        if view.dealer is not None:
            proto.dealer = view.dealer
        return rules_pb2.View(gin=proto)

    def export_record(self, record: MatchRecord) -> str:
        """A plain-text record: the players, the clock, every hand (deal, play, result) and the outcome."""
        setup = record.setup
        started = datetime.fromtimestamp(setup.created_at_ms / 1000, tz=UTC)
        control = setup.time_control
        lines = [
            f"Gin rummy ({record.options.variant.value}, first to {record.options.hands_to_win} hands)",
            f"Match: {setup.match_id}",
            f"Date: {started:%Y-%m-%d %H:%M:%S} UTC",
            f"Seat 0: {setup.players[0]}",
            f"Seat 1: {setup.players[1]}",
            f"Clock: {control.base_ms // 1000} s + {control.increment_ms // 1000} s per turn",
            f"Fairness commitment: {setup.fairness_commitment}",
            "",
            *hand_log(record.game),
        ]
        if record.outcome is not None:
            lines += ["", f"Result: {record.outcome.detail or record.outcome.termination.value}"]
        return "\n".join(lines) + "\n"


FAMILY = GinFamily()
"""The family as its rules service declares it: what matchmaking and the tools read of it
(``services.families``), so that they name no family themselves."""
