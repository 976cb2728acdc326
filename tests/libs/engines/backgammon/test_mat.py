"""The MAT match file: export of finished matches, parsed back to the same moves, dice and scores."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from libs.engines.backgammon.board import Variant
from libs.engines.backgammon.engine import BackgammonOptions, EventKind
from libs.engines.backgammon.mat import MatAction, MatFormatError, export_mat, mat_match, parse_mat
from tests.libs.engines.backgammon.game_helpers import new, random_match, run


def test_layout_of_a_short_match() -> None:
    state = new(cube=True, match_to=3)
    state = run(state, "31", "8/5 6/5", "double", "take", "64", "24/18 13/9", "double", "drop")
    state = run(state, "0:continue", "1:continue", "25", "13/11 13/8", "66", "1")
    state = run(state, "43", "resign single", "accept")
    text = export_mat(state, ("Alice", "Bob"))
    lines = text.splitlines()
    assert lines[0] == " 3 point match"
    assert lines[2] == " Game 1"
    assert lines[3] == " Alice : 0                      Bob : 0"
    assert lines[4] == "  1) 31: 8/5 6/5                  Doubles => 2"
    assert lines[5] == "  2)  Takes                      64: 24/18 13/9"
    assert lines[6] == "  3)  Doubles => 4                Drops"
    assert lines[4].index("Doubles") == lines[6].index("Drops") == 34  # gnubg's columns
    assert lines[7] == "      Wins 2 points"
    assert lines[9] == " Game 2"
    assert lines[10] == " Alice : 2                      Bob : 0"
    assert lines[11].startswith("  1)                             25: ")
    assert lines[-2:] == ["      Wins 1 point and the match", ""]
    parsed = parse_mat(text)
    assert parsed == mat_match(state).__class__(3, ("Alice", "Bob"), mat_match(state).games, "")


def test_forfeit_is_dice_alone() -> None:
    from tests.libs.engines.backgammon.game_helpers import ready, roll
    from tests.libs.engines.backgammon.test_engine import CLOSED

    state = roll(ready(1, CLOSED), "65")
    text = export_mat(state)
    assert "65:" in text.split()
    game = parse_mat(text).games[0]
    assert game.actions[-1] == MatAction(1, "roll", dice=(6, 5), moves=())


def test_variation_header_and_beaver() -> None:
    state = new(variant="nackgammon", cube=True, beavers=True)
    state = run(state, "31", "8/5 6/5", "double", "beaver", "take")
    text = export_mat(state)
    assert text.startswith('; [Variation "NackGammon"]\n\n 0 point match\n')
    assert "Beavers => 4" in text
    parsed = parse_mat(text)
    assert parsed.variation == "NackGammon"
    kinds = [action.kind for action in parsed.games[0].actions]
    assert kinds == ["roll", "double", "beaver", "take"]


@pytest.mark.parametrize(
    "options",
    [
        BackgammonOptions(cube=True, gammons=True, match_to=5),
        BackgammonOptions(cube=True, match_to=3, auto_bearoff=True),
        BackgammonOptions(variant=Variant.HYPERGAMMON, cube=True, gammons=True, match_to=7),
        BackgammonOptions(cube=True, gammons=True, beavers=True, automatic_doubles=1),
    ],
)
def test_round_trip_of_random_matches(options: BackgammonOptions) -> None:
    for seed in range(6):
        state, _ = random_match(random.Random(seed), options)
        text = export_mat(state)
        parsed = parse_mat(text)
        assert parsed.match_to == options.match_to
        assert parsed == mat_match(state)
        assert len(parsed.games) == len(state.games)
        for game, result in zip(parsed.games, state.games, strict=True):
            assert game.number == result.number
            assert game.score == result.score_before
            rolls = [(a.seat, a.dice, a.moves) for a in game.actions if a.kind == "roll"]
            plays = [
                (e.seat, e.dice, e.steps)
                for e in result.events
                if e.kind in (EventKind.PLAY, EventKind.AUTO_PLAY, EventKind.FORFEIT)
            ]
            assert rolls == plays
            win = game.actions[-1]
            assert (win.kind, win.seat, win.value) == ("win", result.winner, result.points)
        assert parsed.games[-1].actions[-1].match_won


def test_parse_errors() -> None:
    with pytest.raises(MatFormatError, match="point match"):
        parse_mat("hello")
    with pytest.raises(MatFormatError, match="Game"):
        parse_mat(" 3 point match\n  1) 31: 8/5 6/5\n")
    with pytest.raises(MatFormatError, match="line 4"):
        parse_mat(" 3 point match\n Game 1\n A : 0      B : 0\n  1) 31: 8/5 6/x\n")
    lenient = parse_mat(
        " 1 point match\n\n Game 1\n A : 0                B : 0\n  1) 31: 8/5 6/5   42: bar/21 13/9\n"
    )
    assert lenient.games[0].actions[1] == MatAction(1, "roll", dice=(4, 2), moves=("25/21", "13/9"))


GNUBG = shutil.which("gnubg") or next((p for p in ("/usr/games/gnubg",) if os.path.exists(p)), None)


@pytest.mark.skipif(GNUBG is None, reason="gnubg is not installed: the independent import check is skipped")
@pytest.mark.parametrize(
    "options",
    [
        BackgammonOptions(cube=True, gammons=True, match_to=5),
        BackgammonOptions(cube=True, gammons=True, auto_bearoff=True),
        BackgammonOptions(variant=Variant.NACKGAMMON, cube=True, gammons=True, match_to=3),
        BackgammonOptions(variant=Variant.HYPERGAMMON, cube=True, gammons=True, match_to=3),
    ],
)
def test_gnubg_imports_the_export_with_the_same_score(options: BackgammonOptions, tmp_path: Path) -> None:
    """An independent reader: gnubg (when installed) imports the file and reaches the same score."""
    assert GNUBG is not None
    for seed in range(3):
        state, _ = random_match(random.Random(seed), options, cube_rate=0.1)
        path = tmp_path / f"match{seed}.mat"
        path.write_text(export_mat(state))
        # gnubg recomputes each game's value from the final position and its own settings: compare
        # tables that score gammons, without beavers (its MAT import reads a take after a beaver as
        # doubling again) and, for money play, with its Jacoby rule switched off.
        commands = f"set jacoby off\nimport mat {path}\nshow score\n"
        done = subprocess.run(
            [GNUBG, "-t", "-q"], input=commands, capture_output=True, text=True, timeout=120, check=False
        )
        found = re.search(r"after (\d+) games?\) is: White (\d+), Black (\d+)", done.stdout)
        assert found, done.stdout[-2000:]
        games, white, black = (int(found.group(i)) for i in (1, 2, 3))
        assert (games, (white, black)) == (len(state.games), state.match.score)
