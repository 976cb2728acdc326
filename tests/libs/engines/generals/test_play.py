"""Play: moves and challenges, the Flag's two ways to win, each automatic draw with its warnings, and
draw offers."""

from __future__ import annotations

import pytest

from libs.engines.base import GameOverError, IllegalActionError, NotYourTurnError, Termination
from libs.engines.generals import GENERALS, GeneralsState, LastMove, Phase, replay
from tests.libs.engines.generals.helpers import CONTEXT, FULL_BLACK, FULL_WHITE, play, position, started

FLAGS = {"a1": "W:FLG", "i8": "B:FLG"}


def test_moves_are_one_square_orthogonally() -> None:
    state = position({**FLAGS, "e4": "W:PVT", "e5": "B:SGT", "d4": "W:SGT"})
    moves = [a for a in GENERALS.legal_actions(state, 0) if "-" in a]
    assert moves == ["a1-a2", "a1-b1", "d4-c4", "d4-d3", "d4-d5", "e4-e3", "e4-e5", "e4-f4"]
    assert GENERALS.legal_actions(state, 1) == ["draw"]
    for action, message in [
        ("e4-e6", "not one square"),
        ("e4-d5", "not one square"),
        ("e4-d4", "d4 holds one of your own pieces"),
        ("e5-e6", "you have no piece on e5"),
        ("c3-c4", "you have no piece on c3"),
    ]:
        with pytest.raises(IllegalActionError, match=message):
            GENERALS.apply(state, 0, action, CONTEXT)
    with pytest.raises(NotYourTurnError, match="White's turn"):
        GENERALS.apply(state, 1, "e5-e6", CONTEXT)


@pytest.mark.parametrize(
    ("attacker", "defender", "result", "on_e5", "lost"),
    [
        ("W:COL", "B:MAJ", "attacker", "W", (0, 1)),
        ("W:MAJ", "B:COL", "defender", "B", (1, 0)),
        ("W:MAJ", "B:MAJ", "both", None, (1, 1)),
        ("W:PVT", "B:SPY", "attacker", "W", (0, 1)),
        ("W:SPY", "B:5*", "attacker", "W", (0, 1)),
    ],
)
def test_challenges(
    attacker: str, defender: str, result: str, on_e5: str | None, lost: tuple[int, int]
) -> None:
    state = play(position({**FLAGS, "e4": attacker, "e5": defender}), "e4-e5")
    removed = {"attacker": ("e5",), "defender": ("e4",), "both": ("e5", "e4")}[result]
    assert state.board[36] == 0
    assert (state.board[40] >> 4 if state.board[40] else None) == (
        None if on_e5 is None else "WB".index(on_e5)
    )
    for seat in (0, 1, None):
        view = GENERALS.view(state, seat)
        assert view.last_move == LastMove(0, "e4", "e5", True, result, removed)
        assert view.lost_counts == lost
        assert view.quiet_moves == 0
    assert GENERALS.view(state, 0).lost[1] == ()
    assert GENERALS.view(state, 1).lost[0] == ()


# ---------------------------------------------------------------------------------------------------------
# The Flag


def test_capturing_the_flag_wins() -> None:
    state = play(position({"a1": "W:FLG", "e4": "W:PVT", "e5": "B:FLG"}), "e4-e5")
    assert state.result is not None
    assert state.result.termination is Termination.FLAG_CAPTURED
    assert state.result.winner == 0
    assert state.phase is Phase.OVER
    with pytest.raises(GameOverError):
        GENERALS.apply(state, 1, "draw", CONTEXT)
    assert GENERALS.legal_actions(state, 0) == GENERALS.legal_actions(state, 1) == []
    assert GENERALS.view(state, 1).pieces[1].rank == "PVT"  # everything is revealed once over


def test_a_flag_takes_the_flag() -> None:
    state = play(position({"e4": "W:FLG", "e5": "B:FLG"}), "e4-e5")
    assert state.result is not None
    assert state.result.termination is Termination.FLAG_CAPTURED
    assert state.result.winner == 0


def test_a_flag_that_challenges_anything_else_is_captured() -> None:
    state = play(position({"e4": "W:FLG", "e5": "B:PVT", "i8": "B:FLG"}), "e4-e5")
    assert state.result is not None
    assert state.result.termination is Termination.FLAG_CAPTURED
    assert state.result.winner == 1


