"""Skirmish Chess in the clients (clients/families/chess.py): options, the two boards as text, duel moves
listed and typed, and the bots, on updates made from the engine's own states with the rules service's
own mapping (``ChessFamily().view_to_proto``), so the clients are tested on what the server sends."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable

import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import InputError, clock_line, family
from clients.families.chess import FAMILY as CHESS
from clients.families.chess import duel_choice, duelist_choice, greedy_choice
from libs.engines import skirmish
from libs.engines.base import ActionContext
from libs.engines.chess.skirmish import SKIRMISH_CHESS, SkirmishChessOptions, SkirmishChessState
from services.rules_chess.family import ChessFamily

SERVICE_MAPPING = ChessFamily()
CONTEXT = ActionContext(remaining_ms=(60_000, 60_000), phase_elapsed_ms=100)
MAX_ACTIONS = 400
Bot = Callable[[rules_pb2.MatchUpdate, random.Random], str | None]


def update_of(state: SkirmishChessState, viewer: int | None) -> rules_pb2.MatchUpdate:
    """The update ``viewer`` (``None``: a spectator) gets for ``state``."""
    view = SKIRMISH_CHESS.view(state, viewer)
    over = SKIRMISH_CHESS.is_over(state)
    update = rules_pb2.MatchUpdate(
        match_id="chess.0.t",
        sequence=1,
        status=rules_pb2.MATCH_STATUS_FINISHED if over else rules_pb2.MATCH_STATUS_LIVE,
        view=SERVICE_MAPPING.view_to_proto(view),
        legal_actions=SKIRMISH_CHESS.legal_actions(state, viewer) if viewer is not None else [],
    )
    if view.to_move is not None:
        update.to_move = view.to_move
    return update


def play(state: SkirmishChessState, *moves: str) -> SkirmishChessState:
    for move in moves:
        seat = SKIRMISH_CHESS.to_move(state)
        assert seat is not None
        state = SKIRMISH_CHESS.apply(state, seat, move, CONTEXT)
    return state


def new_game(**options: object) -> SkirmishChessState:
    return SKIRMISH_CHESS.new_game(SkirmishChessOptions(**options))  # type: ignore[arg-type]


def game_between(
    first: str, second: str, seed: int, **options: object
) -> tuple[SkirmishChessState, int, Counter[str]]:
    """A whole game (at most :data:`MAX_ACTIONS` actions) between bot ``first`` (White) and ``second``,
    through the engine; every action checked to be one the update lists. The end state, the actions
    played and how many were played on each board."""
    rng = random.Random(seed)
    bots = [CHESS.strategy(name, random.Random(rng.random())) for name in (first, second)]
    state = new_game(**options)
    actions = 0
    boards: Counter[str] = Counter()
    while not SKIRMISH_CHESS.is_over(state) and actions < MAX_ACTIONS:
        request = SKIRMISH_CHESS.chance_needed(state)
        if request is not None:
            shuffle = tuple(rng.sample(range(request.bound), request.bound))
            state = SKIRMISH_CHESS.apply_chance(state, request, shuffle)
            continue
        seat = SKIRMISH_CHESS.to_move(state)
        assert seat is not None
        update = update_of(state, seat)
        action = bots[seat](update, seat)
        assert action is not None, "a bot with legal actions must act"
        move = action.chess.move
        assert move in update.legal_actions, (first, second, seed, move)
        boards["duel" if update.view.chess.HasField("duel") else "main"] += 1
        state = SKIRMISH_CHESS.apply(state, seat, move, CONTEXT)
        actions += 1
    return state, actions, boards


def duel_update(fen: str, *, white_seat: int = 0) -> rules_pb2.MatchUpdate:
    """A hand-made update of a duel in ``fen`` (5x5), for the duel mover."""
    position = skirmish.Position.from_fen(fen)
    legal = [move.uci for move in skirmish.legal_moves(position)]
    mover = white_seat if position.white_to_move else 1 - white_seat
    view = chess_pb2.ChessView(
        fen="4k3/8/8/3p4/4P3/8/8/4K3 w - - 0 1",
        variant=chess_pb2.VARIANT_SKIRMISH,
        duel=chess_pb2.Duel(
            capture_uci="e4d5",
            capture_san="exd5",
            attacker="P",
            defender="p",
            white_seat=white_seat,
            black_seat=1 - white_seat,
            fen=fen,
            clock_ms=[60_000, 60_000],
            legal_moves=legal,
        ),
    )
    return rules_pb2.MatchUpdate(
        match_id="chess.0.t",
        status=rules_pb2.MATCH_STATUS_LIVE,
        view=rules_pb2.View(chess=view),
        legal_actions=legal,
        to_move=mover,
    )


# -- options ---------------------------------------------------------------------------------------------


def test_the_skirmish_options_and_what_the_server_makes_of_them() -> None:
    options = CHESS.options({"variant": "skirmish"})
    assert options.chess.variant == chess_pb2.VARIANT_SKIRMISH
    assert options.chess.ruleset == chess_pb2.RULESET_FIDE  # always
    parsed = SERVICE_MAPPING.options_from_proto(options)
    assert parsed == SkirmishChessOptions()  # classic, odds, both stay, 60 s, no increment or countdown
    assert SERVICE_MAPPING.lobby_pool(parsed) == "skirmish/classic/odds/both_stay/60+0/cd0"
    assert CHESS.describe_options(options) == "Skirmish Chess, classic, odds, draw: both stay, duel 60+0 s"
    assert CHESS.options({"variant": "skirmish", "ruleset": "fide"}) == options

    for preset in ("classic", "fortress", "spearhead", "wings", "center_clash", "random"):
        chosen = SERVICE_MAPPING.options_from_proto(CHESS.options({"variant": "skirmish", "preset": preset}))
        assert isinstance(chosen, SkirmishChessOptions)
        assert chosen.preset == preset
    assert CHESS.options({"variant": "skirmish", "preset": "center-clash"}).chess.skirmish.preset == (
        chess_pb2.SKIRMISH_PRESET_CENTER_CLASH
    )
    for odds, expected in (("on", True), ("off", False)):
        chosen = SERVICE_MAPPING.options_from_proto(CHESS.options({"variant": "skirmish", "odds": odds}))
        assert isinstance(chosen, SkirmishChessOptions)
        assert chosen.odds is expected
    for rule in ("both_removed", "both_stay", "defender_wins"):
        chosen = SERVICE_MAPPING.options_from_proto(CHESS.options({"variant": "skirmish", "draw_rule": rule}))
        assert isinstance(chosen, SkirmishChessOptions)
        assert chosen.draw_rule.value == rule
    for name, field, values in (
        ("duel_clock", "duel_clock_ms", (30, 60, 120)),
        ("duel_increment", "duel_increment_ms", (0, 2, 5)),
        ("countdown", "countdown_ms", (0, 3, 5)),
    ):
        for value in values:
            proto = CHESS.options({"variant": "skirmish", name: str(value)})
            chosen = SERVICE_MAPPING.options_from_proto(proto)
            assert getattr(chosen, field) == value * 1000
            SERVICE_MAPPING.lobby_pool(chosen)  # a table the lobby offers
    every = CHESS.options(
        {
            "variant": "skirmish",
            "preset": "wings",
            "odds": "off",
            "draw_rule": "defender_wins",
            "duel_clock": "120",
            "duel_increment": "5",
            "countdown": "3",
        }
    )
    assert CHESS.describe_options(every) == (
        "Skirmish Chess, wings, no odds, draw: defender wins, duel 120+5 s, countdown 3 s"
    )
    # Standard chess is as it was.
    assert CHESS.options({}) == rules_pb2.MatchOptions(
        chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST)
    )
    assert CHESS.options({"variant": "standard", "ruleset": "fide"}).chess.variant == 0
    assert CHESS.describe_options(CHESS.options({})) == "contest rules"


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({"variant": "crazyhouse"}, "variant must be standard or skirmish"),
        ({"variant": "skirmish", "ruleset": "contest"}, "always plays the FIDE rules"),
        ({"variant": "skirmish", "preset": "castle"}, "preset must be classic"),
        ({"variant": "skirmish", "odds": "maybe"}, "odds must be on or off"),
        ({"variant": "skirmish", "draw_rule": "coin"}, "draw_rule must be both_removed"),
        ({"variant": "skirmish", "duel_clock": "45"}, "duel_clock must be 30, 60, 120"),
        ({"variant": "skirmish", "duel_clock": "soon"}, "duel_clock must be"),
        ({"variant": "skirmish", "duel_increment": "1"}, "duel_increment must be 0, 2, 5"),
        ({"variant": "skirmish", "countdown": "30"}, "countdown must be 0, 3, 5"),
        ({"preset": "classic"}, "only Skirmish Chess"),
        ({"variant": "standard", "odds": "off"}, "only Skirmish Chess"),
        ({"variant": "skirmish", "hands": "3"}, "chess has no option hands"),
    ],
)
def test_bad_skirmish_options_are_refused(settings: dict[str, str], reason: str) -> None:
    with pytest.raises(InputError, match=reason):
        CHESS.options(settings)


def test_the_command_line_offers_the_skirmish_options() -> None:
    from clients.cli.main import build_parser

    args = build_parser().parse_args(
        [
            "create",
            "--family",
            "chess",
            "--variant",
            "skirmish",
            "--preset",
            "spearhead",
            "--duel-clock",
            "30",
        ]
    )
    assert (args.variant, args.preset, args.duel_clock) == ("skirmish", "spearhead", "30")
    assert CHESS.strategies == ("random", "greedy", "duelist")
    assert family("chess") is CHESS


# -- the two boards as text --------------------------------------------------------------------------------


def test_a_duel_is_drawn_beside_the_main_board_with_its_stakes_clocks_and_moves() -> None:
    state = play(new_game(), "e2e4", "d7d5", "e4d5", "b2b3")  # exd5: a duel, White has played b3
    update = update_of(state, 1)
    update.server_time_ms = 1_000_000
    update.phase_deadline_ms = 1_054_300  # Black's duel clock falls in 54.3 s
    text = CHESS.render(update, 1)
    lines = text.splitlines()
    assert "duel (5x5)" in lines[1]
    # The 5x5 board beside the main one, seen from Black's side (the viewer plays Black in the duel).
    assert lines[7] == "7  ♟  ♟  ♟  ♟  ·  ♟  ♟  ♟  7    5  ♚  ♛  ♝  ♞  ♜  5"  # both, flipped for Black
    assert lines[3].endswith("    1  ♔  ♕  ♗  ♘  ♖  1")  # the duel's, its White at the top
    assert "duel for exd5: White's pawn e4 attacks Black's pawn d5" in text
    assert "duel White: White, the attacker; duel Black: Black (you), the defender; classic setup" in text
    assert "duel clocks: White 0:59   *Black 0:54" in text  # White's after its 100 ms, Black's running
    assert "duel moves (1/16): 1. b3" in text
    assert "duel: Black (you) to move (Black in the duel)" in text
    assert "moves: 1. e4 d5" in text  # the capture gets its SAN when its duel ends
    assert "material 39-39" in text
    # White sees the duel from White's side, in ASCII, and the last duel move marked.
    white = CHESS.render(update_of(state, 0), 0, ascii=True)
    assert "3  . [P] .  .  .  3" in white
    assert "2  P [.] P  P  P  2" in white
    assert "duel White: White (you), the attacker" in white
    assert "duel clocks: White 0:59   *Black 1:00" in white  # no deadline in the update: as of the event


def test_odds_and_the_countdown_are_shown() -> None:
    state = play(
        new_game(initial_fen="4k3/8/8/3p4/8/8/8/3QK3 w - - 0 1", countdown_ms=3_000),
        "d1d5",  # queen takes pawn: Black loses three pawns, after a 3 s countdown
    )
    update = update_of(state, 0)
    assert update.view.chess.duel.counting_down
    assert not update.legal_actions
    update.server_time_ms = 5_000
    update.phase_deadline_ms = 7_500
    text = CHESS.render(update, 0)
    assert "duel for Qxd5: White's queen d1 attacks Black's pawn d5" in text
    assert "odds: Black's pawns b4 c4 d4 removed" in text
    assert "countdown 0:02.5: nobody moves yet" in text
    assert "to move (" not in text  # nobody moves in the countdown
    assert CHESS.describe_legal(update) == "no moves for you now (not your turn)"
    # Pawn takes queen: the attacker's side (the duel's White) loses its pawns.
    state = play(new_game(initial_fen="4k3/8/8/3q4/4P3/8/8/4K3 w - - 0 1"), "e4d5")
    assert "odds: White's pawns b2 c2 d2 removed" in CHESS.render(update_of(state, None), None)
    # En passant: the passed pawn is the stake, beside the attacker.
    state = play(new_game(initial_fen="4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2"), "e5d6")
    assert "duel for exd6: White's pawn e5 attacks Black's pawn d5" in CHESS.render(update_of(state, 1), 1)


def test_finished_duels_are_listed_with_their_outcome() -> None:
    state = play(new_game(countdown_ms=3_000), "e2e4", "d7d5", "e4d5")
    state = SKIRMISH_CHESS.on_phase_deadline(state)  # the countdown ends
    state = SKIRMISH_CHESS.on_phase_deadline(state)  # White's duel clock falls: the defender wins
    update = update_of(state, 1)
    assert not update.view.chess.HasField("duel")
    text = CHESS.render(update, 1)
    assert "duels (1): exd5- (defender won, timeout)" in text
    assert "moves: 1. e4 d5 2. exd5-" in text
    assert "Black (you) to move" in text
    assert "duel (5x5)" not in text
    # A few more duels: the line keeps the last three.
    rng = random.Random(3)
    while len(state.duels) < 5 and not SKIRMISH_CHESS.is_over(state):
        seat = SKIRMISH_CHESS.to_move(state)
        assert seat is not None
        update = update_of(state, seat)
        if not update.legal_actions:  # a duel's countdown
            state = SKIRMISH_CHESS.on_phase_deadline(state)
            continue
        move = greedy_choice(update, rng)
        assert move is not None
        state = SKIRMISH_CHESS.apply(state, seat, move, CONTEXT)
    text = CHESS.render(update_of(state, None), None)
    line = next(line for line in text.splitlines() if line.startswith("duels ("))
    assert re.fullmatch(
        r"duels \(\d+\): \.\.\. (\S+[-+=] \((attacker won|defender won|drawn), [a-z ]+\)(; )?){3}", line
    )


def test_the_duel_moves_are_listed_in_5x5_san() -> None:
    state = play(new_game(), "e2e4", "d7d5", "e4d5")
    update = update_of(state, 0)
    position = skirmish.Position.from_fen(update.view.chess.duel.fen)
    expected = sorted(skirmish.san(position, move) for move in skirmish.legal_moves(position))
    assert CHESS.describe_legal(update) == f"{len(expected)} legal duel moves: {' '.join(expected)}"
    assert "Nc3" in expected
    assert CHESS.describe_legal(update_of(state, 1)) == "no moves for you now (not your turn)"
    # On the main board: the moves in SAN and the draw actions, as in FIDE chess.
    main = CHESS.describe_legal(update_of(new_game(), 0))
    assert main.startswith("20 legal moves: ")
    assert "Nf3" in main
    assert main.endswith("draw actions: draw")


def test_typed_duel_moves_are_sent_as_typed_and_the_server_reads_them() -> None:
    state = play(new_game(), "e2e4", "d7d5", "e4d5")
    update = update_of(state, 0)
    for typed in ("b2b3", "Nc3", " c3 "):
        action = CHESS.parse(typed, update)
        assert CHESS.needs_turn(action)
        SKIRMISH_CHESS.apply(state, 0, action.chess.move, CONTEXT)  # legal, as typed
    assert CHESS.parse("b2b4", update).chess.move == "b2b4"  # the server judges (no double step)
    with pytest.raises(InputError, match="a duel is being played"):
        CHESS.parse("draw", update)
    with pytest.raises(InputError, match="is not a move"):
        CHESS.parse("take the king", update)
    assert "duel" in CHESS.input_help()
    # On the main board, as in chess.
    main = update_of(new_game(), 0)
    assert CHESS.parse("0-0", main).chess.move == "O-O"
    assert CHESS.parse("draw", main).chess.draw == chess_pb2.DRAW_ACTION_OFFER


# -- bots --------------------------------------------------------------------------------------------------


GAMES: list[tuple[str, str, dict[str, object]]] = [
    ("random", "random", {}),
    ("greedy", "random", {"preset": "fortress"}),
    ("random", "greedy", {"preset": "spearhead", "draw_rule": "both_removed"}),
    ("duelist", "random", {"preset": "wings"}),
    ("random", "duelist", {"preset": "center_clash", "odds": False}),
    ("duelist", "greedy", {"draw_rule": "defender_wins"}),
    ("greedy", "duelist", {"preset": "random"}),
    ("duelist", "duelist", {"preset": "random", "odds": False}),
    ("greedy", "greedy", {"duel_increment_ms": 2_000}),
    ("random", "random", {"preset": "random", "draw_rule": "both_removed"}),
]


def test_every_bot_plays_only_legal_actions_on_both_boards_over_whole_games() -> None:
    boards: Counter[str] = Counter()
    ended = 0
    for index in range(20):
        first, second, options = GAMES[index % len(GAMES)]
        state, actions, played = game_between(first, second, seed=100 + index, **options)
        boards.update(played)
        assert actions <= MAX_ACTIONS
        ended += SKIRMISH_CHESS.is_over(state)
    assert boards["main"] > 0
    assert boards["duel"] > 0
    assert ended >= 10  # most games end (mate, a king lost in a duel, a draw); the rest hit the cap


def test_the_duelist_captures_only_when_the_odds_favour_it() -> None:
    def choices(fen: str, bot: Bot = duelist_choice, seeds: int = 12) -> set[str]:
        update = update_of(new_game(initial_fen=fen), 0)
        found = set()
        for seed in range(seeds):
            move = bot(update, random.Random(seed))
            assert move is not None
            assert move in update.legal_actions
            found.add(move)
        return found

    # Queen takes pawn: Black starts the duel three pawns down. Taken.
    assert choices("4k3/8/8/3p4/8/8/8/3QK3 w - - 0 1") == {"d1d5"}
    # Pawn takes queen: the attacker's side would lose pawns. Greedy takes; the duelist does not.
    fen = "4k3/8/8/3q4/4P3/8/8/4K3 w - - 0 1"
    assert "e4d5" not in choices(fen)
    assert choices(fen, greedy_choice) == {"e4d5"}
    # Knight takes bishop: no odds either way; not taken.
    assert "e4d6" not in choices("4k3/8/3b4/8/4N3/8/8/4K3 w - - 0 1")
    # Rook takes knight: one pawn off the defender's side. Taken.
    assert choices("4k3/8/8/8/8/8/n1b5/R3K3 w - - 0 1") == {"a1a2"}
    # Of two favoured captures, the more valuable defender: the queen takes the rook, not the pawn.
    assert choices("4k3/8/8/3p4/8/8/8/r2QK3 w - - 0 1") == {"d1a1"}
    # The only move is a capture the odds do not favour (king takes queen): played.
    assert choices("4k3/8/8/8/8/8/1q6/K7 w - - 0 1") == {"a1b2"}
    # A king left attackable by a failed capture: taken, whatever the odds.
    assert choices("4k3/8/8/8/8/8/4R3/4K3 w - - 0 1") == {"e2e8"}
    # A quiet mate first, before a favoured capture (Rxh4 would take a knight with odds).
    assert choices("6k1/5ppp/8/8/7n/8/8/R3K2R w - - 0 1") == {"a1a8"}
    # Without any capture, a random quiet move.
    assert len(choices("4k3/8/8/8/8/8/8/R3K3 w - - 0 1")) > 1


def test_in_duels_the_bots_take_the_king_the_best_piece_and_the_duelist_keeps_its_king() -> None:
    # White's king a1; Black's rook e2 holds rank 2; Black's king e5. Ka2 and Kb2 would hand Black the
    # king; Kb1 is the one safe move. Greedy picks among all three; the duelist only Kb1.
    update = duel_update("4k/5/5/4r/K4 w")
    duelist = {duel_choice(update, random.Random(seed), safe=True) for seed in range(20)}
    greedy = {greedy_choice(update, random.Random(seed)) for seed in range(20)}
    assert duelist == {"a1b1"}
    assert greedy == {"a1b1", "a1a2", "a1b2"}
    assert {duelist_choice(update, random.Random(seed)) for seed in range(20)} == {"a1b1"}
    # The king's capture whenever there is one; else the most valuable piece.
    update = duel_update("4k/5/4q/5/K3R w")
    for bot in (greedy_choice, duelist_choice):
        assert bot(update, random.Random(1)) == "e1e3"  # the queen (the king on e5 is behind it)
    update = duel_update("4k/5/5/5/K3R w")
    for bot in (greedy_choice, duelist_choice):
        assert bot(update, random.Random(1)) == "e1e5"
    # The duel's Black may be seat 0 (it defended): the bots play whichever seat moves.
    update = duel_update("4k/5/5/5/K3R b", white_seat=1)
    assert update.to_move == 0
    assert CHESS.strategy("duelist", random.Random(2))(update, 0).chess.move in update.legal_actions  # type: ignore[union-attr]


def test_in_standard_chess_the_duelist_plays_like_greedy() -> None:
    from tests.clients.test_families import chess_update

    fen = "r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 2 4"
    assert duelist_choice(chess_update(fen), random.Random(1)) == "h5f7"
    fen = "4k3/2r1p3/8/3N4/8/8/8/4K3 w - - 0 1"
    assert duelist_choice(chess_update(fen), random.Random(1)) == "d5c7"


def test_the_duelist_beats_the_random_bot() -> None:
    score: Counter[str] = Counter()
    for index in range(40):
        duelist_seat = index % 2
        bots = ("duelist", "random") if duelist_seat == 0 else ("random", "duelist")
        state, _, _ = game_between(*bots, seed=1_000 + index)
        outcome = SKIRMISH_CHESS.outcome(state)
        if outcome is None:
            score["capped"] += 1
        elif outcome.winner is None:
            score["drawn"] += 1
        else:
            score["duelist" if outcome.winner == duelist_seat else "random"] += 1
    print(f"duelist vs random over 40 games: {dict(score)}")
    assert score["duelist"] >= 28, score
    assert score["random"] <= 6, score


def test_the_clock_line_counts_a_duel_deadline_down() -> None:
    update = rules_pb2.MatchUpdate(
        status=rules_pb2.MATCH_STATUS_LIVE,
        server_time_ms=1_000_000,
        phase_deadline_ms=1_030_000,
        clocks=[
            rules_pb2.SeatClock(seat=0, remaining_ms=120_000),
            rules_pb2.SeatClock(seat=1, remaining_ms=90_000),
        ],
    )
    line = clock_line(update, CHESS, {}, now_ms=1_010_000)
    assert line.endswith("deadline 0:20")
    assert "White 2:00" in line  # the main clocks are stopped during the duel
    update.ClearField("phase_deadline_ms")
    assert "deadline" not in clock_line(update, CHESS, {}, now_ms=1_010_000)
