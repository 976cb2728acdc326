"""The Game of the Generals family's declaration and codecs, and its setup in the match runtime: a game that
begins in a timed phase (both seats arranging at once, five minutes) is timed by that phase from its
creation, nobody forfeits or is aborted during it, the deadline completes the late arrangements from the
fairness stream, and the first mover's no-show count starts when the setup is over."""

from __future__ import annotations

import pytest
from skillclassics.generals.v1 import generals_pb2 as gpb
from skillclassics.rules.v1 import rules_pb2 as pb

from libs.clocks import TimeControl
from libs.engines.base import MalformedActionError, Termination
from libs.engines.generals import FIRST_REQUEST, Phase
from libs.match.model import Due, EventKind, MatchEvent, MatchRecord, created, step
from libs.runtime.errors import InvalidArgument
from services.matchmaking.families import family_rules
from services.rules_generals.family import GeneralsFamily
from tests.libs.engines.generals.helpers import FULL_BLACK, FULL_WHITE

FAMILY = GeneralsFamily()
T0 = 1_700_000_000_000
SETUP_MS = 300_000
FIRST_MOVE_MS = 60_000


def test_lobby_clocks_are_the_per_move_clocks_of_004() -> None:
    rules = family_rules("generals")
    assert rules.uses_chance
    assert rules.check_options(pb.MatchOptions()) == "tournament"
    for seconds in (30, 60, 120):
        rules.check_lobby_clock(pb.TimeControl(periods=3, period_ms=seconds * 1000))
    for refused in (
        pb.TimeControl(base_ms=5 * 60_000),
        pb.TimeControl(periods=3, period_ms=45_000),
        pb.TimeControl(periods=2, period_ms=60_000),
        pb.TimeControl(base_ms=60_000, periods=3, period_ms=60_000),
    ):
        with pytest.raises(InvalidArgument, match="a fresh 30, 60, 120 s per move"):
            rules.check_lobby_clock(refused)


def test_actions_need_the_generals_field_and_a_setup_is_never_described_with_its_placements() -> None:
    with pytest.raises(MalformedActionError):
        FAMILY.action_from_proto(pb.Action())
    with pytest.raises(MalformedActionError):
        FAMILY.action_from_proto(pb.Action(generals=gpb.GeneralsAction(action="b3 b4")))
    action = FAMILY.action_from_proto(pb.Action(generals=gpb.GeneralsAction(action=" B3-B4 ")))
    assert action == "b3-b4"
    assert FAMILY.action_from_json(FAMILY.action_to_json(action)) == action
    setup = FAMILY.action_from_proto(pb.Action(generals=gpb.GeneralsAction(action="setup b1=pvt a1=flg")))
    state = new_match().game
    assert FAMILY.describe(state, setup) == "setup"
    assert FAMILY.is_move("b3-b4")
    assert not FAMILY.is_move(setup)
    assert not FAMILY.is_move("ready")
    assert not FAMILY.is_move("draw")


def new_match() -> MatchRecord:
    setup = {
        "match_id": "generals.0.setup",
        "family": "generals",
        "players": ["ann", "ben"],
        "options": {},
        "time_control": TimeControl.per_move(60_000).to_dict(),
        "fairness_commitment": "c" * 64,
        "first_move_timeout_ms": FIRST_MOVE_MS,
        "disconnect_forfeit_ms": 60_000,
        "created_at_ms": T0,
    }
    record = created(FAMILY, MatchEvent(1, EventKind.CREATED, T0, setup, None, "create"))
    for seat in (0, 1):
        event = MatchEvent(record.sequence + 1, EventKind.PRESENCE, T0, {"connected": True}, seat)
        record = step(FAMILY, record, event)
    return record


def act(record: MatchRecord, seat: int, text: str, at_ms: int) -> MatchRecord:
    event = MatchEvent(
        record.sequence + 1,
        EventKind.ACTION,
        at_ms,
        {"action": FAMILY.action_to_json(text)},
        seat,
        f"k{record.sequence}",
    )
    return step(FAMILY, record, event)


def draw(record: MatchRecord, values: tuple[int, ...], at_ms: int) -> MatchRecord:
    request = record.chance_needed(FAMILY)
    assert request is not None
    payload = {"request": request.to_json(), "values": list(values)}
    return step(FAMILY, record, MatchEvent(record.sequence + 1, EventKind.CHANCE, at_ms, payload, None))


def deadline(record: MatchRecord, at_ms: int) -> MatchRecord:
    return step(
        FAMILY, record, MatchEvent(record.sequence + 1, EventKind.DEADLINE, at_ms, {"due": "phase"}, None)
    )


def test_the_setup_is_timed_from_creation_and_nobody_is_aborted_or_forfeits_during_it() -> None:
    record = new_match()
    assert record.game.phase is Phase.SETUP
    assert record.phase_since_ms == T0
    assert record.live_since_ms is None
    # Only the setup's own deadline: no no-show abort at T0 + 60 s, no flag.
    assert record.due(FAMILY) == [Due(T0 + SETUP_MS, "phase", 0)]
    assert record.overdue(FAMILY, T0 + FIRST_MOVE_MS + 1) is None
    record = act(record, 1, f"setup {FULL_BLACK}", T0 + 20_000)
    record = act(record, 1, "ready", T0 + 21_000)
    assert record.moves_made == (0, 0)  # setup actions are not moves
    assert record.due(FAMILY) == [Due(T0 + SETUP_MS, "phase", 0)]  # White's setup is awaited


