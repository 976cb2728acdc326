"""Game of the Generals (Salpakan) for the clients: the 9x8 board from the player's side, the setup typed
piece by piece, and two bots.

Actions are the family's notation (``protos/skillclassics/generals/v1/generals.proto``): a move ``b3-b4``
(also typed ``b3 b4`` or ``b3b4``), ``draw``, ``accept``, ``decline``, ``ready`` and ``setup a1=FLG ...``
(the seat's whole arrangement, sent as typed). During the setup a player may also type helpers that the
client turns into a full ``setup`` from the arrangement in the last update:

- ``place a1 FLG`` (or ``place a1=FLG b1=PVT``, or just ``a1=FLG b1=PVT``): add pieces; a rank already
  placed as often as a side has it is taken off its old square (so ``place c1 FLG`` moves the Flag);
- ``remove a1 [b1 ...]``: take pieces off; ``clear``: take every piece off;
- ``random``: the missing pieces on free home squares at random (the client's own choice, drawn from the
  client's random generator: not the server's fairness stream);
- ``load NAME``: a saved formation (see :meth:`GeneralsClient.set_formations`), or ``load a1=FLG ...``: a
  formation written in the owner's orientation (row 1 the back row), turned for the player's colour with
  :func:`~libs.engines.generals.formation_to_setup`.

The board is drawn from the viewer's side: the viewer's home ranks at the bottom (Black sees rank 1 at the
top and file ``i`` on the left; a spectator sees White at the bottom). Own pieces show their rank codes,
opposing pieces ``??`` (their ranks are never sent while the game is on; once it is over they show in
parentheses, ``(PVT)``), empty squares ``..``; a spectator sees ``W?`` and ``B?``.

The clock is per move (``services/rules_generals/family.py``, ``lobby_clocks``): 30, 60 or 120 s a move,
fresh each move, the third overrun (strike) losing. :meth:`GeneralsClient.time_control` reads ``minutes``
as the time for one move, so 0.5, 1 (the default, :attr:`~GeneralsClient.quick_minutes`) or 2.

Bots (both answer the setup with a complete arrangement and then ``ready``, never offer draws, and only
send one of the update's legal actions or a well-formed ``setup``; the draw rules end their games):

- ``random``: a random arrangement, random legal moves, accepts or declines an offer at random;
- ``greedy``: the Flag on the back rank with its own pieces beside and in front of it (spies and high
  officers), the privates, the sergeant and the lieutenants in the front row; in play it keeps track
  of what each challenge said about the opposing pieces (:class:`Knowledge`), challenges where the
  expected gain is best (privates and sergeants probe unknown pieces, officers take pieces they are
  likely to beat), answers a threat to its Flag, moves its Flag only to escape or toward the far rank
  with no enemy near, walks its other pieces toward the enemy (the keener the longer the game has gone
  without a challenge), and declines draws unless it has lost more pieces than its opponent.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import ClassVar

from skillclassics.generals.v1 import generals_pb2
from skillclassics.rules.v1 import rules_pb2

from clients.families import FamilyClient, InputError, Strategy
from libs.engines.base import MalformedActionError
from libs.engines.generals import (
    CODES,
    COUNTS,
    FAR_RANK,
    FILES,
    HOME,
    NAMES,
    NEIGHBORS,
    RANK_ORDER,
    Challenge,
    challenge,
    formation_to_setup,
    parse_placements,
    placements_text,
)
from libs.engines.generals.pieces import (
    BG1,
    COL,
    CPT,
    FLG,
    GEN4,
    GOA5,
    LG3,
    LT1,
    LT2,
    LTC,
    MAJ,
    MG2,
    PVT,
    SGT,
    SPY,
)

__all__ = [
    "FAMILY",
    "GeneralsClient",
    "GreedyBot",
    "Knowledge",
    "greedy_setup",
    "random_action",
    "random_setup",
    "render_board",
]

READY = "ready"
DRAW = "draw"
ACCEPT = "accept"
DECLINE = "decline"
_WORDS = (READY, DRAW, ACCEPT, DECLINE)
SEAT_LABELS = ("White", "Black")
STRIKES = 3
"""Overruns of the per-move clock that lose (the third strike)."""
PER_MOVE_SECONDS = (30, 60, 120)
"""The lobby's per-move clocks."""
_BY_CODE = {code: rank for rank, code in CODES.items()}
_BY_NAME = {name: index for index, name in enumerate(NAMES)}
_MOVE = re.compile(r"^([a-i][1-8])\s*[-\s]?\s*([a-i][1-8])$")
_ENDED = (rules_pb2.MATCH_STATUS_FINISHED, rules_pb2.MATCH_STATUS_ABORTED)
_Who = Callable[[int], str]
_Arrange = Callable[[dict[int, int]], dict[int, int]]
_RESULT_WORDS = {
    "attacker": "the attacker won",
    "defender": "the defender won",
    "both": "both pieces were removed",
}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _view(update: rules_pb2.MatchUpdate) -> generals_pb2.GeneralsView | None:
    return update.view.generals if update.view.WhichOneof("family") == "generals" else None


