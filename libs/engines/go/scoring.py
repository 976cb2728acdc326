"""Counting a go position: area (Chinese) or territory (Japanese) scoring, by parts per colour.

Every stone on the board counts as alive: the players agree to the count (or resume play to capture
what they think is dead), so nothing is removed here.

- An empty *region* is a maximal set of connected empty points. A region whose border touches only
  Black stones is Black's territory, only White stones White's. A region touching both colours, or no
  stone at all (an empty board), is neutral (dame): it counts for nobody.
- Area (Chinese): stones on the board + territory.
- Territory (Japanese): territory + prisoners (the stones that player captured during the game). A pass
  gives the opponent no prisoner in this ruleset (no pass stones): the prisoners are the captures only.
  Because every stone counts as alive, no dead stones are lifted at the end either.
- Komi goes to White. The higher total wins; equal totals (only possible with a whole-number komi) are a
  draw (jigo).

:func:`score_board` works on any :class:`~libs.engines.go.board.Board`, so a test or another team can
count a finished position without playing a game to reach it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from libs.engines.go.board import BLACK, EMPTY, WHITE, Board


class Scoring(StrEnum):
    """How a finished game is counted."""

    AREA = "area"
    """Chinese: stones + surrounded empty points."""
    TERRITORY = "territory"
    """Japanese: surrounded empty points + prisoners."""


@dataclass(frozen=True, slots=True)
class ColorScore:
    """One colour's count, by parts."""

    stones: int
    """Stones on the board (counted in area scoring only, shown in both)."""
    territory: int
    """Empty points surrounded by this colour alone."""
    prisoners: int
    """Stones this colour captured (counted in territory scoring only, shown in both)."""
    komi: float
    """White's komi; 0 for Black."""
    total: float


@dataclass(frozen=True, slots=True)
class Score:
    """A counted position: each colour's parts and total, the neutral points, and who leads."""

    scoring: Scoring
    black: ColorScore
    white: ColorScore
    neutral: int
    """Empty points in regions touching both colours, or no stone."""

    @property
    def margin(self) -> float:
        """Black's total minus White's (negative: White leads)."""
        return self.black.total - self.white.total

    @property
    def winner(self) -> int | None:
        """The leading seat (0 Black, 1 White), ``None`` for equal totals."""
        margin = self.margin
        return None if margin == 0 else 0 if margin > 0 else 1

    def result(self) -> str:
        """The SGF-style result: ``B+6.5``, ``W+0.5``, ``0`` for a draw."""
        margin = self.margin
        if margin == 0:
            return "0"
        return f"{'B' if margin > 0 else 'W'}+{_number(abs(margin))}"

    def summary(self) -> str:
        """The count in words: ``area: Black 177, White 176 + 7.5 komi``."""
        if self.scoring is Scoring.AREA:
            black = f"Black {self.black.stones + self.black.territory}"
            white = f"White {self.white.stones + self.white.territory}"
        else:
            black = f"Black {self.black.territory} + {_prisoners(self.black.prisoners)}"
            white = f"White {self.white.territory} + {_prisoners(self.white.prisoners)}"
        komi = self.white.komi
        if komi > 0:
            white += f" + {_number(komi)} komi"
        elif komi < 0:
            white += f" - {_number(-komi)} komi"
        return f"{self.scoring.value}: {black}, {white}"

    def detail(self) -> str:
        """A sentence for people: ``White wins by 6.5 (area: Black 177, White 176 + 7.5 komi)``."""
        margin = self.margin
        if margin == 0:
            return f"a draw, equal scores ({self.summary()})"
        leader = "Black" if margin > 0 else "White"
        return f"{leader} wins by {_number(abs(margin))} ({self.summary()})"


def regions(board: Board) -> tuple[list[int], list[int], list[int]]:
    """The empty points split by who surrounds them: (Black's, White's, neutral)."""
    cells = board.cells
    neighbors = board.geometry.neighbors
    seen = bytearray(len(cells))
    black: list[int] = []
    white: list[int] = []
    neutral: list[int] = []
    for start in range(len(cells)):
        if cells[start] != EMPTY or seen[start]:
            continue
        seen[start] = 1
        region = [start]
        border = 0
        index = 0
        while index < len(region):
            p = region[index]
            index += 1
            for q in neighbors[p]:
                v = cells[q]
                if v == EMPTY:
                    if not seen[q]:
                        seen[q] = 1
                        region.append(q)
                else:
                    border |= v
        if border == BLACK:
            black.extend(region)
        elif border == WHITE:
            white.extend(region)
        else:
            neutral.extend(region)
    return black, white, neutral


def score_board(
    board: Board, komi: float, scoring: Scoring | str = Scoring.AREA, prisoners: tuple[int, int] = (0, 0)
) -> Score:
    """Count ``board`` with every stone alive. ``prisoners``: stones captured by (Black, White)."""
    scoring = Scoring(scoring)
    black_region, white_region, neutral = regions(board)
    stones = (board.count(BLACK), board.count(WHITE))
    territory = (len(black_region), len(white_region))
    parts = []
    for seat in (0, 1):
        own_komi = float(komi) if seat == 1 else 0.0
        if scoring is Scoring.AREA:
            total = stones[seat] + territory[seat] + own_komi
        else:
            total = territory[seat] + prisoners[seat] + own_komi
        parts.append(ColorScore(stones[seat], territory[seat], prisoners[seat], own_komi, float(total)))
    return Score(scoring, parts[0], parts[1], len(neutral))


def _number(value: float) -> str:
    """``6.5`` as ``6.5``, ``7.0`` as ``7``."""
    return str(int(value)) if value == int(value) else str(value)


def _prisoners(count: int) -> str:
    return f"{count} prisoner{'s' if count != 1 else ''}"
