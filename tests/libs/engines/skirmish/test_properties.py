"""Properties of random skirmish duels (hypothesis)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from libs.engines.skirmish import (
    MAX_PLIES,
    PRESET_NAMES,
    DuelEnd,
    Move,
    Position,
    apply_odds,
    illegal_reason,
    legal_moves,
    new_duel,
    parse_move,
    play,
    preset_position,
    random_position,
    replay,
    san,
)

SETUPS = st.one_of(
    st.sampled_from([name for name in PRESET_NAMES if name != "random"]).map(preset_position),
    st.permutations(list(range(20))).map(random_position),
)
PIECES = st.sampled_from("PNBRQK")


@settings(max_examples=150, deadline=None)
@given(SETUPS, PIECES, PIECES, st.randoms(use_true_random=False))
def test_random_duels(start: Position, attacker: str, defender: str, rng: random.Random) -> None:
    start, _ = apply_odds(start, attacker, defender)
    duel = new_duel(start)
    while duel.result is None:
        moves = duel.legal
        assert moves
        assert list(moves) == sorted(moves, key=lambda m: m.uci)
        # Every listed move is accepted, as a Move, as UCI and as SAN.
        for move in moves:
            text = san(duel.position, move)
            assert parse_move(duel.position, text) == move
            assert parse_move(duel.position, move.uci) == move
        move = rng.choice(moves)
        before = duel
        forms: list[Move | str] = [move, move.uci, san(duel.position, move)]
        written = rng.choice(forms)
        duel = play(duel, written)
        assert duel.ply == before.ply + 1 <= MAX_PLIES
        assert duel.moves_uci[-1] == move.uci
        assert duel.position.white_to_move != before.position.white_to_move
    assert duel.ply <= MAX_PLIES
    assert duel.legal == ()
    result = duel.result
    if result.end is DuelEnd.KING_CAPTURED:
        assert result.winner is not None
        assert duel.moves_san[-1].endswith("#")
        assert ("k" not in duel.position.board) is result.winner
    else:
        assert result.winner is None
        assert result.end in (DuelEnd.REPETITION, DuelEnd.PLY_LIMIT, DuelEnd.NO_MOVES)
        assert result.end is not DuelEnd.PLY_LIMIT or duel.ply == MAX_PLIES
        assert result.end is not DuelEnd.NO_MOVES or not legal_moves(duel.position)
    # Replaying the record from the start gives the same duel, by UCI and by SAN.
    assert replay(start, duel.moves_uci) == duel
    assert replay(start, duel.moves_san) == duel


@settings(max_examples=60, deadline=None)
@given(SETUPS, st.randoms(use_true_random=False))
def test_illegal_reason_agrees_with_legal_moves(start: Position, rng: random.Random) -> None:
    position = start
    for _ in range(8):
        listed = set(legal_moves(position))
        for from_sq in range(25):
            for to_sq in range(25):
                move = Move(from_sq, to_sq)
                reason = illegal_reason(position, move)
                assert (reason is None) == (move in listed), (position.fen(), move.uci, reason)
        if not listed or "k" not in position.board or "K" not in position.board:
            break
        position = play(new_duel(position), rng.choice(sorted(listed))).position
