"""The backgammon client without a server: the board as text, typed input, options and the two bots,
driven by the engine itself (dice from a seeded generator, views mapped to the contract's proto)."""

from __future__ import annotations

import random

import pytest
from skillclassics.backgammon.v1 import backgammon_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import InputError, family, family_of_match
from clients.families.backgammon import FAMILY as BACKGAMMON_CLIENT
from clients.families.backgammon import cube_decision, greedy_action, random_action
from libs.engines.backgammon import (
    BACKGAMMON,
    BackgammonOptions,
    BackgammonState,
    Position,
    Variant,
    legal_plays,
    pip_count,
    replay,
)
from libs.engines.base import ActionContext
from tests.clients.backgammon_views import update_of

CLOCKS = ActionContext(remaining_ms=(0, 0))


def opened(dice: tuple[int, int] = (6, 5), **options: object) -> BackgammonState:
    """A new match after its opening roll (White moves with 6-5 by default)."""
    return replay(BackgammonOptions(**options), [dice])  # type: ignore[arg-type]


def action_text(action: rules_pb2.Action | None) -> str:
    assert action is not None
    assert action.WhichOneof("kind") == "backgammon"
    return action.backgammon.action


def board_update(
    position: Position, *, to_move: int = 0, legal: list[str] | None = None, **fields: object
) -> rules_pb2.MatchUpdate:
    view = backgammon_pb2.BackgammonView(
        board=backgammon_pb2.Board(
            points=list(position.points), bar=list(position.bar), off=list(position.off)
        ),
        pips=[pip_count(position, 0), pip_count(position, 1)],
        **fields,  # type: ignore[arg-type]
    )
    return rules_pb2.MatchUpdate(
        match_id="backgammon.0.t",
        status=rules_pb2.MATCH_STATUS_LIVE,
        view=rules_pb2.View(backgammon=view),
        to_move=to_move,
        legal_actions=legal or [],
    )


# -- the registry ----------------------------------------------------------------------------------------


def test_backgammon_is_in_the_registry() -> None:
    assert family("backgammon") is BACKGAMMON_CLIENT
    assert family_of_match("backgammon.0.abc") is BACKGAMMON_CLIENT
    assert BACKGAMMON_CLIENT.uses_chance
    assert BACKGAMMON_CLIENT.seat_label(0) == "White"
    assert BACKGAMMON_CLIENT.seat_label(1) == "Black"


# -- the board -------------------------------------------------------------------------------------------

START_BOARD = """\
 +13-14-15-16-17-18------19-20-21-22-23-24-+
 | X           O    |   | O              X |
 | X           O    |   | O              X |
 | X           O    |   | O                |
 | X                |   | O                |
 | X                |   | O                |
 |                  |BAR|                  |
 | O                |   | X                |
 | O                |   | X                |
 | O           X    |   | X                |
 | O           X    |   | X              O |
 | O           X    |   | X              O |
 +12-11-10--9--8--7-------6--5--4--3--2--1-+"""


def test_the_start_position_from_either_side() -> None:
    state = opened((6, 5), cube=True, match_to=5)
    # Either player sees their own 24-point top right, their home board bottom right: the same picture.
    assert BACKGAMMON_CLIENT.render(update_of(state, 0), 0) == START_BOARD + "\n" + "\n".join(
        [
            "X: White (you)  pips 167  bar 0  off 0",
            "O: Black  pips 167  bar 0  off 0",
            "cube: 1, centred",
            "match to 5, game 1: White (you) 0, Black 0",
            "you to play 6-5: 7 legal plays (? lists them; type a play or its number)",
        ]
    )
    assert BACKGAMMON_CLIENT.render(update_of(state, 1), 1) == START_BOARD + "\n" + "\n".join(
        [
            "X: Black (you)  pips 167  bar 0  off 0",
            "O: White  pips 167  bar 0  off 0",
            "cube: 1, centred",
            "match to 5, game 1: White 0, Black (you) 0",
            "White to play 6-5: 7 legal plays",
        ]
    )


def test_rolls_are_written_the_higher_die_first() -> None:
    black_opens = opened((5, 6))  # White's die 5, Black's 6: Black plays 6-5
    assert black_opens.dice == (5, 6)
    assert BACKGAMMON_CLIENT.render(update_of(black_opens, 1), 1).endswith(
        "you to play 6-5: 7 legal plays (? lists them; type a play or its number)"
    )
    assert BACKGAMMON_CLIENT.describe_legal(update_of(black_opens, 1)).startswith("6-5: 7 legal plays")


