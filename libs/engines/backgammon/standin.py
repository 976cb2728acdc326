"""The stand-in for a backgammon seat whose player is away (002's "ghost player"; docs/backgammon.md,
"Clocks and disconnects"): a plain, deterministic player, so that a replayed log plays the same game.

It rolls (it never doubles), takes every double (a stand-in does not give a game away), rejects
resignation offers, and never presses "continue" between the games of a match: that is the player's own
step (002: the disconnected player has 2 minutes to come back and continue). Its play is the one that
bears off the most checkers once there is no contact, otherwise the best by a small evaluation: hits,
made points and fewer pips for it, blots against it (ties: the first by notation).
"""

from __future__ import annotations

from libs.engines.backgammon.board import Position, has_contact, pip_count
from libs.engines.backgammon.engine import BACKGAMMON, BackgammonState, Phase
from libs.engines.backgammon.moves import Play, best_bearoff


def stand_in_action(state: BackgammonState, seat: int) -> str | None:
    """What the stand-in plays for ``seat`` now, in the family's notation; ``None`` when it does nothing
    (not its turn, or the continue step between games)."""
    if state.phase is Phase.BETWEEN_GAMES or not BACKGAMMON.legal_actions(state, seat):
        return None
    if state.phase is Phase.ROLL_OR_DOUBLE:
        return "roll"
    if state.phase is Phase.DOUBLED:
        return "take"
    if state.phase is Phase.RESIGN_OFFERED:
        return "reject"
    plays = state.plays
    if not has_contact(state.position):
        bearing = best_bearoff(plays, seat)
        if bearing is not None:
            return bearing.notation
    return max(plays, key=lambda play: (_score(play.result, seat), _negated(play))).notation


def _score(position: Position, seat: int) -> int:
    opponent = 1 - seat
    own = [position.count(seat, point) for point in range(1, 25)]
    made = sum(1 for n in own if n >= 2)
    blots = sum(1 for n in own if n == 1)
    return 8 * position.bar[opponent] + 3 * made - 4 * blots - pip_count(position, seat) // 8


def _negated(play: Play) -> tuple[int, ...]:
    """A key that makes ``max`` prefer the first play by notation among equals."""
    return tuple(-ord(ch) for ch in play.notation)
