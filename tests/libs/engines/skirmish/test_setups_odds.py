"""Skirmish setups (the fixed presets, the random mapping) and odds by capture pair."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libs.engines.base import MalformedActionError
from libs.engines.skirmish import (
    PAWN_REMOVAL_ORDER,
    PRESET_NAMES,
    PRESETS,
    RANDOM_SHUFFLE_SIZE,
    VALUES,
    Position,
    apply_odds,
    can_capture_king,
    legal_moves,
    new_duel,
    odds_pawns,
    parse_square,
    play,
    preset_position,
    random_position,
    san,
    square_name,
    white_can_take_king,
)

# ---------------------------------------------------------------------------------------------------------
# Board basics


def test_squares() -> None:
    assert square_name(0) == "a1"
    assert square_name(4) == "e1"
    assert square_name(5) == "a2"
    assert square_name(24) == "e5"
    assert parse_square("a1") == 0
    assert parse_square(" C3 ") == 12
    for bad in ("f1", "a6", "a0", "", "e", "e55"):
        with pytest.raises(MalformedActionError, match="files a-e, ranks 1-5"):
            parse_square(bad)


def test_fen_round_trip_and_errors() -> None:
    position = Position.from_fen("rnbqk/ppppp/5/PPPPP/RNBQK")
    assert position.white_to_move
    assert position.board == "RNBQK" + "PPPPP" + "....." + "ppppp" + "rnbqk"
    assert position.piece_at(0) == "R"
    assert position.piece_at(24) == "k"
    assert position.piece_at(12) is None
    assert position.fen() == "rnbqk/ppppp/5/PPPPP/RNBQK w"
    assert Position.from_fen("1nqn1/ppkpp/5/PPKPP/1NQN1 b").fen() == "1nqn1/ppkpp/5/PPKPP/1NQN1 b"
    assert not Position.from_fen("k4/5/5/5/4K b").white_to_move
    for bad, words in [
        ("rnbqk/ppppp/5/PPPPP", "5 ranks"),
        ("rnbqk/ppppp/3/PPPPP/RNBQK", "rank 3 has 3 squares"),
        ("rnbqk/ppppp/42/PPPPP/RNBQK", "rank 3 has 6 squares"),
        ("rnbqk/ppppx/5/PPPPP/RNBQK", "not a piece"),
        ("rnbqk/ppppp/5/PPPPP/RNBQK x", "'w' or 'b'"),
        ("P3k/5/5/5/4K", "White pawn on rank 5"),
        ("4k/5/5/5/p3K", "Black pawn on rank 1"),
        ("", "not a skirmish position"),
    ]:
        with pytest.raises(ValueError, match=words):
            Position.from_fen(bad)


def test_diagram() -> None:
    assert preset_position("classic").diagram() == (
        "5 r n b q k\n4 p p p p p\n3 . . . . .\n2 P P P P P\n1 R N B Q K\n  a b c d e"
    )


# ---------------------------------------------------------------------------------------------------------
# Fixed presets

EXPECTED_PRESETS = {
    "classic": "rnbqk/ppppp/5/PPPPP/RNBQK",
    "fortress": "rbkbr/ppppp/5/PPPPP/RBKBR",
    "spearhead": "1nqn1/ppkpp/5/PPKPP/1NQN1",
    "wings": "rb1br/1pkp1/5/1PKP1/RB1BR",
    "center_clash": "n1k1n/1pqp1/5/1PQP1/N1K1N",
}


def test_presets_are_the_rules() -> None:
    assert PRESETS == EXPECTED_PRESETS
    assert PRESET_NAMES == ("classic", "fortress", "spearhead", "wings", "center_clash", "random")
    for name, fen in EXPECTED_PRESETS.items():
        assert preset_position(name).fen() == fen + " w"
    with pytest.raises(ValueError, match="random_position"):
        preset_position("random")
    with pytest.raises(ValueError, match="not a skirmish setup"):
        preset_position("gardner")


def _mirror(position: Position) -> str:
    """The board seen from the other side: ranks reversed and colours swapped."""
    rows = [position.board[r * 5 : r * 5 + 5] for r in range(5)]
    return "".join(reversed(rows)).swapcase()


@pytest.mark.parametrize("name", list(EXPECTED_PRESETS))
def test_presets_are_playable_for_both_sides(name: str) -> None:
    position = preset_position(name)
    assert _mirror(position) == position.board  # Black's setup is White's mirrored
    assert position.board.count("K") == position.board.count("k") == 1
    assert legal_moves(position)
    assert legal_moves(Position(position.board, False))
    assert new_duel(position).result is None


# Whether White can capture Black's king on move one (and Black White's, were it to move first),
# for every preset with every odds the capture pairs can give: never.
ODDS_CASES = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (2, 0), (3, 0)]
PAIR_FOR_ODDS = {
    (0, 0): "NB",
    (0, 1): "NP",
    (0, 2): "RP",
    (0, 3): "QP",
    (1, 0): "PN",
    (2, 0): "PR",
    (3, 0): "PQ",
}


@pytest.mark.parametrize("name", list(EXPECTED_PRESETS))
@pytest.mark.parametrize("odds", ODDS_CASES)
def test_no_preset_allows_a_move_one_king_capture(name: str, odds: tuple[int, int]) -> None:
    attacker, defender = PAIR_FOR_ODDS[odds][0], PAIR_FOR_ODDS[odds][1]
    assert odds_pawns(attacker, defender) == odds
    position, _ = apply_odds(preset_position(name), attacker, defender)
    assert not white_can_take_king(position)
    assert not can_capture_king(position, False)
    assert legal_moves(position)
    assert legal_moves(Position(position.board, False))


# ---------------------------------------------------------------------------------------------------------
# Random setups


def test_random_mapping_identity_by_hand() -> None:
    # White's order a1 b1 c1 d1 e1 a2 b2 c2 d2 e2: pawns a2 b2 c2, then K a1, Q b1, R c1, B d1, N e1;
    # d2, e2 empty. Black the mirror.
    assert random_position(list(range(20))).fen() == "kqrbn/ppp2/5/PPP2/KQRBN w"


def test_random_mapping_reversed_by_hand() -> None:
    # White's order e2 d2 c2 b2 a2 e1 d1 c1 b1 a1: pawns e2 d2 c2; K b2, Q a2, R e1, B d1, N c1.
    assert random_position(list(range(19, -1, -1))).fen() == "2nbr/qkppp/5/QKPPP/2NBR w"


KING_IN_DANGER = (6, 17, 1, 14, 16, 3, 5, 12, 7, 9, 10, 4, 13, 11, 0, 18, 15, 8, 19, 2)
"""A shuffle whose setup lets White capture Black's king at once (``Rxe5#``): redrawn in play."""