def _grouped(codes: Iterable[str]) -> str:
    """``PVT PVT PVT SPY`` as ``3 PVT, SPY`` (in the order given)."""
    counts: dict[str, int] = {}
    for code in codes:
        counts[code] = counts.get(code, 0) + 1
    return ", ".join(f"{n} {code}" if n > 1 else code for code, n in counts.items())


def _square(text: str) -> int:
    found = _BY_NAME.get(text.strip().lower())
    if found is None:
        raise InputError(f"{text.strip()!r} is not a square: files a-i, ranks 1-8 (like e4)")
    return found


def _rank(text: str) -> int:
    found = _BY_CODE.get(text.strip().upper())
    if found is None:
        raise InputError(f"{text.strip()!r} is not a rank: the ranks are {', '.join(CODES.values())}")
    return found


def own_pieces(view: generals_pb2.GeneralsView, seat: int) -> dict[int, int]:
    """The seat's pieces it may see the ranks of: square index -> rank id."""
    pieces: dict[int, int] = {}
    for piece in view.pieces:
        if piece.seat == seat and piece.rank:
            square, rank = _BY_NAME.get(piece.square), _BY_CODE.get(piece.rank)
            if square is not None and rank is not None:
                pieces[square] = rank
    return pieces


def _setup_text(arrangement: Mapping[int, int]) -> str:
    body = placements_text(arrangement.items())
    return f"setup {body}" if body else "setup"


def _missing(arrangement: Mapping[int, int]) -> list[int]:
    counts = Counter(arrangement.values())
    return [rank for rank in RANK_ORDER for _ in range(COUNTS[rank] - counts.get(rank, 0))]


def random_setup(
    seat: int, rng: random.Random, arrangement: Mapping[int, int] | None = None
) -> dict[int, int]:
    """``arrangement`` (square -> rank id) completed: its missing pieces on free home squares at random."""
    done = dict(arrangement or {})
    free = [square for square in HOME[seat] if square not in done]
    rng.shuffle(free)
    for square, rank in zip(free, _missing(done), strict=False):
        done[square] = rank
    return done


def _formation_square(file: int, row: int, seat: int) -> int:
    """A square given in the owner's orientation (file 0 on its left, row 0 its back row)."""
    square = row * 9 + file
    return square if seat == 0 else 71 - square


GUARDS = (SPY, GEN4, LG3, MG2)
"""The ranks the greedy setup puts beside and in front of its Flag (three of them)."""
FRONT = (PVT, PVT, PVT, PVT, PVT, PVT, SGT, LT2, LT1)
"""The greedy setup's front row: the probes."""


def greedy_setup(seat: int, rng: random.Random) -> dict[int, int]:
    """The greedy bot's arrangement: the Flag on the back rank (not in a corner) with three of
    :data:`GUARDS` beside and in front of it, :data:`FRONT` on the front row, the rest at random."""
    arrangement: dict[int, int] = {}
    flag_file = rng.randrange(1, 8)
    arrangement[_formation_square(flag_file, 0, seat)] = FLG
    guards = rng.sample(GUARDS, 3)
    around = [
        _formation_square(flag_file - 1, 0, seat),
        _formation_square(flag_file + 1, 0, seat),
        _formation_square(flag_file, 1, seat),
    ]
    for square, rank in zip(around, guards, strict=True):
        arrangement[square] = rank
    front = list(FRONT)
    rng.shuffle(front)
    for file, rank in enumerate(front):
        arrangement[_formation_square(file, 2, seat)] = rank
    return random_setup(seat, rng, arrangement)


# -- the board -------------------------------------------------------------------------------------------


