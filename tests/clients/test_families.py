"""The client families without a server: rendering, typed input, bot strategies, generic text."""

from __future__ import annotations

import random

import chess
import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.gin.v1 import gin_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import (
    InputError,
    UnknownFamily,
    clock_line,
    family,
    family_names,
    family_of_match,
    format_ms,
    result_line,
)
from clients.families.chess import FAMILY as CHESS
from clients.families.chess import greedy_choice, render_board
from clients.families.gin import FAMILY as GIN
from clients.families.gin import arrange, greedy_action, parse_card, show_card

# -- helpers ---------------------------------------------------------------------------------------------


def chess_update(
    fen: str = chess.STARTING_FEN, *, seat_to_move: int | None = 0, **view: object
) -> rules_pb2.MatchUpdate:
    board = chess.Board(fen)
    legal = sorted(move.uci() for move in board.legal_moves)
    chess_view = chess_pb2.ChessView(
        fen=fen,
        legal_moves=[chess_pb2.LegalMove(uci=m, san=board.san(chess.Move.from_uci(m))) for m in legal],
        **view,  # type: ignore[arg-type]
    )
    update = rules_pb2.MatchUpdate(
        match_id="chess.0.t",
        sequence=3,
        status=rules_pb2.MATCH_STATUS_LIVE,
        view=rules_pb2.View(chess=chess_view),
        legal_actions=legal if seat_to_move is not None else [],
    )
    if seat_to_move is not None:
        update.to_move = seat_to_move
    return update


def chess_move(action: rules_pb2.Action | None) -> str:
    assert action is not None
    return action.chess.move


def gin_update(hand: list[str], legal: list[str], *, pile: list[str], phase: int) -> rules_pb2.MatchUpdate:
    view = gin_pb2.GinView(
        variant=gin_pb2.VARIANT_STANDARD,
        hands_to_win=3,
        hand_number=2,
        dealer=1,
        phase=phase,  # type: ignore[arg-type]
        hand=hand,
        discard_pile=pile,
        stock_count=21,
        seats=[gin_pb2.SeatCards(seat=0, card_count=len(hand)), gin_pb2.SeatCards(seat=1, card_count=10)],
        knock_limit=10,
        hand_wins=[1, 0],
        points=[25, 0],
    )
    arranged = arrange(hand)
    view.melds.extend(gin_pb2.Meld(cards=list(meld)) for meld in arranged.melds)
    view.deadwood.extend(arranged.deadwood)
    view.deadwood_points = arranged.points
    return rules_pb2.MatchUpdate(
        match_id="gin.0.t",
        sequence=9,
        status=rules_pb2.MATCH_STATUS_LIVE,
        view=rules_pb2.View(gin=view),
        legal_actions=legal,
        to_move=0,
    )


def gin_action(action: rules_pb2.Action | None) -> str:
    assert action is not None
    return action.gin.action


# -- the registry and generic text ----------------------------------------------------------------------


def test_families_are_found_by_name_and_by_match_id() -> None:
    assert family("chess") is CHESS
    assert family_of_match("gin.0.abc") is GIN
    with pytest.raises(UnknownFamily, match="unknown game family 'shogi'"):
        family("shogi")


def test_clock_faces() -> None:
    assert format_ms(300_000) == "5:00"
    assert format_ms(61_999) == "1:01"
    assert format_ms(3_723_000) == "1:02:03"
    assert format_ms(7_350) == "0:07.3"
    assert format_ms(-5) == "0:00.0"


def test_clocks_count_down_locally_from_the_update_server_time() -> None:
    update = chess_update()
    update.server_time_ms = 1_000_000
    update.clocks.extend(
        [
            rules_pb2.SeatClock(seat=0, remaining_ms=60_000, running=True),
            rules_pb2.SeatClock(seat=1, remaining_ms=45_000, running=False),
        ]
    )
    names = {0: "alice", 1: "bob"}
    assert clock_line(update, CHESS, names) == "*White (alice) 1:00    Black (bob) 0:45"
    later = clock_line(update, CHESS, names, now_ms=1_012_500, viewer=1)
    assert later == "*White (alice) 0:47    Black (bob) [you] 0:45"


