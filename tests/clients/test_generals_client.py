"""The Game of the Generals client without a server: the board as text (never an opposing rank), typed
input and the setup helpers, the clock, and the two bots playing whole games through the engine (views
mapped to the contract's proto by the rules service's own mapping)."""

from __future__ import annotations

import random
import re

import pytest
from skillclassics.generals.v1 import generals_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import InputError, family, family_of_match
from clients.families.generals import FAMILY as GENERALS_CLIENT
from clients.families.generals import (
    GUARDS,
    GeneralsClient,
    Knowledge,
    greedy_setup,
    own_pieces,
    random_action,
    random_setup,
)
from libs.engines.generals import (
    CODES,
    FAR_RANK,
    GENERALS,
    HOME,
    NAMES,
    NEIGHBORS,
    GeneralsState,
    Phase,
    check_setup,
    formation_to_setup,
    placements_text,
)
from libs.engines.generals.pieces import FLG, LT2, PVT, SGT, SPY
from tests.clients.generals_views import apply, play_game, update_of

FORMATION = (
    "a1=MAJ b1=CPT c1=SPY d1=FLG e1=4* f1=COL g1=LTC h1=1* a2=2* d2=3* e2=5* h2=SPY "
    "a3=PVT b3=PVT c3=SGT d3=PVT e3=2LT f3=PVT g3=1LT h3=PVT i3=PVT"
)
"""A complete formation (row 1 the owner's back row) used for both seats."""

CODE_PATTERN = re.compile("|".join(re.escape(code) for code in sorted(CODES.values(), key=len, reverse=True)))


def action_text(action: rules_pb2.Action | None) -> str:
    assert action is not None
    assert action.WhichOneof("kind") == "generals"
    return action.generals.action


def set_up(coin: int = 0) -> GeneralsState:
    """Both seats arranged with :data:`FORMATION` and ready; ``coin`` moves first."""
    state = GENERALS.new_game()
    state = apply(state, 0, "setup " + formation_to_setup(FORMATION, 0))
    state = apply(state, 1, "setup " + formation_to_setup(FORMATION, 1))
    state = apply(apply(state, 1, "ready"), 0, "ready")
    request = GENERALS.chance_needed(state)
    assert request is not None
    return GENERALS.apply_chance(state, request, (coin,))


def board_cells(text: str) -> dict[str, str]:
    """The squares of a rendered board and what each shows."""
    lines = text.splitlines()
    files = lines[0].split()
    cells = {}
    for line in lines[1:9]:
        parts = line.split()
        rank = parts[0]
        for file, cell in zip(files, parts[1:10], strict=True):
            cells[f"{file}{rank}"] = cell
    return cells


# -- the registry, seats and the clock -------------------------------------------------------------------


def test_generals_is_in_the_registry() -> None:
    assert family("generals") is GENERALS_CLIENT
    assert family_of_match("generals.0.abc") is GENERALS_CLIENT
    assert GENERALS_CLIENT.uses_chance
    assert GENERALS_CLIENT.option_names == ()
    assert GENERALS_CLIENT.strategies[:2] == ("random", "greedy")
    assert GENERALS_CLIENT.seat_label(0) == "White"
    assert GENERALS_CLIENT.seat_label(1) == "Black"
    assert GENERALS_CLIENT.options({}).WhichOneof("family") == "generals"
    with pytest.raises(InputError, match="no option"):
        GENERALS_CLIENT.options({"ruleset": "fide"})
    with pytest.raises(InputError, match="generals bots are random, greedy"):
        GENERALS_CLIENT.strategy("psychic", random.Random(0))


