"""The go client without a server: the board as text, typed input, options and the two bots, driven by
the engine itself (views mapped to the contract's proto by the rules service's own mapping)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from skillclassics.go.v1 import go_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import InputError, family, family_of_match
from clients.families.go import FAMILY as GO_CLIENT
from clients.families.go import (
    greedy_action,
    liberties_after,
    move_cap,
    own_eye,
    random_action,
    render_board,
    star_points,
)
from libs.engines.base import ActionContext
from libs.engines.go import GO, Board, GoOptions, GoState, Phase, Scoring, parse_point, replay
from tests.clients.go_views import position, update_of

CLOCKS = ActionContext(remaining_ms=(0, 0))

KO_STEPS = [(0, "D5"), (1, "F6"), (0, "E6"), (1, "F4"), (0, "E4"), (1, "G5"), (0, "A1"), (1, "E5"), (0, "F5")]
"""A 9x9 game to a ko: Black's F5 takes White's E5, which White may not take back at once."""


def action_text(action: rules_pb2.Action | None) -> str:
    assert action is not None
    assert action.WhichOneof("kind") == "go"
    return action.go.action


def apply(state: GoState, seat: int, action: str) -> GoState:
    return GO.apply(state, seat, action, CLOCKS)


def counted(state: GoState) -> GoState:
    """``state`` after two passes (the player to move first)."""
    first = GO.to_move(state)
    assert first is not None
    return apply(apply(state, first, "pass"), 1 - first, "pass")


# -- the registry ----------------------------------------------------------------------------------------


def test_go_is_in_the_registry() -> None:
    assert family("go") is GO_CLIENT
    assert family_of_match("go.0.abc") is GO_CLIENT
    assert not GO_CLIENT.uses_chance
    assert GO_CLIENT.strategies[:2] == ("random", "greedy")
    assert GO_CLIENT.seat_label(0) == "Black"
    assert GO_CLIENT.seat_label(1) == "White"
    assert GO_CLIENT.quick_minutes == 5
    with pytest.raises(InputError, match="go bots are random, greedy"):
        GO_CLIENT.strategy("alphago", random.Random(0))


# -- the board -------------------------------------------------------------------------------------------

KO_BOARD = """\
   A B C D E F G H J