def test_random_setup_with_a_move_one_king_capture() -> None:
    # White's order b2 b1 d1 a2 c2 e2 e1 a1 d2 c1: pawns b2 a2 c2; K b1, Q d1, R e2, B e1, N a1.
    # Black's order c4 e5 b4 c5 a5 d5 b5 d4 a4 e4: pawns c4 b4 d4; k e5, q c5, r a5, b d5, n b5.
    position = random_position(KING_IN_DANGER)
    assert position.fen() == "rnqbk/1ppp1/5/PPP1R/NK1QB w"
    assert white_can_take_king(position)
    captures = [m for m in legal_moves(position) if position.board[m.to_sq] == "k"]
    assert [san(position, m) for m in captures] == ["Rxe5#"]
    duel = play(new_duel(position), "Rxe5")
    assert duel.result is not None
    assert duel.result.winner is True


@given(st.permutations(list(range(RANDOM_SHUFFLE_SIZE))))
def test_random_setups_are_valid(permutation: list[int]) -> None:
    position = random_position(permutation)
    board = position.board
    assert position.white_to_move
    assert random_position(list(permutation)) == position
    assert sorted(board[:10].replace(".", "")) == sorted("KQRBNPPP")
    assert sorted(board[15:].replace(".", "")) == sorted("kqrbnppp")
    assert board[10:15] == "....."
    assert "P" not in board[:5]
    assert "p" not in board[20:]
    assert board[5:10].count("P") == 3
    assert board[15:20].count("p") == 3
    assert legal_moves(position)
    assert new_duel(position).result is None


def test_random_setups_vary_and_sometimes_endanger_blacks_king() -> None:
    rng = random.Random(11)
    seen = set()
    danger = 0
    for _ in range(2000):
        permutation = list(range(20))
        rng.shuffle(permutation)
        position = random_position(permutation)
        seen.add(position.board)
        danger += white_can_take_king(position)
    assert len(seen) > 1900
    assert 20 < danger < 300  # about 5%


@pytest.mark.parametrize(
    "permutation",
    [list(range(19)), [*range(19), 19, 0], [*range(19), 20], [*range(19), 18], [True, *range(1, 20)]],
)
def test_random_position_refuses_non_shuffles(permutation: list[int]) -> None:
    with pytest.raises(ValueError, match="shuffle of range"):
        random_position(permutation)


# ---------------------------------------------------------------------------------------------------------
# Odds

# Hand-written from the rule: gap = value(attacker) - value(defender) with P=1 N=3 B=3 R=5 Q=9 K=4;
# the weaker side loses min(3, |gap| // 2) pawns. (pawns from White = attacker, pawns from Black = defender)
ODDS_TABLE = {
    "P": {"P": (0, 0), "N": (1, 0), "B": (1, 0), "R": (2, 0), "Q": (3, 0), "K": (1, 0)},
    "N": {"P": (0, 1), "N": (0, 0), "B": (0, 0), "R": (1, 0), "Q": (3, 0), "K": (0, 0)},
    "B": {"P": (0, 1), "N": (0, 0), "B": (0, 0), "R": (1, 0), "Q": (3, 0), "K": (0, 0)},
    "R": {"P": (0, 2), "N": (0, 1), "B": (0, 1), "R": (0, 0), "Q": (2, 0), "K": (0, 0)},
    "Q": {"P": (0, 3), "N": (0, 3), "B": (0, 3), "R": (0, 2), "Q": (0, 0), "K": (0, 2)},
    "K": {"P": (0, 1), "N": (0, 0), "B": (0, 0), "R": (0, 0), "Q": (2, 0), "K": (0, 0)},
}


