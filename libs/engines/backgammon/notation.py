"""Backgammon play notation: the canonical text of a play, and reading what a player typed.

Always in the MOVER's own numbering (``bar`` = 25, ``off`` = 0), as players and gnubg write it:
``"24/18 13/8"``, ``"bar/22*"``, ``"6/off"``, ``"8/4(2)"``, ``"24/18*/13"``. Canonical form:

- steps that continue one another (one ends where another starts) are chained into one checker's path,
  and the intermediate points of a path are left out unless a hit happened there (``"24/13"``,
  ``"24/18*/13"``); when several paths end where a step starts, the first (highest start) continues;
- paths sorted by start point descending (the bar first), then end descending (then by text);
- identical paths grouped with a count, ``"8/4(2)"``; the ``*`` of a group marks a hit by one of them;
- separated by one space.

Any equivalent text is accepted by :func:`parse_play`: any order, merged or split steps, ``*`` optional,
``(n)`` repeats, or the 1-based index of the play in the list.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from libs.engines.base import IllegalActionError, MalformedActionError

if TYPE_CHECKING:
    from libs.engines.backgammon.moves import Play

_Step = tuple[int, int, bool]


_POINT_TEXT = ("off", *(str(n) for n in range(1, 25)), "bar")
_SINGLE = {
    (start, end, hit): f"{_POINT_TEXT[start]}/{_POINT_TEXT[end]}{'*' if hit else ''}"
    for start in range(1, 26)
    for end in range(0, start)
    for hit in (False, True)
}


def _descending(step: _Step) -> tuple[int, int]:
    return -step[0], -step[1]


def _shape_order(shape: list[Any]) -> tuple[int, int, tuple[int, ...], bool]:
    return -shape[0], -shape[1], shape[3], not shape[2]


@lru_cache(maxsize=8192)
def _canonical(steps: tuple[_Step, ...]) -> str:
    """The notation of steps already sorted by start, then end, descending (the generator's order for
    doubles; two steps are put in order here)."""
    count = len(steps)
    if count == 1:
        return _SINGLE[steps[0]]
    if count == 2:
        first, second = steps
        if (first[0], first[1]) < (second[0], second[1]):
            first, second = second, first
        if first[1] == second[0]:  # one checker's path (ends are never 0 here: 0 starts nothing)
            if first[2]:
                last = _POINT_TEXT[second[1]] + ("*" if second[2] else "")
                return f"{_POINT_TEXT[first[0]]}/{first[1]}*/{last}"
            return _SINGLE[first[0], second[1], second[2]]
        if first[0] == second[0] and first[1] == second[1]:
            return _SINGLE[first[0], first[1], first[2] or second[2]] + "(2)"
        return f"{_SINGLE[first]} {_SINGLE[second]}"
    # Chain the steps into paths: [start, end, hit at end, points hit on the way].
    paths: list[list[Any]] = []
    for start, end, hit in steps:
        for path in paths:
            if path[1] == start:
                if path[2]:
                    path[3] = (*path[3], start)
                path[1] = end
                path[2] = hit
                break
        else:
            paths.append([start, end, hit, ()])
    if len(paths) == 1:
        start, end, hit, middle = paths[0]
        if not middle:
            return _SINGLE[start, end, hit]
    else:
        paths.sort(key=_shape_order)
    parts: list[str] = []
    index = 0
    while index < len(paths):
        start, end, hit, middle = paths[index]
        repeat = 1
        while index + repeat < len(paths):
            other = paths[index + repeat]
            if other[0] != start or other[1] != end or other[3] != middle:
                break
            hit = hit or other[2]
            repeat += 1
        if middle:
            text = "/".join([_POINT_TEXT[start], *(f"{point}*" for point in middle), _POINT_TEXT[end]])
            text += "*" if hit else ""
        else:
            text = _SINGLE[start, end, hit]
        parts.append(f"{text}({repeat})" if repeat > 1 else text)
        index += repeat
    return " ".join(parts)


def canonical_notation(steps: Iterable[_Step]) -> str:
    """The canonical notation of single-die steps ``(start, end, hit)`` in own numbering, in any order."""
    return _canonical(tuple(sorted(steps, key=_descending)))


_LONGEST = 100
_TOKEN = re.compile(r"^(?P<path>[^()]+?)(?:\((?P<count>\d)\))?$")
_POINT = re.compile(r"^(?P<point>bar|off|b|\d{1,2})(?P<hit>\*?)$")


def _read_point(text: str, token: str) -> tuple[int, bool]:
    match = _POINT.match(text)
    if match is None:
        raise MalformedActionError(f"cannot read {text!r} in {token!r}: a point is 1-24, 'bar' or 'off'")
    point = match["point"]
    number = 25 if point in ("bar", "b") else 0 if point == "off" else int(point)
    if number > 25:
        raise MalformedActionError(f"no point {number} in {token!r}: points are 1-24, 'bar' and 'off'")
    return number, bool(match["hit"])


def _read(text: str) -> list[list[tuple[int, bool]]]:
    """The paths the text names, each [(point, marked hit), ...] from start to end, repeats expanded."""
    paths: list[list[tuple[int, bool]]] = []
    if len(text) > _LONGEST:
        raise MalformedActionError(f"a play is at most {_LONGEST} characters")
    tokens = text.replace(",", " ").split()
    if not tokens:
        raise MalformedActionError("empty play: write the moves, e.g. '24/18 13/8', or a number from '?'")
    for token in tokens:
        match = _TOKEN.match(token)
        if match is None:
            raise MalformedActionError(f"cannot read {token!r}: write moves like '24/18', '8/4(2)'")
        parts = match["path"].split("/")
        if len(parts) < 2:
            raise MalformedActionError(f"cannot read {token!r}: a move is 'from/to', e.g. '13/8'")
        path = [_read_point(part, token) for part in parts]
        if path[0][1]:
            raise MalformedActionError(f"{token!r}: '*' marks a hit on the point a checker lands on")
        if any(later[0] >= earlier[0] for earlier, later in itertools.pairwise(path)):
            raise MalformedActionError(f"{token!r}: checkers move from higher to lower points (bar to off)")
        if path[0][0] == 0 or any(point in (0, 25) for point, _ in path[1:-1]):
            raise MalformedActionError(f"{token!r}: 'bar' can only start a move and 'off' only end one")
        if path[-1] == (0, True):
            raise MalformedActionError(f"{token!r}: nothing can be hit off the board")
        count = int(match["count"]) if match["count"] else 1
        if not 1 <= count <= 4:
            raise MalformedActionError(f"{token!r}: a move can be repeated at most four times")
        paths.extend([path] * count)
    if sum(len(path) - 1 for path in paths) > 4:
        raise MalformedActionError("a roll moves checkers at most four steps (four with doubles, else two)")
    return paths


def _splits(start: int, end: int, dice: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Ways to go from ``start`` to ``end`` with some of ``dice``: (points landed on before ``end``,
    dice left). Bearing off may use a die larger than the distance for the last step."""
    distance = start - end
    for index, die in enumerate(dice):
        if index and die == dice[index - 1]:
            continue  # the same die value again gives the same splits
        rest = dice[:index] + dice[index + 1 :]
        if die == distance or (end == 0 and die > distance):
            yield (), rest
        elif die < distance:
            for landings, left in _splits(start - die, end, rest):
                yield (start - die, *landings), left


