"""Backgammon for the clients: the board as ASCII text, plays typed in notation or by number, two bots.

Actions are the family's notation (``protos/skillclassics/backgammon/v1/backgammon.proto``): a play in the
mover's own numbering (``24/18 13/8``, ``bar/22*``, ``6/off(2)``) or its 1-based number among the view's
``legal_plays``; ``roll``, ``double``, ``take``, ``drop`` (``pass``), ``beaver``, ``resign single`` (or
``gammon``, ``backgammon``), ``accept``, ``reject``, ``continue``. Typed input may abbreviate the words
(``r``, ``d``, ``t``, ``p``, ``c``, ``resign s|g|b``); ``?`` lists the legal plays, numbered.

The board is drawn from the viewer's side, as gnubg draws it: the viewer's own points 13-24 along the top
and 12-1 along the bottom (the home board bottom right), the viewer's checkers ``X`` and the opponent's
``O`` (a spectator sees White as ``X``), five checkers a point with the count in the fifth place of a
taller stack, checkers on the bar in the middle column (the viewer's below ``BAR``, the opponent's above).

Bots (``docs/backgammon.md``, "Bots"): ``random`` plays a random listed play, rolls or doubles at random,
takes or drops at random and always continues; ``greedy`` (the heuristic bot) scores every listed play's
resulting position (hits, made points and primes, blots and their shots, bearing off, running when ahead
in the race) and doubles, takes and drops by pip count.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from skillclassics.backgammon.v1 import backgammon_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import FamilyClient, InputError, Strategy
from libs.engines.backgammon import (
    BLACK,
    WHITE,
    Play,
    Position,
    has_contact,
    legal_plays,
    parse_action,
    parse_play,
    pip_count,
)
from libs.engines.base import IllegalActionError, MalformedActionError

__all__ = [
    "DOUBLE_LEAD",
    "FAMILY",
    "TAKE_DEFICIT",
    "BackgammonClient",
    "cube_decision",
    "evaluate",
    "greedy_action",
    "position_of",
    "random_action",
    "render_board",
]

DOUBLE_LEAD = 0.08
"""The heuristic bot doubles in a pure race when the opponent's pip count exceeds its own by this share."""
TAKE_DEFICIT = 0.12
"""The heuristic bot takes unless its pip count exceeds the doubler's by more than this share."""
CONTACT_TAKE_DEFICIT = 0.25
"""With contact left, pip counts say less: the bot takes unless behind by more than this share."""

_VARIANTS = {
    "standard": backgammon_pb2.VARIANT_STANDARD,
    "nackgammon": backgammon_pb2.VARIANT_NACKGAMMON,
    "hypergammon": backgammon_pb2.VARIANT_HYPERGAMMON,
}
_VARIANT_NAMES = {value: name for name, value in _VARIANTS.items()}
_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n", ""}
_SWITCHES = ("cube", "gammons", "beavers", "jacoby", "auto_roll", "auto_bearoff")
_WORDS = {
    "roll": "roll",
    "r": "roll",
    "double": "double",
    "d": "double",
    "take": "take",
    "t": "take",
    "drop": "drop",
    "pass": "drop",
    "p": "drop",
    "beaver": "beaver",
    "accept": "accept",
    "reject": "reject",
    "continue": "continue",
    "c": "continue",
}
_LEVELS = {
    "single": "single",
    "s": "single",
    "1": "single",
    "gammon": "gammon",
    "g": "gammon",
    "2": "gammon",
    "backgammon": "backgammon",
    "b": "backgammon",
    "bg": "backgammon",
    "3": "backgammon",
}
_LEVEL_NAMES = {1: "a single game", 2: "a gammon", 3: "a backgammon"}
_PHASES = {
    backgammon_pb2.PHASE_OPENING: "opening roll",
    backgammon_pb2.PHASE_ROLL_OR_DOUBLE: "roll or double",
    backgammon_pb2.PHASE_ROLLING: "rolling",
    backgammon_pb2.PHASE_MOVE: "move",
    backgammon_pb2.PHASE_DOUBLED: "doubled: take or drop",
    backgammon_pb2.PHASE_RESIGN_OFFERED: "resign offered: accept or reject",
    backgammon_pb2.PHASE_BETWEEN_GAMES: "between games: continue",
    backgammon_pb2.PHASE_OVER: "match over",
}
_HEIGHT = 5
"""Checkers drawn per point; a taller stack shows its count in the fifth place."""


