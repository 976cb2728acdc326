"""The engine against the plain reference (``reference.py``) over many seeded random games: the legal
points, the captures and the prisoners after every move, the area count at the end, and the replay of
every action log."""

from __future__ import annotations

import random

import pytest

from libs.engines.base import ActionContext, IllegalActionError, Termination
from libs.engines.go import ACCEPT, BLACK, GO, PASS, WHITE, GoOptions, GoState, Phase, Scoring, replay
from libs.engines.go.board import COLUMNS
from tests.libs.engines.go.reference import Point, ReferenceGame

CONTEXT = ActionContext(remaining_ms=(0, 0))
COLOURS = ("B", "W")
SEEN = {"ko": 0, "ko_refused": 0, "captures": 0}
"""What the random games went through (so a test can check they reached kos and captures at all)."""


def _name(point: Point) -> str:
    return f"{COLUMNS[point[0]]}{point[1] + 1}"


def _reference_point(state: GoState, index: int) -> Point:
    row, col = divmod(index, state.options.size)
    return col, row


def play_random_game(
    rng: random.Random, size: int, max_moves: int, check_every: int = 1
) -> tuple[GoState, ReferenceGame, list[tuple[int, str]]]:
    """A random game to the end (both players accept the count), checked against the reference.

    Players pick a random legal point that does not fill one of their own eyes; with none left (or after
    ``max_moves`` moves) they pass. Legal points are compared every ``check_every`` moves."""
    options = GoOptions(size=size, scoring=Scoring.AREA)
    state = GO.new_game(options)
    reference = ReferenceGame(size)
    log: list[tuple[int, str]] = []
    moves = 0
    while state.phase is Phase.PLAY:
        seat = state.turn
        assert COLOURS[seat] == reference.to_play
        actions = GO.legal_actions(state, seat)
        assert actions == sorted(actions)
        assert actions[-1] == PASS
        points = actions[:-1]
        ko = state.board.ko
        if ko is not None:
            SEEN["ko"] += 1
            if state.board.geometry.names[ko] not in points:
                SEEN["ko_refused"] += 1
                ko_point = _reference_point(state, ko)
                assert reference.result_of(ko_point, reference.to_play) is None
        if moves % check_every == 0:
            expected = sorted(_name(p) for p in reference.legal_points())
            assert points == expected, f"move {moves}: legal points differ"
        colour = seat + 1
        cells = state.board.cells
        neighbors = state.board.geometry.neighbors
        by_name = state.board.geometry.by_name
        candidates = [
            name for name in points if not all(cells[q] == colour for q in neighbors[by_name[name]])
        ]
        if moves >= max_moves or not candidates:
            action = PASS
            reference.pass_move()
        else:
            action = rng.choice(candidates)
            point = _reference_point(state, by_name[action])
            assert reference.result_of(point, reference.to_play) is not None
            captured = reference.play(point)
        log.append((seat, action))
        state = GO.apply(state, seat, action, CONTEXT)
        moves += 1
        if action != PASS:
            SEEN["captures"] += len(captured)
            assert sorted(_name(p) for p in captured) == sorted(
                state.board.geometry.names[p] for p in state.board.captured
            )
            assert state.prisoners == (reference.captures["B"], reference.captures["W"])
        # The board itself, stone by stone.
        if moves % check_every == 0:
            rows = state.board.rows()
            for (col, row), colour_letter in reference.stones.items():
                assert rows[size - 1 - row][col] == ("X" if colour_letter == "B" else "O")
            assert state.board.count(BLACK) + state.board.count(WHITE) == len(reference.stones)
        assert moves < 4 * max_moves, "the game does not end"
    assert state.phase is Phase.COUNT
    assert state.score is not None
    black, white = reference.area()
    assert (state.score.black.stones + state.score.black.territory) == black
    assert (state.score.white.stones + state.score.white.territory) == white
    for seat in (0, 1):
        log.append((seat, ACCEPT))
        state = GO.apply(state, seat, ACCEPT, CONTEXT)
    outcome = GO.outcome(state)
    assert outcome is not None
    assert outcome.termination is Termination.SCORED
    return state, reference, log


