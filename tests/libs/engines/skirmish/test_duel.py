"""Skirmish duels: how they end, the special rules, SAN, and reading moves (with readable errors)."""

from __future__ import annotations

import pytest

from libs.engines.base import GameOverError, IllegalActionError, MalformedActionError, RulesError
from libs.engines.skirmish import (
    MAX_PLIES,
    Duel,
    DuelEnd,
    DuelResult,
    Move,
    Position,
    apply_move,
    legal_moves,
    new_duel,
    parse_move,
    parse_square,
    play,
    preset_position,
    replay,
    san,
    time_out,
)


def at(fen: str) -> Position:
    return Position.from_fen(fen)


def uci(text: str) -> Move:
    return Move(parse_square(text[:2]), parse_square(text[2:4]))


def play_all(duel: Duel, moves: str) -> Duel:
    for move in moves.split():
        duel = play(duel, move)
    return duel


# ---------------------------------------------------------------------------------------------------------
# Ends


def test_white_wins_by_capturing_the_king() -> None:
    duel = play(new_duel(at("k4/5/5/5/R3K w")), "Rxa5")
    assert duel.result == DuelResult(True, DuelEnd.KING_CAPTURED)
    assert duel.result.detail == "White captured Black's king"
    assert duel.moves_san == ("Rxa5#",)
    assert duel.moves_uci == ("a1a5",)
    assert duel.legal == ()
    assert duel.over


def test_black_wins_by_capturing_the_king() -> None:
    duel = play_all(new_duel(at("r3k/5/5/5/K3R w")), "Re2 a5a1")
    assert duel.result == DuelResult(False, DuelEnd.KING_CAPTURED)
    assert duel.moves_san == ("Re2", "Rxa1#")
    assert duel.ply == 2


def test_king_capture_is_checked_before_the_ply_limit() -> None:
    duel = new_duel(at("k4/5/5/5/R3K w"))
    duel = Duel(duel.position, MAX_PLIES - 1, seen=duel.seen, start=duel.start)
    assert play(duel, "a1a5").result == DuelResult(True, DuelEnd.KING_CAPTURED)
    assert play(duel, "a1a4").result == DuelResult(None, DuelEnd.PLY_LIMIT)


def test_threefold_repetition_counts_the_start() -> None:
    start = preset_position("classic")
    knights = "Na3 Nc3 Nb1 Nb5"
    duel = play_all(new_duel(start), knights)
    assert duel.position == start  # the start a second time
    assert duel.result is None
    duel = play_all(duel, "Na3 Nc3 Nb1")
    assert duel.result is None
    duel = play(duel, "Nb5")  # the start a third time
    assert duel.result == DuelResult(None, DuelEnd.REPETITION)
    assert duel.ply == 8
    assert duel.result.detail == "drawn by threefold repetition"


def test_repetition_needs_the_same_side_to_move() -> None:
    # The kings walk a triangle and a line: the same board comes back with the other side to move.
    duel = new_duel(at("k4/5/5/5/4K w"))
    duel = play_all(duel, "Kd1 Kb5 Kd2 Ka5 Ke1 Kb5 Kd1 Ka5 Kd2 Kb5")
    assert duel.result is None


def test_a_capture_or_pawn_move_starts_the_counts_afresh() -> None:
    duel = play(new_duel(preset_position("classic")), "b3")
    assert duel.seen == ((duel.position.key, 1),)
    duel = play(duel, "Na3")
    assert len(duel.seen) == 2


def test_sixteen_plies_draw() -> None:
    moves = "Ke2 Ka4 Ke3 Kb4 Kd3 Kb5 Kd2 Ka5 Kd1 Ka4 Kc1 Kb4 Kc2 Kb5 Kc3"
    duel = play_all(new_duel(at("k4/5/5/5/4K w")), moves)
    assert duel.ply == 15
    assert duel.result is None
    duel = play(duel, "Ka5")
    assert duel.ply == MAX_PLIES == 16
    assert duel.result == DuelResult(None, DuelEnd.PLY_LIMIT)
    assert duel.legal == ()
    with pytest.raises(GameOverError, match="the skirmish is over"):
        play(duel, "Kb3")


