"""The actions a backgammon player can take, and their notation.

=============================== ===========================================================================
notation                        meaning
=============================== ===========================================================================
``roll``                        roll the dice (only offered when the player could double instead)
``double``                      offer the cube at twice its value, before rolling
``take`` / ``drop``             answer a double (or a beaver)
``beaver``                      answer a double by taking and redoubling at once, keeping the cube
``resign single``               offer to give up the game for one (``gammon``: two, ``backgammon``: three)
                                times the cube
``accept`` / ``reject``         answer a resign offer
``continue``                    between the games of a match: ready for the next game
``24/18 13/8``, ``bar/22*``,    a play in the mover's own numbering (see ``docs/backgammon.md``), or the
``6/off``, ``3``                1-based index of a play in the listed legal plays
=============================== ===========================================================================

Words are read case-insensitively with surrounding and repeated spaces ignored; ``pass`` is read as
``drop`` (002 says "Pass"). ``str(action)`` is the canonical text and ``parse_action(str(a)) == a``. A play
is only checked for syntax here; which listed play it names is decided against the position
(:func:`libs.engines.backgammon.notation.parse_play`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from libs.engines.base import MalformedActionError


class Word(StrEnum):
    """The one-word actions."""

    ROLL = "roll"
    DOUBLE = "double"
    TAKE = "take"
    DROP = "drop"
    BEAVER = "beaver"
    ACCEPT = "accept"
    REJECT = "reject"
    CONTINUE = "continue"


class ResignLevel(StrEnum):
    """What a resign offer gives up: one, two or three times the cube."""

    SINGLE = "single"
    GAMMON = "gammon"
    BACKGAMMON = "backgammon"

    @property
    def points(self) -> int:
        return {"single": 1, "gammon": 2, "backgammon": 3}[self.value]


@dataclass(frozen=True, slots=True)
class Simple:
    """A one-word action (:class:`Word`)."""

    word: Word

    def __str__(self) -> str:
        return self.word.value


@dataclass(frozen=True, slots=True)
class Resign:
    """Offer to give up the game at ``level`` times the cube; the opponent accepts or rejects."""

    level: ResignLevel

    def __str__(self) -> str:
        return f"resign {self.level.value}"


@dataclass(frozen=True, slots=True)
class PlayText:
    """A checker play as typed (normalised: lower case, single spaces) or a 1-based index."""

    text: str

    def __str__(self) -> str:
        return self.text


BackgammonAction = Simple | Resign | PlayText
"""Anything a backgammon player can do through the engine (plain resignation is the runtime's)."""

ROLL = Simple(Word.ROLL)
DOUBLE = Simple(Word.DOUBLE)
TAKE = Simple(Word.TAKE)
DROP = Simple(Word.DROP)
BEAVER = Simple(Word.BEAVER)
ACCEPT = Simple(Word.ACCEPT)
REJECT = Simple(Word.REJECT)
CONTINUE = Simple(Word.CONTINUE)

_WORDS: dict[str, BackgammonAction] = {word.value: Simple(word) for word in Word}
_WORDS["pass"] = DROP
_PLAY = re.compile(r"(?:bar|off|[0-9/*() ])+")
"""What a play may be made of; :func:`~libs.engines.backgammon.notation.parse_play` reads it."""
MAX_TEXT = 200

NOTATION_HINT = (
    "expected roll, double, take, drop, beaver, accept, reject, continue, 'resign single|gammon|backgammon', "
    "or a play such as '24/18 13/8', 'bar/22*', '6/off(2)' or its number in the list ('?' lists them)"
)


def parse_action(text: str) -> BackgammonAction:
    """The action ``text`` names (see the module docstring).

    >>> parse_action(" Double "), parse_action("24/18  13/8")
    (Simple(word=<Word.DOUBLE: 'double'>), PlayText(text='24/18 13/8'))

    :raises MalformedActionError: ``text`` is not an action's notation.
    """
    if not isinstance(text, str):
        raise MalformedActionError(f"a backgammon action is text, not {type(text).__name__}: {NOTATION_HINT}")
    if len(text) > MAX_TEXT:
        raise MalformedActionError(f"an action is at most {MAX_TEXT} characters: {NOTATION_HINT}")
    words = text.lower().split()
    if len(words) == 1 and words[0] in _WORDS:
        return _WORDS[words[0]]
    if words and words[0] == "resign":
        if len(words) == 2 and words[1] in ResignLevel.__members__.values():
            return Resign(ResignLevel(words[1]))
        raise MalformedActionError(
            "a resign offer names its level: 'resign single', 'resign gammon' or 'resign backgammon'"
        )
    joined = " ".join(words)
    if _PLAY.fullmatch(joined) and any(c.isdigit() or c == "/" for c in joined):
        return PlayText(joined)
    raise MalformedActionError(f"cannot read {text!r} as a backgammon action: {NOTATION_HINT}")
