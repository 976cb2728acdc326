"""The skirmish move generator against an independent one, and perft.

The reference generator below shares nothing with the engine: it reads the position's FEN text itself,
keeps the board as a dict ``{(file, rank): (white, letter)}`` and walks directions with coordinates;
moves are UCI strings. It is compared with :func:`legal_moves` (and :func:`apply_move`) on every
preset, random setups, random positions with pieces anywhere, and the positions random play reaches
from them.

Perft (leaf counts; a sequence capturing a king before its last ply counts nothing, see
:func:`libs.engines.skirmish.perft`), White to move:

============  =====  ======  =======  ========
preset        1      2       3        4
============  =====  ======  =======  ========
classic           7      53      510     5,000
fortress          5      28      228     1,820
spearhead        11     127    1,648    21,108
wings            16     234    3,822    58,483
center_clash     14     186    2,522    33,831
============  =====  ======  =======  ========
"""

from __future__ import annotations

import random

import pytest

from libs.engines.skirmish import (
    PRESETS,
    Position,
    apply_move,
    has_legal_move,
    legal_moves,
    perft,
    preset_position,
    random_position,
)

Board = dict[tuple[int, int], tuple[bool, str]]
FILE_LETTERS = "abcde"


def ref_read(fen: str) -> tuple[Board, bool]:
    placement, _, side = fen.partition(" ")
    board: Board = {}
    for row, text in enumerate(placement.split("/")):
        rank = 4 - row
        file = 0
        for char in text:
            if char.isdigit():
                file += int(char)
            else:
                board[(file, rank)] = (char.isupper(), char.lower())
                file += 1
        assert file == 5
    return board, side != "b"


def ref_write(board: Board, white: bool) -> str:
    rows = []
    for rank in range(4, -1, -1):
        text = ""
        empty = 0
        for file in range(5):
            piece = board.get((file, rank))
            if piece is None:
                empty += 1
                continue
            if empty:
                text += str(empty)
                empty = 0
            text += piece[1].upper() if piece[0] else piece[1]
        rows.append(text + (str(empty) if empty else ""))
    return "/".join(rows) + (" w" if white else " b")


def ref_name(file: int, rank: int) -> str:
    return f"{FILE_LETTERS[file]}{rank + 1}"


def ref_moves(board: Board, white: bool) -> list[str]:
    moves: list[str] = []
    for (file, rank), (colour, letter) in board.items():
        if colour != white:
            continue
        here = ref_name(file, rank)

        def free_or_enemy(f: int, r: int) -> bool:
            if not (0 <= f <= 4 and 0 <= r <= 4):
                return False
            other = board.get((f, r))
            return other is None or other[0] != white

        if letter == "p":
            step = 1 if white else -1
            if 0 <= rank + step <= 4 and (file, rank + step) not in board:
                moves.append(here + ref_name(file, rank + step))
            for side in (-1, 1):
                f, r = file + side, rank + step
                other = board.get((f, r))
                if other is not None and other[0] != white:
                    moves.append(here + ref_name(f, r))
        elif letter in "nk":
            if letter == "n":
                jumps = [(a, b) for a in (-2, -1, 1, 2) for b in (-2, -1, 1, 2) if abs(a) != abs(b)]
            else:
                jumps = [(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1) if (a, b) != (0, 0)]
            for a, b in jumps:
                if free_or_enemy(file + a, rank + b):
                    moves.append(here + ref_name(file + a, rank + b))
        else:
            directions = []
            if letter in "bq":
                directions += [(1, 1), (1, -1), (-1, 1), (-1, -1)]
            if letter in "rq":
                directions += [(1, 0), (-1, 0), (0, 1), (0, -1)]
            for a, b in directions:
                f, r = file + a, rank + b
                while 0 <= f <= 4 and 0 <= r <= 4:
                    other = board.get((f, r))
                    if other is None:
                        moves.append(here + ref_name(f, r))
                    else:
                        if other[0] != white:
                            moves.append(here + ref_name(f, r))
                        break
                    f, r = f + a, r + b
    return sorted(moves)


def ref_play(board: Board, uci: str) -> Board:
    start = (FILE_LETTERS.index(uci[0]), int(uci[1]) - 1)
    end = (FILE_LETTERS.index(uci[2]), int(uci[3]) - 1)
    after = dict(board)
    colour, letter = after.pop(start)
    if letter == "p" and end[1] == (4 if colour else 0):
        letter = "q"
    after[end] = (colour, letter)
    return after


def ref_perft(board: Board, white: bool, depth: int) -> int:
    if depth == 0:
        return 1
    kings = [piece for piece in board.values() if piece[1] == "k"]
    if sorted(colour for colour, _ in kings) != [False, True]:
        return 0  # a king was captured: the duel is over
    return sum(ref_perft(ref_play(board, move), not white, depth - 1) for move in ref_moves(board, white))


