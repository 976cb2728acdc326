"""PGN export of Skirmish Chess games, readable by ordinary PGN readers (python-chess's among them).

A capture in Skirmish Chess is decided by a duel, and only an attacker's win does what chess would do
with the move. A defender's win removes the attacker; a draw removes both, or neither (the turn passes).
No chess move can say that, so a reader replaying the moves would go wrong after the first such duel.
The export therefore splits the game into *parts*, one PGN game each, in one text:

- a part runs while every move is one chess can replay: quiet moves, and captures the attacker won;
- a capture whose duel ended otherwise closes its part with a comment that gives the move with its
  outcome mark (``{ 12. Bxe5- [%duel ...] }``), and the next part starts from the position it left
  (``[SetUp "1"]`` and ``[FEN ...]``);
- every part carries ``[Rules "Skirmish Chess"]`` (not ``Variant``: readers refuse variants they do
  not know) and ``[Part "i/n"]``; parts before the last have the
  result ``*``, the last one the game's result and its ``Termination``.

Every duel is kept in a comment after its capture as ``[%duel <SAN with mark> <key=value> ...]``:
``preset``, ``start`` (the 5x5 position, ``_`` for spaces), ``odds`` (the squares of the pawns the odds
removed, ``-`` for none), ``end`` (``king_captured``, ``no_moves``, ``repetition``, ``ply_limit`` or
``timeout``) and ``moves`` (the duel's moves in 5x5 SAN, comma-separated). Clocks are ``[%clk h:mm:ss]``
after every main-board move, as in standard chess games.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import chess

from libs.engines.base import Outcome
from libs.engines.chess.notation import format_clock
from libs.engines.chess.pgn import (
    escape_tag,
    result_token,
    roster,
    termination_text,
    wrap,
)
from libs.engines.chess.skirmish import (
    DuelOutcome,
    DuelSummary,
    SkirmishChessState,
    board_after_duel,
    capture_san,
)


@dataclass
class _Part:
    start: chess.Board
    tokens: list[str] = field(default_factory=list)


def duel_comment(duel: DuelSummary) -> str:
    """A duel as a ``[%duel ...]`` command (see the module docstring)."""
    odds = ",".join(duel.odds_removed) or "-"
    moves = ",".join(duel.moves_san) or "-"
    start = duel.start_fen.replace(" ", "_")
    return (
        f"[%duel {duel.capture_san} preset={duel.preset} start={start} odds={odds} end={duel.end.value} "
        f"moves={moves}]"
    )


def export_skirmish_pgn(
    state: SkirmishChessState,
    headers: Mapping[str, str],
    clock_after_move_ms: Sequence[int],
    outcome: Outcome | None = None,
) -> str:
    """The game as PGN text, in parts (see the module docstring). ``clock_after_move_ms[i]`` is the
    mover's main clock just after main-board move ``i`` (capture attempts included)."""
    final = outcome if outcome is not None else state.result
    initial = state.options.initial_fen
    board = chess.Board() if initial is None else chess.Board(initial)
    parts = [_Part(board.copy())]
    duels = iter(state.duels)
    for index, uci in enumerate(state.moves_uci):
        move = chess.Move.from_uci(uci)
        clock = (
            f"[%clk {format_clock(clock_after_move_ms[index])}]" if index < len(clock_after_move_ms) else ""
        )
        number = f"{board.fullmove_number}." if board.turn == chess.WHITE else f"{board.fullmove_number}..."
        tokens = parts[-1].tokens
        if not board.is_capture(move):
            tokens += [number, board.san(move)]
            if clock:
                tokens.append(f"{{ {clock} }}")
            board.push(move)
            continue
        duel = next(duels, None)
        if duel is None:  # the game ended while this capture's duel was being played
            tokens.append(
                f"{{ {number} {capture_san(board, move)} was being decided by a duel when the game ended }}"
            )
            break
        ordinary = (
            duel.outcome is DuelOutcome.ATTACKER_WON
            and board.piece_type_at(move.to_square) != chess.KING
            and board.is_legal(move)
        )
        after, _ = board_after_duel(board, move, duel.outcome, state.options.draw_rule)
        if ordinary:
            tokens += [
                number,
                capture_san(board, move),
                f"{{ {clock} {duel_comment(duel)} }}".replace("  ", " "),
            ]
            board = after
            continue
        tokens.append(f"{{ {number} {duel.capture_san} {clock} {duel_comment(duel)} }}".replace("  ", " "))
        board = after
        parts.append(_Part(board.copy()))
    texts = []
    count = len(parts)
    for index, part in enumerate(parts, start=1):
        last = index == count
        tags = roster(headers)
        tags["Result"] = result_token(final) if last else "*"
        tags["Rules"] = "Skirmish Chess"
        tags["Part"] = f"{index}/{count}"
        if index > 1 or initial is not None:
            tags["SetUp"] = "1"
            tags["FEN"] = part.start.fen()
        if last and final is not None:
            tags["Termination"] = termination_text(final)
        lines = [f'[{name} "{escape_tag(value)}"]' for name, value in tags.items()]
        texts.append("\n".join([*lines, "", *wrap([*part.tokens, tags["Result"]])]) + "\n")
    return "\n".join(texts)
