"""The setup phase: validation, ready, the deadline's random completion, the first-mover draw, and
formations for both colours."""

from __future__ import annotations

import re

import pytest

from libs.engines.base import (
    ChanceRequest,
    IllegalActionError,
    MalformedActionError,
    NotYourTurnError,
    PhaseDeadline,
)
from libs.engines.generals import (
    ARMY,
    CODES,
    FIRST_REQUEST,
    GENERALS,
    HOME,
    NAMES,
    SETUP_WITHIN_MS,
    Phase,
    check_formation,
    check_setup,
    describe,
    formation_to_setup,
    is_move,
    parse_action,
    placements_text,
    replay,
    setup_request,
    setup_to_formation,
)
from tests.libs.engines.generals.helpers import CONTEXT, FULL_BLACK, FULL_WHITE

PARTIAL = "a1=FLG b1=PVT c2=SPY"


def test_a_new_game_is_in_the_setup_with_a_deadline() -> None:
    state = GENERALS.new_game()
    assert state.phase is Phase.SETUP
    assert GENERALS.to_move(state) == 0
    assert GENERALS.phase_deadline(state) == PhaseDeadline(SETUP_WITHIN_MS, None)
    assert GENERALS.chance_needed(state) is None
    assert GENERALS.legal_actions(state, 0) == []
    assert GENERALS.legal_actions(state, 1) == []


def test_partial_setups_replace_the_whole_arrangement() -> None:
    state = GENERALS.apply(GENERALS.new_game(), 0, f"setup {PARTIAL}", CONTEXT)
    assert sum(1 for v in state.board if v) == 3
    state = GENERALS.apply(state, 0, "SETUP e3=5* F2=pvt", CONTEXT)
    assert [NAMES[i] for i, v in enumerate(state.board) if v] == ["f2", "e3"]
    state = GENERALS.apply(state, 0, "setup", CONTEXT)
    assert not any(state.board)


def test_either_seat_may_act_first_and_to_move_is_the_first_not_ready() -> None:
    state = GENERALS.apply(GENERALS.new_game(), 1, f"setup {FULL_BLACK}", CONTEXT)
    state = GENERALS.apply(state, 1, "ready", CONTEXT)
    assert GENERALS.to_move(state) == 0
    assert GENERALS.phase_deadline(state) == PhaseDeadline(SETUP_WITHIN_MS, 0)
    state = GENERALS.apply(state, 0, f"setup {FULL_WHITE}", CONTEXT)
    assert GENERALS.legal_actions(state, 0) == ["ready"]
    assert GENERALS.legal_actions(state, 1) == []
    state = GENERALS.apply(state, 0, "ready", CONTEXT)
    assert GENERALS.phase_deadline(state) is None
    assert GENERALS.chance_needed(state) == FIRST_REQUEST


@pytest.mark.parametrize(
    ("seat", "text", "reason"),
    [
        (0, "a4=PVT", "a4 is outside White's home rows (ranks 1-3)"),
        (1, "a1=PVT b3=SGT", "a1, b3 are outside Black's home rows (ranks 6-8)"),
        (0, "a1=PVT a1=SGT", "a1 used more than once"),
        (0, "a1=FLG b1=FLG", "2 FLG placed, but a side has only 1"),
        (1, " ".join(f"{f}6=PVT" for f in "abcdefg"), "7 PVT placed, but a side has only 6"),
        (0, "a1=SPY b1=SPY c1=spy", "3 SPY placed, but a side has only 2"),
    ],
)
def test_setup_refusals(seat: int, text: str, reason: str) -> None:
    assert reason in check_setup(seat, text)
    with pytest.raises(IllegalActionError, match=re.escape(reason)):
        GENERALS.apply(GENERALS.new_game(), seat, f"setup {text}", CONTEXT)


@pytest.mark.parametrize("text", ["a1=XYZ", "j1=PVT", "a9=PVT", "a1PVT", "a1=", "=PVT"])
def test_unreadable_placements(text: str) -> None:
    with pytest.raises(MalformedActionError):
        GENERALS.apply(GENERALS.new_game(), 0, f"setup {text}", CONTEXT)
    assert len(check_setup(0, text)) == 1


def test_check_setup_on_its_own() -> None:
    assert check_setup(0, FULL_WHITE, complete=True) == []
    assert check_setup(1, FULL_BLACK, complete=True) == []
    assert check_setup(0, PARTIAL) == []
    reasons = check_setup(0, PARTIAL, complete=True)
    assert reasons == [
        "only 3 of the 21 pieces are placed (missing: 5*, 4*, 3*, 2*, 1*, COL, LTC, MAJ, CPT, "
        "1LT, 2LT, SGT, 5 PVT, SPY)"
    ]
    assert check_setup(0, {"a1": "flg"}) == []
    assert check_setup(0, [(0, 1)]) == []