# -- the board --------------------------------------------------------------------------------------------


def position_of(view: backgammon_pb2.BackgammonView) -> Position | None:
    """The engine's :class:`Position` of the view's board (``None`` when the board is not well formed)."""
    board = view.board
    if len(board.points) != 25 or len(board.bar) != 2 or len(board.off) != 2:
        return None
    position = Position(tuple(board.points), (board.bar[0], board.bar[1]), (board.off[0], board.off[1]))
    try:
        position.validate()
    except ValueError:
        return None
    return position


def _count(points: Sequence[int], absolute: int, seat: int) -> int:
    n = points[absolute]
    return max(n, 0) if seat == WHITE else max(-n, 0)


def _absolute(seat: int, own: int) -> int:
    return 25 - own if seat == WHITE else own


def _cell(count: int, row: int, mark: str) -> str:
    """The 3-character cell of a stack of ``count`` at ``row`` (0: the edge, 4: the fifth place)."""
    if count <= row:
        return "   "
    if row == _HEIGHT - 1 and count > _HEIGHT:
        return f"{count:>2} "
    return f" {mark} "


def render_board(
    points: Sequence[int], bar: Sequence[int], viewer: int, *, marks: tuple[str, str] = ("X", "O")
) -> list[str]:
    """The board's 13 lines from ``viewer``'s side (``points``: 25 entries, ``> 0`` White; ``bar``:
    White's, Black's): own points 13-24 along the top, 12-1 along the bottom; ``marks``: the viewer's
    checkers, the opponent's."""
    me, them = viewer, 1 - viewer
    mine, theirs = marks

    def stack(own: int) -> tuple[int, str]:
        absolute = _absolute(me, own)
        if (n := _count(points, absolute, me)) > 0:
            return n, mine
        return _count(points, absolute, them), theirs

    def half(owns: Sequence[int], row: int) -> str:
        cells = []
        for own in owns:
            count, mark = stack(own)
            cells.append(_cell(count, row, mark))
        return "".join(cells)

    top_left, top_right = range(13, 19), range(19, 25)
    bottom_left, bottom_right = range(12, 6, -1), range(6, 0, -1)

    def labels(owns: Sequence[int]) -> str:
        return "-".join(f"{own:>2}".replace(" ", "-") for own in owns)

    lines = [f" +{labels(top_left)}------{labels(top_right)}-+"]
    for row in range(_HEIGHT):
        # the opponent's bar checkers above BAR, stacked from the middle up
        centre = _cell(bar[them], _HEIGHT - 1 - row, theirs)
        lines.append(f" |{half(top_left, row)}|{centre}|{half(top_right, row)}|")
    lines.append(" |                  |BAR|                  |")
    for row in reversed(range(_HEIGHT)):
        centre = _cell(bar[me], _HEIGHT - 1 - row, mine)
        lines.append(f" |{half(bottom_left, row)}|{centre}|{half(bottom_right, row)}|")
    lines.append(f" +{labels(bottom_left)}-------{labels(bottom_right)[1:]}-+")
    return lines


def _dice(dice: Sequence[int]) -> str:
    """A roll as players write it, the higher die first: ``6-4``."""
    return "-".join(str(d) for d in sorted(dice, reverse=True))


# -- the family -------------------------------------------------------------------------------------------


