"""Go (weiqi, baduk) on 9x9, 13x13 and 19x19 (see ``docs/go.md``).

The board, usable on its own: :class:`Board` (incremental groups and liberties, captures, suicide, simple
ko), the colours :data:`EMPTY`, :data:`BLACK`, :data:`WHITE`, GTP coordinates :func:`parse_point` and
:func:`point_name`; handicap stones :func:`handicap_points` / :func:`handicap_names` (GNU Go's
``fixed_handicap``); counting :func:`score_board` with :class:`Score`, :class:`ColorScore`,
:class:`Scoring`, :func:`regions`.

The game: :data:`GO` (:class:`GoEngine`) with :class:`GoOptions`, :class:`GoState`, :class:`GoView`,
:class:`Phase`, the action words :data:`PASS`, :data:`ACCEPT`, :data:`RESUME`, :func:`parse_action`,
:func:`replay`; the SGF
record :func:`export_sgf`.
"""

from libs.engines.go.board import (
    BLACK,
    COLUMNS,
    EMPTY,
    SIZES,
    WHITE,
    Board,
    Geometry,
    Group,
    geometry,
    parse_point,
    point_name,
)
from libs.engines.go.engine import (
    ACCEPT,
    COUNT_WITHIN_MS,
    GO,
    PASS,
    PASS_POINT,
    RESUME,
    GoEngine,
    GoOptions,
    GoState,
    GoView,
    Phase,
    count,
    move_color,
    parse_action,
    replay,
)
from libs.engines.go.handicap import handicap_names, handicap_points
from libs.engines.go.scoring import ColorScore, Score, Scoring, regions, score_board
from libs.engines.go.sgf import export_sgf, sgf_point, sgf_result

__all__ = [
    "ACCEPT",
    "BLACK",
    "COLUMNS",
    "COUNT_WITHIN_MS",
    "EMPTY",
    "GO",
    "PASS",
    "PASS_POINT",
    "RESUME",
    "SIZES",
    "WHITE",
    "Board",
    "ColorScore",
    "Geometry",
    "GoEngine",
    "GoOptions",
    "GoState",
    "GoView",
    "Group",
    "Phase",
    "Score",
    "Scoring",
    "count",
    "export_sgf",
    "geometry",
    "handicap_names",
    "handicap_points",
    "move_color",
    "parse_action",
    "parse_point",
    "point_name",
    "regions",
    "replay",
    "score_board",
    "sgf_point",
    "sgf_result",
]