def _interpretations(paths: list[list[tuple[int, bool]]], dice: tuple[int, ...]) -> Iterator[frozenset[int]]:
    """For each way to split the text's paths into single-die steps: the points landed on."""

    def walk(
        index: int, hop: int, left: tuple[int, ...], landings: frozenset[int]
    ) -> Iterator[frozenset[int]]:
        if index == len(paths):
            yield landings
            return
        path = paths[index]
        if hop == len(path) - 1:
            yield from walk(index + 1, 0, left, landings)
            return
        start, end = path[hop][0], path[hop + 1][0]
        for middle, rest in _splits(start, end, left):
            reached = landings | set(middle) | ({end} if end else set())
            yield from walk(index, hop + 1, rest, frozenset(reached))

    yield from walk(0, 0, tuple(sorted(dice)), frozenset())


def _net(pairs: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    net: dict[int, int] = {}
    for start, end in pairs:
        net[start] = net.get(start, 0) - 1
        net[end] = net.get(end, 0) + 1
    return tuple(sorted((point, n) for point, n in net.items() if n))


def _roll_text(plays: Sequence[Play], dice: tuple[int, int] | None) -> str:
    if dice is not None:
        return f"{max(dice)}-{min(dice)}"
    if plays:
        used = plays[0].dice_used
        if len(used) == 2 or len(used) == 4:
            return f"{max(used)}-{min(used)}"
    return "this roll"


def parse_play(text: str, plays: Sequence[Play], *, dice: tuple[int, int] | None = None) -> Play:
    """The play of ``plays`` that ``text`` names: its notation or any equivalent text, or its 1-based
    index. ``dice`` (optional) only names the roll in error messages.

    Raises :class:`MalformedActionError` if the text cannot be read, :class:`IllegalActionError` if it
    names no play of the list."""
    stripped = text.strip().lower()
    roll = _roll_text(plays, dice)
    if stripped.isdigit():
        number = int(stripped)
        if not 1 <= number <= len(plays):
            if not plays:
                raise IllegalActionError(f"no legal play with {roll}: the turn is forfeited")
            raise IllegalActionError(
                f"no play number {number}: {len(plays)} legal plays with {roll}; '?' lists them"
            )
        return plays[number - 1]
    # A play's own canonical notation (what the view lists and bots send) names it: found directly, not
    # read and matched against every play's moves (milliseconds with a thousand plays).
    for play in plays:
        if play.notation == stripped:
            return play
    return _read_and_match(text, stripped, plays, roll)


def _read_and_match(text: str, stripped: str, plays: Sequence[Play], roll: str) -> Play:
    """The play the text names, read as moves and matched against every play's moves (any order, split or
    merged steps, hits marked or not)."""
    paths = _read(stripped)
    if not plays:
        raise IllegalActionError(f"no legal play with {roll}: the turn is forfeited")
    text_net = _net((path[0][0], path[-1][0]) for path in paths)
    marked = {point for path in paths for point, hit in path[1:] if hit}
    # Blots the plays show: an opponent's single checker stood there before the play.
    blots = {move.end for play in plays for move in play.moves if move.hit}
    matches: list[Play] = []
    for play in plays:
        if _net((move.start, move.end) for move in play.moves) != text_net:
            continue
        hits = {move.end for move in play.moves if move.hit}
        if not marked <= hits:
            continue
        for landings in _interpretations(paths, play.dice_used):
            if hits <= landings and not (landings - hits) & blots:
                matches.append(play)
                break
    if len(matches) > 1:
        exact = [play for play in matches if {move.end for move in play.moves if move.hit} == marked]
        matches = exact or matches
    if len(matches) == 1:
        return matches[0]
    if matches:
        meanings = " or ".join(repr(play.notation) for play in matches)
        raise IllegalActionError(f"{text.strip()!r} can mean {meanings}: write the one you mean")
    raise IllegalActionError(f"{text.strip()!r} is not a legal play with {roll}; '?' lists the legal plays")
