"""The chess family's codecs without a server: ``view_to_proto`` against a plain construction of the same
message, and ``describe`` against python-chess's SAN."""

from __future__ import annotations

import random

import chess
import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.engines.chess import CHESS, DRAW_ACTIONS, ChessView, Ruleset, parse_action, resolve_move
from services.rules_chess.family import _RULESET_TO_PROTO, ChessFamily
from tests.libs.engines.chess import CLOCKS, new, play

FAMILY = ChessFamily()


def reference_proto(view: ChessView) -> rules_pb2.View:
    """The message built the plain way: every field given to the constructors."""
    proto = chess_pb2.ChessView(
        fen=view.fen,
        ruleset=_RULESET_TO_PROTO[view.ruleset],
        moves_san=view.moves_san,
        moves_uci=view.moves_uci,
        last_move_uci=view.last_move or "",
        check=view.is_check,
        material=chess_pb2.Material(white=view.material[0], black=view.material[1]),
        legal_moves=[
            chess_pb2.LegalMove(uci=uci, san=san)
            for uci, san in zip(view.legal_moves_uci, view.legal_moves_san, strict=True)
        ],
        can_claim_draw=view.can_claim_draw,
        ply=view.ply_count,
        variant=chess_pb2.VARIANT_STANDARD,
        claim_moves=getattr(view, "claim_moves", ()),
    )
    if view.draw_offer is not None:
        proto.draw_offer_by = view.draw_offer
    return rules_pb2.View(chess=proto)


def assert_same_proto(view: ChessView) -> rules_pb2.View:
    made, expected = FAMILY.view_to_proto(view), reference_proto(view)
    assert made == expected
    assert made.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)
    assert made.WhichOneof("family") == "chess"
    assert made.chess.HasField("material")
    assert made.chess.HasField("draw_offer_by") == (view.draw_offer is not None)
    return made


def test_view_to_proto_along_random_games() -> None:
    rng = random.Random(3)
    for game in range(6):
        ruleset = (Ruleset.CONTEST, Ruleset.FIDE)[game % 2]
        state = new("4k3/8/8/8/8/8/8/R3K2N w - - 0 1" if game >= 4 else None, ruleset)
        while (seat := CHESS.to_move(state)) is not None:
            assert_same_proto(CHESS.view(state, None))
            moves = [a for a in CHESS.legal_actions(state, seat) if a not in DRAW_ACTIONS]
            state = CHESS.apply(state, seat, rng.choice(moves), CLOCKS)
        made = assert_same_proto(CHESS.view(state, None))
        assert not made.chess.legal_moves


@pytest.mark.parametrize("offerer", [0, 1])
def test_view_to_proto_with_a_draw_offer_claim_and_bare_kings(offerer: int) -> None:
    """The fields whose presence matters: a draw offer by seat 0 (a default value that must still be
    present), material of 0 to 0, a claimable draw, the position before any move."""
    assert_same_proto(CHESS.view(new(ruleset=Ruleset.FIDE), None))
    offered = CHESS.apply(new(ruleset=Ruleset.FIDE), offerer, "offer_draw", CLOCKS)
    assert assert_same_proto(CHESS.view(offered, None)).chess.draw_offer_by == offerer
    shuffled = play(new(ruleset=Ruleset.FIDE), *("Nf3", "Nf6", "Ng1", "Ng8") * 2)
    assert assert_same_proto(CHESS.view(shuffled, None)).chess.can_claim_draw
    bare = play(new("4k3/8/8/8/8/8/3r4/4K3 w - - 0 1"), "Kxd2")
    made = assert_same_proto(CHESS.view(bare, None))
    assert (made.chess.material.white, made.chess.material.black) == (0, 0)


@pytest.mark.parametrize("served", [False, True])
def test_describe_writes_python_chess_san(served: bool) -> None:
    state = play(new(), "e4", "e5", "Qh5", "Nc6", "Bc4", "Nf6")
    if served:
        CHESS.view(state, None)
    board = state.board()
    texts = [*CHESS.legal_actions(state, 0), "Qxf7#", "Qxf7", "Bxf7+", "Nc3", "h5f7"]
    for text in texts:
        expected = board.san(resolve_move(board, text))
        assert FAMILY.describe(state, parse_action(text)) == expected
    assert FAMILY.describe(state, parse_action("Qxf7")) == "Qxf7#"
    fide = new(ruleset=Ruleset.FIDE)
    for notation in DRAW_ACTIONS:
        assert FAMILY.describe(fide, parse_action(notation)) == notation
    assert chess.Board().san(chess.Move.from_uci("g1f3")) == FAMILY.describe(new(), parse_action("g1f3"))