class BackgammonClient(FamilyClient):
    """Backgammon: White is seat 0, Black seat 1."""

    name = "backgammon"
    uses_chance = True
    option_names = ("variant", "match_to", *_SWITCHES)
    option_help: ClassVar[Mapping[str, str]] = {
        "variant": "backgammon: standard (default), nackgammon or hypergammon",
        "match_to": "backgammon: a match to N points (default 0: one game)",
        "cube": "backgammon: play with the doubling cube, on or off (default: off)",
        "gammons": "backgammon: score gammons and backgammons, on or off (default: off)",
        "beavers": "backgammon: beavers (money play with the cube), on or off",
        "jacoby": "backgammon: the Jacoby rule (money play, cube and gammons), on or off",
        "auto_roll": "backgammon: the server rolls at the start of each turn, on or off",
        "auto_bearoff": "backgammon: the server bears off once no contact is left, on or off",
    }
    option_choices: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "variant": tuple(_VARIANTS),
        **{name: ("on", "off") for name in _SWITCHES},
    }
    quick_minutes = 3

    def options(self, settings: Mapping[str, str]) -> rules_pb2.MatchOptions:
        unknown = sorted(set(settings) - set(self.option_names))
        if unknown:
            raise InputError(
                f"backgammon has no option {', '.join(unknown)} (options: {', '.join(self.option_names)})"
            )
        text = settings.get("variant", "standard").strip().lower()
        variant = _VARIANTS.get(text)
        if variant is None:
            raise InputError(f"backgammon variant must be standard, nackgammon or hypergammon, not {text!r}")
        points = settings.get("match_to", "0").strip()
        if not points.isdigit() or int(points) > 25:
            raise InputError(f"backgammon match_to must be a whole number from 0 to 25, not {points!r}")
        switches: dict[str, bool] = {}
        for name in _SWITCHES:
            value = settings.get(name, "off").strip().lower()
            if value not in _TRUE | _FALSE:
                raise InputError(f"backgammon {name} must be on or off, not {value!r}")
            switches[name] = value in _TRUE
        return rules_pb2.MatchOptions(
            backgammon=backgammon_pb2.BackgammonOptions(variant=variant, match_to=int(points), **switches)
        )

    def describe_options(self, options: rules_pb2.MatchOptions) -> str:
        bg = options.backgammon
        parts = [_VARIANT_NAMES.get(bg.variant, "standard")]
        parts.append(f"match to {bg.match_to}" if bg.match_to else "one game")
        parts += [name.replace("_", " ") for name in _SWITCHES if getattr(bg, name)]
        return ", ".join(parts)

    def seat_label(self, seat: int) -> str:
        return {WHITE: "White", BLACK: "Black"}.get(seat, f"seat {seat}")

    # -- rendering ---------------------------------------------------------------------------------------

    def render(self, update: rules_pb2.MatchUpdate, seat: int | None, *, ascii: bool = False) -> str:
        view = update.view.backgammon
        viewer = seat if seat in (WHITE, BLACK) else WHITE
        assert viewer is not None

        def who(other: int) -> str:
            return f"{self.seat_label(other)} (you)" if other == seat else self.seat_label(other)

        board = view.board
        points = list(board.points) if len(board.points) == 25 else [0] * 25
        bar = list(board.bar) if len(board.bar) == 2 else [0, 0]
        off = list(board.off) if len(board.off) == 2 else [0, 0]
        pips = list(view.pips) if len(view.pips) == 2 else [0, 0]
        lines = render_board(points, bar, viewer)
        for side, mark in ((viewer, "X"), (1 - viewer, "O")):
            lines.append(f"{mark}: {who(side)}  pips {pips[side]}  bar {bar[side]}  off {off[side]}")
        lines.append(self._cube_line(view, seat))
        if view.match_to:
            score = list(view.score) if len(view.score) == 2 else [0, 0]
            crawford = ", Crawford game" if view.crawford else ""
            lines.append(
                f"match to {view.match_to}, game {view.game_number}: "
                f"{who(WHITE)} {score[WHITE]}, {who(BLACK)} {score[BLACK]}{crawford}"
            )
        if view.variant not in (backgammon_pb2.VARIANT_UNSPECIFIED, backgammon_pb2.VARIANT_STANDARD):
            lines.append(f"variant: {_VARIANT_NAMES.get(view.variant, 'standard')}")
        if view.HasField("last_seat"):
            rolled = _dice(view.last_dice)
            if view.last_turn_forfeited:
                roll = f" rolled {rolled}:" if rolled else ""
                lines.append(f"last: {who(view.last_seat)}{roll} no legal play, turn forfeited")
            elif view.last_play:
                lines.append(
                    f"last: {who(view.last_seat)} played {view.last_play}{f' ({rolled})' if rolled else ''}"
                )
        if view.message and not view.last_turn_forfeited:
            lines.append(view.message)
        lines.append(self._phase_line(update, seat))
        return "\n".join(lines)

    def _cube_line(self, view: backgammon_pb2.BackgammonView, seat: int | None) -> str:
        value = view.cube_value or 1
        if view.HasField("cube_owner"):
            owner = "you" if view.cube_owner == seat else self.seat_label(view.cube_owner)
            return f"cube: {value}, owned by {owner}"
        return f"cube: {value}, centred"

    def _phase_line(self, update: rules_pb2.MatchUpdate, seat: int | None) -> str:
        view = update.view.backgammon
        phase = view.phase
        mover = update.to_move if update.HasField("to_move") else None
        actor = "" if mover is None else ("you" if mover == seat else self.seat_label(mover))
        dice = _dice(view.dice)
        if phase == backgammon_pb2.PHASE_MOVE and actor:
            plays = len(view.legal_plays)
            count = f"{plays} legal play{'s' if plays != 1 else ''}"
            hint = " (? lists them; type a play or its number)" if mover == seat else ""
            return f"{actor} to play {dice}: {count}{hint}"
        if phase == backgammon_pb2.PHASE_ROLL_OR_DOUBLE and actor:
            return f"{actor} to roll or double"
        if phase == backgammon_pb2.PHASE_ROLLING:
            return f"dice rolling for {actor}" if actor else "dice rolling"
        if phase == backgammon_pb2.PHASE_OPENING:
            return "opening roll: one die each, the higher plays both"
        if phase == backgammon_pb2.PHASE_DOUBLED and mover is not None:
            answers = "take, drop or beaver" if "beaver" in update.legal_actions else "take or drop"
            doubler = "you" if 1 - mover == seat else self.seat_label(1 - mover)
            offer = (
                f"to {view.cube_offered}"
                if view.cube_offered
                else f"(the cube was at {view.cube_value or 1})"
            )
            return f"{doubler} doubled {offer}: {actor} to answer, {answers}"
        if phase == backgammon_pb2.PHASE_RESIGN_OFFERED and mover is not None:
            level = _LEVEL_NAMES.get(view.resign_offered, "the game")
            offerer = "you" if 1 - mover == seat else self.seat_label(1 - mover)
            return f"{offerer} offered to resign {level}: {actor} to accept or reject"
        if phase == backgammon_pb2.PHASE_BETWEEN_GAMES:
            waiting = [s for s in (WHITE, BLACK) if s not in view.continued]
            names = " and ".join("you" if s == seat else self.seat_label(s) for s in waiting)
            return f"game {view.game_number} over: waiting for {names or 'nobody'} to continue"
        if phase == backgammon_pb2.PHASE_OVER:
            return "match over"
        return _PHASES.get(phase, "")

    def describe_legal(self, update: rules_pb2.MatchUpdate) -> str:
        actions = list(update.legal_actions)
        if not actions:
            return "nothing to play now (not your turn)"
        view = update.view.backgammon
        plays = list(view.legal_plays) if view.phase == backgammon_pb2.PHASE_MOVE else []
        others = [action for action in actions if action not in set(plays)]
        lines: list[str] = []
        if plays:
            lines.append(f"{_dice(view.dice)}: {len(plays)} legal play{'s' if len(plays) != 1 else ''}")
            lines += _columns(
                [f"{number:>{len(str(len(plays)))}}. {play}" for number, play in enumerate(plays, 1)]
            )
        if others:
            lines.append(("also: " if plays else "") + ", ".join(others))
        return "\n".join(lines)

    def input_help(self) -> str:
        return (
            "a play (24/18 13/8, bar/22*, 6/off) or its number, roll (r), double (d), take (t), drop (p), "
            "beaver, resign single|gammon|backgammon, accept, reject, continue (c)"
        )

    def parse(self, text: str, update: rules_pb2.MatchUpdate | None = None) -> rules_pb2.Action:
        words = text.strip().lower().split()
        if not words:
            raise InputError(f"type an action: {self.input_help()}")
        if words == ["?"]:
            raise InputError(self.describe_legal(update) if update is not None else "no position yet")
        if len(words) == 1 and words[0] in _WORDS:
            return _action(_WORDS[words[0]])
        if words[0] == "resign":
            if len(words) == 2 and words[1] in _LEVELS:
                return _action(f"resign {_LEVELS[words[1]]}")
            raise InputError(
                "offer to resign at a level: resign single, resign gammon or resign backgammon "
                "(resign alone gives up the whole match)"
            )
        joined = " ".join(words)
        try:
            parse_action(joined)
        except MalformedActionError as error:
            raise InputError(str(error)) from None
        return _action(self._play_text(joined, update))

    def _play_text(self, text: str, update: rules_pb2.MatchUpdate | None) -> str:
        """The play ``text`` names, in canonical notation when the update shows the viewer's legal plays
        (else as typed: the server reads it)."""
        plays = _listed_plays(update)
        if plays is None:
            return text
        view = update.view.backgammon if update is not None else None
        dice = (view.dice[0], view.dice[1]) if view is not None and len(view.dice) == 2 else None
        try:
            return parse_play(text, plays, dice=dice).notation
        except (IllegalActionError, MalformedActionError) as error:
            raise InputError(str(error)) from None

    def needs_turn(self, action: rules_pb2.Action) -> bool:
        return action.WhichOneof("kind") != "resign"

    # -- bots --------------------------------------------------------------------------------------------

    def strategy(self, name: str, rng: random.Random) -> Strategy:
        if name == "random":
            return lambda update, seat: _maybe(random_action(update, rng))
        if name == "greedy":
            return lambda update, seat: _maybe(greedy_action(update, seat, rng))
        raise InputError(f"backgammon bots are {', '.join(self.strategies)}, not {name!r}")

    def advantage(self, update: rules_pb2.MatchUpdate, seat: int) -> float | None:
        """Match points ahead, then the race: the opponent's pip count minus one's own."""
        view = update.view.backgammon
        pips = list(view.pips)
        if len(pips) != 2 or seat not in (WHITE, BLACK):
            return None
        score = list(view.score) if len(view.score) == 2 else [0, 0]
        other = 1 - seat
        return float((score[seat] - score[other]) * 1000 + pips[other] - pips[seat])