def test_a_position_with_checkers_on_the_bar_and_borne_off() -> None:
    # White: 7 on its 6-point (absolute 19), 3 on its 5 (20), a blot on its 13 (12), 2 on the bar, 2 off.
    # Black: 2 on absolute 23 (White's 2-point), 5 on 3, 2 on 6, 1 on the bar, 5 off.
    position = Position.from_counts({19: 7, 20: 3, 12: 1}, {23: 2, 3: 5, 6: 2}, bar=(2, 1), off=(2, 5))
    update = board_update(
        position,
        legal=["double", "resign single", "roll"],
        phase=backgammon_pb2.PHASE_ROLL_OR_DOUBLE,
        cube_value=2,
        cube_owner=0,
        match_to=7,
        score=[6, 4],
        crawford=False,
        last_play="6/2* 5/2",
        last_seat=1,
        game_number=3,
    )
    assert BACKGAMMON_CLIENT.render(update, 0) == "\n".join(
        [
            " +13-14-15-16-17-18------19-20-21-22-23-24-+",
            " | X                |   | O        O       |",
            " |                  |   | O        O       |",
            " |                  |   |          O       |",
            " |                  |   |          O       |",
            " |                  | O |          O       |",
            " |                  |BAR|                  |",
            " |                  | X | 7                |",
            " |                  | X | X                |",
            " |                  |   | X  X             |",
            " |                  |   | X  X        O    |",
            " |                  |   | X  X        O    |",
            " +12-11-10--9--8--7-------6--5--4--3--2--1-+",
            "X: White (you)  pips 120  bar 2  off 2",
            "O: Black  pips 98  bar 1  off 5",
            "cube: 2, owned by you",
            "match to 7, game 3: White (you) 6, Black 4",
            "last: Black played 6/2* 5/2",
            "you to roll or double",
        ]
    )
    # Black's side: its own numbering is the absolute one; White's checkers are now the Os.
    assert BACKGAMMON_CLIENT.render(update, 1).splitlines()[:13] == [
        " +13-14-15-16-17-18------19-20-21-22-23-24-+",
        " |                  |   | O  O        X    |",
        " |                  |   | O  O        X    |",
        " |                  |   | O  O             |",
        " |                  | O | O                |",
        " |                  | O | 7                |",
        " |                  |BAR|                  |",
        " |                  | X |          X       |",
        " |                  |   |          X       |",
        " |                  |   |          X       |",
        " |                  |   | X        X       |",
        " | O                |   | X        X       |",
        " +12-11-10--9--8--7-------6--5--4--3--2--1-+",
    ]


def test_the_phase_lines_say_who_does_what() -> None:
    start = Position.start()
    doubled = board_update(
        start, to_move=1, legal=["drop", "take"], phase=backgammon_pb2.PHASE_DOUBLED, cube_value=1
    )
    assert BACKGAMMON_CLIENT.render(doubled, 1).endswith(
        "White doubled (the cube was at 1): you to answer, take or drop"
    )
    doubled.view.backgammon.cube_offered = 2
    assert BACKGAMMON_CLIENT.render(doubled, 1).endswith("White doubled to 2: you to answer, take or drop")
    forfeited = board_update(
        start,
        phase=backgammon_pb2.PHASE_ROLL_OR_DOUBLE,
        last_seat=1,
        last_dice=[6, 6],
        last_turn_forfeited=True,
        message="Black rolled 6-6: no legal play, turn forfeited",
        variant=backgammon_pb2.VARIANT_NACKGAMMON,
    )
    assert BACKGAMMON_CLIENT.render(forfeited, 0).splitlines()[-4:] == [
        "cube: 1, centred",
        "variant: nackgammon",
        "last: Black rolled 6-6: no legal play, turn forfeited",
        "you to roll or double",
    ]
    offered = board_update(
        start,
        to_move=0,
        legal=["accept", "reject"],
        phase=backgammon_pb2.PHASE_RESIGN_OFFERED,
        resign_offered=1,
    )
    assert BACKGAMMON_CLIENT.render(offered, 0).endswith(
        "Black offered to resign a single game: you to accept or reject"
    )
    between = board_update(
        start,
        to_move=1,
        legal=["continue"],
        phase=backgammon_pb2.PHASE_BETWEEN_GAMES,
        continued=[0],
        game_number=2,
    )
    assert BACKGAMMON_CLIENT.render(between, 1).endswith("game 2 over: waiting for you to continue")
    crawford = board_update(
        start, phase=backgammon_pb2.PHASE_ROLLING, match_to=3, score=[2, 0], crawford=True
    )
    assert "match to 3, game 0: White (you) 2, Black 0, Crawford game" in BACKGAMMON_CLIENT.render(
        crawford, 0
    )


