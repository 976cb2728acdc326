"""Perft through the engine's own legal-action listing and ``apply``, against the chessprogramming.org
reference counts (https://www.chessprogramming.org/Perft_Results)."""

from __future__ import annotations

import pytest

from libs.engines.chess import perft
from tests.libs.engines.chess import new

POSITIONS = {
    "initial": (None, (20, 400, 8902)),
    "kiwipete": (
        "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
        (48, 2039, 97862),
    ),
    "position 3": ("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - -", (14, 191, 2812)),
    "position 4": ("r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1", (6, 264, 9467)),
    "position 5": ("rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8", (44, 1486, 62379)),
    # The published FEN: black bishop on g4, white pawn on a3. (Without them, as the position is sometimes
    # misquoted, White has 45 moves, not 46.)
    "position 6": (
        "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
        (46, 2079, 89890),
    ),
}

CASES = [
    pytest.param(fen, depth, counts[depth - 1], id=f"{name}-{depth}")
    for name, (fen, counts) in POSITIONS.items()
    for depth in (1, 2, 3)
]


@pytest.mark.parametrize(("fen", "depth", "expected"), CASES)
def test_perft(fen: str | None, depth: int, expected: int) -> None:
    assert perft(new(fen), depth) == expected


def test_perft_depth_zero_is_one_and_negative_is_refused() -> None:
    assert perft(new(), 0) == 1
    with pytest.raises(ValueError, match="negative"):
        perft(new(), -1)
