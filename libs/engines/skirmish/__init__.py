"""The 5x5 skirmish duel of Skirmish Chess (see ``docs/skirmish-duel.md``).

A capture attempt on the main board is decided by a duel on a 5x5 board: the attacker's owner plays
White, the defender's owner Black; whoever captures the other's king wins; no check rules, no castling,
no en passant, no double step, automatic promotion to a queen; drawn when the side to move has no move,
on threefold repetition or after 16 plies.

- The board: :data:`SIZE`, :func:`square_name`, :func:`parse_square`, :class:`Position`.
- Setups: :data:`PRESETS`, :data:`PRESET_NAMES`, :func:`preset_position`, :func:`random_position`
  (from a shuffle of :data:`RANDOM_SHUFFLE_SIZE` values), :func:`white_can_take_king`.
- Odds: :data:`VALUES`, :data:`PAWN_REMOVAL_ORDER`, :func:`odds_pawns`, :func:`apply_odds`.
- Moves: :class:`Move`, :func:`legal_moves`, :func:`apply_move`, :func:`san`, :func:`parse_move`,
  :func:`illegal_reason`, :func:`perft`.
- The duel: :data:`MAX_PLIES`, :class:`DuelEnd`, :class:`DuelResult`, :class:`Duel`, :func:`new_duel`,
  :func:`play`, :func:`time_out`, :func:`replay`.

Pure: no I/O, no clock, no randomness (a random setup is made from a shuffle given to it).
"""

from libs.engines.skirmish.board import (
    FILES,
    NAMES,
    SIZE,
    SQUARES,
    Position,
    parse_square,
    square_name,
)
from libs.engines.skirmish.duel import (
    MAX_PLIES,
    Duel,
    DuelEnd,
    DuelResult,
    new_duel,
    play,
    replay,
    time_out,
)
from libs.engines.skirmish.moves import (
    Move,
    apply_move,
    can_capture_king,
    captures_king,
    has_legal_move,
    illegal_reason,
    is_legal,
    is_promotion,
    legal_moves,
    move_from_uci,
    parse_move,
    perft,
    san,
)
from libs.engines.skirmish.odds import (
    PAWN_REMOVAL_ORDER,
    VALUES,
    apply_odds,
    odds_pawns,
)
from libs.engines.skirmish.presets import (
    BLACK_HOME,
    PRESET_NAMES,
    PRESETS,
    RANDOM_SHUFFLE_SIZE,
    WHITE_HOME,
    preset_position,
    random_position,
    white_can_take_king,
)

__all__ = [
    "BLACK_HOME",
    "FILES",
    "MAX_PLIES",
    "NAMES",
    "PAWN_REMOVAL_ORDER",
    "PRESETS",
    "PRESET_NAMES",
    "RANDOM_SHUFFLE_SIZE",
    "SIZE",
    "SQUARES",
    "VALUES",
    "WHITE_HOME",
    "Duel",
    "DuelEnd",
    "DuelResult",
    "Move",
    "Position",
    "apply_move",
    "apply_odds",
    "can_capture_king",
    "captures_king",
    "has_legal_move",
    "illegal_reason",
    "is_legal",
    "is_promotion",
    "legal_moves",
    "move_from_uci",
    "new_duel",
    "odds_pawns",
    "parse_move",
    "parse_square",
    "perft",
    "play",
    "preset_position",
    "random_position",
    "replay",
    "san",
    "square_name",
    "time_out",
    "white_can_take_king",
]