def test_the_legal_plays_are_listed_numbered() -> None:
    update = update_of(opened((6, 5)), 0)
    assert BACKGAMMON_CLIENT.describe_legal(update) == "\n".join(
        [
            "6-5: 7 legal plays",
            "  1. 13/2         3. 13/8 13/7    5. 24/18 13/8   7. 8/3 8/2",
            "  2. 13/7 8/3     4. 24/13        6. 24/18 8/3",
            "also: resign single",
        ]
    )
    assert (
        BACKGAMMON_CLIENT.describe_legal(update_of(opened((6, 5)), 1))
        == "nothing to play now (not your turn)"
    )
    decide = board_update(Position.start(), legal=["double", "resign single", "roll"])
    assert BACKGAMMON_CLIENT.describe_legal(decide) == "double, resign single, roll"


# -- typed input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "action"),
    [
        ("24/18 13/8", "24/18 13/8"),
        ("13/8 24/18", "24/18 13/8"),  # any order
        ("24/18 18/13", "24/13"),  # split steps: the canonical notation
        ("  24/13 ", "24/13"),
        ("4", "24/13"),  # the 4th listed play
        ("1", "13/2"),
        ("13/7/2", "13/2"),
    ],
)
def test_plays_are_read_against_the_listed_plays(typed: str, action: str) -> None:
    update = update_of(opened((6, 5)), 0)
    assert action_text(BACKGAMMON_CLIENT.parse(typed, update)) == action
    assert action in update.legal_actions