def test_a_flag_on_the_far_rank_with_nobody_beside_it_wins_at_once() -> None:
    state = play(position({"e7": "W:FLG", "a8": "B:FLG", "e6": "B:PVT"}), "e7-e8")
    assert state.result is not None
    assert state.result.termination is Termination.FLAG_REACHED
    assert state.result.winner == 0
    black = play(position({"a1": "W:FLG", "e2": "B:FLG"}, turn=1), "e2-e1")
    assert black.result is not None
    assert black.result.winner == 1
    assert black.result.termination is Termination.FLAG_REACHED


def test_a_flag_beside_an_enemy_wins_if_it_survives_the_next_move() -> None:
    base = position({"e7": "W:FLG", "d8": "B:PVT", "a6": "B:SGT", "i8": "B:FLG"})
    state = play(base, "e7-e8")
    assert state.result is None
    assert state.flag_pending == 67
    assert GENERALS.view(state, 0).flag_pending == "e8"
    assert "your Flag on e8 wins if it survives this move" in GENERALS.view(state, 0).message
    assert GENERALS.view(state, 1).flag_pending is None
    assert "Flag" not in GENERALS.view(state, 1).message
    # A draw offer is no move: the Flag has not survived a move yet.
    offered = GENERALS.apply(state, 1, "draw", CONTEXT)
    assert offered.result is None
    survived = play(offered, "a6-a5")
    assert survived.result is not None
    assert survived.result.termination is Termination.FLAG_REACHED
    assert survived.result.winner == 0
    assert "survived" in survived.result.detail
    captured = play(state, "d8-e8")
    assert captured.result is not None
    assert captured.result.termination is Termination.FLAG_CAPTURED
    assert captured.result.winner == 1


# ---------------------------------------------------------------------------------------------------------
# Automatic draws


def warnings(state: GeneralsState, seat: int | None = 0) -> list[tuple[str, int | None, int]]:
    return [(w.rule, w.seat, w.moves_left) for w in GENERALS.view(state, seat).warnings]


def test_the_5_move_perpetual_with_its_warnings() -> None:
    # Black's SGT chases White's PVT, which runs back and forth between e4 and d4.
    state = position({**FLAGS, "e4": "W:PVT", "e6": "B:SGT"}, turn=1)
    state = play(state, "e6-e5")  # now the PVT on e4 is chased
    seen = []
    for white, black in [("e4-d4", "e5-d5"), ("d4-e4", "d5-e5"), ("e4-d4", "e5-d5"), ("d4-e4", "d5-e5")]:
        state = play(state, white)
        seen.append(warnings(state))
        assert warnings(state, 1) == warnings(state, None) == seen[-1]
        state = play(state, black)
        assert warnings(state) == seen[-1]
    assert seen == [[], [("5-move", 0, 3)], [("5-move", 0, 2)], [("5-move", 0, 1)]]
    assert GENERALS.view(state, 1).chase[0] == (("e4", 4, 4))
    state = play(state, "e4-d4")
    assert state.result is not None
    assert state.result.termination is Termination.PERPETUAL_CHASE
    assert state.result.winner is None
    assert state.result.detail.startswith("5-move perpetual")
    assert state.result.score == (0.5, 0.5)


def test_a_piece_that_is_not_chased_does_not_count() -> None:
    state = position({**FLAGS, "e4": "W:PVT", "e6": "B:SGT", "i5": "B:PVT"}, turn=1)
    state = play(state, "e6-e5", "e4-d4", "e5-d5", "d4-e4")  # two chased moves
    assert GENERALS.view(state, 0).chase[0] == ("e4", 2, 2)
    state = play(state, "i5-i4", "e4-d4")  # Black did not chase: the run starts again... not at all
    assert GENERALS.view(state, 0).chase[0] == (None, 0, 0)
    assert warnings(state) == []


def test_the_16_move_perpetual_with_its_warnings() -> None:
    # White's PVT runs along rank 4, then rank 3; Black's SGT follows one rank above it.
    runner = [f"{f}4" for f in "abcdefghi"] + [f"{f}3" for f in "ihgfedcba"]
    chaser = [f"{f}5" for f in "abcdefghi"] + [f"{f}4" for f in "ihgfedcba"]
    state = position({"a2": "W:FLG", "i8": "B:FLG", "a4": "W:PVT", "a6": "B:SGT"}, turn=1)
    state = play(state, "a6-a5")
    left = []
    for n in range(1, 17):
        state = play(state, f"{runner[n - 1]}-{runner[n]}")
        if n == 16:
            break
        left.append([w[2] for w in GENERALS.view(state, 1).warnings if w[0] == "16-move"])
        assert not any(w[0] == "5-move" for w in GENERALS.view(state, 1).warnings)
        state = play(state, f"{chaser[n - 1]}-{chaser[n]}")
    assert left == [[]] * 12 + [[3], [2], [1]]
    assert state.result is not None
    assert state.result.termination is Termination.PERPETUAL_CHASE
    assert state.result.detail.startswith("16-move perpetual")