# Black to move has nothing: the king is walled in by its own pieces, the pawns are blocked by White's
# bishop and queen with nothing of White's to capture diagonally, the bishops and the rook hemmed in.
NO_MOVES = "3bk/2prb/2Bp1/3Q1/K4"


def test_no_moves_draw_after_a_move() -> None:
    duel = new_duel(at("3bk/2prb/2Bp1/5/K3Q w"))
    assert duel.result is None
    duel = play(duel, "Qd2")
    assert duel.position.fen() == NO_MOVES + " b"
    assert duel.result == DuelResult(None, DuelEnd.NO_MOVES)
    assert duel.result.detail == "drawn: the side to move has no legal move"


def test_no_moves_at_the_start_is_drawn_at_once() -> None:
    duel = new_duel(at(NO_MOVES + " b"))
    assert duel.result == DuelResult(None, DuelEnd.NO_MOVES)
    assert duel.ply == 0
    assert duel.legal == ()


def test_time_out() -> None:
    duel = new_duel(preset_position("classic"))
    assert time_out(duel).result == DuelResult(False, DuelEnd.TIMEOUT)
    assert time_out(duel).result.detail == "White ran out of skirmish time"  # type: ignore[union-attr]
    later = play(duel, "b3")
    assert time_out(later).result == DuelResult(True, DuelEnd.TIMEOUT)
    with pytest.raises(GameOverError):
        play(time_out(later), "b3")
    with pytest.raises(GameOverError):
        time_out(time_out(later))


def test_new_duel_needs_one_king_a_side() -> None:
    with pytest.raises(ValueError, match="one king of each side"):
        new_duel(at("5/5/5/5/R3K w"))
    with pytest.raises(ValueError, match="one king of each side"):
        new_duel(at("k3k/5/5/5/R3K w"))


# ---------------------------------------------------------------------------------------------------------
# Special rules


def test_promotion_to_a_queen_is_automatic() -> None:
    position = at("k4/3P1/5/5/4K w")
    move = parse_move(position, "d5")
    assert san(position, move) == "d5=Q"
    assert apply_move(position, move).fen() == "k2Q1/5/5/5/4K b"
    for text in ("d4d5", "d4d5q", "D4D5Q", "d4d5=q", "d5=Q", "d5Q", "d5=Q#"):
        assert parse_move(position, text) == move
    with pytest.raises(IllegalActionError, match="a pawn always promotes to a queen"):
        parse_move(position, "d4d5n")
    with pytest.raises(IllegalActionError, match="a pawn always promotes to a queen"):
        parse_move(position, "d5=N")
    with pytest.raises(IllegalActionError, match="only a pawn reaching the last rank promotes"):
        parse_move(position, "e1e2q")
    black = at("k4/5/5/1p3/4K b")
    duel = play(new_duel(black), "b1")
    assert duel.moves_san == ("b1=Q",)
    assert duel.position.board[1] == "q"
    capture = at("k1r2/1P3/5/5/4K w")
    assert san(capture, parse_move(capture, "bxc5")) == "bxc5=Q"
    assert apply_move(capture, uci("b4c5")).fen() == "k1Q2/5/5/5/4K b"


def test_no_double_step() -> None:
    position = preset_position("classic")
    assert uci("b2b4") not in legal_moves(position)
    with pytest.raises(IllegalActionError) as error:
        parse_move(position, "b2b4")
    assert str(error.value) == "b2b4 is not a legal skirmish move: pawns step one square (no double step)"
    with pytest.raises(IllegalActionError, match=r"^b4 is not a legal skirmish move: pawns step one square"):
        parse_move(position, "b4")
    with pytest.raises(IllegalActionError, match="no double step"):
        play(new_duel(position), uci("b2b4"))


def test_no_en_passant() -> None:
    # Black's pawn stands beside White's after its step; White may not take it "in passing".
    duel = play_all(new_duel(at("k4/2p2/1P3/5/4K b")), "c3")
    assert duel.position.fen() == "k4/5/1Pp2/5/4K w"
    assert [m.uci for m in duel.legal if m.from_sq == parse_square("b3")] == ["b3b4"]
    with pytest.raises(
        IllegalActionError, match=r"diagonally only to capture a piece \(there is no en passant\)"
    ):
        play(duel, "b3c4")
    with pytest.raises(IllegalActionError, match="cannot capture straight ahead"):
        parse_move(at("k4/5/1p3/1P3/4K w"), "b3")


