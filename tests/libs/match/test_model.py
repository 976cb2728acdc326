"""The pure match model: what ends a match by itself, and when; which actions are moves.

Every instant is given explicitly, so same-millisecond cases are exact.
"""

from __future__ import annotations

from libs.clocks import TimeControl
from libs.engines.base import Termination
from libs.engines.chess import ChessOptions, Ruleset
from libs.engines.gin import GinOptions
from libs.match.model import DrawUsed, Due, EventKind, MatchEvent, MatchRecord, MatchStatus, created, step
from services.rules_chess.family import ChessFamily
from services.rules_gin.family import GinFamily

FAMILY = ChessFamily()
T0 = 1_700_000_000_000
"""When the match is created (Unix ms)."""
TIMEOUT = 60_000
"""The first-move timeout and the disconnect forfeit, both the default 60 s."""


def new_match(
    control: TimeControl | None = None, ruleset: Ruleset = Ruleset.CONTEST, fen: str | None = None
) -> MatchRecord:
    setup = {
        "match_id": "chess.0.model",
        "family": "chess",
        "players": ["alice", "bob"],
        "options": dict(FAMILY.options_to_json(ChessOptions(ruleset, fen))),
        "time_control": (control or TimeControl.sudden_death(5 * 60_000)).to_dict(),
        "fairness_commitment": "",
        "first_move_timeout_ms": TIMEOUT,
        "disconnect_forfeit_ms": TIMEOUT,
        "created_at_ms": T0,
    }
    return created(FAMILY, MatchEvent(1, EventKind.CREATED, T0, setup, None, "create"))


def act(record: MatchRecord, seat: int, notation: str, at_ms: int) -> MatchRecord:
    payload = {"action": dict(FAMILY.action_to_json(FAMILY.action_from_json({"notation": notation})))}
    event = MatchEvent(record.sequence + 1, EventKind.ACTION, at_ms, payload, seat, f"k{record.sequence}")
    return step(FAMILY, record, event)


def presence(record: MatchRecord, seat: int, connected: bool, at_ms: int) -> MatchRecord:
    event = MatchEvent(record.sequence + 1, EventKind.PRESENCE, at_ms, {"connected": connected}, seat)
    return step(FAMILY, record, event)


# -- before the match is live: only the no-show abort ------------------------------------------------------


def test_before_the_first_move_only_the_abort_can_happen_even_for_an_absent_player() -> None:
    # Nobody ever connected: both seats count as disconnected since creation. The 60 s of absence and the
    # 60 s first-move timeout end in the same millisecond, but play has not begun: no forfeit, an abort.
    record = new_match()
    assert record.status is MatchStatus.WAITING
    assert record.due(FAMILY) == [Due(T0 + TIMEOUT, "first_move", 0)]
    assert record.overdue(FAMILY, T0 + TIMEOUT - 1) is None
    overdue = record.overdue(FAMILY, T0 + TIMEOUT)
    assert overdue is not None
    due, outcome = overdue
    assert outcome is not None  # an end, not a phase's deadline
    assert due.kind == "first_move"
    assert outcome.termination is Termination.ABORTED
    assert outcome.winner is None
    assert outcome.score == ()


def test_a_first_move_in_the_last_millisecond_makes_the_match_live() -> None:
    record = act(new_match(), 0, "e4", T0 + TIMEOUT - 1)
    assert record.status is MatchStatus.LIVE
    assert record.live_since_ms == T0 + TIMEOUT - 1
    # A move at T0 + TIMEOUT itself would come too late: the abort is due in that very millisecond.
    assert new_match().overdue(FAMILY, T0 + TIMEOUT) is not None


def test_a_draw_offer_is_not_a_first_move() -> None:
    record = act(new_match(ruleset=Ruleset.FIDE), 0, "offer_draw", T0 + 1_000)
    assert record.status is MatchStatus.WAITING
    assert record.due(FAMILY) == [Due(T0 + TIMEOUT, "first_move", 0)]