@pytest.mark.parametrize("seed", range(4))
def test_random_9x9_games_match_the_reference(seed: int) -> None:
    rng = random.Random(9000 + seed)
    before = dict(SEEN)
    for _ in range(50):
        state, _reference, log = play_random_game(rng, 9, max_moves=160)
        assert replay(state.options, log) == state
    assert SEEN["captures"] > before["captures"]
    assert SEEN["ko_refused"] > before["ko_refused"], "no ko was met: the games test too little"


def test_random_19x19_games_match_the_reference() -> None:
    """Legal points compared every 25 moves (the reference lists them slowly); the captures, prisoners
    and the final count at every move."""
    rng = random.Random(1900)
    for _ in range(25):
        state, _reference, log = play_random_game(rng, 19, max_moves=450, check_every=25)
        assert replay(state.options, log) == state


def test_random_13x13_games_match_the_reference() -> None:
    rng = random.Random(1300)
    for _ in range(5):
        state, _reference, log = play_random_game(rng, 13, max_moves=250, check_every=3)
        assert replay(state.options, log) == state


def test_every_listed_action_is_accepted_and_every_refused_point_is_refused() -> None:
    rng = random.Random(77)
    for _ in range(8):
        state = GO.new_game(GoOptions(size=9, handicap=rng.choice([0, 2, 5])))
        while state.phase is Phase.PLAY:
            seat = state.turn
            listed = GO.legal_actions(state, seat)
            for action in listed:
                GO.apply(state, seat, action, CONTEXT)
            for name in set(state.board.geometry.names) - set(listed):
                with pytest.raises(IllegalActionError):
                    GO.apply(state, seat, name, CONTEXT)
            assert GO.legal_actions(state, 1 - seat) == []
            action = rng.choice(listed) if len(state.moves) < 120 else PASS
            state = GO.apply(state, seat, action, CONTEXT)
        assert state.phase is Phase.COUNT


def flood_fill_area(rows: tuple[str, ...]) -> tuple[int, int]:
    """Area count of a final board from its rows alone (a third, separate count: no engine code): each
    player's stones plus the empty regions that touch only their stones."""
    size = len(rows)
    score = {"X": 0, "O": 0}
    seen: set[tuple[int, int]] = set()
    for r in range(size):
        for c in range(size):
            cell = rows[r][c]
            if cell != ".":
                score[cell] += 1
                continue
            if (r, c) in seen:
                continue
            region, borders, todo = 0, set(), [(r, c)]
            seen.add((r, c))
            while todo:
                y, x = todo.pop()
                region += 1
                for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
                    if 0 <= ny < size and 0 <= nx < size:
                        if rows[ny][nx] == ".":
                            if (ny, nx) not in seen:
                                seen.add((ny, nx))
                                todo.append((ny, nx))
                        else:
                            borders.add(rows[ny][nx])
            if len(borders) == 1:
                score[borders.pop()] += region
    return score["X"], score["O"]


def test_thousands_of_random_9x9_games_end_and_count_as_a_flood_fill_does() -> None:
    """2,000 seeded random 9x9 games by the engine alone (random legal points that fill no own eye,
    then passes): every one ends in the count, and its area count equals the flood fill of its board."""
    rng = random.Random(2000)
    options = GoOptions(size=9)
    ended = 0
    for _ in range(2000):
        state = GO.new_game(options)
        moves = 0
        while state.phase is Phase.PLAY:
            seat = state.turn
            colour = seat + 1
            board = state.board
            cells, neighbors = board.cells, board.geometry.neighbors
            candidates = [
                p for p in board.legal_points(colour) if not all(cells[q] == colour for q in neighbors[p])
            ]
            action = board.geometry.names[rng.choice(candidates)] if candidates and moves < 300 else PASS
            state = GO.apply(state, seat, action, CONTEXT)
            moves += 1
            assert moves < 400, "a random game did not end"
        assert state.score is not None
        black, white = flood_fill_area(state.board.rows())
        assert state.score.black.stones + state.score.black.territory == black
        assert state.score.white.stones + state.score.white.territory == white
        ended += 1
    assert ended == 2000