@pytest.mark.parametrize(
    ("typed", "action"),
    [
        ("roll", "roll"),
        ("R", "roll"),
        ("double", "double"),
        ("d", "double"),
        ("take", "take"),
        ("t", "take"),
        ("drop", "drop"),
        ("pass", "drop"),
        ("p", "drop"),
        ("beaver", "beaver"),
        ("accept", "accept"),
        ("reject", "reject"),
        ("continue", "continue"),
        ("c", "continue"),
        ("resign single", "resign single"),
        ("resign gammon", "resign gammon"),
        ("Resign  Backgammon", "resign backgammon"),
        ("resign g", "resign gammon"),
        # without a position to read them against, plays go as typed (the server reads them)
        ("24/18 13/8", "24/18 13/8"),
        ("bar/22*", "bar/22*"),
        ("6/off(2)", "6/off(2)"),
        ("3", "3"),
    ],
)
def test_words_and_plays_are_read(typed: str, action: str) -> None:
    assert action_text(BACKGAMMON_CLIENT.parse(typed)) == action


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("", "type an action"),
        ("resign", "resign alone gives up the whole match"),
        ("resign everything", "resign single, resign gammon or resign backgammon"),
        ("24-18", "cannot read '24-18' as a backgammon action"),
        ("hello", "cannot read 'hello'"),
        ("13/7", "'13/7' is not a legal play with 6-5; '?' lists the legal plays"),
        ("9", "no play number 9: 7 legal plays with 6-5"),
        ("18/24", "18/24"),
    ],
)
def test_unreadable_or_unlisted_input(typed: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        BACKGAMMON_CLIENT.parse(typed, update_of(opened((6, 5)), 0))
    assert message in str(raised.value)


def test_a_question_mark_lists_the_plays() -> None:
    update = update_of(opened((6, 5)), 0)
    with pytest.raises(InputError) as raised:
        BACKGAMMON_CLIENT.parse("?", update)
    assert str(raised.value) == BACKGAMMON_CLIENT.describe_legal(update)


def test_only_the_runtimes_resignation_goes_out_of_turn() -> None:
    assert BACKGAMMON_CLIENT.needs_turn(BACKGAMMON_CLIENT.parse("roll"))
    assert BACKGAMMON_CLIENT.needs_turn(BACKGAMMON_CLIENT.parse("resign single"))
    assert not BACKGAMMON_CLIENT.needs_turn(rules_pb2.Action(resign=rules_pb2.Resign()))


# -- options ---------------------------------------------------------------------------------------------


def test_options() -> None:
    plain = BACKGAMMON_CLIENT.options({})
    assert plain.backgammon == backgammon_pb2.BackgammonOptions(variant=backgammon_pb2.VARIANT_STANDARD)
    assert BACKGAMMON_CLIENT.describe_options(plain) == "standard, one game"
    match = BACKGAMMON_CLIENT.options(
        {"variant": "Nackgammon", "match_to": "5", "cube": "on", "auto_roll": "yes"}
    )
    assert match.backgammon == backgammon_pb2.BackgammonOptions(
        variant=backgammon_pb2.VARIANT_NACKGAMMON, match_to=5, cube=True, auto_roll=True
    )
    assert BACKGAMMON_CLIENT.describe_options(match) == "nackgammon, match to 5, cube, auto roll"
    for settings, message in (
        ({"ruleset": "fide"}, "backgammon has no option ruleset"),
        ({"variant": "plakoto"}, "standard, nackgammon or hypergammon, not 'plakoto'"),
        ({"match_to": "26"}, "from 0 to 25, not '26'"),
        ({"cube": "maybe"}, "cube must be on or off"),
    ):
        with pytest.raises(InputError, match=message):
            BACKGAMMON_CLIENT.options(settings)


# -- bots ------------------------------------------------------------------------------------------------

TABLES = [
    BackgammonOptions(),
    BackgammonOptions(cube=True),
    BackgammonOptions(cube=True, match_to=3),
    BackgammonOptions(cube=True, beavers=True, gammons=True),
    BackgammonOptions(variant=Variant.HYPERGAMMON, cube=True, match_to=2),
    BackgammonOptions(variant=Variant.NACKGAMMON, auto_bearoff=True),
]


def play_game(
    options: BackgammonOptions,
    movers: dict[int, str],
    dice: random.Random,
    bots_rng: random.Random,
    visit: object = None,
    *,
    max_actions: int = 3000,
) -> BackgammonState:
    """A whole match through the engine, each seat played by the bot ``movers[seat]``; ``visit(update,
    seat)`` sees every update in which a seat has something to do."""
    bots = {seat: BACKGAMMON_CLIENT.strategy(name, bots_rng) for seat, name in movers.items()}
    state = BACKGAMMON.new_game(options)
    actions = 0
    while not BACKGAMMON.is_over(state):
        request = BACKGAMMON.chance_needed(state)
        if request is not None:
            state = BACKGAMMON.apply_chance(state, request, (dice.randint(1, 6), dice.randint(1, 6)))
            continue
        seat = BACKGAMMON.to_move(state)
        assert seat is not None
        update = update_of(state, seat, sequence=actions + 1)
        if callable(visit):
            visit(update, seat)
        text = action_text(bots[seat](update, seat))
        assert text in update.legal_actions
        state = BACKGAMMON.apply(state, seat, text, CLOCKS)
        actions += 1
        assert actions < max_actions, "a bot game did not end"
    return state


def test_both_bots_always_choose_a_listed_action() -> None:
    dice, choices = random.Random(2026), random.Random(7)
    rngs = {name: random.Random(11) for name in BACKGAMMON_CLIENT.strategies}
    seen: list[str] = []

    def check(update: rules_pb2.MatchUpdate, seat: int) -> None:
        # Every strategy is asked about every state, whichever one moves.
        for name in BACKGAMMON_CLIENT.strategies:
            chosen = action_text(BACKGAMMON_CLIENT.strategy(name, rngs[name])(update, seat))
            assert chosen in update.legal_actions, (name, chosen, list(update.legal_actions))
        phase = update.view.backgammon.phase
        seen.append(backgammon_pb2.Phase.Name(phase))

    for game in range(24):
        options = TABLES[game % len(TABLES)]
        movers = {0: choices.choice(["random", "greedy"]), 1: choices.choice(["random", "greedy"])}
        play_game(options, movers, dice, random.Random(game), check)
    assert len(seen) >= 500
    assert {"PHASE_MOVE", "PHASE_ROLL_OR_DOUBLE", "PHASE_DOUBLED", "PHASE_BETWEEN_GAMES"} <= set(seen)


def test_the_random_bot_never_offers_to_resign_and_always_continues() -> None:
    rng = random.Random(3)
    decide = board_update(Position.start(), legal=["double", "resign single", "roll"])
    assert {random_action(decide, rng) for _ in range(50)} == {"double", "roll"}
    doubled = board_update(Position.start(), legal=["drop", "take"])
    assert {random_action(doubled, rng) for _ in range(50)} == {"drop", "take"}
    between = board_update(Position.start(), legal=["continue"])
    assert random_action(between, rng) == "continue"
    assert random_action(board_update(Position.start()), rng) is None


def test_the_heuristic_bot_beats_the_random_bot() -> None:
    dice = random.Random(50)
    wins = 0
    for game in range(50):
        greedy_seat = game % 2
        movers = {greedy_seat: "greedy", 1 - greedy_seat: "random"}
        state = play_game(BackgammonOptions(cube=game % 4 == 0), movers, dice, random.Random(game))
        outcome = BACKGAMMON.outcome(state)
        assert outcome is not None
        wins += outcome.winner == greedy_seat
    assert wins >= 40, f"the heuristic bot won only {wins} of 50"


def choose(position: Position, dice: tuple[int, int], seat: int = 0) -> str:
    """The heuristic bot's play for ``seat`` with ``dice`` in ``position``."""
    plays = legal_plays(position, seat, dice)
    update = board_update(
        position,
        to_move=seat,
        legal=sorted(play.notation for play in plays),
        phase=backgammon_pb2.PHASE_MOVE,
        dice=list(dice),
        legal_plays=[play.notation for play in plays],
    )
    chosen = greedy_action(update, seat, random.Random(0))
    assert chosen is not None
    return chosen


def test_the_heuristic_bot_makes_points_hits_and_bears_off() -> None:
    start = Position.start()
    assert choose(start, (3, 1)) == "8/5 6/5"  # makes the 5-point
    assert choose(start, (6, 1)) == "13/7 8/7"  # makes the bar point
    # A Black blot on White's 18-point (absolute 7) in reach of a 6 from White's 24: White hits it.
    blot = Position.from_counts({1: 2, 12: 5, 17: 3, 19: 5}, {24: 2, 13: 5, 8: 3, 6: 4, 7: 1})
    assert "*" in choose(blot, (6, 2))
    # A race in the home board: two checkers off with 6-5, not moving inside.
    race = Position.from_counts({19: 3, 20: 3, 22: 2, 24: 2}, {1: 3, 2: 3, 3: 3})
    assert choose(race, (6, 5)) == "6/off 5/off"
    # Bringing the last straggler home first when a die cannot bear off yet.
    straggler = Position.from_counts({15: 1, 22: 4, 23: 4}, {1: 3, 2: 3})
    assert choose(straggler, (6, 2)).startswith("10/4")


def test_the_cube_by_pip_count() -> None:
    decide, doubled = backgammon_pb2.PHASE_ROLL_OR_DOUBLE, backgammon_pb2.PHASE_DOUBLED
    # A pure race: White far ahead.
    race = Position.from_counts({20: 5, 21: 5, 22: 5}, {18: 5, 17: 5, 16: 5})
    view = board_update(race, phase=decide).view.backgammon
    assert (pip_count(race, 0), pip_count(race, 1)) == (60, 255)
    assert cube_decision(view, 0)  # 255 > 60 * 1.08: double
    assert not cube_decision(view, 1)  # behind: never doubles
    view.phase = doubled
    assert not cube_decision(view, 1)  # 255 > 60 * 1.12: drop
    assert cube_decision(view, 0)
    # Close races: 100 against 107 is under 8% (no double); 100 against 109 is over it.
    close = Position.from_counts({19: 10}, {7: 1, 1: 14}, checkers=15)
    view = board_update(close, phase=decide).view.backgammon
    view.ClearField("pips")
    view.pips.extend([100, 107])
    assert not cube_decision(view, 0)
    view.pips[1] = 109
    assert cube_decision(view, 0)
    # Takes: behind by 12% at most takes, by more drops.
    view.phase = doubled
    view.pips[:] = [112, 100]
    assert cube_decision(view, 0)
    view.pips[:] = [113, 100]
    assert not cube_decision(view, 0)
    # With contact the bot never doubles (the start position), and takes unless far behind.
    start = board_update(Position.start(), phase=decide).view.backgammon
    assert not cube_decision(start, 0)
    start.phase = doubled
    assert cube_decision(start, 1)


def test_the_heuristic_bot_answers_cube_resign_and_continue() -> None:
    rng = random.Random(1)
    race = Position.from_counts({20: 5, 21: 5, 22: 5}, {18: 5, 17: 5, 16: 5})
    assert greedy_action(board_update(race, legal=["double", "resign single", "roll"]), 0, rng) == "double"
    update = board_update(race, to_move=1, legal=["drop", "take"], phase=backgammon_pb2.PHASE_DOUBLED)
    assert greedy_action(update, 1, rng) == "drop"
    assert greedy_action(board_update(race, legal=["accept", "reject"]), 0, rng) == "accept"
    assert greedy_action(board_update(race, legal=["continue"]), 0, rng) == "continue"
    assert greedy_action(board_update(race), 0, rng) is None


def test_advantage_is_match_points_then_the_race() -> None:
    race = Position.from_counts({20: 5, 21: 5, 22: 5}, {18: 5, 17: 5, 16: 5})
    update = board_update(race, match_to=5, score=[1, 2])
    assert BACKGAMMON_CLIENT.advantage(update, 0) == -1000 + 195
    assert BACKGAMMON_CLIENT.advantage(update, 1) == 1000 - 195