def test_a_challenge_ends_a_chase_run() -> None:
    state = position({**FLAGS, "e4": "W:PVT", "e6": "B:SGT", "d5": "B:PVT"}, turn=1)
    state = play(state, "e6-e5", "e4-d4")
    assert state.runs[0][1] == 1
    state = play(state, "e5-e4", "d4-d5")  # the chased PVT challenges: no run
    assert state.runs[0][1] == 0


def test_no_challenges_with_its_warnings() -> None:
    state = position({**FLAGS, "a4": "W:PVT", "i5": "B:PVT"})
    for ply in range(1, 61):
        white = ply % 4 in (1, 2)
        if ply % 2:
            state = play(state, "a4-a3" if white else "a3-a4")
        else:
            state = play(state, "i5-i6" if white else "i6-i5")
        if ply < 60:
            expected = [("no-challenges", None, 60 - ply)] if 60 - ply <= 6 else []
            assert warnings(state) == warnings(state, 1) == expected, ply
            assert state.result is None
    assert state.result is not None
    assert state.result.termination is Termination.NO_CHALLENGES
    assert state.result.winner is None


def test_a_challenge_resets_the_no_challenge_count() -> None:
    state = position({**FLAGS, "a4": "W:PVT", "i5": "B:PVT", "e4": "W:COL", "e5": "B:MAJ"})
    state = play(state, "a4-a3", "i5-i6")
    assert state.quiet == 2
    state = play(state, "e4-e5")
    assert state.quiet == 0


# ---------------------------------------------------------------------------------------------------------
# Offers


def test_three_offers_each_and_a_move_declines() -> None:
    state = started(FULL_WHITE, FULL_BLACK)
    for n in range(3):
        assert "draw" in GENERALS.legal_actions(state, 0)
        state = GENERALS.apply(state, 0, "draw", CONTEXT)
        assert state.offer == 0
        assert state.offers_left == (2 - n, 3)
        assert GENERALS.legal_actions(state, 1) == ["accept", "decline"]
        with pytest.raises(IllegalActionError, match="already offered"):
            GENERALS.apply(state, 0, "draw", CONTEXT)
        with pytest.raises(IllegalActionError, match="White has offered a draw: accept or decline it"):
            GENERALS.apply(state, 1, "draw", CONTEXT)
        with pytest.raises(IllegalActionError, match="no draw offer from Black"):
            GENERALS.apply(state, 0, "accept", CONTEXT)
        # The offerer's own move leaves it standing; the opponent's move declines it.
        state = play(state, "a3-a4" if n % 2 == 0 else "a4-a3")
        assert state.offer == 0
        state = play(state, "a6-a5" if n % 2 == 0 else "a5-a6")
        assert state.offer is None
    assert "draw" not in GENERALS.legal_actions(state, 0)
    with pytest.raises(IllegalActionError, match="your 3 draw offers"):
        GENERALS.apply(state, 0, "draw", CONTEXT)
    state = GENERALS.apply(state, 1, "draw", CONTEXT)  # out of turn: offers are open to both seats
    state = GENERALS.apply(state, 0, "decline", CONTEXT)
    assert state.offer is None
    assert state.offers_left == (0, 2)
    state = GENERALS.apply(state, 1, "draw", CONTEXT)
    state = GENERALS.apply(state, 0, "accept", CONTEXT)
    assert state.result is not None
    assert state.result.termination is Termination.DRAW_AGREED
    assert state.result.score == (0.5, 0.5)


def test_timeout_and_resignation() -> None:
    state = started(FULL_WHITE, FULL_BLACK)
    out = GENERALS.timeout_outcome(state, 1)
    assert out.termination is Termination.TIMEOUT
    assert out.winner == 0
    assert "third strike" in out.detail
    out = GENERALS.resignation_outcome(state, 0)
    assert out.termination is Termination.RESIGNATION
    assert out.winner == 1
    assert "resign" not in GENERALS.legal_actions(state, 0)


def test_replay_is_the_same_game() -> None:
    steps: list[object] = [
        (0, f"setup {FULL_WHITE}"),
        (0, "ready"),
        (1, f"setup {FULL_BLACK}"),
        (1, "ready"),
        (1,),
        (1, "a6-a5"),
        (0, "a3-a4"),
        (1, "a5-a4"),
    ]
    state = replay(None, steps)
    assert state.plies == 3
    assert state.last is not None
    assert state.last.result