def test_result_lines() -> None:
    names = {0: "alice", 1: "bob"}
    mate = rules_pb2.Result(
        termination=rules_pb2.TERMINATION_CHECKMATE, winner=1, detail="checkmate; Black wins"
    )
    assert result_line(mate, CHESS, names) == "Black (bob) wins by checkmate: checkmate; Black wins"
    aborted = rules_pb2.Result(termination=rules_pb2.TERMINATION_ABORTED, detail="White did not move")
    assert result_line(aborted, CHESS, names) == "aborted, no winner: White did not move"
    draw = rules_pb2.Result(termination=rules_pb2.TERMINATION_DRAW_AGREED)
    assert result_line(draw, CHESS, names) == "draw by draw agreed: draw agreed"


# -- chess ----------------------------------------------------------------------------------------------


def test_chess_board_from_each_side_in_unicode_and_ascii() -> None:
    board = chess.Board()
    board.push_san("e4")
    white = render_board(board, ascii=True, last_move="e2e4")
    assert white[0] == white[-1] == "   a  b  c  d  e  f  g  h"
    assert white[1] == "8  r  n  b  q  k  b  n  r  8"
    assert white[4] == "5  .  .  .  .  .  .  .  .  5"
    assert white[5] == "4  .  .  .  . [P] .  .  .  4"
    assert white[7] == "2  P  P  P  P [.] P  P  P  2"
    black = render_board(board, flipped=True)
    assert black[0] == "   h  g  f  e  d  c  b  a"
    assert black[1] == "1  ♖  ♘  ♗  ♔  ♕  ♗  ♘  ♖  1"
    assert black[8] == "8  ♜  ♞  ♝  ♚  ♛  ♝  ♞  ♜  8"


def test_chess_render_says_whose_move_and_the_moves() -> None:
    board = chess.Board()
    for san in ["e4", "e5", "Nf3"]:
        board.push_san(san)
    update = chess_update(
        board.fen(),
        seat_to_move=1,
        moves_san=["e4", "e5", "Nf3"],
        last_move_uci="g1f3",
        material=chess_pb2.Material(white=39, black=39),
    )
    text = CHESS.render(update, 1, ascii=True)
    assert "moves: 1. e4 e5 2. Nf3" in text
    assert "Black to move (you); material 39-39" in text
    assert CHESS.render(update, 0, ascii=True).splitlines()[1].startswith("8  r  n  b  q  k")


def test_chess_legal_moves_are_listed_in_san() -> None:
    listed = CHESS.describe_legal(chess_update())
    assert listed.startswith("20 legal moves: ")
    assert " Nf3 " in listed
    assert "g1f3" not in listed
    assert CHESS.describe_legal(chess_update(seat_to_move=None)) == "no moves for you now (not your turn)"
    fide = chess_update()
    fide.legal_actions.append("offer_draw")
    assert CHESS.describe_legal(fide).endswith("draw actions: draw")


@pytest.mark.parametrize(
    ("typed", "move"),
    [
        ("e4", "e4"),
        (" Nf3 ", "Nf3"),
        ("g1f3", "g1f3"),
        ("e7e8q", "e7e8q"),
        ("0-0", "O-O"),
        ("o-o-o", "O-O-O"),
    ],
)
def test_chess_moves_are_sent_as_typed(typed: str, move: str) -> None:
    action = CHESS.parse(typed)
    assert action.chess.move == move
    assert CHESS.needs_turn(action)


