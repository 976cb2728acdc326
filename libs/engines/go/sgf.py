"""SGF export (FF[4], GM[1]) of a go game.

The root node carries ``FF[4] GM[1] CA[UTF-8] SZ``, the komi ``KM``, the rules ``RU[Chinese]`` (area) or
``RU[Japanese]`` (territory), with a handicap ``HA`` and Black's stones ``AB``, the players ``PB``/``PW``
when given, and the result ``RE`` when the game is over:

- counted: ``B+6.5`` / ``W+0.5``, ``0`` for a draw (jigo);
- resignation ``B+R`` / ``W+R``, time ``B+T`` / ``W+T``, forfeit (disconnection) ``B+F`` / ``W+F``;
- aborted: ``Void``.

Then one node per move, ``B[dd]`` / ``W[pp]`` (SGF coordinates: column then row letter, ``a`` = the left
column and the top row), a pass as an empty value ``B[]`` / ``W[]`` (FF[4]; ``tt`` is the FF[3] form and
is not written). With clock readings, each move node also has ``BL``/``WL`` (the mover's time left in
seconds, as SGF defines them) and a comment ``C[Black 593000 ms, White 600000 ms]`` (both clocks in
milliseconds, after the move).
"""

from __future__ import annotations

from collections.abc import Sequence

from libs.engines.base import Outcome, Termination
from libs.engines.go.engine import PASS_POINT, GoState, move_color
from libs.engines.go.handicap import handicap_points
from libs.engines.go.scoring import Score, Scoring

RULES_NAMES = {Scoring.AREA: "Chinese", Scoring.TERRITORY: "Japanese"}
COLOR_LETTERS = ("B", "W")


def sgf_point(size: int, point: int) -> str:
    """The SGF coordinates of ``point`` (``D4`` on 19x19 is ``dp``)."""
    row, col = divmod(point, size)
    return chr(ord("a") + col) + chr(ord("a") + size - 1 - row)


def sgf_result(outcome: Outcome | None, score: Score | None = None) -> str | None:
    """The ``RE`` value of an outcome (``score``: the count, for a counted game), or ``None`` when the
    game is not over."""
    if outcome is None:
        return None
    if outcome.termination is Termination.ABORTED:
        return "Void"
    if outcome.winner is None:
        return "0"
    winner = COLOR_LETTERS[outcome.winner]
    if outcome.termination is Termination.SCORED:
        return score.result() if score is not None else f"{winner}+"
    how = {
        Termination.RESIGNATION: "R",
        Termination.TIMEOUT: "T",
        Termination.DISCONNECT: "F",
    }.get(outcome.termination, "")
    return f"{winner}+{how}" if how else f"{winner}+"


def export_sgf(
    state: GoState,
    *,
    outcome: Outcome | None = None,
    black: str | None = None,
    white: str | None = None,
    clocks: Sequence[tuple[int, int] | None] | None = None,
    date: str | None = None,
) -> str:
    """The game as an SGF text.

    ``outcome``: how the match ended when that was not on the board (resignation, timeout, forfeit,
    abort: the runtime knows it); by default the engine's own result (a count), if any. ``black`` /
    ``white``: player names. ``clocks``: per move (in order, passes included), Black's and White's
    remaining milliseconds after it, or ``None`` for a move without a reading. ``date``: ``DT``
    (``YYYY-MM-DD``).
    """
    options = state.options
    size = options.size
    root = [f"FF[4]GM[1]CA[UTF-8]SZ[{size}]KM[{_number(options.komi or 0.0)}]"]
    root.append(f"RU[{RULES_NAMES[options.scoring]}]")
    if black is not None:
        root.append(f"PB[{_escape(black)}]")
    if white is not None:
        root.append(f"PW[{_escape(white)}]")
    if date is not None:
        root.append(f"DT[{_escape(date)}]")
    result = sgf_result(outcome if outcome is not None else state.result, state.score)
    if result is not None:
        root.append(f"RE[{result}]")
    if options.handicap:
        stones = "".join(f"[{sgf_point(size, p)}]" for p in handicap_points(size, options.handicap))
        root.append(f"HA[{options.handicap}]AB{stones}PL[W]")
    nodes = ["(;" + "".join(root)]
    for index, point in enumerate(state.moves):
        seat = move_color(options, index)
        letter = COLOR_LETTERS[seat]
        value = "" if point == PASS_POINT else sgf_point(size, point)
        node = f";{letter}[{value}]"
        reading = clocks[index] if clocks is not None and index < len(clocks) else None
        if reading is not None:
            node += f"{letter}L[{_number(reading[seat] / 1000)}]"
            node += f"C[Black {reading[0]} ms, White {reading[1]} ms]"
        nodes.append(node)
    return "\n".join(nodes) + ")\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("]", "\\]")


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)
