"""Backgammon legal plays in C (``_native.c``; built by ``setup.py``, used through ``native.py``)."""

from collections.abc import Sequence
from typing import Any

from libs.engines.backgammon.moves import Play

def plays(board: bytes | Sequence[int], high: int, low: int) -> list[tuple[str, bytes, bytes]]:
    """Every distinct legal play of the roll ``high`` >= ``low`` (1..6) from the mover's own board (26
    signed values: off, points 1..24, bar), sorted by notation: ``(notation, steps, after)``, ``steps``
    4 bytes a move (start, end, hit, die) in the order played, ``after`` the own board after the play
    (26 signed bytes)."""

def play_objects(
    board: bytes | Sequence[int],
    high: int,
    low: int,
    white: bool,
    other_bar: int,
    other_off: int,
    kinds: tuple[type[Play], type[Any], tuple[Any, ...]],
) -> tuple[Play, ...]:
    """The same plays as finished ``Play`` objects. ``kinds``: (Play, Position, the Move of each
    (start, end, hit) at ``(start * 26 + end) * 2 + hit``, 1,352 entries); ``white``: the mover is White;
    ``other_bar``, ``other_off``: the opponent's checkers on the bar and off before the play."""