def test_chess_draw_words_and_unreadable_input() -> None:
    assert CHESS.parse("draw").chess.draw == chess_pb2.DRAW_ACTION_OFFER
    assert CHESS.parse("Accept").chess.draw == chess_pb2.DRAW_ACTION_ACCEPT
    assert not CHESS.needs_turn(CHESS.parse("decline"))
    with pytest.raises(InputError, match="is not a move"):
        CHESS.parse("hello world")
    with pytest.raises(InputError, match="ruleset must be contest or fide"):
        CHESS.options({"ruleset": "blitz"})
    with pytest.raises(InputError, match="chess has no option hands"):
        CHESS.options({"hands": "3"})
    assert CHESS.options({"ruleset": "fide"}).chess.ruleset == chess_pb2.RULESET_FIDE


def test_greedy_chess_mates_when_it_can() -> None:
    # Scholar's mate is on the board for White: Qxf7#.
    fen = "r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 2 4"
    assert greedy_choice(chess_update(fen), random.Random(1)) == "h5f7"


def test_greedy_chess_takes_the_most_valuable_piece() -> None:
    # White's knight on d5 can take a rook on c7 or a pawn on e7; the rook it is.
    fen = "4k3/2r1p3/8/3N4/8/8/8/4K3 w - - 0 1"
    assert greedy_choice(chess_update(fen), random.Random(1)) == "d5c7"
    # En passant captures a pawn (the target square is empty).
    fen = "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2"
    assert greedy_choice(chess_update(fen), random.Random(1)) == "e5d6"


def test_chess_bots_play_legal_moves_only_on_their_turn() -> None:
    rng = random.Random(7)
    random_bot = CHESS.strategy("random", rng)
    update = chess_update()
    assert chess_move(random_bot(update, 0)) in update.legal_actions
    assert random_bot(chess_update(seat_to_move=None), 0) is None
    with pytest.raises(InputError, match="chess bots are random, greedy"):
        CHESS.strategy("deep", rng)


def test_chess_advantage_and_plies_come_from_the_view() -> None:
    update = chess_update(material=chess_pb2.Material(white=39, black=30), ply=41)
    assert CHESS.advantage(update, 0) == 9
    assert CHESS.advantage(update, 1) == -9
    assert CHESS.plies(update) == 41


# -- gin ------------------------------------------------------------------------------------------------


def test_cards_are_read_and_shown() -> None:
    assert parse_card("7h") == "7H"
    assert parse_card("10♦") == "TD"
    assert parse_card("td") == "TD"
    assert parse_card("A♠") == "AS"
    with pytest.raises(InputError, match="is not a card"):
        parse_card("1Z")
    assert show_card("TD") == "10♦"
    assert show_card("7H", ascii=True) == "7H"


def test_arrangements_leave_the_least_deadwood() -> None:
    best = arrange(["AC", "2C", "3C", "7D", "7H", "7S", "9D", "TS", "JS", "QS"])
    assert best.points == 9
    assert best.deadwood == ("9D",)
    assert sorted(best.melds) == [("7D", "7H", "7S"), ("AC", "2C", "3C"), ("TS", "JS", "QS")]
    # A card in both a set and a run goes where it saves the most.
    shared = arrange(["5H", "6H", "7H", "7C", "7S", "KD", "KC"])
    # the set of sevens leaves 5H 6H KD KC (31), the run 5-6-7H leaves 7C 7S KD KC (34)
    assert (shared.melds, shared.points) == ((("7C", "7H", "7S"),), 31)
    gin = arrange(["AH", "2H", "3H", "4H", "5S", "5D", "5C", "JC", "QC", "KC"])
    assert (gin.points, gin.deadwood) == (0, ())
    assert arrange([]).points == 0


def test_gin_render_shows_hand_melds_pile_and_score() -> None:
    hand = ["AC", "2C", "3C", "7D", "7H", "7S", "9D", "TS", "JS", "QS"]
    update = gin_update(hand, ["stock", "take"], pile=["3D", "9H", "KS"], phase=gin_pb2.PHASE_DRAW)
    text = GIN.render(update, 0)
    assert "gin rummy, hand 2 (standard, knock at 10 or less); first to 3 hands" in text
    assert "score: seat 0 (you) 1 hand (25 points), seat 1 0 hands (0 points)" in text
    assert "discard pile (3): 3♦ 9♥  [K♠]" in text
    assert "seat 1: 10 cards" in text
    assert "your hand: A♣ 2♣ 3♣ 7♦ 7♥ 7♠ 9♦ 10♠ J♠ Q♠" in text
    assert "deadwood: 9♦ (9 points)" in text
    assert "seat 0 (you) to play: draw: stock or take" in text
    assert "your hand: AC 2C 3C" in GIN.render(update, 0, ascii=True)


