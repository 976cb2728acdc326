"""The go family for the match runtime: the engine and its codecs (protobuf and the log's JSON).

Lobby tables (``docs/go.md``, "Service") offer every option the engine has: the board (9, 13 or 19),
a handicap (0 or 2-9), the komi (default or any multiple of 0.5) and the scoring (area or territory);
quick match pairs players who asked for the same options. Clocks: absolute (5, 10, 20, 30 or 60 minutes
per player), Fischer (the same plus 10 or 20 s per move) or byo-yomi (the same plus 5 x 30 s or
3 x 60 s periods).
"""

from __future__ import annotations

from datetime import UTC, datetime

from skillclassics.go.v1 import go_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import InvalidOptionsError, MalformedActionError
from libs.engines.go import GO, GoEngine, GoOptions, GoState, GoView, Phase, Scoring, export_sgf, parse_action
from libs.engines.go.engine import ACCEPT, RESUME
from libs.engines.go.scoring import ColorScore, Score
from libs.match.family import JsonObject, LobbyClocks
from libs.match.model import MatchRecord

_SCORING_FROM_PROTO = {
    go_pb2.SCORING_UNSPECIFIED: Scoring.AREA,
    go_pb2.SCORING_AREA: Scoring.AREA,
    go_pb2.SCORING_TERRITORY: Scoring.TERRITORY,
}
_SCORING_TO_PROTO = {Scoring.AREA: go_pb2.SCORING_AREA, Scoring.TERRITORY: go_pb2.SCORING_TERRITORY}
_PHASE_TO_PROTO = {
    Phase.PLAY: go_pb2.PHASE_PLAY,
    Phase.COUNT: go_pb2.PHASE_COUNT,
    Phase.OVER: go_pb2.PHASE_OVER,
}
_NOT_MOVES = (ACCEPT, RESUME)


class GoFamily:
    """Go as the runtime sees it."""

    name = "go"
    record_format = "sgf"
    hides_information = False
    uses_chance = False

    lobby_clocks = LobbyClocks(
        "go", minutes=(5, 10, 20, 30, 60), increment_seconds=(0, 10, 20), byo_yomi=((5, 30), (3, 60))
    )
    """Absolute time (no increment), Fischer (10 or 20 s a move) or Japanese byo-yomi after the main time
    (RULES.md: absolute and Fischer; byo-yomi welcome)."""

    def __init__(self, engine: GoEngine = GO) -> None:
        self.engine = engine

    def lobby_pool(self, options: GoOptions) -> str:
        """Every option is offered; quick match pairs the same board, handicap, komi and scoring."""
        komi = options.komi if options.komi is not None else 0.0
        return f"{options.size}x{options.size}/{options.scoring.value}/h{options.handicap}/komi{komi:g}"

    def is_move(self, action: str) -> bool:
        """A stone or a pass is a move (it presses the clock); accepting or resuming the count is not."""
        return action not in _NOT_MOVES

    def options_from_proto(self, options: rules_pb2.MatchOptions) -> GoOptions:
        which = options.WhichOneof("family")
        if which not in (None, "go"):
            raise InvalidOptionsError(f"{which} options cannot configure a go match")
        given = options.go
        scoring = _SCORING_FROM_PROTO.get(given.scoring)
        if scoring is None:
            raise InvalidOptionsError(f"unknown go scoring {given.scoring}")
        return GoOptions(
            size=given.size or 19,
            handicap=given.handicap,
            komi=given.komi if given.HasField("komi") else None,
            scoring=scoring,
        )

    def options_to_proto(self, options: GoOptions) -> rules_pb2.MatchOptions:
        return rules_pb2.MatchOptions(
            go=go_pb2.GoOptions(
                size=options.size,
                handicap=options.handicap,
                komi=options.komi,
                scoring=_SCORING_TO_PROTO[options.scoring],
            )
        )

    def options_to_json(self, options: GoOptions) -> JsonObject:
        return {
            "size": options.size,
            "handicap": options.handicap,
            "komi": options.komi,
            "scoring": options.scoring.value,
        }

    def options_from_json(self, data: JsonObject) -> GoOptions:
        return GoOptions(
            size=int(data["size"]),
            handicap=int(data["handicap"]),
            komi=float(data["komi"]),
            scoring=Scoring(data["scoring"]),
        )

    def action_from_proto(self, action: rules_pb2.Action) -> str:
        if action.WhichOneof("kind") != "go":
            raise MalformedActionError("a go action needs the go field (a point like 'D4', 'pass', 'accept')")
        return parse_action(action.go.action)

    def action_to_json(self, action: str) -> JsonObject:
        return {"notation": action}

    def action_from_json(self, data: JsonObject) -> str:
        return parse_action(data["notation"])

    def describe(self, state_before: GoState, action: str) -> str:
        """The action as written in the record: a point (``D4``) or a word (``pass``, ``accept``)."""
        return action

    def view_to_proto(self, view: GoView) -> rules_pb2.View:
        proto = go_pb2.GoView(
            size=view.size,
            rows=view.rows,
            handicap=view.handicap,
            komi=view.komi,
            scoring=_SCORING_TO_PROTO[view.scoring],
            phase=_PHASE_TO_PROTO[view.phase],
            prisoners=view.prisoners,
            ko=view.ko or "",
            last_move=view.last_move or "",
            last_captured=view.last_captured,
            move_number=view.move_number,
            passes=view.passes,
            legal_points=view.legal_points,
            accepted=[seat for seat in (0, 1) if view.accepted[seat]],
            message=view.message,
        )
        if view.score is not None:
            proto.score.CopyFrom(_score_to_proto(view.score))
        if view.last_seat is not None:
            proto.last_seat = view.last_seat
        if view.turn is not None:
            proto.turn = view.turn
        return rules_pb2.View(go=proto)

    def export_record(self, record: MatchRecord) -> str:
        """The game as SGF (FF[4]) with the players, the date, the result and both clocks after every
        move (``BL``/``WL`` and a comment in milliseconds)."""
        setup = record.setup
        started = datetime.fromtimestamp(setup.created_at_ms / 1000, tz=UTC)
        state: GoState = record.game
        base = setup.time_control.base_ms
        remaining = [base, base]
        clocks: list[tuple[int, int] | None] = []
        for mark in record.clock_marks[: len(state.moves)]:
            # The other seat's clock did not run during this move: its last reading still holds.
            remaining[mark.seat] = mark.remaining_ms
            clocks.append((remaining[0], remaining[1]))
        return export_sgf(
            state,
            outcome=record.outcome,
            black=setup.players[0],
            white=setup.players[1],
            clocks=clocks,
            date=f"{started:%Y-%m-%d}",
        )


def _color_to_proto(score: ColorScore) -> go_pb2.ColorScore:
    return go_pb2.ColorScore(
        stones=score.stones,
        territory=score.territory,
        prisoners=score.prisoners,
        komi=score.komi,
        total=score.total,
    )


def _score_to_proto(score: Score) -> go_pb2.Score:
    return go_pb2.Score(
        black=_color_to_proto(score.black),
        white=_color_to_proto(score.white),
        neutral=score.neutral,
        result=score.result(),
    )


FAMILY = GoFamily()
"""The family as its rules service declares it: what matchmaking and the tools read of it
(``services.families``), so that they name no family themselves."""
