"""Chess on python-chess for the match runtime: the ``contest`` (SkillClassics) and ``fide`` rulesets.

See ``docs/chess.md`` for the rules as implemented. The public API:

- :class:`ChessEngine` (and the instance :data:`CHESS`), :class:`ChessOptions`, :class:`Ruleset`,
  :class:`ChessState`, :class:`ChessView`;
- actions :class:`Move`, :class:`OfferDraw`, :class:`AcceptDraw`, :class:`DeclineDraw`,
  :class:`ClaimDraw` (on the position, or naming a move: ``claim_draw Nf3``) and :func:`parse_action`;
- :func:`export_pgn` with :func:`result_token` and :func:`termination_text`;
- the contest tiebreak (:func:`break_tie`, :func:`material`, :func:`moves_played`), :func:`perft`, and
  :func:`is_blocked_dead` (FIDE dead positions of locked pawns).
"""

from libs.engines.chess.actions import (
    CLAIM_DRAW,
    DRAW_ACTIONS,
    AcceptDraw,
    ChessAction,
    ClaimDraw,
    DeclineDraw,
    DrawAction,
    Move,
    OfferDraw,
    parse_action,
)
from libs.engines.chess.dead import is_blocked_dead
from libs.engines.chess.engine import CHESS, ChessEngine, ChessOptions, ChessState, ChessView, Ruleset, perft
from libs.engines.chess.notation import format_clock, parse_clock, resolve_move
from libs.engines.chess.pgn import export_pgn, result_token, termination_text
from libs.engines.chess.tiebreak import PIECE_VALUES, break_tie, material, moves_played

__all__ = [
    "CHESS",
    "CLAIM_DRAW",
    "DRAW_ACTIONS",
    "PIECE_VALUES",
    "AcceptDraw",
    "ChessAction",
    "ChessEngine",
    "ChessOptions",
    "ChessState",
    "ChessView",
    "ClaimDraw",
    "DeclineDraw",
    "DrawAction",
    "Move",
    "OfferDraw",
    "Ruleset",
    "break_tie",
    "export_pgn",
    "format_clock",
    "is_blocked_dead",
    "material",
    "moves_played",
    "parse_action",
    "parse_clock",
    "perft",
    "resolve_move",
    "result_token",
    "termination_text",
]