def test_ready_needs_all_21_and_freezes_the_arrangement() -> None:
    state = GENERALS.apply(GENERALS.new_game(), 0, f"setup {PARTIAL}", CONTEXT)
    with pytest.raises(IllegalActionError, match="place all 21 pieces before you are ready"):
        GENERALS.apply(state, 0, "ready", CONTEXT)
    state = GENERALS.apply(state, 0, f"setup {FULL_WHITE}", CONTEXT)
    state = GENERALS.apply(state, 0, "ready", CONTEXT)
    for action in (f"setup {PARTIAL}", "ready"):
        with pytest.raises(IllegalActionError, match="you are ready: your arrangement can no longer change"):
            GENERALS.apply(state, 0, action, CONTEXT)
    assert GENERALS.legal_actions(state, 0) == []


@pytest.mark.parametrize("action", ["a3-a4", "draw", "accept", "decline"])
def test_no_move_or_offer_during_the_setup(action: str) -> None:
    state = GENERALS.apply(GENERALS.new_game(), 0, f"setup {FULL_WHITE}", CONTEXT)
    with pytest.raises(IllegalActionError, match="still being set up"):
        GENERALS.apply(state, 0, action, CONTEXT)


def test_nothing_while_a_draw_is_awaited() -> None:
    state = replay(None, [(0, f"setup {FULL_WHITE}"), (0, "ready"), (1, f"setup {FULL_BLACK}"), (1, "ready")])
    for seat in (0, 1):
        with pytest.raises(NotYourTurnError, match="waiting for a draw"):
            GENERALS.apply(state, seat, "ready", CONTEXT)
        assert GENERALS.legal_actions(state, seat) == []


@pytest.mark.parametrize("value", [0, 1])
def test_the_first_mover_is_a_coin(value: int) -> None:
    state = replay(None, [(0, f"setup {FULL_WHITE}"), (0, "ready"), (1, f"setup {FULL_BLACK}"), (1, "ready")])
    assert GENERALS.chance_needed(state) == ChanceRequest("first", 0, "coin", 1, 0)
    with pytest.raises(ValueError, match="a coin is one value, 0 or 1"):
        GENERALS.apply_chance(state, FIRST_REQUEST, (2,))
    with pytest.raises(ValueError, match="waits for"):
        GENERALS.apply_chance(state, setup_request(0), tuple(range(27)))
    state = GENERALS.apply_chance(state, FIRST_REQUEST, (value,))
    assert state.phase is Phase.PLAY
    assert state.turn == state.first == value == GENERALS.to_move(state)
    assert state.initial == state.board
    assert GENERALS.chance_needed(state) is None
    assert GENERALS.legal_actions(state, 1 - value) == ["draw"]
    assert len(GENERALS.legal_actions(state, value)) > 9


def test_the_deadline_completes_both_seats_from_the_given_shuffles() -> None:
    # White placed 18 pieces (everything but 5*, 4*, 3*) on a1..i2; Black placed nothing.
    white = placements_text(zip(HOME[0][:18], ARMY[3:], strict=True))
    state = replay(None, [(0, f"setup {white}")])
    state = GENERALS.on_phase_deadline(state)
    assert state.ready == (True, True)
    assert state.to_complete == (0, 1)
    assert state.completed == (0, 1)
    assert GENERALS.phase_deadline(state) is None
    assert GENERALS.chance_needed(state) == ChanceRequest("setup", 0, "shuffle", 1, 27)
    with pytest.raises(NotYourTurnError):
        GENERALS.apply(state, 0, "ready", CONTEXT)
    # Reversed: the order is i3, h3, ..., a3, i2, ...: the empty squares a3..i3 come first from i3.
    state = GENERALS.apply_chance(state, setup_request(0), tuple(range(26, -1, -1)))
    board = {NAMES[i]: CODES[v & 15] for i, v in enumerate(state.board) if v}
    assert (board["i3"], board["h3"], board["g3"]) == ("5*", "4*", "3*")
    assert "f3" not in board
    assert GENERALS.chance_needed(state) == ChanceRequest("setup", 1, "shuffle", 1, 27)
    # Identity: Black's home squares a6, b6, ... get the army in rank order.
    state = GENERALS.apply_chance(state, setup_request(1), tuple(range(27)))
    board = {NAMES[i]: CODES[v & 15] for i, v in enumerate(state.board) if v}
    expected = dict(zip([NAMES[s] for s in HOME[1][:21]], [CODES[r] for r in ARMY], strict=True))
    assert {k: v for k, v in board.items() if k[1] in "678"} == expected
    assert GENERALS.chance_needed(state) == FIRST_REQUEST
    state = GENERALS.apply_chance(state, FIRST_REQUEST, (1,))
    assert state.phase is Phase.PLAY
    assert state.turn == 1
    assert sum(1 for v in state.board if v) == 42


