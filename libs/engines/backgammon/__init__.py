"""Backgammon: standard, nackgammon and hypergammon (see ``docs/backgammon.md``).

The geometry, usable on its own: :class:`Position` (with :meth:`Position.start`), :class:`Variant`, the
seats :data:`WHITE` and :data:`BLACK`, :func:`own_point` / :func:`absolute_point`, :func:`pip_count`,
:func:`has_contact`, :func:`all_home`, :func:`game_value`; legal plays :func:`legal_plays` with
:class:`Play` and :class:`Move`, :func:`best_bearoff`; notation :func:`canonical_notation` and
:func:`parse_play`.

The game: :data:`BACKGAMMON` (:class:`BackgammonEngine`) with :class:`BackgammonOptions`,
:class:`BackgammonState`, :class:`BackgammonView`, :class:`Phase`, the record (:class:`Event`,
:class:`GameResult`), actions (:func:`parse_action`), the cube (:class:`Cube`), the match score
(:class:`MatchScore`) and the MAT match file (:func:`export_mat`, :func:`parse_mat`).
"""

from libs.engines.backgammon.actions import (
    ACCEPT,
    BEAVER,
    CONTINUE,
    DOUBLE,
    DROP,
    REJECT,
    ROLL,
    TAKE,
    BackgammonAction,
    PlayText,
    Resign,
    ResignLevel,
    Simple,
    Word,
    parse_action,
)
from libs.engines.backgammon.board import (
    BLACK,
    WHITE,
    Position,
    Variant,
    absolute_point,
    all_home,
    game_value,
    has_contact,
    own_point,
    pip_count,
)
from libs.engines.backgammon.cube import Cube, may_double
from libs.engines.backgammon.engine import (
    BACKGAMMON,
    BackgammonEngine,
    BackgammonOptions,
    BackgammonState,
    BackgammonView,
    Event,
    EventKind,
    GameResult,
    Phase,
    dice_request,
    replay,
)
from libs.engines.backgammon.mat import MatAction, MatFormatError, MatGame, MatMatch, export_mat, parse_mat
from libs.engines.backgammon.match import MatchScore
from libs.engines.backgammon.moves import Move, Play, best_bearoff, legal_plays
from libs.engines.backgammon.notation import canonical_notation, parse_play

__all__ = [
    "ACCEPT",
    "BACKGAMMON",
    "BEAVER",
    "BLACK",
    "CONTINUE",
    "DOUBLE",
    "DROP",
    "REJECT",
    "ROLL",
    "TAKE",
    "WHITE",
    "BackgammonAction",
    "BackgammonEngine",
    "BackgammonOptions",
    "BackgammonState",
    "BackgammonView",
    "Cube",
    "Event",
    "EventKind",
    "GameResult",
    "MatAction",
    "MatFormatError",
    "MatGame",
    "MatMatch",
    "MatchScore",
    "Move",
    "Phase",
    "Play",
    "PlayText",
    "Position",
    "Resign",
    "ResignLevel",
    "Simple",
    "Variant",
    "Word",
    "absolute_point",
    "all_home",
    "best_bearoff",
    "canonical_notation",
    "dice_request",
    "export_mat",
    "game_value",
    "has_contact",
    "legal_plays",
    "may_double",
    "own_point",
    "parse_action",
    "parse_mat",
    "parse_play",
    "pip_count",
    "replay",
]