def test_no_castling() -> None:
    position = at("k4/5/5/5/R3K w")
    for text in ("O-O", "O-O-O", "0-0"):
        with pytest.raises(IllegalActionError, match="there is no castling"):
            parse_move(position, text)
    with pytest.raises(IllegalActionError, match=r"one square in any direction \(there is no castling\)"):
        parse_move(position, "e1c1")


def test_king_captures_king() -> None:
    position = at("5/5/2k2/2K2/5 w")
    assert uci("c2c3") in legal_moves(position)
    duel = play(new_duel(position), "Kxc3")
    assert duel.moves_san == ("Kxc3#",)
    assert duel.result == DuelResult(True, DuelEnd.KING_CAPTURED)


def test_moving_into_attack_and_leaving_the_king_attacked_are_legal() -> None:
    position = at("k4/5/5/r4/4K w")  # Black's rook holds rank 2
    assert uci("e1e2") in legal_moves(position)
    duel = play_all(new_duel(position), "Ke2 Rxe2")
    assert duel.moves_san == ("Ke2", "Rxe2#")
    assert duel.result == DuelResult(False, DuelEnd.KING_CAPTURED)
    # A pinned piece may move: the bishop leaves the king to the rook.
    pinned = at("k3r/5/5/4B/4K w")
    duel = play_all(new_duel(pinned), "Bd3 Rxe1")
    assert duel.result == DuelResult(False, DuelEnd.KING_CAPTURED)


# ---------------------------------------------------------------------------------------------------------
# SAN


@pytest.mark.parametrize(
    ("fen", "move", "expected"),
    [
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "b1c3", "Nc3"),
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "b2b3", "b3"),
        ("rnbqk/p1ppp/1p3/2P2/4K w", "c2b3", "cxb3"),
        ("k3r/5/5/5/R1K2 b", "e5e1", "Re1"),
        ("k3q/5/5/5/R3K b", "e5e1", "Qxe1#"),
        # two rooks on a rank: the file tells them apart
        ("k4/5/5/5/R3R w", "a1c1", "Rac1"),
        ("k4/5/5/5/R3R w", "e1c1", "Rec1"),
        # two rooks on a file: the rank
        ("k4/5/R4/5/R3K w", "a1a2", "R1a2"),
        ("k4/5/R4/5/R3K w", "a3a2", "R3a2"),
        # two knights that can both reach c3
        ("k4/5/5/5/1N1NK w", "b1c3", "Nbc3"),
        ("k4/5/5/5/1N1NK w", "d1c3", "Ndc3"),
        # a knight that cannot reach the square needs no hint
        ("k4/5/N4/5/3NK w", "d1c3", "Nc3"),
        # three queens: file and rank are both needed for the one on a1
        ("k4/5/Q4/5/Q1Q1K w", "a1c3", "Qa1c3"),
        ("k4/5/Q4/5/Q1Q1K w", "a3c3", "Q3c3"),
        ("k4/5/Q4/5/Q1Q1K w", "c1c3", "Qcc3"),
        # a bishop told apart by its rank (not to be read as the UCI b3c4)
        ("kB3/5/1B3/5/4K w", "b3c4", "B3c4"),
        ("kB3/5/1B3/5/4K w", "b5c4", "B5c4"),
        # a blocked rival does not count
        ("k4/5/5/5/RB1RK w", "d1c1", "Rc1"),
    ],
)
def test_san(fen: str, move: str, expected: str) -> None:
    position = at(fen)
    chosen = uci(move)
    assert chosen in legal_moves(position)
    assert san(position, chosen) == expected
    assert parse_move(position, expected) == chosen
    assert parse_move(position, expected.replace("x", "").replace("#", "")) == chosen