# -- once it is live: no abort any more; flags and forfeits -----------------------------------------------


def test_once_live_an_absent_second_player_forfeits_and_the_match_is_never_aborted() -> None:
    # The audit's case: White connects and plays; Black neither connects nor moves. Black's 60 s of absence
    # (counted from the first move) end at T1 + 60 s; play has begun, so it is a forfeit, not an abort.
    record = presence(new_match(), 0, True, T0 + 500)
    t1 = T0 + 2_000
    record = act(record, 0, "e4", t1)
    dues = record.due(FAMILY)
    assert all(due.kind != "first_move" for due in dues)
    assert dues[0] == Due(t1 + TIMEOUT, "disconnect", 1)
    assert record.overdue(FAMILY, t1 + TIMEOUT - 1) is None
    overdue = record.overdue(FAMILY, t1 + TIMEOUT)
    assert overdue is not None
    assert overdue[1] is not None  # an end, not a phase's deadline
    assert overdue[1].termination is Termination.DISCONNECT
    assert overdue[1].winner == 0


def test_a_connected_second_player_who_never_moves_loses_on_time() -> None:
    record = new_match(TimeControl.sudden_death(90_000))
    for seat in (0, 1):
        record = presence(record, seat, True, T0 + 100)
    t1 = T0 + 1_000
    record = act(record, 0, "e4", t1)
    assert record.due(FAMILY) == [Due(t1 + 90_000, "flag", 1)]
    overdue = record.overdue(FAMILY, t1 + 90_000)
    assert overdue is not None
    assert overdue[1] is not None  # an end, not a phase's deadline
    assert overdue[1].termination is Termination.TIMEOUT
    assert overdue[1].winner == 0


def test_a_flag_and_a_forfeit_in_the_same_millisecond_the_flag_comes_first() -> None:
    # Black's flag and White's 60 s of absence fall due at the same instant: the clock decides.
    t1 = T0 + 1_000
    record = presence(presence(new_match(TimeControl.sudden_death(70_000)), 0, True, T0), 1, True, T0)
    record = act(record, 0, "e4", t1)
    gone = t1 + 10_000
    record = presence(record, 0, False, gone)  # White leaves; Black is thinking, flag at t1 + 70 s
    flag_at = t1 + 70_000
    assert gone + TIMEOUT == flag_at
    assert [d.kind for d in record.due(FAMILY)] == ["flag", "disconnect"]
    overdue = record.overdue(FAMILY, flag_at)
    assert overdue is not None
    assert overdue[1] is not None  # an end, not a phase's deadline
    assert overdue[0] == Due(flag_at, "flag", 1)
    assert overdue[1].termination is Termination.TIMEOUT
    assert overdue[1].winner == 0


def test_two_forfeits_in_the_same_millisecond_the_seat_to_move_forfeits() -> None:
    # Neither seat ever connected (the moves came through another path): both absences count from the
    # first move and end together. Black is to move: Black's absence is the one holding the game up.
    t1 = T0 + 1_000
    record = act(new_match(), 0, "e4", t1)
    assert [(d.kind, d.seat) for d in record.due(FAMILY)][:2] == [("disconnect", 1), ("disconnect", 0)]
    overdue = record.overdue(FAMILY, t1 + TIMEOUT)
    assert overdue is not None
    assert overdue[1] is not None  # an end, not a phase's deadline
    assert overdue[1].termination is Termination.DISCONNECT
    assert overdue[1].winner == 0


# -- draw actions are not moves -----------------------------------------------------------------------------