def test_the_deadline_with_one_seat_ready_draws_once_with_index_0() -> None:
    state = replay(None, [(0, f"setup {FULL_WHITE}"), (0, "ready"), (1, "setup a6=FLG")])
    state = GENERALS.on_phase_deadline(state)
    assert state.to_complete == (1,)
    assert state.completed == (1,)
    assert GENERALS.chance_needed(state) == setup_request(0)
    permutation = (5, *range(5), *range(6, 27))  # b6 (index 1 of Black's home) ... : a6 holds the Flag
    state = GENERALS.apply_chance(state, setup_request(0), permutation)
    board = {NAMES[i]: CODES[v & 15] for i, v in enumerate(state.board) if v >> 4 == 1}
    # Order: f6, a6 (taken), b6, c6, d6, e6, g6, ...: 5* on f6, 4* on b6, 3* on c6, 2* on d6, 1* on e6.
    assert (board["a6"], board["f6"], board["b6"], board["c6"], board["d6"], board["e6"]) == (
        "FLG",
        "5*",
        "4*",
        "3*",
        "2*",
        "1*",
    )
    assert len(board) == 21
    assert GENERALS.chance_needed(state) == FIRST_REQUEST


def test_the_deadline_makes_a_complete_seat_ready_without_a_draw() -> None:
    state = replay(None, [(0, f"setup {FULL_WHITE}"), (1, f"setup {FULL_BLACK}")])
    state = GENERALS.on_phase_deadline(state)
    assert state.to_complete == ()
    assert state.completed == ()
    assert GENERALS.chance_needed(state) == FIRST_REQUEST


def test_bad_shuffles_are_refused() -> None:
    state = GENERALS.on_phase_deadline(GENERALS.new_game())
    with pytest.raises(ValueError, match="permutation"):
        GENERALS.apply_chance(state, setup_request(0), (0,) * 27)
    with pytest.raises(ValueError, match="waits for"):
        GENERALS.apply_chance(state, setup_request(1), tuple(range(27)))


def test_parse_action_canonical_forms() -> None:
    assert parse_action(" B3-b4 ") == "b3-b4"
    assert parse_action("READY") == "ready"
    assert parse_action("setup c2=spy a1=flg") == "setup a1=FLG c2=SPY"
    assert parse_action("setup") == "setup"
    for bad in ("b3b4", "j1-j2", "ready now", "", "resign", "b3-"):
        with pytest.raises(MalformedActionError):
            parse_action(bad)


# ---------------------------------------------------------------------------------------------------------
# Formations


FORMATION = placements_text(zip(HOME[0][3:24], ARMY, strict=True))


def test_a_formation_is_a_setup_for_white_as_it_stands() -> None:
    assert check_formation(FORMATION) == []
    assert formation_to_setup(FORMATION, 0) == FORMATION
    assert setup_to_formation(FORMATION, 0) == FORMATION


def test_a_formation_turns_half_a_turn_for_black() -> None:
    black = formation_to_setup("a1=FLG i3=PVT e2=SPY", 1)
    assert black == "a6=PVT e7=SPY i8=FLG"
    assert setup_to_formation(black, 1) == "a1=FLG e2=SPY i3=PVT"
    setup = formation_to_setup(FORMATION, 1)
    assert check_setup(1, setup, complete=True) == []
    assert setup_to_formation(setup, 1) == FORMATION
    for seat in (0, 1):
        state = GENERALS.apply(
            GENERALS.new_game(), seat, f"setup {formation_to_setup(FORMATION, seat)}", CONTEXT
        )
        assert GENERALS.legal_actions(state, seat) == ["ready"]


def test_formation_round_trip_random() -> None:
    import random

    rng = random.Random(4)
    for _ in range(200):
        squares = rng.sample(range(27), 21)
        formation = placements_text(zip(squares, ARMY, strict=True))
        for seat in (0, 1):
            setup = formation_to_setup(formation, seat)
            assert check_setup(seat, setup, complete=True) == []
            assert setup_to_formation(setup, seat) == formation


def test_check_formation_reasons() -> None:
    assert check_formation("a4=PVT") == ["a4 is outside a formation's rows 1-3"]
    assert check_formation("a1=FLG") == [
        "only 1 of the 21 pieces are placed (missing: 5*, 4*, 3*, 2*, 1*, COL, LTC, MAJ, CPT, 1LT, 2LT, SGT, "
        "6 PVT, 2 SPY)"
    ]
    assert check_formation("a1=FLG", complete=False) == []
    assert check_formation("a1=KING")[0].startswith("'KING' is not a rank")
    assert check_formation("a1=FLG b1=FLG", complete=False) == ["2 FLG placed, but a side has only 1"]


def test_describe_hides_placements_and_is_move_names_moves() -> None:
    state = GENERALS.new_game()
    assert describe(state, "setup a1=FLG b1=PVT") == "setup"
    assert describe(state, "B3-B4") == "b3-b4"
    assert describe(state, "Draw") == "draw"
    assert is_move("b3-b4")
    assert not any(is_move(a) for a in ("setup a1=FLG", "ready", "draw", "accept", "decline"))