def test_once_both_are_ready_the_first_mover_is_drawn_and_has_the_first_move_timeout_from_then() -> None:
    record = new_match()
    record = act(record, 0, f"setup {FULL_WHITE}", T0 + 10_000)
    record = act(record, 1, f"setup {FULL_BLACK}", T0 + 11_000)
    record = act(record, 1, "ready", T0 + 12_000)
    ended = T0 + 13_000
    record = act(record, 0, "ready", ended)
    assert record.phase_since_ms is None
    assert record.turn_since_ms == ended
    assert record.chance_needed(FAMILY) == FIRST_REQUEST
    record = draw(record, (1,), ended + 5)  # Black moves first
    assert record.game.phase is Phase.PLAY
    assert record.to_move(FAMILY) == 1
    assert record.due(FAMILY) == [Due(ended + FIRST_MOVE_MS, "first_move", 1)]
    # A first move that does not come aborts the match (no-show: fees refunded), not a forfeit.
    overdue = record.overdue(FAMILY, ended + FIRST_MOVE_MS)
    assert overdue is not None
    assert overdue[1] is not None
    assert overdue[1].termination is Termination.ABORTED
    # The first move makes it live and starts the per-move clock of the next mover.
    record = act(record, 1, "a6-a5", ended + 7_000)
    assert record.live_since_ms == ended + 7_000
    assert record.clock.is_running
    assert record.moves_made == (0, 1)
    assert [d.kind for d in record.due(FAMILY)] == ["flag"]


def test_the_deadline_completes_the_late_arrangements_from_the_fairness_stream() -> None:
    record = new_match()
    record = act(record, 0, "setup a1=FLG b1=PVT", T0 + 10_000)  # two of twenty-one, never ready
    record = act(record, 1, f"setup {FULL_BLACK}", T0 + 11_000)
    record = act(record, 1, "ready", T0 + 12_000)
    record = deadline(record, T0 + SETUP_MS)
    assert record.phase_since_ms is None
    request = record.chance_needed(FAMILY)
    assert request is not None
    assert (request.stream, request.index, request.kind, request.bound) == ("setup", 0, "shuffle", 27)
    record = draw(record, tuple(range(27)), T0 + SETUP_MS + 3)
    assert record.chance_needed(FAMILY) == FIRST_REQUEST
    record = draw(record, (0,), T0 + SETUP_MS + 6)
    assert record.game.phase is Phase.PLAY
    view = FAMILY.engine.view(record.game, 0)
    assert len([p for p in view.pieces if p.seat == 0]) == 21  # White's nineteen missing pieces placed
    assert {p.square: p.rank for p in view.pieces if p.seat == 0}["a1"] == "FLG"  # its own kept
    assert all(p.rank is None for p in view.pieces if p.seat == 1)  # Black's ranks hidden from White
    assert record.due(FAMILY) == [Due(T0 + SETUP_MS + FIRST_MOVE_MS, "first_move", 0)]


def test_views_during_the_setup_show_only_ones_own_arrangement() -> None:
    record = act(new_match(), 1, f"setup {FULL_BLACK}", T0 + 1_000)
    record = act(record, 1, "ready", T0 + 2_000)
    white = FAMILY.view_to_proto(FAMILY.engine.view(record.game, 0)).generals
    black = FAMILY.view_to_proto(FAMILY.engine.view(record.game, 1)).generals
    assert list(white.pieces) == []
    assert list(white.ready) == [1]
    assert len(white.missing) == 21
    assert len(black.pieces) == 21
    assert all(piece.rank for piece in black.pieces)


def test_a_late_move_is_a_strike_and_the_third_strike_loses() -> None:
    """Seed 004's per-move clock through the runtime: each move a fresh 60 s; running over is a strike and
    a fresh 60 s for the same move; the third strike flags, and the engine makes that seat lose."""
    record = act(new_match(), 0, f"setup {FULL_WHITE}", T0 + 1_000)
    record = act(record, 1, f"setup {FULL_BLACK}", T0 + 1_000)
    record = act(record, 0, "ready", T0 + 2_000)
    record = act(record, 1, "ready", T0 + 2_000)
    record = draw(record, (0,), T0 + 2_000)  # White first
    record = act(record, 0, "a3-a4", T0 + 3_000)  # the first move starts the clocks: Black to move
    started = T0 + 3_000
    # Black takes 75 s: one strike (a fresh period for the same move), the move is in time.
    record = act(record, 1, "a6-a5", started + 75_000)
    assert record.clock.status(1, started + 75_000).periods_left == 2
    # White moves at once; Black then lets 2 more periods run out: the flag falls at the second.
    white_moved = started + 76_000
    record = act(record, 0, "a4-a3", white_moved)
    assert record.due(FAMILY)[0] == Due(white_moved + 2 * 60_000, "flag", 1)
    overdue = record.overdue(FAMILY, white_moved + 2 * 60_000)
    assert overdue is not None
    outcome = overdue[1]
    assert outcome is not None
    assert (outcome.termination, outcome.winner) == (Termination.TIMEOUT, 0)
    assert "third strike" in outcome.detail