def test_every_san_reads_back() -> None:
    for name in ("classic", "wings", "center_clash", "spearhead"):
        position = preset_position(name)
        for _ in range(6):
            moves = legal_moves(position)
            for move in moves:
                assert parse_move(position, san(position, move)) == move
                assert parse_move(position, move.uci) == move
            position = apply_move(position, moves[len(moves) // 2])


# ---------------------------------------------------------------------------------------------------------
# Reading moves: errors a player understands


@pytest.mark.parametrize(
    ("fen", "text", "message"),
    [
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "b2b4", "b2b4 is not a legal skirmish move: pawns step one square"),
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "b4b3", "the pawn on b4 is Black's, and it is White's move"),
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "c3c4", "there is no piece on c3"),
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "a1a2", "White's own pawn stands on a2"),
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "a1a1", "a move must go to another square"),
        (
            "rnbqk/ppppp/5/PPPPP/RNBQK w",
            "b1b3",
            "a knight jumps two squares one way and one square the other",
        ),
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "c1a3", "the bishop's way is blocked on b2"),
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "c1d3", "a bishop moves diagonally"),
        ("k4/5/1P3/5/4K w", "b3b2", "a pawn moves one square straight up (toward rank 5)"),
        ("k4/5/1p3/5/4K b", "b3b4", "a pawn moves one square straight down (toward rank 1)"),
        ("k4/5/5/5/R3K w", "a1b2", "a rook moves along a rank or a file"),
        ("k4/5/5/5/Q3K w", "a1c2", "a queen moves along a rank, a file or a diagonal"),
        ("rbkbr/ppppp/5/PPPPP/RBKBR w", "Nc3", "Nc3 is not a legal skirmish move: White has no knight"),
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "Nd3", "Nd3 is not a legal skirmish move: a knight jumps"),
        ("k4/5/5/5/1N1NK w", "Nc2", "no White knight can go to c2"),
        (
            "k4/5/5/5/1N1NK w",
            "Nc3",
            "Nc3 is ambiguous: the knights on b1 and d1 can each go to c3 (write Nbc3 or Ndc3)",
        ),
        ("rnbqk/ppppp/5/PPPPP/RNBQK w", "b3=Q", "only a pawn reaching the last rank promotes"),
    ],
)
def test_illegal_moves_say_why(fen: str, text: str, message: str) -> None:
    with pytest.raises(IllegalActionError) as error:
        parse_move(at(fen), text)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the move is empty"),
        ("   ", "the move is empty"),
        ("hello", "is not a skirmish move: write it in UCI (b2b3) or SAN (Nc3, bxc4, b5=Q)"),
        ("e2e4e5", "is not a skirmish move"),
        ("Nf3", "names a square off the skirmish board: files a-e, ranks 1-5"),
        ("a2a6", "names a square off the skirmish board"),
        ("g1f3", "names a square off the skirmish board"),
        ("Zc3", "is not a skirmish move"),
        ("#", "is not a skirmish move"),
    ],
)
def test_unreadable_moves(text: str, message: str) -> None:
    with pytest.raises(MalformedActionError) as error:
        parse_move(preset_position("classic"), text)
    assert message in str(error.value)


def test_play_refuses_what_is_no_move() -> None:
    duel = new_duel(preset_position("classic"))
    with pytest.raises(MalformedActionError, match="is not a skirmish move"):
        play(duel, 42)  # type: ignore[arg-type]
    with pytest.raises(MalformedActionError, match=r"squares are 0 \(a1\) to 24 \(e5\)"):
        play(duel, Move(0, 25))
    with pytest.raises(IllegalActionError, match="b1b3 is not a legal skirmish move: a knight jumps"):
        play(duel, Move(1, 11))
    with pytest.raises(RulesError):
        parse_move(preset_position("classic"), None)  # type: ignore[arg-type]


def test_text_forms_accepted() -> None:
    position = preset_position("classic")
    nc3 = uci("b1c3")
    for text in ("b1c3", "B1C3", "b1-c3", " Nc3 ", "Nc3+", "Nc3!", "Nbc3", "Nb1c3", "Nb1-c3"):
        assert parse_move(position, text) == nc3
    capture = at("rnbqk/p1ppp/1p3/2P2/4K w")
    for text in ("cxb3", "cb3", "c2b3", "c2xb3", "cxb3+"):
        assert parse_move(capture, text) == uci("c2b3")


def test_replay_and_start() -> None:
    start = preset_position("classic")
    duel = replay(start, ["b3", "Nc3", "Nc3"])
    assert duel.start == start
    assert duel.moves_uci == ("b2b3", "b5c3", "b1c3")
    assert duel.moves_san == ("b3", "Nc3", "Nxc3")
    assert replay(start, list(duel.moves_uci)) == duel
