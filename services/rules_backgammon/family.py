"""The backgammon family for the match runtime: the engine and its codecs (protobuf and the log's JSON).

Lobby tables (``docs/backgammon.md``, "Lobby tables"; ``docs/matchmaking.md``, "What a lobby table
offers") never use the doubling cube (seed ``000``: "Tables created in the lobby do not use the doubling
cube"), so none of the money-play rules that need it (beavers, automatic doubles, Jacoby). The creator
picks the variant, and either SkillClassics' one game (``000``: the first to bear off wins, gammons not
scored) or seed ``002``'s match to 1, 3, 5 or 9 points with the Crawford rule, gammons and backgammons
scored; automatic roll and automatic bear-off (``002``'s conveniences) as chosen. Clocks: ``000``'s
chess-style clocks or ``002``'s capped-bonus clocks. Matches made directly (``CreateMatch``: scheduled
events) may use every option the engine supports.
"""

from __future__ import annotations

from datetime import UTC, datetime

from skillclassics.backgammon.v1 import backgammon_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.backgammon import (
    BACKGAMMON,
    BackgammonAction,
    BackgammonEngine,
    BackgammonOptions,
    BackgammonState,
    BackgammonView,
    Phase,
    PlayText,
    Variant,
    export_mat,
    parse_action,
    parse_play,
)
from libs.engines.backgammon.standin import stand_in_action
from libs.engines.base import InvalidOptionsError, MalformedActionError
from libs.match.family import JsonObject, LobbyClocks
from libs.match.model import MatchRecord

_VARIANT_FROM_PROTO = {
    backgammon_pb2.VARIANT_UNSPECIFIED: Variant.STANDARD,
    backgammon_pb2.VARIANT_STANDARD: Variant.STANDARD,
    backgammon_pb2.VARIANT_NACKGAMMON: Variant.NACKGAMMON,
    backgammon_pb2.VARIANT_HYPERGAMMON: Variant.HYPERGAMMON,
}
_VARIANT_TO_PROTO = {
    Variant.STANDARD: backgammon_pb2.VARIANT_STANDARD,
    Variant.NACKGAMMON: backgammon_pb2.VARIANT_NACKGAMMON,
    Variant.HYPERGAMMON: backgammon_pb2.VARIANT_HYPERGAMMON,
}
_PHASE_TO_PROTO = {
    Phase.OPENING: backgammon_pb2.PHASE_OPENING,
    Phase.ROLL_OR_DOUBLE: backgammon_pb2.PHASE_ROLL_OR_DOUBLE,
    Phase.ROLLING: backgammon_pb2.PHASE_ROLLING,
    Phase.MOVE: backgammon_pb2.PHASE_MOVE,
    Phase.DOUBLED: backgammon_pb2.PHASE_DOUBLED,
    Phase.RESIGN_OFFERED: backgammon_pb2.PHASE_RESIGN_OFFERED,
    Phase.BETWEEN_GAMES: backgammon_pb2.PHASE_BETWEEN_GAMES,
    Phase.OVER: backgammon_pb2.PHASE_OVER,
}
_DEFAULTS = BackgammonOptions()
_FLAGS = ("cube", "beavers", "jacoby", "gammons", "auto_roll", "auto_bearoff")
"""The boolean options, named as in the proto and the log's JSON."""