def test_the_clock_is_per_move_with_three_strikes() -> None:
    quick = GENERALS_CLIENT.time_control(GENERALS_CLIENT.quick_minutes)
    assert quick == rules_pb2.TimeControl(base_ms=0, periods=3, period_ms=60_000)
    assert GENERALS_CLIENT.time_control(0.5).period_ms == 30_000
    assert GENERALS_CLIENT.time_control(2).period_ms == 120_000
    for minutes, increment in ((5, 0), (1.5, 0), (1, 2)):
        with pytest.raises(InputError, match="per move"):
            GENERALS_CLIENT.time_control(minutes, increment)
    # What the lobby offers (services/rules_generals/family.py).
    from services.rules_generals.family import GeneralsFamily

    for minutes in (0.5, 1, 2):
        assert GeneralsFamily.lobby_clocks.problem(GENERALS_CLIENT.time_control(minutes)) is None


# -- the board -------------------------------------------------------------------------------------------

WHITE_AFTER_A_TRADE = """\
        a     b     c     d     e     f     g     h     i
 8     ..    ??    ??    ??    ??    ??    ??    ??    ??   8
 7     ..    ??    ..    ..    ??    ??    ..    ..    ??   7
 6     ??    ??    ??    ??    ..    ??    ??    ??    ??   6
 5     ..    ..    ..    ..    ..    ..    ..    ..    ..   5
 4     ..    ..    ..    ..    ..    ..    ..    ..    ..   4
 3    PVT   PVT   SGT   PVT    ..   PVT   1LT   PVT   PVT   3
 2     2*    ..    ..    3*    5*    ..    ..   SPY    ..   2
 1    MAJ   CPT   SPY   FLG    4*   COL   LTC    1*    ..   1
        a     b     c     d     e     f     g     h     i
you are White, at the bottom; ?? an opposing piece
move 3: White (you) e4-e5, a challenge: both pieces were removed (emptied: e5 e4)
lost: White (you) 1 (2LT); Black 1
strikes: White (you) 0, Black 1 (the third loses)
moves 3; 0 in a row without a challenge (60 draw)
Black offers a draw: accept or decline
draw offers left: White (you) 3, Black 2
Black to move
White challenged e5 from e4: both pieces removed; Black offers a draw; Black to move"""


def traded() -> GeneralsState:
    """White's 2LT and Black's 2LT trade on e5; then Black offers a draw."""
    state = set_up(coin=0)
    for seat, move in ((0, "e3-e4"), (1, "e6-e5"), (0, "e4-e5"), (1, "draw")):
        state = apply(state, seat, move)
    return state


def test_the_board_from_whites_side_with_the_last_challenge_losses_strikes_and_an_offer() -> None:
    text = GENERALS_CLIENT.render(update_of(traded(), 0, strikes=(0, 1)), 0)
    assert text == WHITE_AFTER_A_TRADE


def test_black_sees_its_home_at_the_bottom_and_file_i_on_the_left() -> None:
    text = GENERALS_CLIENT.render(update_of(traded(), 1, strikes=(0, 1)), 1)
    lines = text.splitlines()
    assert lines[0].split() == list("ihgfedcba")
    assert lines[1].split()[0] == "1"
    assert lines[8].split()[0] == "8"
    cells = board_cells(text)
    assert cells["f8"] == "FLG"  # the formation's d1, turned half a turn
    assert lines[8].split()[1] == "MAJ"  # the formation's a1 is Black's i8, bottom left
    assert all(cells[f"{f}{r}"] in ("??", "..") for f in "abcdefghi" for r in "123")
    assert "you offered a draw: waiting for the answer" in text
    assert "you to move" in text
    assert "lost: White 1; Black (you) 1 (2LT)" in text
    assert "strikes: White 0, Black (you) 1" in text


def test_a_spectator_sees_no_rank_and_white_at_the_bottom() -> None:
    text = GENERALS_CLIENT.render(update_of(traded(), None), None)
    cells = board_cells(text)
    assert cells["d1"] == "W?"
    assert cells["a6"] == "B?"
    assert not CODE_PATTERN.search("\n".join(text.splitlines()[:10]))
    assert "lost: White 1; Black 1" in text
    assert "Black offers a draw" in text
    assert "accept or decline" not in text