def _columns(items: Sequence[str], width: int = 96) -> list[str]:
    """``items`` laid out in as many columns as fit in ``width``, filled down then across."""
    if not items:
        return []
    cell = max(len(item) for item in items) + 3
    across = max(1, width // cell)
    down = -(-len(items) // across)
    rows = []
    for row in range(down):
        cells = [items[i] for i in range(row, len(items), down)]
        rows.append("  " + "".join(c.ljust(cell) for c in cells).rstrip())
    return rows


def _action(text: str) -> rules_pb2.Action:
    return rules_pb2.Action(backgammon=backgammon_pb2.BackgammonAction(action=text))


def _maybe(text: str | None) -> rules_pb2.Action | None:
    return None if text is None else _action(text)


def _listed_plays(update: rules_pb2.MatchUpdate | None) -> tuple[Play, ...] | None:
    """The engine's plays of the update's roll, when the update shows the viewer to move with dice and the
    engine lists exactly the view's plays (``None`` otherwise)."""
    if update is None or not update.legal_actions or not update.HasField("to_move"):
        return None
    view = update.view.backgammon
    if view.phase != backgammon_pb2.PHASE_MOVE or len(view.dice) != 2 or not view.legal_plays:
        return None
    position = position_of(view)
    if position is None or update.to_move not in (WHITE, BLACK):
        return None
    plays = legal_plays(position, update.to_move, (view.dice[0], view.dice[1]))
    if [play.notation for play in plays] != list(view.legal_plays):
        return None
    return plays


# -- bots ---------------------------------------------------------------------------------------------------


def random_action(update: rules_pb2.MatchUpdate, rng: random.Random) -> str | None:
    """The random bot: a random listed play; roll or double, take or drop (or beaver), accept or reject
    at random; always continue. It never offers to resign (most turns would be resign offers)."""
    legal = sorted(action for action in update.legal_actions if not action.startswith("resign "))
    if not legal:
        return None
    if "continue" in legal:
        return "continue"
    return rng.choice(legal)


@dataclass(frozen=True, slots=True)
class _Weights:
    hit: float = 1.6
    """Per opponent checker on the bar."""
    opponent_pip: float = 0.03
    """Per pip the opponent must still travel (a hit sends a checker back)."""
    own_pip: float = 0.03
    point: tuple[float, ...] = (
        0.0,  # unused
        0.4,
        0.8,
        1.0,
        1.3,
        1.5,
        1.3,  # home board: the 5 and 4 points first
        1.2,
        0.7,
        0.5,
        0.4,
        0.3,
        0.3,  # the bar point, then the outfield
        0.2,
        0.2,
        0.2,
        0.2,
        0.3,
        0.5,
        0.5,
        0.8,
        0.8,
        0.6,
        0.4,
        0.3,  # anchors in the opponent's home board (the 20 and 21 best)
    )
    prime: float = 0.6
    """Per made point beyond two in a row."""
    blot: float = 0.045
    """Times (shots out of 36) x (pips lost if hit)."""
    borne_off: float = 1.2
    stuck_back: float = 0.5
    """Per checker in the opponent's home board when ahead in the race."""


_W = _Weights()

_SHOTS = (0, 11, 12, 14, 15, 15, 17, 6, 6, 5, 3, 2, 3, 0, 0, 1, 1, 0, 1, 0, 1, 0, 0, 0, 1)
"""Rolls of 36 that hit a blot at a distance, ignoring blocks (the standard table)."""


def _own_counts(position: Position, seat: int) -> tuple[list[int], list[int]]:
    """``seat``'s checkers and the opponent's per point in ``seat``'s own numbering (index 1..24; 0 and 25
    unused here)."""
    mine, theirs = [0] * 26, [0] * 26
    for own in range(1, 25):
        n = position.points[_absolute(seat, own)]
        if seat == BLACK:
            n = -n
        if n > 0:
            mine[own] = n
        elif n < 0:
            theirs[own] = -n
    return mine, theirs


def evaluate(position: Position, seat: int) -> float:
    """How good ``position`` is for ``seat``, who just moved (higher is better); see ``docs/backgammon.md``,
    "Bots"."""
    other = 1 - seat
    my_pips, their_pips = pip_count(position, seat), pip_count(position, other)
    off = position.off[seat]
    if not has_contact(position):
        # A race: bear off as many as possible, waste as few pips as possible, bring stragglers home.
        mine, _ = _own_counts(position, seat)
        outside = sum(mine[own] for own in range(7, 25))
        gaps = sum(1 for own in range(1, 7) if not mine[own])
        return 10.0 * off - my_pips - 2.0 * outside - 0.1 * gaps
    mine, theirs = _own_counts(position, seat)
    score = _W.hit * position.bar[other] + _W.opponent_pip * their_pips - _W.own_pip * my_pips
    score += _W.borne_off * off
    run = 0
    for own in range(1, 25):
        if mine[own] >= 2:
            score += _W.point[own]
            run += 1
            if run > 2:
                score += _W.prime
        else:
            run = 0
    # Blots: the opponent's checkers (and its bar, at own point 0) that stand behind each blot.
    attackers = [own for own in range(1, 25) if theirs[own]]
    if position.bar[other]:
        attackers.append(0)
    for own in range(1, 25):
        if mine[own] != 1:
            continue
        shots = sum(_SHOTS[own - at] for at in attackers if 0 < own - at < len(_SHOTS))
        score -= _W.blot * min(shots, 36) * (25 - own)
    if my_pips < their_pips:
        score -= _W.stuck_back * sum(mine[own] for own in range(19, 25))
    return score


def cube_decision(view: backgammon_pb2.BackgammonView, seat: int) -> bool:
    """Whether ``seat`` doubles (phase roll-or-double) or takes (phase doubled) by the pip-count rule."""
    pips = list(view.pips)
    if len(pips) != 2:
        return view.phase == backgammon_pb2.PHASE_DOUBLED  # no race figures: take, never double
    mine, theirs = pips[seat], pips[1 - seat]
    position = position_of(view)
    contact = position is None or has_contact(position)
    if view.phase == backgammon_pb2.PHASE_DOUBLED:
        deficit = CONTACT_TAKE_DEFICIT if contact else TAKE_DEFICIT
        return mine <= theirs * (1 + deficit)
    return not contact and theirs > mine * (1 + DOUBLE_LEAD)


def greedy_action(update: rules_pb2.MatchUpdate, seat: int, rng: random.Random) -> str | None:
    """The heuristic bot's action in the family's notation (``None`` when it has none)."""
    legal = set(update.legal_actions)
    if not legal:
        return None
    view = update.view.backgammon
    if "continue" in legal:
        return "continue"
    if "accept" in legal:
        return "accept"  # the game is won at once: never worse than playing on without gammons
    if "take" in legal:
        return "take" if cube_decision(view, seat) else "drop"
    if "roll" in legal:
        return "double" if "double" in legal and cube_decision(view, seat) else "roll"
    plays = _listed_plays(update)
    if plays is not None:
        scored = [(evaluate(play.result, seat), play.notation) for play in plays]
        best = max(score for score, _ in scored)
        return rng.choice(sorted(notation for score, notation in scored if score >= best - 1e-9))
    candidates = sorted(action for action in legal if not action.startswith("resign "))
    return rng.choice(candidates) if candidates else None


FAMILY = BackgammonClient()
