"""The game record: a text that reveals every rank, for after the game (see ``docs/generals.md``,
"Record").

::

    generals 1
    white a1=FLG b1=PVT ... (White's arrangement when play began, in square order)
    black a6=2LT ...
    completed black           (only if a seat's arrangement was completed at the setup deadline)
    first white               (the seat the coin gave the first move)
    W b3-b4                   (every action of play, in order: seat letter, action)
    B b6-b5
    W b4-b5 SGT>PVT           (a challenge: attacker rank, > < or =, defender rank)
    B draw
    W decline
    result 1-0 flag_captured  (1-0, 0-1, 1/2-1/2 and the termination; * while unfinished)
    detail White captured Black's Flag on e8 from e7; White wins

A challenge is written ``ATT>DEF`` (the attacker won), ``ATT<DEF`` (the defender won) or ``ATT=DEF``
(both removed). :func:`parse_record` reads it back; :func:`game_from_record` replays it.
"""

from __future__ import annotations

from dataclasses import dataclass

from libs.engines.base import ActionContext, Outcome, Termination
from libs.engines.generals.board import (
    HOME,
    SEAT_LETTERS,
    SEAT_NAMES,
    Placements,
    parse_placements,
    placements_text,
)
from libs.engines.generals.engine import (
    FIRST_REQUEST,
    GENERALS,
    GeneralsOptions,
    GeneralsState,
    Phase,
    Step,
)
from libs.engines.generals.pieces import CHALLENGE_MARKS, CODES, Challenge

HEADER = "generals 1"
_COLOURS = ("white", "black")
_MARK_RESULTS = {mark: result for result, mark in CHALLENGE_MARKS.items()}


@dataclass(frozen=True, slots=True)
class RecordStep:
    """One action of play in a record."""

    seat: int
    action: str
    """As played, canonical (``b3-b4``, ``draw``, ``accept``, ``decline``)."""
    challenge: str | None = None
    """For a challenge: ``SGT>PVT``, ``SGT<COL`` or ``SGT=SGT``."""

    def line(self) -> str:
        text = f"{SEAT_LETTERS[self.seat]} {self.action}"
        return f"{text} {self.challenge}" if self.challenge else text


@dataclass(frozen=True, slots=True)
class GeneralsRecord:
    """A game as its record holds it."""

    arrangements: tuple[Placements, Placements]
    """Each seat's ``(square, rank id)`` placements when play began (as they stood, if it never did),
    in square order."""
    completed: tuple[int, ...] = ()
    """Seats whose arrangement was completed at random at the setup deadline."""
    first: int | None = None
    steps: tuple[RecordStep, ...] = ()
    result: str = "*"
    """``1-0``, ``0-1``, ``1/2-1/2``, or ``*`` (not over)."""
    termination: Termination | None = None
    detail: str = ""

    def to_text(self) -> str:
        lines = [HEADER]
        for seat in (0, 1):
            body = placements_text(self.arrangements[seat])
            lines.append(f"{_COLOURS[seat]} {body}" if body else _COLOURS[seat])
        if self.completed:
            lines.append("completed " + " ".join(_COLOURS[s] for s in self.completed))
        if self.first is not None:
            lines.append(f"first {_COLOURS[self.first]}")
        lines.extend(step.line() for step in self.steps)
        if self.termination is None:
            lines.append(f"result {self.result}")
        else:
            lines.append(f"result {self.result} {self.termination.value}")
        if self.detail:
            lines.append(f"detail {self.detail}")
        return "\n".join(lines) + "\n"


def record_of(state: GeneralsState, outcome: Outcome | None = None) -> GeneralsRecord:
    """The record of ``state``; ``outcome`` (the runtime's: resignation, third strike, disconnection,
    abort) overrides the engine's own result when given."""
    board = state.initial or state.board
    arrangements = tuple(
        tuple((s, board[s] & 15) for s in HOME[seat] if board[s] and board[s] >> 4 == seat) for seat in (0, 1)
    )
    steps = tuple(_record_step(step) for step in state.history)
    end = outcome if outcome is not None else state.result
    if end is None:
        result, termination, detail = "*", None, ""
    else:
        result = {None: "1/2-1/2", 0: "1-0", 1: "0-1"}[end.winner]
        if end.termination is Termination.ABORTED:
            result = "*"
        termination, detail = end.termination, end.detail
    return GeneralsRecord(
        arrangements=(arrangements[0], arrangements[1]),
        completed=state.completed,
        first=state.first,
        steps=steps,
        result=result,
        termination=termination,
        detail=detail,
    )