def render_board(view: generals_pb2.GeneralsView, viewer: int | None) -> list[str]:
    """The board's lines from ``viewer``'s side (``None``: a spectator, White at the bottom): file
    letters above and below, rank numbers on both sides, 6 characters a square."""
    cells: dict[int, str] = {}
    for piece in view.pieces:
        square = _BY_NAME.get(piece.square)
        if square is None:
            continue
        if viewer is None:
            if not piece.rank:
                text = "W?" if piece.seat == 0 else "B?"
            else:
                text = piece.rank if piece.seat == 0 else f"({piece.rank})"
        elif piece.seat == viewer:
            text = piece.rank or "?"
        else:
            text = f"({piece.rank})" if piece.rank else "??"
        cells[square] = text
    flipped = viewer == 1
    ranks = range(8) if flipped else range(7, -1, -1)
    files = range(8, -1, -1) if flipped else range(9)
    header = "   " + "".join(f"{FILES[f]:>6}" for f in files)
    lines = [header]
    for rank in ranks:
        row = "".join(f"{cells.get(rank * 9 + f, '..'):>6}" for f in files)
        lines.append(f"{rank + 1:>2} {row}   {rank + 1}")
    lines.append(header)
    return lines


# -- the family -----------------------------------------------------------------------------------------


class GeneralsClient(FamilyClient):
    """Game of the Generals: White is seat 0 (home ranks 1-3), Black seat 1 (home ranks 6-8)."""

    name = "generals"
    uses_chance = True
    option_names = ()
    quick_minutes = 1
    """A per-move clock: one minute a move (the seed's default; 0.5 and 2 are the others)."""
    demo_settings: ClassVar[Mapping[str, str]] = MappingProxyType({})

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        """Draws the ``random`` setup helper (the player's own choice, not the server's chance)."""
        self.formations: dict[str, str] = {}
        """The player's saved formations by name (formation text), for ``load NAME``: see
        :meth:`set_formations`."""
        self._seats: dict[str, int] = {}

    def set_formations(self, formations: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        """The player's saved formations (name -> formation text, as ``PlayerSession.list_formations``
        gives them) for ``load NAME``."""
        self.formations = dict(formations.items() if isinstance(formations, Mapping) else formations)

    # -- setting a table up ----------------------------------------------------------------------------

    def options(self, settings: Mapping[str, str]) -> rules_pb2.MatchOptions:
        if settings:
            raise InputError(
                f"generals has no option {', '.join(sorted(settings))}: the tournament rules are the only "
                "ruleset"
            )
        return rules_pb2.MatchOptions(generals=generals_pb2.GeneralsOptions())

    def time_control(self, minutes: float, increment_s: float = 0) -> rules_pb2.TimeControl:
        """The per-move clock: ``minutes`` is the time for one move, 0.5, 1 or 2 (30, 60 or 120 s); three
        strikes lose. :class:`InputError` for another time or an increment."""
        seconds = minutes * 60
        if increment_s or seconds not in PER_MOVE_SECONDS:
            raise InputError(
                "a generals clock is per move: 0.5, 1 or 2 minutes a move (30, 60 or 120 s), no increment; "
                "the third overrun loses"
            )
        return rules_pb2.TimeControl(base_ms=0, periods=STRIKES, period_ms=round(seconds) * 1000)

    def describe_options(self, options: rules_pb2.MatchOptions) -> str:
        return "tournament rules"

    # -- seats -----------------------------------------------------------------------------------------

    def seat_label(self, seat: int) -> str:
        return SEAT_LABELS[seat] if seat in (0, 1) else f"seat {seat}"

    # -- rendering ---------------------------------------------------------------------------------------

    def render(self, update: rules_pb2.MatchUpdate, seat: int | None, *, ascii: bool = False) -> str:
        view = _view(update) or generals_pb2.GeneralsView()
        if seat is not None and update.match_id:
            self._seats[update.match_id] = seat
        lines = render_board(view, seat)

        def who(other: int) -> str:
            return f"{self.seat_label(other)} (you)" if other == seat else self.seat_label(other)

        def actor(other: int) -> str:
            return "you" if other == seat else self.seat_label(other)

        over = view.phase == generals_pb2.PHASE_OVER or update.status in _ENDED
        if seat is None:
            legend = "White below, Black above (in parentheses once the game is over)"
        else:
            legend = f"you are {self.seat_label(seat)}, at the bottom; ?? an opposing piece"
        lines.append(legend)
        if view.phase == generals_pb2.PHASE_SETUP and not over:
            lines += self._setup_lines(view, seat, who)
        else:
            lines += self._play_lines(update, view, seat, who, actor, over)
        if view.message:
            lines.append(view.message)
        return "\n".join(lines)

    def _setup_lines(self, view: generals_pb2.GeneralsView, seat: int | None, who: _Who) -> list[str]:
        lines = []
        ready = [who(s) for s in (0, 1) if s in view.ready]
        waiting = [who(s) for s in (0, 1) if s not in view.ready]
        lines.append(
            f"setup: ready: {', '.join(ready) or 'nobody yet'}; arranging: {', '.join(waiting) or 'nobody'}"
        )
        if view.awaiting_chance:
            lines.append("waiting for the fairness stream (the first mover, or completing a setup)")
        elif seat is not None and seat not in view.ready:
            placed = len(own_pieces(view, seat))
            if view.missing:
                lines.append(f"placed {placed} of 21; to place: {_grouped(view.missing)}")
                lines.append("place a1 FLG, remove a1, random, load NAME, clear (or setup a1=FLG ...)")
            else:
                lines.append("all 21 placed: type ready (or change them: place, remove, random, clear)")
        return lines

    def _play_lines(
        self,
        update: rules_pb2.MatchUpdate,
        view: generals_pb2.GeneralsView,
        seat: int | None,
        who: _Who,
        actor: _Who,
        over: bool,
    ) -> list[str]:
        lines = []
        if view.HasField("last_move"):
            last = view.last_move
            text = f"move {view.moves_played}: {who(last.seat)} {getattr(last, 'from')}-{last.to}"
            if last.challenge:
                text += f", a challenge: {_RESULT_WORDS.get(last.result, last.result)}"
                if last.removed:
                    text += f" (emptied: {' '.join(last.removed)})"
            lines.append(text)
        lost = list(view.lost)
        if len(lost) == 2:
            parts = []
            for s in (0, 1):
                ranks = f" ({', '.join(lost[s].ranks)})" if lost[s].ranks else ""
                parts.append(f"{who(s)} {lost[s].count}{ranks}")
            lines.append("lost: " + "; ".join(parts))
        clocks = sorted(update.clocks, key=lambda c: c.seat)
        if clocks:
            strikes = ", ".join(f"{who(c.seat)} {max(0, STRIKES - c.periods_left)}" for c in clocks)
            lines.append(f"strikes: {strikes} (the third loses)")
        counters = f"moves {view.moves_played}; {view.quiet_moves} in a row without a challenge (60 draw)"
        lines.append(counters)
        for s, chase in enumerate(view.chase):
            if chase.moves:
                lines.append(
                    f"chase: {who(s)}'s piece on {chase.square}: {_plural(chase.moves, 'chased move')}, "
                    f"{chase.shuttle} back and forth (5 back and forth, or 16, draw)"
                )
        for warning in view.warnings:
            lines.append(f"warning: {warning.text}")
        if not over:
            if view.HasField("draw_offer"):
                if view.draw_offer == seat:
                    lines.append("you offered a draw: waiting for the answer")
                else:
                    answer = ": accept or decline" if seat is not None else ""
                    lines.append(f"{who(view.draw_offer)} offers a draw{answer}")
            offers = list(view.offers_left)
            if len(offers) == 2:
                lines.append(f"draw offers left: {who(0)} {offers[0]}, {who(1)} {offers[1]}")
            if view.flag_pending:
                lines.append(f"your Flag on {view.flag_pending} wins if it survives the next move")
            if view.HasField("turn"):
                hint = " (like b3-b4; ? lists your moves)" if view.turn == seat else ""
                lines.append(f"{actor(view.turn)} to move{hint}")
        else:
            lines.append("game over")
        return lines

    def describe_legal(self, update: rules_pb2.MatchUpdate) -> str:
        view = _view(update)
        actions = list(update.legal_actions)
        if view is not None and view.phase == generals_pb2.PHASE_SETUP and update.status not in _ENDED:
            if READY in actions:
                return "all 21 pieces placed: ready (or rearrange: place, remove, random, load, clear)"
            if view.missing:
                return (
                    f"arrange your pieces (to place: {_grouped(view.missing)}): place a1 FLG, remove a1, "
                    "random, load NAME, clear, or setup a1=FLG ..."
                )
            return "nothing to do now: waiting for the other side (or the coin)"
        if not actions:
            return "nothing to do now (not your turn)"
        by_square: dict[str, list[str]] = {}
        words = []
        for action in actions:
            frm, dash, to = action.partition("-")
            if dash:
                by_square.setdefault(frm, []).append(to)
            else:
                words.append(action)
        lines = []
        if by_square:
            moves = sum(len(targets) for targets in by_square.values())
            lines.append(f"{_plural(moves, 'move')}:")
            for frm in sorted(by_square, key=lambda name: _BY_NAME.get(name, 0)):
                lines.append(f"  {frm}: {' '.join(by_square[frm])}")
        if words:
            lines.append(("also: " if by_square else "") + ", ".join(words))
        return "\n".join(lines)

    def input_help(self) -> str:
        return (
            "a move like b3-b4; draw, accept, decline; during the setup: place a1 FLG, remove a1, random, "
            "load NAME, clear, setup a1=FLG ..., then ready"
        )

    def parse(self, text: str, update: rules_pb2.MatchUpdate | None = None) -> rules_pb2.Action:
        typed = text.strip()
        lowered = " ".join(typed.lower().split())
        if not lowered:
            raise InputError(f"type an action: {self.input_help()}")
        if lowered == "?":
            raise InputError(self.describe_legal(update) if update is not None else "no position yet")
        if lowered in _WORDS:
            return _action(lowered)
        word, _, rest = lowered.partition(" ")
        if word == "setup":
            try:
                placements = parse_placements(rest)
            except MalformedActionError as error:
                raise InputError(str(error)) from None
            return _action(f"setup {placements_text(placements)}".rstrip())
        if word == "clear" and not rest:
            return _action("setup")
        if word == "load":
            return _action(self._helper(word, " ".join(typed.split()[1:]), update))
        if word in ("place", "remove", "random"):
            return _action(self._helper(word, rest, update))
        if "=" in word:
            return _action(self._helper("place", lowered, update))
        match = _MOVE.match(lowered)
        if match:
            return _action(f"{match.group(1)}-{match.group(2)}")
        raise InputError(f"cannot read {typed!r} as a generals action: {self.input_help()}")

    # -- the setup helpers ---------------------------------------------------------------------------------

    def _seat_of(self, update: rules_pb2.MatchUpdate | None, squares: Iterable[int] = ()) -> int:
        """The seat arranging: as last rendered for this match, else the side of its pieces, else the side
        of the squares typed."""
        if update is not None and update.match_id in self._seats:
            return self._seats[update.match_id]
        view = _view(update) if update is not None else None
        seats = {piece.seat for piece in view.pieces} if view is not None else set()
        if len(seats) == 1:
            return seats.pop()
        sides = {0 if square < 27 else 1 for square in squares if square < 27 or square >= 45}
        if len(sides) == 1:
            return sides.pop()
        raise InputError("which side are you? place a piece on your home ranks first (1-3 White, 6-8 Black)")

    def _helper(self, word: str, rest: str, update: rules_pb2.MatchUpdate | None) -> str:
        view = _view(update) if update is not None else None
        if view is not None and view.phase not in (generals_pb2.PHASE_SETUP, generals_pb2.PHASE_UNSPECIFIED):
            raise InputError("the setup is over: the pieces can no longer be arranged")
        if word == "place":
            pairs = _placements(rest)
            if not pairs:
                raise InputError("place what? like place a1 FLG, or place a1=FLG b1=PVT")
            seat = self._seat_of(update, [square for square, _ in pairs])
            arrangement = own_pieces(view, seat) if view is not None else {}
            for square, rank in pairs:
                if square not in HOME[seat]:
                    rows = "1-3" if seat == 0 else "6-8"
                    raise InputError(f"{NAMES[square]} is not on your home ranks ({rows})")
                arrangement.pop(square, None)
                same = [s for s, r in arrangement.items() if r == rank and s not in dict(pairs)]
                if len(same) >= COUNTS[rank]:
                    del arrangement[same[0]]  # a side has no more of them: the old one moves
                arrangement[square] = rank
            return _setup_text(arrangement)
        if word == "remove":
            squares = [_square(token) for token in rest.split()]
            if not squares:
                raise InputError("remove what? like remove a1 (or clear to remove them all)")
            seat = self._seat_of(update, squares)
            arrangement = own_pieces(view, seat) if view is not None else {}
            empty = [NAMES[s] for s in squares if s not in arrangement]
            if empty:
                raise InputError(f"none of your pieces is on {', '.join(empty)}")
            for square in squares:
                del arrangement[square]
            return _setup_text(arrangement)
        if word == "random":
            if rest:
                raise InputError("random takes nothing: it places the missing pieces at random")
            seat = self._seat_of(update)
            arrangement = own_pieces(view, seat) if view is not None else {}
            return _setup_text(random_setup(seat, self.rng, arrangement))
        # load
        if not rest:
            names = ", ".join(sorted(self.formations)) or "none known"
            raise InputError(
                f"load which formation? (saved: {names}; or load a1=FLG ... in your orientation)"
            )
        formation = self.formations.get(rest) or next(
            (text for name, text in self.formations.items() if name.lower() == rest.lower()), None
        )
        if formation is None:
            if "=" not in rest:
                names = ", ".join(sorted(self.formations)) or "none known"
                raise InputError(f"no saved formation {rest!r} (saved: {names})")
            formation = rest
        seat = self._seat_of(update)
        try:
            return f"setup {formation_to_setup(formation, seat)}".rstrip()
        except MalformedActionError as error:
            raise InputError(str(error)) from None

    def needs_turn(self, action: rules_pb2.Action) -> bool:
        """Only a move waits for one's turn: the setup, ``ready``, offers and their answers are open to
        either seat at any time they are allowed (the setup to both at once), so they go at once."""
        if action.WhichOneof("kind") == "generals":
            return bool(_MOVE.match(action.generals.action))
        return super().needs_turn(action)

    def should_act(self, update: rules_pb2.MatchUpdate, seat: int) -> bool:
        """Also during the setup while the seat is not ready: its ``setup`` is never listed."""
        if update.legal_actions:
            return True
        view = _view(update)
        return (
            view is not None
            and update.status not in _ENDED
            and view.phase == generals_pb2.PHASE_SETUP
            and not view.awaiting_chance
            and seat not in view.ready
        )

    # -- bots --------------------------------------------------------------------------------------------

    def strategy(self, name: str, rng: random.Random) -> Strategy:
        if name == "random":
            return lambda update, seat: _maybe(random_action(update, seat, rng))
        if name == "greedy":
            bot = GreedyBot(rng)
            return lambda update, seat: _maybe(bot(update, seat))
        raise InputError(f"generals bots are {', '.join(self.strategies)}, not {name!r}")

    def plies(self, update: rules_pb2.MatchUpdate) -> int | None:
        view = _view(update)
        return None if view is None else view.moves_played

    def advantage(self, update: rules_pb2.MatchUpdate, seat: int) -> float | None:
        """Pieces ahead: the opponent's losses less one's own."""
        view = _view(update)
        if view is None or len(view.lost) != 2 or seat not in (0, 1):
            return None
        return float(view.lost[1 - seat].count - view.lost[seat].count)


def _placements(text: str) -> list[tuple[int, int]]:
    """``a1 FLG b1 PVT`` or ``a1=FLG b1=PVT`` as (square, rank id) pairs."""
    tokens = text.replace("=", " ").split()
    if len(tokens) % 2:
        raise InputError("write a square and a rank for each piece: place a1 FLG, or place a1=FLG b1=PVT")
    return [(_square(tokens[i]), _rank(tokens[i + 1])) for i in range(0, len(tokens), 2)]


def _action(text: str) -> rules_pb2.Action:
    return rules_pb2.Action(generals=generals_pb2.GeneralsAction(action=text))


def _maybe(text: str | None) -> rules_pb2.Action | None:
    return None if text is None else _action(text)


# -- bots ---------------------------------------------------------------------------------------------------


def _setup_answer(
    update: rules_pb2.MatchUpdate, view: generals_pb2.GeneralsView, seat: int, arrange: _Arrange
) -> str | None:
    """During the setup: ``ready`` when listed, else a complete arrangement while the seat's is not."""
    if READY in update.legal_actions:
        return READY
    if view.awaiting_chance or seat in view.ready or not view.missing:
        return None
    return _setup_text(arrange(own_pieces(view, seat)))


def random_action(update: rules_pb2.MatchUpdate, seat: int, rng: random.Random) -> str | None:
    """The random bot: a random complete arrangement and ``ready``; a random legal move; a draw offer
    accepted or declined at random. It never offers a draw."""
    view = _view(update)
    if view is None or update.status in _ENDED:
        return None
    if view.phase == generals_pb2.PHASE_SETUP:
        return _setup_answer(update, view, seat, lambda done: random_setup(seat, rng, done))
    legal = list(update.legal_actions)
    if ACCEPT in legal:
        return rng.choice((ACCEPT, DECLINE))
    moves = [action for action in legal if "-" in action]
    return rng.choice(moves) if moves else None


VALUES: dict[int, float] = {
    FLG: 25.0,
    PVT: 1.0,
    SGT: 2.0,
    LT2: 3.0,
    LT1: 3.5,
    CPT: 4.0,
    MAJ: 4.5,
    LTC: 5.0,
    COL: 6.0,
    BG1: 7.0,
    MG2: 8.0,
    LG3: 9.0,
    GEN4: 10.0,
    GOA5: 12.0,
    SPY: 8.0,
}
"""What a piece is worth to the greedy bot (taking the Flag wins: it is worth most)."""
ALL_RANKS = frozenset(RANK_ORDER)
PROBES = (PVT, SGT)
MOVED_FLAG_WEIGHT = 0.2
"""How much likelier a piece that never moved is the Flag than one that did."""


def _distance(a: int, b: int) -> int:
    return abs(a % 9 - b % 9) + abs(a // 9 - b // 9)


class Knowledge:
    """What the greedy bot has learnt of the opposing pieces from the challenges it saw: the ranks each
    opposing piece may have, the pieces that moved (unlikely to be the Flag), and the ranks known to be
    removed. It follows the game update by update (one move at a time); after a gap it keeps what still
    stands where it was and learns the rest afresh."""

    def __init__(self) -> None:
        self._reset("")

    def _reset(self, match_id: str) -> None:
        self.match_id = match_id
        self.moves = -1
        self.own: dict[int, int] = {}
        self.enemy: dict[int, frozenset[int]] = {}
        self.moved: set[int] = set()
        self.removed: Counter[int] = Counter()
        self.last_own: tuple[int, int] | None = None

    def follow(self, update: rules_pb2.MatchUpdate, view: generals_pb2.GeneralsView, seat: int) -> None:
        """Take in ``update`` (the seat's view during play)."""
        if update.match_id != self.match_id or view.moves_played < self.moves or self.moves < 0:
            self._reset(update.match_id)
        elif view.moves_played == self.moves + 1 and view.HasField("last_move"):
            self._learn(view.last_move, seat)
        self.own = own_pieces(view, seat)
        standing = {_BY_NAME[p.square] for p in view.pieces if p.seat != seat and p.square in _BY_NAME}
        self.enemy = {square: self.enemy.get(square, ALL_RANKS) for square in standing}
        self.moved &= standing
        self.moves = view.moves_played
        self._narrow()

    def _learn(self, last: generals_pb2.LastMove, seat: int) -> None:
        frm, to = _BY_NAME.get(getattr(last, "from")), _BY_NAME.get(last.to)
        if frm is None or to is None:
            return
        result = {"attacker": Challenge.ATTACKER, "defender": Challenge.DEFENDER, "both": Challenge.BOTH}.get(
            last.result
        )
        if last.seat == seat:
            self.last_own = (frm, to)
            attacker = self.own.get(frm)
            if attacker is None or not last.challenge or result is None:
                return
            ranks = self.enemy.get(to, ALL_RANKS)
            fits = frozenset(r for r in ranks if challenge(attacker, r) == result) or ranks
            if result == Challenge.DEFENDER:
                self.enemy[to] = fits
            else:
                self.enemy.pop(to, None)
                self._removed(fits)
            return
        ranks = self.enemy.pop(frm, ALL_RANKS)
        self.moved.discard(frm)
        if not last.challenge or result is None:
            self.enemy[to] = ranks
            self.moved.add(to)
            return
        defender = self.own.get(to)
        if defender is None:
            return
        fits = frozenset(r for r in ranks if challenge(r, defender) == result) or ranks
        if result == Challenge.ATTACKER:
            self.enemy[to] = fits
            self.moved.add(to)
        else:
            self._removed(fits)

    def _removed(self, ranks: frozenset[int]) -> None:
        if len(ranks) == 1:
            self.removed[next(iter(ranks))] += 1

    def _narrow(self) -> None:
        """Ranks all of whose pieces are accounted for (removed, or known exactly on the board) are taken
        out of the other pieces' possibilities."""
        for _ in range(3):
            exact = Counter(next(iter(ranks)) for ranks in self.enemy.values() if len(ranks) == 1)
            gone = {r for r in RANK_ORDER if self.removed[r] + exact[r] >= COUNTS[r]}
            if not gone:
                return
            changed = False
            for square, ranks in self.enemy.items():
                if len(ranks) > 1 and ranks & gone:
                    narrowed = ranks - gone
                    if narrowed:
                        self.enemy[square] = narrowed
                        changed = True
            if not changed:
                return

    def odds(self, square: int) -> dict[int, float]:
        """The chances of each rank for the opposing piece on ``square``."""
        ranks = self.enemy.get(square, ALL_RANKS)
        weights = {r: float(max(0, COUNTS[r] - self.removed[r])) for r in ranks}
        if square in self.moved and FLG in weights:
            weights[FLG] *= MOVED_FLAG_WEIGHT
        total = sum(weights.values())
        if total <= 0:
            return {r: 1 / len(ranks) for r in ranks}
        return {r: w / total for r, w in weights.items()}

    def attack_value(self, attacker: int, square: int) -> tuple[float, float]:
        """The expected gain of ``attacker`` challenging the piece on ``square``, and its chance to win
        (or trade)."""
        gain = 0.0
        wins = 0.0
        for rank, p in self.odds(square).items():
            result = challenge(attacker, rank)
            if result == Challenge.ATTACKER:
                gain += p * VALUES[rank]
                wins += p
            elif result == Challenge.DEFENDER:
                gain -= p * VALUES[attacker]
            else:
                gain += p * (VALUES[rank] - VALUES[attacker])
                wins += p
        return gain, wins

    def danger(self, rank: int, square: int) -> float:
        """The chance the opposing piece on ``square`` beats (or trades with) ``rank`` if it attacks."""
        return sum(p for r, p in self.odds(square).items() if challenge(r, rank) != Challenge.DEFENDER)


class GreedyBot:
    """The greedy bot of one game at a time (see the module's docstring)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.knowledge = Knowledge()

    def __call__(self, update: rules_pb2.MatchUpdate, seat: int) -> str | None:
        view = _view(update)
        if view is None or update.status in _ENDED:
            return None
        if view.phase == generals_pb2.PHASE_SETUP:
            return _setup_answer(update, view, seat, lambda _: greedy_setup(seat, self.rng))
        if view.phase != generals_pb2.PHASE_PLAY:
            return None
        self.knowledge.follow(update, view, seat)
        legal = list(update.legal_actions)
        if ACCEPT in legal:
            behind = len(view.lost) == 2 and view.lost[seat].count > view.lost[1 - seat].count
            return ACCEPT if behind else DECLINE
        moves = [
            (_BY_NAME[frm], _BY_NAME[to]) for frm, _, to in (a.partition("-") for a in legal if "-" in a)
        ]
        if not moves:
            return None
        frm, to = self.choose(moves, seat, view.quiet_moves)
        return f"{NAMES[frm]}-{NAMES[to]}"

    def choose(self, moves: list[tuple[int, int]], seat: int, quiet: int = 0) -> tuple[int, int]:
        """The move to play among ``moves`` (square pairs); ``quiet``: moves in a row without a challenge
        (the longer the run, the keener the bot is to challenge)."""
        pressure = quiet / 15
        know = self.knowledge
        own = know.own
        enemy = know.enemy
        flag = next((square for square, rank in own.items() if rank == FLG), None)
        far = set(FAR_RANK[seat])

        def near_enemy(square: int, within: int) -> bool:
            return any(_distance(square, e) <= within for e in enemy)

        # The Flag wins at once on the far rank with no enemy beside it.
        for frm, to in moves:
            if frm == flag and to in far and to not in enemy and not any(n in enemy for n in NEIGHBORS[to]):
                return frm, to
        guards = set(NEIGHBORS[flag]) & set(own) if flag is not None else set()
        threats = {n for n in NEIGHBORS[flag] if n in enemy} if flag is not None else set()
        scored: list[tuple[float, float, tuple[int, int]]] = []
        for frm, to in moves:
            rank = own[frm]
            if to in enemy:
                if rank == FLG and know.odds(to).get(FLG, 0) < 1:
                    continue  # a Flag challenging anything but the Flag is lost
                gain, wins = know.attack_value(rank, to)
                if rank in PROBES and len(enemy.get(to, ALL_RANKS)) > 2:
                    gain += 1.0  # what the probe learns
                if to in threats:
                    gain += 20 * wins
                elif frm in guards and flag is not None and _distance(to, flag) > 2:
                    gain -= 5  # a guard stays by its Flag
                score = gain + pressure
            elif rank == FLG:
                if threats and not any(n in enemy for n in NEIGHBORS[to]):
                    score = 15.0  # the Flag escapes
                elif not threats and _forward(frm, to, seat) and not near_enemy(to, 3):
                    score = 3.0  # no enemy near: toward the far rank
                else:
                    continue
            else:
                risk = max(
                    (know.danger(rank, n) * VALUES[rank] for n in NEIGHBORS[to] if n in enemy), default=0
                )
                before = min((_distance(frm, e) for e in enemy), default=0)
                after = min((_distance(to, e) for e in enemy), default=0)
                pull = 1.0 if rank in (PVT, SGT, LT2, LT1, GOA5, GEN4) else 0.5 if rank != SPY else 0.2
                score = (before - after) * (pull + pressure) - risk - 0.5
                if frm in guards:
                    score -= 4
                if know.last_own == (to, frm):
                    score -= 0.4  # no shuttling back and forth
            scored.append((score, self.rng.random(), (frm, to)))
        if not scored:
            return self.rng.choice(moves)
        return max(scored)[2]


def _forward(frm: int, to: int, seat: int) -> bool:
    return to // 9 > frm // 9 if seat == 0 else to // 9 < frm // 9


FAMILY = GeneralsClient()
