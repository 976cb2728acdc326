"""Formations: saved setups that work for either colour.

A *formation* is an arrangement written in its owner's own orientation: row 1 is the owner's back row,
row 3 its front row, file ``a`` on the owner's left, all as the owner sees the board from its seat. For
White a formation square is the board square itself; for Black the board is turned half a turn (row 1 is
rank 8, row 3 rank 6, file ``a`` is file ``i``): formation square ``a1`` is Black's ``i8``. So a
formation saved while playing one colour sets up the same shape, as its owner sees it, with the other.

Formations are written like placements (``a1=FLG b1=PVT c2=SPY ...``, rows 1-3 only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from libs.engines.base import MalformedActionError
from libs.engines.generals.board import (
    SEATS,
    SQUARES,
    Placements,
    check_setup,
    parse_placements,
    placements_text,
)

FormationInput = str | Mapping[str, str] | Iterable[tuple[str, str]]


def _turn(square: int, seat: int) -> int:
    """A square turned from the owner's orientation to the board's (and back: the turn is its own
    inverse)."""
    return square if seat == 0 else SQUARES - 1 - square


def _check_seat(seat: int) -> None:
    if seat not in SEATS or isinstance(seat, bool):
        raise ValueError(f"Game of the Generals has seats 0 (White) and 1 (Black), not {seat!r}")


def parse_formation(formation: FormationInput) -> Placements:
    """A formation's placements (formation squares, rows 1-3), as read.

    :raises MalformedActionError: unreadable (see :func:`~libs.engines.generals.board.parse_placements`).
    """
    return parse_placements(formation)


def check_formation(formation: FormationInput, complete: bool = True) -> list[str]:
    """What makes ``formation`` no legal setup, in words (empty when it is one): unreadable, a square
    outside rows 1-3, a square twice, too many pieces of a rank, and (unless ``complete`` is false) fewer
    than 21 pieces."""
    try:
        placements = parse_formation(formation)
    except MalformedActionError as error:
        return [str(error)]
    return [
        reason.replace("White's home rows (ranks 1-3)", "a formation's rows 1-3")
        for reason in check_setup(0, placements, complete=complete)
    ]


def formation_to_setup(formation: FormationInput, seat: int) -> str:
    """The placements (board squares, in square order) that ``formation`` gives ``seat``: the text to
    send after ``setup``. It is not checked (see :func:`check_formation`).

    :raises MalformedActionError: the formation is unreadable.
    """
    _check_seat(seat)
    return placements_text((_turn(s, seat), r) for s, r in parse_formation(formation))


def setup_to_formation(placements: FormationInput, seat: int) -> str:
    """The formation (owner's orientation, in formation square order) of ``seat``'s placements.

    :raises MalformedActionError: the placements are unreadable.
    """
    _check_seat(seat)
    return placements_text((_turn(s, seat), r) for s, r in parse_placements(placements))