def export_record(state: GeneralsState, outcome: Outcome | None = None) -> str:
    """The record of ``state`` as text (see the module docstring); ``outcome`` as in :func:`record_of`.
    It reveals every rank: it is for after the game, never for a player during it."""
    return record_of(state, outcome).to_text()


def _record_step(step: Step) -> RecordStep:
    challenge = None
    if step.result:
        mark = CHALLENGE_MARKS[Challenge(step.result)]
        challenge = f"{CODES[step.attacker]}{mark}{CODES[step.defender]}"
    return RecordStep(step.seat, step.notation, challenge)


def parse_record(text: str) -> GeneralsRecord:
    """The record written by :func:`export_record`.

    :raises ValueError: not such a record (the message names the line).
    """
    # Blank lines and comment lines (``# ...``: the service's header of players, date and clock) are skipped.
    lines = [
        line.rstrip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines or lines[0].strip() != HEADER:
        raise ValueError(f"a Generals record starts with {HEADER!r}")
    arrangements: list[Placements] = []
    completed: tuple[int, ...] = ()
    first: int | None = None
    steps: list[RecordStep] = []
    result = "*"
    termination: Termination | None = None
    detail = ""
    for number, line in enumerate(lines[1:], start=2):
        word, _, rest = line.strip().partition(" ")
        try:
            if word in _COLOURS and len(arrangements) < 2 and _COLOURS.index(word) == len(arrangements):
                arrangements.append(tuple(sorted(parse_placements(rest))))
            elif word == "completed":
                completed = tuple(_COLOURS.index(colour) for colour in rest.split())
            elif word == "first":
                first = _COLOURS.index(rest.strip())
            elif word in SEAT_LETTERS:
                action, _, challenge = rest.partition(" ")
                if challenge:
                    _parse_challenge(challenge)
                steps.append(RecordStep(SEAT_LETTERS.index(word), action, challenge or None))
            elif word == "result":
                result, _, name = rest.partition(" ")
                if result not in ("1-0", "0-1", "1/2-1/2", "*"):
                    raise ValueError(f"unknown result {result!r}")
                termination = Termination(name) if name else None
            elif word == "detail":
                detail = rest
            else:
                raise ValueError(f"unexpected {word!r}")
        except ValueError as error:
            raise ValueError(f"line {number} of the record: {error}") from None
    if len(arrangements) != 2:
        raise ValueError("a Generals record has a white and a black arrangement line")
    return GeneralsRecord(
        arrangements=(arrangements[0], arrangements[1]),
        completed=completed,
        first=first,
        steps=tuple(steps),
        result=result,
        termination=termination,
        detail=detail,
    )


def _parse_challenge(text: str) -> tuple[int, Challenge, int]:
    for mark, result in _MARK_RESULTS.items():
        attacker, found, defender = text.partition(mark)
        if found:
            pairs = parse_placements(f"a1={attacker} a2={defender}")
            return pairs[0][1], result, pairs[1][1]
    raise ValueError(f"{text!r} is not a challenge like SGT>PVT")


def game_from_record(record: GeneralsRecord, options: GeneralsOptions | None = None) -> GeneralsState:
    """The game a record describes, replayed through the engine: both arrangements set up and made
    ready, the first mover drawn as recorded, every action applied (each challenge checked against the
    record). A seat completed at the deadline is replayed as if it had set up and readied itself, so
    :attr:`GeneralsState.completed` and :attr:`~GeneralsState.setup_draws` are not restored.

    :raises ValueError: the record does not replay (a refused action, a challenge that came out
        differently, an arrangement that is no legal setup).
    """
    context = ActionContext(remaining_ms=(0, 0))
    state = GENERALS.new_game(options)
    for seat in (0, 1):
        body = placements_text(record.arrangements[seat])
        state = GENERALS.apply(state, seat, f"setup {body}" if body else "setup", context)
    if record.first is None:
        return state
    for seat in (0, 1):
        state = GENERALS.apply(state, seat, "ready", context)
    state = GENERALS.apply_chance(state, FIRST_REQUEST, (record.first,))
    for number, step in enumerate(record.steps, start=1):
        state = GENERALS.apply(state, step.seat, step.action, context)
        played = _record_step(state.history[-1])
        if played.challenge != step.challenge:
            raise ValueError(
                f"action {number} ({SEAT_NAMES[step.seat]} {step.action}) gave {played.challenge}, "
                f"the record says {step.challenge}"
            )
    assert state.phase in (Phase.PLAY, Phase.OVER)
    return state