def test_the_setup_shows_the_arrangement_what_is_missing_and_who_is_ready() -> None:
    state = apply(GENERALS.new_game(), 1, "setup " + formation_to_setup(FORMATION, 1))
    state = apply(apply(state, 1, "ready"), 0, "setup a1=FLG b2=PVT")
    text = GENERALS_CLIENT.render(update_of(state, 0), 0)
    cells = board_cells(text)
    assert cells["a1"] == "FLG"
    assert cells["b2"] == "PVT"
    assert sum(cell != ".." for cell in cells.values()) == 2  # not even the opponent's squares
    assert "setup: ready: Black; arranging: White (you)" in text
    assert (
        "placed 2 of 21; to place: 5*, 4*, 3*, 2*, 1*, COL, LTC, MAJ, CPT, 1LT, 2LT, SGT, 5 PVT, 2 SPY"
        in text
    )
    black = GENERALS_CLIENT.render(update_of(state, 1), 1)
    assert "setup: ready: Black (you); arranging: White" in black
    assert "to place" not in black
    assert "arrange your pieces" in GENERALS_CLIENT.describe_legal(update_of(state, 0))


def test_a_finished_game_shows_every_rank_and_no_turn() -> None:
    state, _ = play_game({0: "greedy", 1: "random"}, random.Random(3))
    text = GENERALS_CLIENT.render(update_of(state, 0), 0)
    assert "game over" in text
    assert "to move" not in text
    assert "(" in "".join(board_cells(text).values())  # the opponent's ranks, in parentheses


def test_an_empty_update_still_renders() -> None:
    text = GENERALS_CLIENT.render(rules_pb2.MatchUpdate(), None)
    assert text.splitlines()[1].split()[1:10] == [".."] * 9


def own_codes(view: generals_pb2.GeneralsView, seat: int) -> set[str]:
    codes = {piece.rank for piece in view.pieces if piece.seat == seat and piece.rank}
    codes |= set(view.lost[seat].ranks) if len(view.lost) == 2 else set()
    return codes | set(view.missing)


def test_no_opposing_rank_is_ever_shown_while_the_game_is_on() -> None:
    """Along whole games, every update either seat gets: every opposing piece is ``??`` and no rank code
    appears in the text but the viewer's own (on the board, lost, missing)."""
    checked = 0

    def check(state: GeneralsState, seat: int, action: str) -> None:
        nonlocal checked
        for viewer in (0, 1):
            update = update_of(state, viewer, strikes=(1, 2))
            text = GENERALS_CLIENT.render(update, viewer)
            cells = board_cells(text)
            view = update.view.generals
            for piece in view.pieces:
                expected = piece.rank if piece.seat == viewer else "??"
                assert cells[piece.square] == expected
            assert set(CODE_PATTERN.findall(text)) <= own_codes(view, viewer), text
            checked += 1

    for game in range(4):
        play_game({0: "random", 1: "greedy"}, random.Random(200 + game), visit=check)
    assert checked > 400


