"""Match play: the score of a match to N points and the Crawford rule.

Usable on its own: ``MatchScore(match_to=5).add(0, 2)`` is the score after seat 0 won a game worth two
points. ``match_to == 0`` is money play: a single game, no match score to reach (the score still counts
the points of that game, which is what the result reports).

The Crawford rule (``001``): the first game after either player first reaches ``match_to - 1`` points is
played without the doubling cube; later games use it again. A match to 1 point has no Crawford game
(nobody *reaches* 0 points).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

MAX_MATCH_TO = 25
"""The longest match a table may play (the contract's limit, protos/skillclassics/backgammon)."""


@dataclass(frozen=True, slots=True)
class MatchScore:
    """The score of a match and where it stands with the Crawford rule."""

    match_to: int = 0
    """Points that win the match; 0: money play (one game)."""
    score: tuple[int, int] = (0, 0)
    crawford_game: bool = False
    """The game being played (or about to be) is the Crawford game: no doubling."""
    crawford_done: bool = False
    """The Crawford game has been played (or its turn has passed): no other game is one."""
    games: int = 0
    """Games finished."""

    @property
    def is_money(self) -> bool:
        return self.match_to == 0

    @property
    def winner(self) -> int | None:
        """The seat that has won the match (money play: the winner of the single game), or ``None``."""
        if self.is_money:
            if self.games == 0:
                return None
            return 0 if self.score[0] > self.score[1] else 1
        for seat in (0, 1):
            if self.score[seat] >= self.match_to:
                return seat
        return None

    @property
    def over(self) -> bool:
        return self.winner is not None

    @property
    def post_crawford(self) -> bool:
        return self.crawford_done and not self.crawford_game

    def away(self, seat: int) -> int:
        """Points ``seat`` still needs (money play: 0)."""
        return 0 if self.is_money else max(0, self.match_to - self.score[seat])

    def add(self, seat: int, points: int) -> MatchScore:
        """The score after ``seat`` won a game worth ``points``; decides whether the next game is the
        Crawford game."""
        score = (
            (self.score[0] + points, self.score[1]) if seat == 0 else (self.score[0], self.score[1] + points)
        )
        crawford_done = self.crawford_done or self.crawford_game
        crawford_next = False
        if (
            not self.is_money
            and not crawford_done
            and max(score) < self.match_to
            and self.match_to > 1
            and self.match_to - 1 in score
        ):
            # A player reached match_to - 1 with this game: the next game is the Crawford game.
            crawford_next = True
        return replace(
            self,
            score=score,
            crawford_game=crawford_next,
            crawford_done=crawford_done or crawford_next,
            games=self.games + 1,
        )