def test_gin_render_shows_the_last_hand() -> None:
    update = gin_update([], [], pile=["4C"], phase=gin_pb2.PHASE_UPCARD_OFFER)
    update.view.gin.hands.append(
        gin_pb2.HandResult(
            hand_number=1,
            end=gin_pb2.HAND_END_KNOCK,
            ender=1,
            winner=1,
            points=12,
            hands=[gin_pb2.HandReveal(seat=0, cards=["KD"], deadwood=["KD"], deadwood_points=10)],
        )
    )
    text = GIN.render(update, None)
    assert "last hand (1): knock by seat 1; seat 1 scored 12" in text
    assert "seat 0: none; deadwood K♦ (10 points)" in text
    assert "your hand" not in text  # a spectator sees no hand


@pytest.mark.parametrize(
    ("typed", "action"),
    [
        ("stock", "stock"),
        ("s", "stock"),
        ("T", "take"),
        ("pass", "pass"),
        ("discard 7h", "discard 7H"),
        ("d 10♦", "discard TD"),
        ("7H", "discard 7H"),
        ("knock qs", "knock QS"),
        ("g AC", "gin AC"),
        ("big gin", "biggin"),
        ("BIGGIN", "biggin"),
    ],
)
def test_gin_actions_are_read(typed: str, action: str) -> None:
    assert GIN.parse(typed).gin.action == action


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("", "type an action"),
        ("shuffle", "is not a gin action"),
        ("knock", "needs one card"),
        ("stock 7H", "no card"),
    ],
)
def test_gin_unreadable_actions(typed: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        GIN.parse(typed)


def test_gin_legal_actions_are_grouped() -> None:
    update = gin_update([], ["discard 2C", "discard 9D", "knock 9D"], pile=[], phase=gin_pb2.PHASE_DISCARD)
    assert GIN.describe_legal(update) == "discard: 2C 9D\nknock: 9D"


def test_gin_options() -> None:
    assert GIN.options({}).gin.variant == gin_pb2.VARIANT_STANDARD
    assert GIN.options({"variant": "oklahoma", "hands": "3"}).gin.hands_to_win == 3
    with pytest.raises(InputError, match="gin variant"):
        GIN.options({"variant": "rummy"})
    with pytest.raises(InputError, match="gin has no option ruleset"):
        GIN.options({"ruleset": "fide"})


def test_greedy_gin_takes_the_discard_only_when_it_lowers_deadwood() -> None:
    hand = ["AC", "2C", "3C", "7D", "7H", "7S", "9D", "TS", "JS", "KH"]  # deadwood 9D TS JS KH: 39
    rng = random.Random(1)
    helps = gin_update(hand, ["stock", "take"], pile=["3D", "QS"], phase=gin_pb2.PHASE_DRAW)
    assert greedy_action(helps, rng) == "take"  # QS makes TS JS QS a run; KH goes: 9 left
    useless = gin_update(hand, ["stock", "take"], pile=["QS", "KD"], phase=gin_pb2.PHASE_DRAW)
    assert greedy_action(useless, rng) == "stock"  # KD for KH: still 39
    low = ["AC", "2C", "3C", "7D", "7H", "7S", "TS", "JS", "QS", "2H"]  # deadwood 2H: 2
    offer = gin_update(low, ["pass", "take"], pile=["4D"], phase=gin_pb2.PHASE_UPCARD_OFFER)
    assert greedy_action(offer, rng) == "pass"
    assert greedy_action(gin_update(hand, ["pass", "take"], pile=["8D"], phase=2), rng) == "take"


def test_greedy_gin_discards_to_the_least_deadwood_and_knocks_or_gins_when_it_may() -> None:
    rng = random.Random(1)
    hand = ["AC", "2C", "3C", "7D", "7H", "7S", "9D", "TS", "JS", "QS", "KH"]
    discards = [f"discard {card}" for card in hand]
    update = gin_update(hand, discards, pile=["5D"], phase=gin_pb2.PHASE_DISCARD)
    assert greedy_action(update, rng) == "discard KH"  # leaves 9 (9D) rather than 10 (KH)
    knock = gin_update(hand, [*discards, "knock KH", "knock 9D"], pile=["5D"], phase=gin_pb2.PHASE_DISCARD)
    assert greedy_action(knock, rng) == "knock KH"
    full = ["AC", "2C", "3C", "7D", "7H", "7S", "TS", "JS", "QS", "KS", "9D"]
    gin = gin_update(full, ["discard 9D", "knock 9D", "gin 9D"], pile=[], phase=gin_pb2.PHASE_DISCARD)
    assert greedy_action(gin, rng) == "gin 9D"
    big = gin_update(full, ["biggin", "gin 9D"], pile=[], phase=gin_pb2.PHASE_DISCARD)
    assert gin_action(GIN.strategy("greedy", rng)(big, 0)) == "biggin"


def test_gin_advantage_is_hands_then_points() -> None:
    update = gin_update([], [], pile=[], phase=gin_pb2.PHASE_DRAW)  # seat 0: 1 hand, 25 points
    assert GIN.advantage(update, 0) == 1025
    assert GIN.advantage(update, 1) == -1025
    assert GIN.plies(update) is None


def test_random_gin_plays_a_legal_action() -> None:
    update = gin_update(["AC"], ["stock", "take"], pile=["2C"], phase=gin_pb2.PHASE_DRAW)
    assert gin_action(GIN.strategy("random", random.Random(3))(update, 0)) in ("stock", "take")
    assert GIN.strategy("random", random.Random(3))(gin_update([], [], pile=[], phase=0), 0) is None


# -- every family of the registry ------------------------------------------------------------------------


@pytest.mark.parametrize("name", family_names())
def test_every_family_in_the_registry_is_complete(name: str) -> None:
    fam = family(name)
    assert fam.name == name
    assert family_of_match(f"{name}.0.abc") is fam
    assert fam.strategies[:2] == ("random", "greedy")  # what the demo and the load harness play
    for strategy in fam.strategies:
        assert callable(fam.strategy(strategy, random.Random(0)))
    with pytest.raises(InputError):
        fam.strategy("clairvoyant", random.Random(0))
    assert set(fam.option_help) == set(fam.option_names)  # every option has command-line help
    assert set(fam.option_choices) <= set(fam.option_names)
    defaults = fam.options({})
    assert defaults.WhichOneof("family") == name
    assert isinstance(fam.describe_options(defaults), str)
    with pytest.raises(InputError):
        fam.options({"no_such_option": "1"})
    assert fam.input_help()
    assert fam.quick_minutes > 0


def test_the_command_line_offers_every_familys_options() -> None:
    from clients.cli.main import build_parser

    for command in ("create", "queue", "bot"):
        parser = build_parser()
        for name in family_names():
            fam = family(name)
            settings = {option: (fam.option_choices.get(option) or ("1",))[0] for option in fam.option_names}
            if name == "chess":  # the Skirmish Chess options need its variant (and its FIDE rules)
                settings |= {"variant": "skirmish", "ruleset": "fide"}
            argv = [command, "--family", name]
            for option, value in settings.items():
                argv += [f"--{option.replace('_', '-')}", value]
            args = parser.parse_args(argv)
            assert {option: getattr(args, option) for option in fam.option_names} == settings
            fam.options(settings)  # the family reads what the command line gives it