# -- typed input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "action"),
    [
        ("b3-b4", "b3-b4"),
        ("B3-B4", "b3-b4"),
        ("b3 b4", "b3-b4"),
        ("b3b4", "b3-b4"),
        (" i8 - i7 ", "i8-i7"),
        ("draw", "draw"),
        ("Accept", "accept"),
        ("decline", "decline"),
        ("READY", "ready"),
        ("setup a1=FLG b1=pvt", "setup a1=FLG b1=PVT"),
        ("setup b1=PVT a1=FLG", "setup a1=FLG b1=PVT"),
        ("setup", "setup"),
        ("clear", "setup"),
    ],
)
def test_actions_are_read(typed: str, action: str) -> None:
    assert action_text(GENERALS_CLIENT.parse(typed)) == action


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("", "type an action"),
        ("b3-b9", "cannot read"),
        ("j1-j2", "cannot read"),
        ("resign please", "cannot read"),
        ("setup a1=XYZ", "not a rank"),
        ("setup a1", "not a placement"),
        ("place a1", "a square and a rank"),
        ("place z9 FLG", "not a square"),
        ("remove", "remove what"),
        ("random now", "random takes nothing"),
    ],
)
def test_unreadable_input(typed: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        GENERALS_CLIENT.parse(typed)


def test_only_moves_wait_for_the_turn() -> None:
    for typed in ("setup a1=FLG", "ready", "draw", "accept", "decline"):
        assert not GENERALS_CLIENT.needs_turn(GENERALS_CLIENT.parse(typed))
    assert GENERALS_CLIENT.needs_turn(GENERALS_CLIENT.parse("b3-b4"))
    assert not GENERALS_CLIENT.needs_turn(rules_pb2.Action(resign=rules_pb2.Resign()))


def test_the_legal_moves_by_square() -> None:
    update = update_of(set_up(coin=0), 0)
    listed = GENERALS_CLIENT.describe_legal(update)
    assert listed.splitlines()[0] == f"{len(update.legal_actions) - 1} moves:"
    assert "  a3: a4" in listed
    assert listed.splitlines()[-1] == "also: draw"
    with pytest.raises(InputError, match="moves:"):
        GENERALS_CLIENT.parse("?", update)
    assert GENERALS_CLIENT.describe_legal(update_of(set_up(coin=1), 0)) == "draw"


# -- the setup helpers -----------------------------------------------------------------------------------


def setup_update(state: GeneralsState, seat: int, client: GeneralsClient) -> rules_pb2.MatchUpdate:
    update = update_of(state, seat)
    client.render(update, seat)  # as the command line does: the client learns the seat
    return update


def test_place_remove_random_and_clear_send_the_whole_arrangement() -> None:
    client = GeneralsClient(random.Random(7))
    state = GENERALS.new_game()
    text = action_text(client.parse("place a1 FLG", update_of(state, 0)))
    assert text == "setup a1=FLG"
    state = apply(state, 0, text)
    text = action_text(client.parse("place b1=PVT c2 SPY", update_of(state, 0)))
    assert text == "setup a1=FLG b1=PVT c2=SPY"
    state = apply(state, 0, text)
    assert action_text(client.parse("c1=pvt", update_of(state, 0))) == "setup a1=FLG b1=PVT c1=PVT c2=SPY"
    # A rank placed as often as a side has it moves: the Flag from a1 to e1.
    assert action_text(client.parse("place e1 FLG", update_of(state, 0))) == "setup b1=PVT e1=FLG c2=SPY"
    # A square taken is replaced.
    assert action_text(client.parse("place a1 SPY", update_of(state, 0))) == "setup a1=SPY b1=PVT c2=SPY"
    assert action_text(client.parse("remove b1 c2", update_of(state, 0))) == "setup a1=FLG"
    with pytest.raises(InputError, match="none of your pieces is on d1"):
        client.parse("remove d1", update_of(state, 0))
    with pytest.raises(InputError, match="not on your home ranks"):
        client.parse("place a6 PVT", update_of(state, 0))
    # random keeps what is placed and fills the rest on free home squares.
    text = action_text(client.parse("random", update_of(state, 0)))
    assert text.startswith("setup ")
    assert "a1=FLG" in text
    assert "b1=PVT" in text
    assert "c2=SPY" in text
    assert check_setup(0, text.removeprefix("setup "), complete=True) == []
    state = apply(state, 0, text)
    assert GENERALS.legal_actions(state, 0) == ["ready"]
    assert action_text(client.parse("clear", update_of(state, 0))) == "setup"


def test_black_places_on_its_own_ranks_and_the_seat_comes_from_the_render() -> None:
    client = GeneralsClient(random.Random(1))
    state = GENERALS.new_game()
    # Nothing placed yet: the squares typed say the side; random needs the seat (learnt from the render).
    assert action_text(client.parse("place e8 FLG", update_of(state, 1))) == "setup e8=FLG"
    with pytest.raises(InputError, match="which side are you"):
        client.parse("random", update_of(state, 1))
    text = action_text(client.parse("random", setup_update(state, 1, client)))
    assert check_setup(1, text.removeprefix("setup "), complete=True) == []
    state = apply(state, 1, text)
    assert GENERALS.legal_actions(state, 1) == ["ready"]


def test_load_a_saved_formation_or_a_written_one() -> None:
    client = GeneralsClient()
    client.set_formations({"Wall": FORMATION})
    state = GENERALS.new_game()
    update = setup_update(state, 1, client)
    expected = "setup " + formation_to_setup(FORMATION, 1)
    assert action_text(client.parse("load Wall", update)) == expected
    assert action_text(client.parse("load wall", update)) == expected
    assert action_text(client.parse(f"load {FORMATION}", update)) == expected
    with pytest.raises(InputError, match=r"no saved formation 'castle' \(saved: Wall\)"):
        client.parse("load castle", update)
    with pytest.raises(InputError, match="load which formation"):
        client.parse("load", update)
    assert GENERALS.legal_actions(apply(state, 1, expected), 1) == ["ready"]


def test_helpers_are_refused_once_the_setup_is_over() -> None:
    with pytest.raises(InputError, match="the setup is over"):
        GENERALS_CLIENT.parse("place a1 FLG", update_of(set_up(), 0))


# -- the bots --------------------------------------------------------------------------------------------


def test_bots_act_during_the_setup_although_setup_is_never_listed() -> None:
    state = GENERALS.new_game()
    for name in ("random", "greedy"):
        bot = GENERALS_CLIENT.strategy(name, random.Random(5))
        for seat in (0, 1):
            update = update_of(state, seat)
            assert list(update.legal_actions) == []
            assert GENERALS_CLIENT.should_act(update, seat)
            text = action_text(bot(update, seat))
            assert text.startswith("setup ")
            arranged = apply(state, seat, text)
            assert action_text(bot(update_of(arranged, seat), seat)) == "ready"
            ready = apply(arranged, seat, "ready")
            assert not GENERALS_CLIENT.should_act(update_of(ready, seat), seat)
            assert bot(update_of(ready, seat), seat) is None
    # Both ready: the coin is awaited, nobody acts.
    for seat in (0, 1):
        state = apply(
            state, seat, "setup " + placements_text(random_setup(seat, random.Random(seat)).items())
        )
        state = apply(state, seat, "ready")
    assert GENERALS.chance_needed(state) is not None
    for seat in (0, 1):
        assert not GENERALS_CLIENT.should_act(update_of(state, seat), seat)


@pytest.mark.parametrize(
    ("white", "black"),
    [("random", "random"), ("greedy", "greedy"), ("greedy", "random"), ("random", "greedy")],
)
def test_bot_games_end_with_every_action_accepted(white: str, black: str) -> None:
    for game in range(6):
        state, actions = play_game({0: white, 1: black}, random.Random(game * 17 + len(white + black)))
        assert state.phase is Phase.OVER
        assert GENERALS.outcome(state) is not None
        assert actions >= 4  # two setups, two readies, then the moves


def test_the_greedy_bot_beats_the_random_bot() -> None:
    wins = losses = 0
    for game in range(30):
        greedy_seat = game % 2
        state, _ = play_game({greedy_seat: "greedy", 1 - greedy_seat: "random"}, random.Random(1000 + game))
        outcome = GENERALS.outcome(state)
        assert outcome is not None
        wins += outcome.winner == greedy_seat
        losses += outcome.winner == 1 - greedy_seat
    assert wins >= 22, f"the greedy bot won only {wins} of 30 ({losses} lost)"
    assert losses <= 4


@pytest.mark.parametrize("seat", [0, 1])
def test_the_greedy_setup_keeps_its_flag_on_the_back_rank_guarded(seat: int) -> None:
    back = set(HOME[seat][:9]) if seat == 0 else set(HOME[seat][18:])
    for seed in range(50):
        arrangement = greedy_setup(seat, random.Random(seed))
        text = placements_text(arrangement.items())
        assert check_setup(seat, text, complete=True) == []
        flag = next(square for square, rank in arrangement.items() if rank == FLG)
        assert flag in back
        around = [n for n in NEIGHBORS[flag] if n in HOME[seat]]
        assert len(around) == 3  # never in a corner: two beside it, one in front
        assert all(arrangement.get(n) in GUARDS for n in around)


def test_the_greedy_bot_never_moves_its_flag_into_a_challenge_and_keeps_it_home_early() -> None:
    flag_moves: list[tuple[int, str]] = []

    def check(state: GeneralsState, seat: int, action: str) -> None:
        if state.phase is not Phase.PLAY or "-" not in action:
            return
        frm, to = action.split("-")
        view = GENERALS.view(state, seat)
        mine = {piece.square: piece.rank for piece in view.pieces if piece.seat == seat}
        if mine.get(frm) == "FLG":
            enemy = {piece.square for piece in view.pieces if piece.seat != seat}
            assert to not in enemy, "a Flag challenged"
            flag_moves.append((state.plies, action))

    for game in range(6):
        play_game({0: "greedy", 1: "greedy"}, random.Random(50 + game), visit=check)
    assert all(plies >= 10 for plies, _ in flag_moves)


def test_offers_are_answered() -> None:
    state = apply(set_up(coin=0), 0, "draw")
    update = update_of(state, 1)
    assert {"accept", "decline"} <= set(update.legal_actions)
    answers = {random_action(update, 1, random.Random(seed)) for seed in range(20)}
    assert answers == {"accept", "decline"}
    # The greedy bot declines when level, accepts when it has lost more pieces.
    greedy = GENERALS_CLIENT.strategy("greedy", random.Random(0))
    assert action_text(greedy(update, 1)) == "decline"
    behind = rules_pb2.MatchUpdate()
    behind.CopyFrom(update)
    behind.view.generals.lost[1].count = 3
    behind.view.generals.lost[0].count = 1
    assert action_text(greedy(behind, 1)) == "accept"
    # Neither bot ever offers a draw.
    for name in ("random", "greedy"):
        bot = GENERALS_CLIENT.strategy(name, random.Random(0))
        assert action_text(bot(update_of(set_up(coin=0), 0), 0)) != "draw"
        assert bot(update_of(set_up(coin=0), 1), 1) is None  # not its turn: nothing to send


def test_what_the_greedy_bot_learns_from_challenges() -> None:
    know = Knowledge()
    state = set_up(coin=0)

    def follow(state: GeneralsState) -> None:
        update = update_of(state, 0)
        know.follow(update, update.view.generals, 0)

    follow(state)
    e5, i5 = NAMES.index("e5"), NAMES.index("i5")
    assert len(know.enemy) == 21
    assert know.odds(NAMES.index("a6"))[FLG] == pytest.approx(1 / 21)
    for seat, move in ((0, "e3-e4"), (1, "i6-i5"), (0, "a3-a4"), (1, "e6-e5")):
        state = apply(state, seat, move)
        follow(state)
    assert i5 in know.moved
    assert e5 in know.moved
    assert know.odds(i5)[FLG] < know.odds(NAMES.index("a6"))[FLG]  # a piece that moved is rarely the Flag
    # White's 2LT takes on Black's piece on e5: both removed, so it was the 2LT, and no other piece is.
    state = apply(state, 0, "e4-e5")
    follow(state)
    assert know.removed[LT2] == 1
    assert e5 not in know.enemy
    assert all(LT2 not in ranks for ranks in know.enemy.values())
    # Odds and expected gains: a Spy gains more than a Sergeant against an unknown piece, the Flag never
    # challenges, and a Private wins rarely.
    a6 = NAMES.index("a6")
    assert know.attack_value(SPY, a6)[0] > know.attack_value(SGT, a6)[0]
    assert know.attack_value(PVT, a6)[1] < 0.5
    assert know.danger(FLG, a6) == pytest.approx(1.0)
    assert set(own_pieces(update_of(state, 0).view.generals, 0).values()) >= {FLG, SPY}
    assert FAR_RANK[0][0] == NAMES.index("a8")