9  . . . . . . . . .  9
8  . . . . . . . . .  8
7  . . + . . . + . .  7
6  . . . . X O . . .  6
5  . . . X *(X)O . .  5
4  . . . . X O . . .  4
3  . . + . . . + . .  3
2  . . . . . . . . .  2
1  X . . . . . . . .  1
   A B C D E F G H J"""


def test_a_ko_drawn_in_ascii() -> None:
    state = replay(GoOptions(size=9), KO_STEPS)
    assert GO_CLIENT.render(update_of(state, 1), 1, ascii=True) == KO_BOARD + "\n" + "\n".join(
        [
            "X Black: 1 prisoner   O White (you): 0 prisoners   komi 5.5, area scoring",
            "move 9: Black played F5, capturing 1 stone (E5)",
            "ko at E5 (*): you may not take back there at once",
            "you to play (a point like D4, or pass; ? lists the legal points)",
            "Black played F5, capturing 1 stone; White to play",
        ]
    )
    # Black, and a spectator, see the same board; the lines below it name the players as they see them.
    black = GO_CLIENT.render(update_of(state, 0), 0, ascii=True).splitlines()
    assert black[:11] == KO_BOARD.splitlines()
    assert black[11:14] == [
        "X Black (you): 1 prisoner   O White: 0 prisoners   komi 5.5, area scoring",
        "move 9: Black (you) played F5, capturing 1 stone (E5)",
        "ko at E5 (*): White may not take back there at once",
    ]
    assert black[14] == "White to play"
    assert GO_CLIENT.render(update_of(state, None), None, ascii=True).splitlines()[14] == "White to play"


def test_the_board_in_unicode_and_ascii() -> None:
    state = replay(GoOptions(size=9), KO_STEPS)
    lines = GO_CLIENT.render(update_of(state, 1), 1).splitlines()
    assert lines[5] == "5  · · · ● □(●)○ · ·  5"
    assert lines[7] == "3  · · + · · · + · ·  3"
    assert lines[11].startswith("● Black: 1 prisoner   ○ White (you)")
    ascii_text = GO_CLIENT.render(update_of(state, 1), 1, ascii=True)
    board_chars = set("".join(ascii_text.splitlines()[1:10]))
    assert board_chars <= set("0123456789 XO.+*()")


def test_coordinates_skip_i_and_rows_count_from_the_bottom() -> None:
    state = replay(GoOptions(size=19), [(0, "T19"), (1, "A1")])
    lines = GO_CLIENT.render(update_of(state, 0), 0, ascii=True).splitlines()
    header = "    A B C D E F G H J K L M N O P Q R S T"
    assert lines[0] == lines[20] == header
    assert "I" not in header
    assert lines[1] == "19  . . . . . . . . . . . . . . . . . . X  19"
    assert lines[4] == "16  . . . + . . . . . + . . . . . + . . .  16"
    assert lines[19] == " 1 (O). . . . . . . . . . . . . . . . . .  1"
    assert lines[21] == "X Black (you): 0 prisoners   O White: 0 prisoners   komi 7.5, area scoring"
    assert lines[22] == "move 2: White played A1"
    # The last stone on the right edge: its closing parenthesis takes the space before the row number.
    state = apply(state, 0, "T1")
    assert GO_CLIENT.render(update_of(state, 1), 1, ascii=True).splitlines()[19] == (
        " 1  O . . . . . . . . . . . . . . . . .(X) 1"
    )
    # The row numbers on the right are in one column, whatever the marks.
    assert [line[len(header) + 2 :] for line in lines[1:20]] == [str(n) for n in range(19, 0, -1)]


def test_star_points() -> None:
    names = {
        size: sorted(Board.empty(size).geometry.names[p] for p in star_points(size)) for size in (9, 13, 19)
    }
    assert names[9] == ["C3", "C7", "E5", "G3", "G7"]
    assert names[13] == ["D10", "D4", "G7", "K10", "K4"]
    assert names[19] == ["D10", "D16", "D4", "K10", "K16", "K4", "Q10", "Q16", "Q4"]
    assert render_board(["." * 9] * 9)[5] == "5  · · · · + · · · ·  5"


def test_a_pass_a_handicap_and_territory_scoring() -> None:
    state = replay(GoOptions(size=13, handicap=3, scoring=Scoring.TERRITORY), [(1, "C3"), (0, "pass")])
    text = GO_CLIENT.render(update_of(state, 1), 1, ascii=True)
    assert (
        "X Black: 0 prisoners   O White (you): 0 prisoners   komi 0.5, territory scoring, handicap 3" in text
    )
    assert "move 2: Black passed" in text
    assert "you to play (a point like D4, or pass; ? lists the legal points)" in text
    assert text.endswith("Black passed; White to play (a second pass starts the count)")


def test_the_count_is_shown_by_parts_with_who_accepted() -> None:
    state = counted(replay(GoOptions(size=9), KO_STEPS))
    assert GO.view(state, 0).phase is Phase.COUNT
    lines = GO_CLIENT.render(update_of(state, 0), 0, ascii=True).splitlines()
    assert lines[11:] == [
        "X Black (you): 1 prisoner   O White: 0 prisoners   komi 5.5, area scoring",
        "move 11: Black (you) passed",
        "count (area scoring):",
        "  Black (you): 5 stones + 1 territory = 6 (1 prisoner)",
        "  White: 3 stones + 0 territory + 5.5 komi = 8.5",
        "  neutral 72; result W+2.5",
        "accepted: nobody yet; waiting for you and White to accept (or resume play)",
        "two passes: the count says White wins by 2.5 (area: Black 6, White 3 + 5.5 komi); "
        "Black and White to accept or resume",
    ]
    assert "*" not in "".join(lines[1:10])  # no ko during the count
    state = apply(state, 0, "accept")
    assert "accepted: Black; waiting for you to accept (or resume play)" in GO_CLIENT.render(
        update_of(state, 1), 1
    )
    over = apply(state, 1, "accept")
    text = GO_CLIENT.render(update_of(over, None), None)
    assert "game over" in text
    assert "  White: 3 stones + 0 territory + 5.5 komi = 8.5" in text
    assert text.endswith("both players accepted the count")


def test_territory_counts_show_prisoners() -> None:
    state = counted(replay(GoOptions(size=9, scoring=Scoring.TERRITORY), KO_STEPS))
    text = GO_CLIENT.render(update_of(state, 1), 1)
    assert "count (territory scoring):" in text
    assert "  Black: 1 territory + 1 prisoner = 2 (5 stones on the board)" in text
    assert "  White (you): 0 territory + 0 prisoners + 5.5 komi = 5.5 (3 stones on the board)" in text


def test_a_match_ended_during_play_shows_no_turn() -> None:
    update = update_of(replay(GoOptions(size=9), KO_STEPS), 1)
    update.status = rules_pb2.MATCH_STATUS_FINISHED  # White resigned, or ran out of time
    update.ClearField("legal_actions")
    lines = GO_CLIENT.render(update, 1, ascii=True).splitlines()
    assert lines[-2:] == ["game over", "Black played F5, capturing 1 stone; White to play"]
    assert not any(line.startswith("ko at") for line in lines)


def test_an_empty_update_still_renders() -> None:
    text = GO_CLIENT.render(rules_pb2.MatchUpdate(), None)
    assert text.splitlines()[0] == "    A B C D E F G H J K L M N O P Q R S T"


# -- the legal actions -----------------------------------------------------------------------------------


def test_the_legal_points_by_column() -> None:
    state = replay(GoOptions(size=9), KO_STEPS)
    assert GO_CLIENT.describe_legal(update_of(state, 1)) == "\n".join(
        [
            "72 legal points, and pass:",
            "  A: 2-9",
            "  B: 1-9",
            "  C: 1-9",
            "  D: 1-4 6-9",
            "  E: 1-3 7-9",  # not E5: the ko
            "  F: 1-3 7-9",
            "  G: 1-4 6-9",
            "  H: 1-9",
            "  J: 1-9",
        ]
    )
    assert GO_CLIENT.describe_legal(update_of(state, 0)) == "nothing to play now (not your turn)"
    count = counted(state)
    assert (
        GO_CLIENT.describe_legal(update_of(count, 1))
        == "the count: accept it, or resume play (accept, resume)"
    )
    accepted = apply(count, 1, "accept")
    assert GO_CLIENT.describe_legal(update_of(accepted, 1)) == (
        "you accepted the count; you may still resume play (resume)"
    )
    only_pass = rules_pb2.MatchUpdate(legal_actions=["pass"])
    assert GO_CLIENT.describe_legal(only_pass) == "no legal point: pass"


def test_columns_on_the_big_board_are_in_board_order() -> None:
    lines = GO_CLIENT.describe_legal(update_of(GO.new_game(GoOptions(size=19)), 0)).splitlines()
    assert lines[0] == "361 legal points, and pass:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == list("ABCDEFGHJKLMNOPQRST")
    assert lines[1] == "  A: 1-19"


# -- typed input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "action"),
    [
        ("D4", "D4"),
        ("d4", "D4"),
        ("  q16 ", "Q16"),
        ("T19", "T19"),
        ("j1", "J1"),
        ("d 4", "D4"),
        ("pass", "pass"),
        ("PASS", "pass"),
        ("Accept", "accept"),
        ("resume", "resume"),
    ],
)
def test_points_and_words_are_read(typed: str, action: str) -> None:
    assert action_text(GO_CLIENT.parse(typed)) == action


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("", "type an action"),
        ("i5", "there is no column I on a go board"),
        ("D0", "is not on the 19x19 board (columns A-T, rows 1-19)"),
        ("D04", "is not on the 19x19 board"),
        ("D20", "is not on the 19x19 board"),
        ("U3", "is not on the 19x19 board"),
        ("4D", "cannot read '4D' as a go action"),
        ("hello", "cannot read 'hello' as a go action"),
        ("D4 E5", "cannot read 'D4 E5'"),
        ("resign", "cannot read 'resign'"),
    ],
)
def test_unreadable_input(typed: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        GO_CLIENT.parse(typed)
    assert message in str(raised.value)


def test_points_off_a_small_board_are_refused_when_the_board_is_known() -> None:
    update = update_of(GO.new_game(GoOptions(size=9)), 0)
    assert action_text(GO_CLIENT.parse("j9", update)) == "J9"
    for typed in ("K10", "D10", "K1"):
        with pytest.raises(InputError, match=r"not on the 9x9 board \(columns A-J, rows 1-9\)"):
            GO_CLIENT.parse(typed, update)
    # Legality is the server's: an occupied point is sent as typed.
    state = replay(GoOptions(size=9), KO_STEPS)
    assert action_text(GO_CLIENT.parse("f5", update_of(state, 1))) == "F5"


def test_a_question_mark_lists_the_legal_points() -> None:
    update = update_of(replay(GoOptions(size=9), KO_STEPS), 1)
    with pytest.raises(InputError) as raised:
        GO_CLIENT.parse("?", update)
    assert str(raised.value) == GO_CLIENT.describe_legal(update)


def test_answers_to_the_count_go_at_once() -> None:
    assert GO_CLIENT.needs_turn(GO_CLIENT.parse("D4"))
    assert GO_CLIENT.needs_turn(GO_CLIENT.parse("pass"))
    assert not GO_CLIENT.needs_turn(GO_CLIENT.parse("accept"))
    assert not GO_CLIENT.needs_turn(GO_CLIENT.parse("resume"))
    assert not GO_CLIENT.needs_turn(rules_pb2.Action(resign=rules_pb2.Resign()))
    assert GO_CLIENT.input_help().startswith("a point (D4")


# -- options ---------------------------------------------------------------------------------------------


def test_options() -> None:
    plain = GO_CLIENT.options({})
    assert plain.go == go_pb2.GoOptions(size=19, scoring=go_pb2.SCORING_AREA)
    assert not plain.go.HasField("komi")
    assert GO_CLIENT.describe_options(plain) == "19x19, area, komi 7.5"
    small = GO_CLIENT.options({"size": "9"})
    assert GO_CLIENT.describe_options(small) == "9x9, area, komi 5.5"
    handicap = GO_CLIENT.options({"size": "13x13", "handicap": "4", "scoring": "Territory"})
    assert handicap.go == go_pb2.GoOptions(size=13, handicap=4, scoring=go_pb2.SCORING_TERRITORY)
    assert GO_CLIENT.describe_options(handicap) == "13x13, territory, komi 0.5, handicap 4"
    komi = GO_CLIENT.options({"komi": "6.5", "scoring": "japanese", "handicap": "0"})
    assert komi.go.HasField("komi")
    assert komi.go.komi == 6.5
    assert GO_CLIENT.describe_options(komi) == "19x19, territory, komi 6.5"
    assert GO_CLIENT.options({"komi": "-3"}).go.komi == -3
    assert GO_CLIENT.options({"komi": "0"}).go.HasField("komi")
    assert GO_CLIENT.describe_options(GO_CLIENT.options({"komi": "7"})) == "19x19, area, komi 7"
    assert not GO_CLIENT.options({"komi": "default"}).go.HasField("komi")
    for settings, message in (
        ({"ruleset": "aga"}, "go has no option ruleset"),
        ({"size": "11"}, "a go board is 9, 13 or 19 lines (9x9, 13x13, 19x19), not '11'"),
        ({"size": "big"}, "not 'big'"),
        ({"handicap": "1"}, "a go handicap is 0 (none) or 2 to 9 stones, not '1'"),
        ({"handicap": "10"}, "2 to 9 stones, not '10'"),
        ({"komi": "6.3"}, "go komi is a multiple of 0.5 from -400 to 400 (like 6.5 or 7), not '6.3'"),
        ({"komi": "lots"}, "not 'lots'"),
        ({"komi": "500"}, "not '500'"),
        ({"komi": "nan"}, "not 'nan'"),
        ({"scoring": "ing"}, "go scoring is area (Chinese) or territory (Japanese), not 'ing'"),
    ):
        with pytest.raises(InputError) as raised:
            GO_CLIENT.options(settings)
        assert message in str(raised.value)


def test_the_options_are_what_the_service_reads() -> None:
    from services.rules_go.family import GoFamily

    read = GoFamily().options_from_proto(GO_CLIENT.options({"size": "9", "handicap": "2", "komi": "3.5"}))
    assert read == GoOptions(size=9, handicap=2, komi=3.5)
    assert GoFamily().options_from_proto(GO_CLIENT.options({})) == GoOptions()


# -- plies and advantage ---------------------------------------------------------------------------------


def test_plies_and_advantage() -> None:
    state = replay(GoOptions(size=9), KO_STEPS)
    update = update_of(state, 0)
    assert GO_CLIENT.plies(update) == 9
    # During play: the board counted as it stands (every stone alive), komi included.
    assert GO_CLIENT.advantage(update, 0) == pytest.approx(6 - 3 - 5.5)
    assert GO_CLIENT.advantage(update, 1) == pytest.approx(2.5)
    count = counted(state)
    assert GO_CLIENT.advantage(update_of(count, 1), 1) == pytest.approx(2.5)
    assert GO_CLIENT.advantage(update_of(count, 1), 0) == pytest.approx(-2.5)
    assert GO_CLIENT.plies(rules_pb2.MatchUpdate()) is None


# -- bots ------------------------------------------------------------------------------------------------


def eyes(board: Board, color: int) -> set[int]:
    """The single-point eyes of ``color``: empty points whose every on-board neighbour is ``color``."""
    neighbors = board.geometry.neighbors
    return {
        p
        for p in range(board.geometry.points)
        if board[p] == 0 and all(board[q] == color for q in neighbors[p])
    }


def best_capture(state: GoState, seat: int) -> int:
    """The most stones one legal move of ``seat`` captures now."""
    most = 0
    for p in state.board.legal_points(seat + 1):
        most = max(most, len(state.board.play(p, seat + 1).captured))
    return most


Visit = Callable[[GoState, int, str], None]


def play_game(
    options: GoOptions, movers: dict[int, str], rng: random.Random, visit: Visit | None = None
) -> tuple[GoState, int]:
    """A whole game through the engine, each seat played by the bot ``movers[seat]``; ``visit(state,
    seat, action)`` sees every action before it is applied. Returns the final state and the actions."""
    bots = {seat: GO_CLIENT.strategy(name, rng) for seat, name in movers.items()}
    state = GO.new_game(options)
    actions = 0
    limit = move_cap(options.size) + 10
    while not GO.is_over(state):
        seat = GO.to_move(state)
        assert seat is not None
        update = update_of(state, seat, sequence=actions + 1)
        text = action_text(bots[seat](update, seat))
        assert text in update.legal_actions, (text, list(update.legal_actions)[:5])
        if visit is not None:
            visit(state, seat, text)
        state = apply(state, seat, text)
        actions += 1
        assert actions < limit, "a bot game did not end"
    return state, actions


@pytest.mark.parametrize("size", [9, 13])
@pytest.mark.parametrize(
    ("black", "white"), [("random", "random"), ("greedy", "greedy"), ("greedy", "random")]
)
def test_bot_games_end_with_the_count_accepted(size: int, black: str, white: str) -> None:
    movers = {0: black, 1: white}
    eye_fills: list[str] = []
    missed_captures: list[str] = []
    captures = 0

    def check(state: GoState, seat: int, action: str) -> None:
        nonlocal captures
        if state.phase is not Phase.PLAY:
            assert action == "accept"  # bots accept the count, never resume it
            return
        board = state.board
        if action != "pass":
            point = parse_point(board.size, action)
            if point in eyes(board, seat + 1):
                eye_fills.append(f"{movers[seat]} {action} at move {len(state.moves)}")
        if movers[seat] == "greedy" and len(state.moves) < move_cap(board.size):
            most = best_capture(state, seat)
            if most:
                captures += 1
                taken = (
                    0
                    if action == "pass"
                    else len(board.play(parse_point(board.size, action), seat + 1).captured)
                )
                if taken != most:
                    missed_captures.append(
                        f"{action} takes {taken}, {most} possible, move {len(state.moves)}"
                    )

    for game in range(3):
        state, actions = play_game(GoOptions(size=size), movers, random.Random(game * 31 + size), check)
        assert state.phase is Phase.OVER
        assert state.accepted == (True, True)
        outcome = GO.outcome(state)
        assert outcome is not None
        assert "both players accepted the count" in outcome.detail
        assert len(state.moves) <= move_cap(size) + 2
        assert state.moves[-2:] == (-1, -1)  # two passes
        assert actions == len(state.moves) + 2  # and two accepts
    assert not eye_fills
    assert not missed_captures
    if "greedy" in movers.values() and "random" in movers.values():
        assert captures > 0  # the greedy bot had captures to take, and took them


def test_the_random_bot_never_fills_its_own_eyes_and_then_passes() -> None:
    # Black's only empty points are single eyes (A9 in the corner, C7 inside, J5 on the edge): it passes.
    rows = [
        ".XXXXXXXX",
        "XXXXXXXXX",
        "XX.XXXXXX",
        "XXXXXXXXX",
        "XXXXXXXX.",
        "XXXXXXXXX",
        "XXXXXXXXX",
        "OOOOOOOOO",
        "O.O.O.O.O",
    ]
    state = position(rows, turn=0)
    board = state.board
    assert {board.geometry.names[p] for p in eyes(board, 1)} == {"A9", "C7", "J5"}
    for p in eyes(board, 1):
        assert own_eye(board, p, 1)
        assert not own_eye(board, p, 2)
    update = update_of(state, 0)
    assert {"A9", "C7", "J5"} <= set(update.legal_actions)
    rng = random.Random(5)
    assert {random_action(update, 0, rng) for _ in range(20)} == {"pass"}
    assert {greedy_action(update, 0, rng) for _ in range(20)} == {"pass"}
    # White to move: its own eyes on row 1 are not played either, but Black's eyes may be (they capture
    # nothing here: suicide, so not legal).
    white = update_of(position(rows, turn=1), 1)
    assert random_action(white, 1, rng) == "pass"


def test_the_random_bot_plays_every_other_point() -> None:
    state = position(["." * 9] * 7 + ["..X......", "XX.X....."], turn=0)
    update = update_of(state, 0)
    rng = random.Random(1)
    chosen = {random_action(update, 0, rng) for _ in range(2000)}
    assert "C1" not in chosen  # a single eye on the edge
    assert len(chosen) == 81 - 4 - 1


def test_the_greedy_bot_takes_the_largest_capture() -> None:
    # White's A1-A2-B1 (3 stones, last liberty C1), H1-J1 (2 stones, G1) and E5 (1 stone, E4).
    rows = [
        ".........",
        ".........",
        ".........",
        "....X....",
        "...XOX...",
        ".........",
        "X........",
        "OX.....XX",
        "OO.....OO",
    ]
    state = position(rows, turn=0)
    board = state.board
    assert [board.liberties(parse_point(9, name)) for name in ("A1", "H1", "E5")] == [1, 1, 1]
    update = update_of(state, 0)
    for seed in range(5):
        assert greedy_action(update, 0, random.Random(seed)) == "C1"
    assert len(board.play(parse_point(9, "C1"), 1).captured) == 3
    # Without the big one, the next biggest.
    rows[7], rows[8] = "XX.....XX", "X......OO"
    assert greedy_action(update_of(position(rows, turn=0), 0), 0, random.Random(0)) == "G1"


def test_the_greedy_bot_escapes_atari() -> None:
    # Black's D5 is in atari (White on D6, C5, E5); D4 gives it three liberties: Black extends there.
    rows = [
        ".........",
        ".........",
        ".........",
        "...O.....",
        "..OXO....",
        ".........",
        ".........",
        ".........",
        ".........",
    ]
    state = position(rows, turn=0)
    assert state.board.liberties(parse_point(9, "D5")) == 1
    update = update_of(state, 0)
    for seed in range(5):
        assert greedy_action(update, 0, random.Random(seed)) == "D4"
    assert liberties_after(state.board, parse_point(9, "D4"), 1) == 3
    # A ladder-like extension that would still leave one liberty is not a rescue: the bot plays elsewhere.
    rows = [
        ".........",
        ".........",
        ".........",
        "...O.....",
        "..OXO....",
        "..O.O....",
        ".........",
        ".........",
        ".........",
    ]
    state = position(rows, turn=0)
    update = update_of(state, 0)
    assert "D4" in update.legal_actions
    assert liberties_after(state.board, parse_point(9, "D4"), 1) == 1
    assert greedy_action(update, 0, random.Random(0)) not in ("D4", "pass")


def test_the_greedy_bot_extends_next_to_its_stones_and_avoids_self_atari() -> None:
    state = position(["." * 9] * 4 + ["....X...."] + ["." * 9] * 4, turn=0)
    update = update_of(state, 0)
    chosen = {greedy_action(update, 0, random.Random(seed)) for seed in range(30)}
    assert chosen <= {"E6", "E4", "D5", "F5"}
    # On an empty board it plays somewhere.
    empty = update_of(GO.new_game(GoOptions(size=9)), 0)
    assert greedy_action(empty, 0, random.Random(0)) not in (None, "pass")


def test_the_bots_pass_from_the_move_cap_on_and_accept_the_count_once() -> None:
    assert (move_cap(9), move_cap(13), move_cap(19)) == (121, 253, 541)
    state = GO.new_game(GoOptions(size=9))
    update = update_of(state, 0)
    update.view.go.move_number = move_cap(9)
    rng = random.Random(0)
    assert random_action(update, 0, rng) == "pass"
    assert greedy_action(update, 0, rng) == "pass"
    count = counted(state)
    for name in ("random", "greedy"):
        bot = GO_CLIENT.strategy(name, rng)
        for seat in (0, 1):
            assert action_text(bot(update_of(count, seat), seat)) == "accept"
        accepted = apply(count, 0, "accept")
        assert list(update_of(accepted, 0).legal_actions) == ["resume"]
        assert bot(update_of(accepted, 0), 0) is None  # it waits, never resumes
        assert action_text(bot(update_of(accepted, 1), 1)) == "accept"
        # Nothing to do, nothing sent: not its turn, or the game is over.
        assert bot(update_of(GO.new_game(GoOptions(size=9)), 1), 1) is None
        assert bot(update_of(apply(accepted, 1, "accept"), 0), 0) is None


@pytest.mark.parametrize("black", ["random", "greedy"])
def test_bot_games_on_the_big_board_end(black: str) -> None:
    state, _ = play_game(GoOptions(size=19), {0: black, 1: black}, random.Random(19))
    assert state.phase is Phase.OVER
    assert len(state.moves) <= move_cap(19) + 2


def test_a_handicap_game_between_bots_ends() -> None:
    state, _ = play_game(GoOptions(size=13, handicap=4), {0: "greedy", 1: "random"}, random.Random(4))
    assert state.phase is Phase.OVER


def test_the_greedy_bot_beats_the_random_bot() -> None:
    wins = 0
    for game in range(10):
        greedy_seat = game % 2
        movers = {greedy_seat: "greedy", 1 - greedy_seat: "random"}
        state, _ = play_game(GoOptions(size=9), movers, random.Random(100 + game))
        outcome = GO.outcome(state)
        assert outcome is not None
        wins += outcome.winner == greedy_seat
    assert wins >= 8, f"the greedy bot won only {wins} of 10"