def random_board(rng: random.Random) -> Position:
    """Pieces anywhere: one king a side, up to 7 more pieces each, pawns off their promotion rank."""
    cells = ["."] * 25
    squares = rng.sample(range(25), 25)
    cells[squares.pop()] = "K"
    cells[squares.pop()] = "k"
    for _ in range(rng.randrange(0, 15)):
        sq = squares.pop()
        piece = rng.choice("PNBRQ")
        white = rng.random() < 0.5
        if piece == "P" and ((white and sq >= 20) or (not white and sq < 5)):
            continue
        cells[sq] = piece if white else piece.lower()
    return Position("".join(cells), rng.random() < 0.5)


def compare(position: Position) -> list[str]:
    """Check the engine against the reference in ``position``; return the listed moves (UCI)."""
    board, white = ref_read(position.fen())
    assert ref_write(board, white) == position.fen()
    expected = ref_moves(board, white)
    got = [m.uci for m in legal_moves(position)]
    assert got == expected, position.fen()
    assert has_legal_move(position) == bool(expected)
    return got


def walk(position: Position, rng: random.Random, plies: int) -> int:
    """Random play from ``position``, comparing every position and every move's result; positions seen."""
    seen = 0
    for _ in range(plies):
        moves = compare(position)
        seen += 1
        if not moves or "K" not in position.board or "k" not in position.board:
            break
        move = rng.choice(legal_moves(position))
        after = apply_move(position, move)
        board, white = ref_read(position.fen())
        assert after.fen() == ref_write(ref_play(board, move.uci), not white)
        position = after
    return seen


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_match_reference(name: str) -> None:
    rng = random.Random(name)
    position = preset_position(name)
    compare(position)
    assert sum(walk(position, rng, 20) for _ in range(60)) > 300


def test_random_setups_match_reference() -> None:
    rng = random.Random(3)
    positions = 0
    for _ in range(400):
        permutation = list(range(20))
        rng.shuffle(permutation)
        positions += walk(random_position(permutation), rng, 20)
    assert positions > 4000


def test_random_boards_match_reference() -> None:
    rng = random.Random(4)
    positions = 0
    for _ in range(600):
        positions += walk(random_board(rng), rng, 6)
    assert positions > 2000


def test_moves_are_sorted_by_uci_and_shared() -> None:
    position = preset_position("wings")
    moves = legal_moves(position)
    assert [m.uci for m in moves] == sorted(m.uci for m in moves)
    assert moves == legal_moves(position)


PERFT = {
    "classic": (7, 53, 510, 5000),
    "fortress": (5, 28, 228, 1820),
    "spearhead": (11, 127, 1648, 21108),
    "wings": (16, 234, 3822, 58483),
    "center_clash": (14, 186, 2522, 33831),
}


@pytest.mark.parametrize("name", sorted(PERFT))
def test_perft_presets(name: str) -> None:
    position = preset_position(name)
    board, white = ref_read(position.fen())
    expected = PERFT[name]
    assert perft(position, 0) == 1
    for depth in range(1, 5):
        assert perft(position, depth) == expected[depth - 1]
    assert tuple(ref_perft(board, white, depth) for depth in range(1, 5)) == expected


RANDOM_PERFT: dict[tuple[int, ...], tuple[str, tuple[int, ...]]] = {
    # shuffle -> (setup, perft 1..4)
    (7, 14, 0, 19, 3, 11, 9, 16, 5, 12, 1, 18, 8, 13, 2, 17, 6, 10, 4, 15): (
        "1qrbk/1pnpp/5/P1PBP/KRNQ1 w",
        (14, 143, 2221, 31736),
    ),
    (19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0): (
        "2nbr/qkppp/5/QKPPP/2NBR w",
        (16, 258, 4122, 64718),
    ),
}


@pytest.mark.parametrize("permutation", list(RANDOM_PERFT))
def test_perft_random_setups(permutation: tuple[int, ...]) -> None:
    fen, expected = RANDOM_PERFT[permutation]
    position = random_position(permutation)
    assert position.fen() == fen
    board, white = ref_read(fen)
    assert tuple(perft(position, d) for d in range(1, 5)) == expected
    assert ref_perft(board, white, 4) == expected[3]


def test_perft_counts_king_capture_only_as_a_last_ply() -> None:
    # White's rook takes the king at once; nothing follows a captured king.
    position = Position.from_fen("k4/5/5/5/R3K w")
    assert perft(position, 1) == len(legal_moves(position)) == 10
    board, white = ref_read(position.fen())
    assert perft(position, 2) == ref_perft(board, white, 2)
    assert perft(position, 3) == ref_perft(board, white, 3)
    # The king capture (a1a5) contributes a leaf at depth 1 but nothing deeper.
    assert perft(position, 2) == sum(
        perft(apply_move(position, m), 1) for m in legal_moves(position) if m.uci != "a1a5"
    )
    with pytest.raises(ValueError, match="depth"):
        perft(position, -1)