@pytest.mark.parametrize("attacker", "PNBRQK")
@pytest.mark.parametrize("defender", "PNBRQK")
def test_odds_table(attacker: str, defender: str) -> None:
    expected = ODDS_TABLE[attacker][defender]
    assert odds_pawns(attacker, defender) == expected
    assert odds_pawns(attacker.lower(), defender) == expected
    assert odds_pawns(attacker, defender.lower()) == expected


def test_odds_named_examples_and_errors() -> None:
    assert VALUES == {"P": 1, "N": 3, "B": 3, "R": 5, "Q": 9, "K": 4}
    assert odds_pawns("Q", "P") == (0, 3)
    assert odds_pawns("N", "B") == (0, 0)
    assert PAWN_REMOVAL_ORDER == ("c", "d", "b", "e", "a")
    with pytest.raises(ValueError, match="attacker must be a piece letter"):
        odds_pawns("X", "P")
    with pytest.raises(ValueError, match="defender must be a piece letter"):
        odds_pawns("Q", "")


# Removed squares for each preset: (pawns White loses, pawns Black loses) -> squares.
REMOVED = {
    "classic": {
        (0, 1): ("c4",),
        (0, 2): ("c4", "d4"),
        (0, 3): ("b4", "c4", "d4"),
        (1, 0): ("c2",),
        (2, 0): ("c2", "d2"),
        (3, 0): ("b2", "c2", "d2"),
    },
    "fortress": {
        (0, 1): ("c4",),
        (0, 2): ("c4", "d4"),
        (0, 3): ("b4", "c4", "d4"),
        (1, 0): ("c2",),
        (2, 0): ("c2", "d2"),
        (3, 0): ("b2", "c2", "d2"),
    },
    "spearhead": {  # no c-pawn: the king stands on c2 / c4
        (0, 1): ("d4",),
        (0, 2): ("b4", "d4"),
        (0, 3): ("b4", "d4", "e4"),
        (1, 0): ("d2",),
        (2, 0): ("b2", "d2"),
        (3, 0): ("b2", "d2", "e2"),
    },
    "wings": {  # only two pawns a side: capped
        (0, 1): ("d4",),
        (0, 2): ("b4", "d4"),
        (0, 3): ("b4", "d4"),
        (1, 0): ("d2",),
        (2, 0): ("b2", "d2"),
        (3, 0): ("b2", "d2"),
    },
    "center_clash": {  # only two pawns a side: capped
        (0, 1): ("d4",),
        (0, 2): ("b4", "d4"),
        (0, 3): ("b4", "d4"),
        (1, 0): ("d2",),
        (2, 0): ("b2", "d2"),
        (3, 0): ("b2", "d2"),
    },
}


@pytest.mark.parametrize("name", list(REMOVED))
@pytest.mark.parametrize("odds", ODDS_CASES)
def test_apply_odds_on_presets(name: str, odds: tuple[int, int]) -> None:
    start = preset_position(name)
    position, removed = apply_odds(start, PAIR_FOR_ODDS[odds][0], PAIR_FOR_ODDS[odds][1])
    expected = REMOVED[name].get(odds, ())
    assert tuple(square_name(sq) for sq in removed) == expected
    assert list(removed) == sorted(removed)
    for sq in range(25):
        if sq in removed:
            assert start.board[sq] in "Pp"
            assert position.board[sq] == "."
        else:
            assert position.board[sq] == start.board[sq]
    lost_white = sum(start.board[sq] == "P" for sq in removed)
    lost_black = sum(start.board[sq] == "p" for sq in removed)
    assert lost_white == min(odds[0], start.board.count("P"))
    assert lost_black == min(odds[1], start.board.count("p"))
    assert position.white_to_move


def test_apply_odds_takes_the_pawn_nearer_the_own_back_rank_first() -> None:
    # White's two pawns on the c-file (c2, c3), Black's two on the d-file (d4, d3).
    start = Position.from_fen("k4/3p1/2Pp1/2P2/K4 w")
    _, removed = apply_odds(start, "P", "Q")  # White loses 3: c2 first, then c3, then nothing else
    assert [square_name(sq) for sq in removed] == ["c2", "c3"]
    _, removed = apply_odds(start, "Q", "N")  # Black loses 3: d4 (nearer rank 5) first, then d3
    assert [square_name(sq) for sq in removed] == ["d3", "d4"]
    _, removed = apply_odds(start, "R", "N")  # Black loses 1: d4
    assert [square_name(sq) for sq in removed] == ["d4"]
    _, removed = apply_odds(start, "P", "N")  # White loses 1: c2
    assert [square_name(sq) for sq in removed] == ["c2"]
    unchanged, removed = apply_odds(start, "N", "B")
    assert unchanged == start
    assert removed == ()
