"""Match ids name their family and shard: ``<family>.<shard>.<unique>``, e.g. ``chess.0.9f2c1a7e``.

Any gateway replica routes a call to the right rules shard from the id alone (the Nakama
``uuid.node`` idea); a rules service refuses ids that are not its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MATCH_ID = re.compile(r"(?P<family>[a-z]{2,32})\.(?P<shard>[0-9]{1,4})\.(?P<unique>[A-Za-z0-9_-]{1,80})")


class MatchIdError(ValueError):
    """The text is not a match id."""


@dataclass(frozen=True, slots=True)
class MatchId:
    """A parsed match id."""

    family: str
    shard: int
    unique: str

    @classmethod
    def parse(cls, text: str) -> MatchId:
        found = _MATCH_ID.fullmatch(text)
        if found is None:
            raise MatchIdError(
                "match id must look like <family>.<shard>.<unique> (e.g. chess.0.9f2c1a7e), "
                f"got {text[:60]!r}"
            )
        return cls(found["family"], int(found["shard"]), found["unique"])

    def __str__(self) -> str:
        return f"{self.family}.{self.shard}.{self.unique}"