def test_accepting_a_draw_is_not_a_move_and_presses_no_clock() -> None:
    control = TimeControl.fischer(60_000, 2_000)
    record = new_match(control, Ruleset.FIDE)
    t1, t2, t3 = T0 + 1_000, T0 + 4_000, T0 + 9_000
    record = act(record, 0, "e4", t1)  # the first move: not charged; Black's clock runs from t1
    record = act(record, 1, "offer_draw", t2)  # Black offers on its own turn and keeps thinking
    assert record.moves_made == (1, 0)
    record = act(record, 0, "accept_draw", t3)  # White accepts on Black's turn
    assert record.outcome is not None
    assert record.outcome.termination is Termination.DRAW_AGREED
    assert record.ended_at_ms == t3
    assert record.moves_made == (1, 0)
    assert [(m.seat, m.at_ms) for m in record.clock_marks] == [(0, t1)]
    assert not record.clock.is_running
    # Black was charged from t1 to t3 and got no increment; White's clock is as its first move (which
    # starts the clocks and is neither charged nor credited) left it.
    assert record.clock.remaining_ms(1, t3 + 5_000) == 60_000 - (t3 - t1)
    assert record.clock.remaining_ms(0, t3 + 5_000) == 60_000


def test_claiming_a_draw_is_not_a_move_and_earns_no_increment() -> None:
    control = TimeControl.fischer(60_000, 2_000)
    record = new_match(control, Ruleset.FIDE)
    at = T0
    for ply, notation in enumerate(["Nf3", "Nf6", "Ng1", "Ng8", "Nf3", "Nf6", "Ng1"]):
        at += 1_000
        record = act(record, ply % 2, notation, at)
    assert record.moves_made == (4, 3)
    marks = record.clock_marks
    black_before = record.clock.remaining_ms(1, at)
    claim_at = at + 3_000
    record = act(record, 1, "claim_draw Ng8", claim_at)  # Ng8 would repeat the start a third time
    assert record.outcome is not None
    assert record.outcome.termination is Termination.THREEFOLD_REPETITION
    assert record.moves_made == (4, 3)
    assert record.clock_marks == marks
    assert not record.clock.is_running
    assert record.clock.remaining_ms(1, claim_at + 1_000) == black_before - 3_000


def test_a_move_presses_the_clock_and_is_counted() -> None:
    control = TimeControl.fischer(60_000, 2_000)
    record = act(act(new_match(control), 0, "e4", T0 + 1_000), 1, "e5", T0 + 4_000)
    assert record.moves_made == (1, 1)
    # The first move starts the clocks; Black's 3 s are charged and the increment credited.
    assert [(m.seat, m.remaining_ms) for m in record.clock_marks] == [(0, 60_000), (1, 59_000)]
    assert record.clock.to_move == 0


# -- fairness ------------------------------------------------------------------------------------------------


def test_a_gin_match_keeps_the_draws_it_used_and_its_fairness_version() -> None:
    gin = GinFamily()
    setup = {
        "match_id": "gin.0.model",
        "family": "gin",
        "players": ["alice", "bob"],
        "options": dict(gin.options_to_json(GinOptions())),
        "time_control": TimeControl.sudden_death(5 * 60_000).to_dict(),
        "fairness_commitment": "ab" * 32,
        "first_move_timeout_ms": TIMEOUT,
        "disconnect_forfeit_ms": TIMEOUT,
        "created_at_ms": T0,
    }  # as logged before the version was: that was version 1, the only one then
    record = created(gin, MatchEvent(1, EventKind.CREATED, T0, setup, None, "create"))
    assert record.setup.fairness_version == 1
    assert record.setup.to_json()["fairness_version"] == 1
    assert record.draws == ()
    used = []
    for values in ((1,), tuple(range(52))):
        request = record.chance_needed(gin)
        assert request is not None
        payload = {"request": request.to_json(), "values": list(values)}
        record = step(gin, record, MatchEvent(record.sequence + 1, EventKind.CHANCE, T0 + 1, payload))
        used.append(DrawUsed(request, values))
    assert record.draws == tuple(used)
    assert [(d.request.stream, d.request.index) for d in record.draws] == [("dealer", 0), ("shuffle", 0)]
    chess = new_match()
    assert (chess.setup.fairness_version, chess.draws) == (0, ())
