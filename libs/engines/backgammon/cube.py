"""The doubling cube: its value, its owner, a pending double or beaver, and the rules that move it.

Usable on its own (a test or a bot can ask :func:`may_double` without a game). The cube is frozen; every
verb returns a new one. See ``docs/backgammon.md`` ("Doubling cube") for the rules as implemented.

- A player may double only at the start of their own turn, before rolling, when the cube is centred or
  theirs, the table uses the cube, and the game is not a Crawford game.
- Doubling offers the cube at twice its value. The opponent takes (the cube goes to them at that value),
  drops (the game ends: the dropper loses the value before the double) or, where beavers are played,
  beavers: the cube goes to twice the offered value and stays on the beaverer's side; the original doubler
  then takes (the game goes on at that value, the beaverer keeps the cube) or drops (and loses the offered
  value, the stake the beaverer had accepted).
- Automatic doubles (opening ties) turn a centred cube up without anybody owning it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from libs.engines.base import IllegalActionError


@dataclass(frozen=True, slots=True)
class Cube:
    """The doubling cube of one game."""

    value: int = 1
    """The stake now (before a pending double is answered)."""
    owner: int | None = None
    """The seat that owns the cube; ``None`` while it is centred (either player may double)."""
    offered_by: int | None = None
    """The seat whose double (or beaver) waits for an answer; ``None`` when none does."""
    offered_value: int = 0
    """The value a pending double or beaver proposes (0 when none is pending)."""
    beavered: bool = False
    """The pending offer is a beaver (answered by the original doubler)."""
    doubled: bool = False
    """A player has offered a double in this game (automatic doubles do not count): the Jacoby rule's
    condition for gammons to count."""
    automatic: int = 0
    """Automatic doubles made by opening ties in this game."""

    @property
    def pending(self) -> bool:
        return self.offered_by is not None


def may_double(cube: Cube, seat: int, *, enabled: bool = True, crawford: bool = False) -> bool:
    """Whether ``seat`` may double now (at the start of its turn, before rolling)."""
    return enabled and not crawford and not cube.pending and cube.owner in (None, seat)


def offer_double(cube: Cube, seat: int, *, enabled: bool = True, crawford: bool = False) -> Cube:
    """``seat`` doubles: the cube is offered at twice its value."""
    if not enabled:
        raise IllegalActionError("this table does not use the doubling cube")
    if crawford:
        raise IllegalActionError("this is the Crawford game: no doubling")
    if cube.pending:
        raise IllegalActionError("a double is already waiting for an answer")
    if cube.owner not in (None, seat):
        raise IllegalActionError(f"only the cube's owner (seat {cube.owner}) may double")
    return replace(cube, offered_by=seat, offered_value=2 * cube.value, doubled=True)


def take(cube: Cube, seat: int) -> Cube:
    """``seat`` takes the pending double (or beaver). A take of a double gives ``seat`` the cube; a take
    of a beaver leaves it with the beaverer."""
    _check_answer(cube, seat)
    assert cube.offered_by is not None
    owner = cube.offered_by if cube.beavered else seat
    return Cube(value=cube.offered_value, owner=owner, doubled=True, automatic=cube.automatic)


def beaver(cube: Cube, seat: int) -> Cube:
    """``seat``, just doubled, beavers: takes and at once redoubles, keeping the cube; the original doubler
    must now take or drop (a beaver cannot be beavered)."""
    _check_answer(cube, seat)
    if cube.beavered:
        raise IllegalActionError("a beaver cannot be beavered: take or drop")
    return replace(cube, offered_by=seat, offered_value=2 * cube.offered_value, beavered=True)


def drop_stake(cube: Cube, seat: int) -> int:
    """What ``seat`` loses by dropping the pending offer: the stake before it (the cube's value for a
    double; for a beaver, the value of the double the beaverer had accepted)."""
    _check_answer(cube, seat)
    return cube.offered_value // 2


def automatic_double(cube: Cube) -> Cube:
    """An opening tie turns the (centred) cube up one step; it stays centred."""
    return replace(cube, value=2 * cube.value, automatic=cube.automatic + 1)


def _check_answer(cube: Cube, seat: int) -> None:
    if cube.offered_by is None:
        raise IllegalActionError("no double is waiting for an answer")
    if cube.offered_by == seat:
        raise IllegalActionError("you cannot answer your own double")
