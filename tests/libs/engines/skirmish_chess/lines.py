"""Scripted duels: the shortest line of duel moves that ends a duel the way a test wants.

Found by a breadth-first search over the duel engine's own moves (a few thousand positions at most), so a
test can say "the attacker wins this duel" and play it through the engine or the service.
"""

from __future__ import annotations

from collections import deque

from libs.engines.skirmish import Duel, play


def line_to(duel: Duel, want: bool | None, max_plies: int = 16) -> list[str]:
    """Duel moves (UCI) from ``duel`` to its end with winner ``want`` (True: the duel's White, False:
    its Black, None: a draw). Wins are found by breadth-first search; a draw is the shortest repetition
    line (pieces stepping back and forth), or any line that reaches the ply limit without a capture of a
    king."""
    if want is None:
        return _draw_line(duel)
    queue: deque[tuple[Duel, list[str]]] = deque([(duel, [])])
    seen = {duel.position}
    while queue:
        current, moves = queue.popleft()
        for move in current.legal:
            after = play(current, move)
            if after.result is not None:
                if after.result.winner is want:
                    return [*moves, move.uci]
                continue
            if after.position in seen or len(moves) + 1 >= max_plies:
                continue
            seen.add(after.position)
            queue.append((after, [*moves, move.uci]))
    raise AssertionError(f"no line in which the duel ends with winner {want}")


def _draw_line(duel: Duel) -> list[str]:
    """A line that ends the duel drawn, found depth-first, quiet moves first."""

    def search(current: Duel, moves: list[str]) -> list[str] | None:
        if current.result is not None:
            return moves if current.result.winner is None else None
        for move in sorted(current.legal, key=lambda m: current.position.piece_at(m.to_sq) is not None):
            after = play(current, move)
            if after.result is not None and after.result.winner is not None:
                continue
            found = search(after, [*moves, move.uci])
            if found is not None:
                return found
        return None

    found = search(duel, [])
    if found is None:
        raise AssertionError("no drawn line")
    return found