class BackgammonFamily:
    """Backgammon as the runtime sees it."""

    name = "backgammon"
    record_format = "mat"
    hides_information = False
    uses_chance = True

    lobby_clocks = LobbyClocks(
        "backgammon", minutes=(3, 5, 10, 20, 30), capped_bonus=((30, 10, 10, 30), (120, 20, 20, 120))
    )
    """Seed 000: head-to-head tables offer 3, 5, 10, 20 or 30 minutes per player, no increment, and
    backgammon's clock is "chess-style" (it ticks during the player's turn). Seed 002: its quick game's
    capped-bonus clock (30 s, 10 s more after a move made within 10 s, never above 30 s) and its standard
    game's and match's (120 s, 20 s more within 20 s, never above 120 s)."""

    LOBBY_MATCH_LENGTHS = (1, 3, 5, 9)
    """The match lengths a lobby table offers besides one game: seed 002's 3, 5 and 9 points, and 1 (a
    single game scored as match play: gammons count, the winner needs one point)."""

    def __init__(self, engine: BackgammonEngine = BACKGAMMON) -> None:
        self.engine = engine

    def lobby_pool(self, options: BackgammonOptions) -> str:
        """The variant, the game or match length and the conveniences, when the table is one the lobby
        offers: never the cube (000), and gammons scored exactly when it is a match (000's single game
        does not score them; 002's matches, like all match play of 001, do)."""
        lengths = ", ".join(str(n) for n in self.LOBBY_MATCH_LENGTHS)
        if options.cube or options.beavers or options.automatic_doubles or options.jacoby:
            raise InvalidOptionsError(
                "lobby backgammon tables never use the doubling cube (so no beavers, automatic doubles or "
                "Jacoby); they are one game or a match to " + lengths + " points"
            )
        if options.match_to and options.match_to not in self.LOBBY_MATCH_LENGTHS:
            raise InvalidOptionsError(
                f"lobby backgammon matches are to {lengths} points (match_to), or one game (match_to 0)"
            )
        if options.match_to and not options.gammons:
            raise InvalidOptionsError(
                "lobby backgammon matches score gammons and backgammons (gammons true), as match play does"
            )
        if not options.match_to and options.gammons:
            raise InvalidOptionsError(
                "a lobby backgammon game (match_to 0) does not score gammons: the first to bear off wins "
                "(gammons false)"
            )
        key = options.variant.value  # one game without conveniences: the variant alone, as always
        if options.match_to:
            key += f"/match{options.match_to}"
        if options.auto_roll:
            key += "/auto-roll"
        if options.auto_bearoff:
            key += "/auto-bearoff"
        return key

    def stand_in(self, state: BackgammonState, seat: int) -> BackgammonAction | None:
        """The stand-in's action for an absent ``seat`` (libs/engines/backgammon/standin.py)."""
        text = stand_in_action(state, seat)
        return None if text is None else parse_action(text)

    def options_from_proto(self, options: rules_pb2.MatchOptions) -> BackgammonOptions:
        which = options.WhichOneof("family")
        if which not in (None, "backgammon"):
            raise InvalidOptionsError(f"{which} options cannot configure a backgammon match")
        given = options.backgammon
        variant = _VARIANT_FROM_PROTO.get(given.variant)
        if variant is None:
            raise InvalidOptionsError(f"unknown backgammon variant {given.variant}")
        return BackgammonOptions(
            variant=variant,
            cube=given.cube,
            beavers=given.beavers,
            automatic_doubles=given.automatic_doubles,
            jacoby=given.jacoby,
            gammons=given.gammons,
            match_to=given.match_to,
            auto_roll=given.auto_roll,
            auto_bearoff=given.auto_bearoff,
        )

    def options_to_proto(self, options: BackgammonOptions) -> rules_pb2.MatchOptions:
        return rules_pb2.MatchOptions(
            backgammon=backgammon_pb2.BackgammonOptions(
                variant=_VARIANT_TO_PROTO[options.variant],
                cube=options.cube,
                beavers=options.beavers,
                automatic_doubles=options.automatic_doubles,
                jacoby=options.jacoby,
                gammons=options.gammons,
                match_to=options.match_to,
                auto_roll=options.auto_roll,
                auto_bearoff=options.auto_bearoff,
            )
        )

    def options_to_json(self, options: BackgammonOptions) -> JsonObject:
        return {
            "variant": options.variant.value,
            **{flag: getattr(options, flag) for flag in _FLAGS},
            "automatic_doubles": options.automatic_doubles,
            "match_to": options.match_to,
        }

    def options_from_json(self, data: JsonObject) -> BackgammonOptions:
        return BackgammonOptions(
            variant=Variant(data["variant"]),
            **{flag: bool(data.get(flag, getattr(_DEFAULTS, flag))) for flag in _FLAGS},
            automatic_doubles=int(data.get("automatic_doubles", 0)),
            match_to=int(data.get("match_to", 0)),
        )

    def action_from_proto(self, action: rules_pb2.Action) -> BackgammonAction:
        if action.WhichOneof("kind") != "backgammon":
            raise MalformedActionError(
                "a backgammon action needs the backgammon field (e.g. 'roll', '24/18 13/8', 'take')"
            )
        return parse_action(action.backgammon.action)

    def action_to_json(self, action: BackgammonAction) -> JsonObject:
        # The text as read (normalised); a play's index is replayed against the same sorted list.
        return {"notation": str(action)}

    def action_from_json(self, data: JsonObject) -> BackgammonAction:
        return parse_action(data["notation"])

    def describe(self, state_before: BackgammonState, action: BackgammonAction) -> str:
        """The action in its notation; a play (however written, or by its number) in canonical notation
        (``24/13``, ``bar/22*``, ``8/4(2) 6/4(2)``)."""
        if isinstance(action, PlayText) and state_before.plays:
            return parse_play(action.text, state_before.plays, dice=state_before.dice).notation
        return str(action)

    def view_to_proto(self, view: BackgammonView) -> rules_pb2.View:
        position = view.position
        proto = backgammon_pb2.BackgammonView(
            board=backgammon_pb2.Board(points=position.points, bar=position.bar, off=position.off),
            pips=view.pip_counts,
            phase=_PHASE_TO_PROTO[view.phase],
            dice=view.dice or (),
            legal_plays=view.legal_plays,
            cube_value=view.cube_value,
            match_to=view.match_to,
            score=view.match_score,
            crawford=view.is_crawford,
            resign_offered=_resign_points(view),
            last_play=view.last_play or "",
            last_turn_forfeited=view.last_forfeited,
            game_number=view.game_number,
            continued=(
                [seat for seat in (0, 1) if seat not in view.continue_pending]
                if view.phase is Phase.BETWEEN_GAMES
                else []
            ),
            variant=_VARIANT_TO_PROTO[view.variant],
            cube_offered=view.cube_offered,
            last_dice=view.last_dice or (),
            message=view.message,
        )
        if view.cube_owner is not None:
            proto.cube_owner = view.cube_owner
        if view.last_mover is not None:
            proto.last_seat = view.last_mover
        return rules_pb2.View(backgammon=proto)

    def export_record(self, record: MatchRecord) -> str:
        """The match as a Jellyfish MAT file (gnubg imports it), with gnubg's ``; [...]`` header lines:
        the site, the match id, the date, the clock and the fairness commitment."""
        setup = record.setup
        started = datetime.fromtimestamp(setup.created_at_ms / 1000, tz=UTC)
        control = setup.time_control
        header = [
            '; [Site "SkillClassics"]',
            f'; [Match ID "{setup.match_id}"]',
            f'; [Player 1 "{setup.players[0]}"]',
            f'; [Player 2 "{setup.players[1]}"]',
            f'; [EventDate "{started:%Y.%m.%d}"]',
            f'; [EventTime "{started:%H.%M}"]',
            f'; [Clock "{control.base_ms // 1000} s + {control.increment_ms // 1000} s per turn"]',
            f'; [Fairness "{setup.fairness_commitment}"]',
        ]
        if record.outcome is not None:
            header.append(f'; [Result "{_quote(record.outcome.detail or record.outcome.termination.value)}"]')
        names = (_quote(setup.players[0]), _quote(setup.players[1]))
        return "\n".join(header) + "\n" + export_mat(record.game, names=names)


def _resign_points(view: BackgammonView) -> int:
    if view.resign_offer is None:
        return 0
    level = view.resign_offer[1]
    return {"single": 1, "gammon": 2, "backgammon": 3}[str(level)]


def _quote(text: str) -> str:
    """``text`` on one line, without the quotes that would end a header value."""
    return " ".join(text.replace('"', "'").split())


FAMILY = BackgammonFamily()
"""The family as its rules service declares it: what matchmaking and the tools read of it
(``services.families``), so that they name no family themselves."""
