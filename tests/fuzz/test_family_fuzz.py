"""The families' parsers and engines fuzzed directly: whatever a player sends, in whatever state, the
family either accepts it or refuses it with its documented refusal (``MalformedActionError`` for what it
cannot read, ``IllegalActionError`` for what the state forbids, ``InvalidOptionsError`` for options),
never another exception; a refused action leaves the state exactly as it was; and an accepted one was
among the actions ``legal_actions`` offered that seat.

States: chess from the start, one move in, castling, en passant and promotion positions, a FIDE game
with a draw offer pending, and finished games (mate, agreed draw); gin rummy waiting for its deal, in
the upcard offer, mid-hand (reached by a random walk of legal actions from a drawn shuffle) and over.
Backgammon in every phase (a money game, one with the cube and beavers, a match to 3, hypergammon with
automatic bear-off), reached by random walks with seeded dice. Go on 9x9 and 13x13 with a handicap: the
start, mid-game (with a ko), the count (one seat accepted or none) and over. Game of the Generals in the
setup (empty, one seat ready), in play (with a draw offer pending) and at the end.
Actions: random text, UCI- and SAN-shaped strings, the draw words, gin's words with every card and
some that are not cards, backgammon's words and play-shaped text, go's words and point-shaped text (on
and off the board), and the legal actions of either seat
(so the wrong seat's moves too).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from skillclassics.rules.v1 import rules_pb2

from libs.engines.base import ActionContext, IllegalActionError, InvalidOptionsError, MalformedActionError
from libs.engines.chess import CHESS, ChessOptions, ChessState, Ruleset
from libs.engines.chess import parse_action as parse_chess
from libs.engines.chess.actions import Move
from libs.engines.gin import GIN, GinOptions, GinState, Phase, Variant
from libs.engines.gin import parse_action as parse_gin
from libs.engines.gin.cards import CARD_TEXT
from services.rules_chess.family import ChessFamily
from services.rules_gin.family import GinFamily
from tests.fuzz.conftest import fuzz
from tests.fuzz.notation import DRAW_WORDS, GIN_WORDS, NOT_CARDS, SAN_LIKE, UCI_LIKE, gin_words
from tests.fuzz.strategies import messages, texts

CONTEXT = ActionContext(remaining_ms=(60_000, 60_000))
REFUSALS = (MalformedActionError, IllegalActionError)
"""What a family may raise for an action: nothing else."""

# -- chess ------------------------------------------------------------------------------------------------


def _chess(
    moves: tuple[str, ...] = (), fen: str | None = None, ruleset: Ruleset = Ruleset.CONTEST
) -> ChessState:
    state = CHESS.new_game(ChessOptions(ruleset, fen))
    for ply, move in enumerate(moves):
        seat = CHESS.to_move(state)
        assert seat is not None, (moves, ply)
        state = CHESS.apply(state, seat, move, CONTEXT)
    return state


def _chess_states() -> dict[str, ChessState]:
    fide_offer = CHESS.apply(_chess(("e2e4",), ruleset=Ruleset.FIDE), 0, "offer_draw", CONTEXT)
    agreed = CHESS.apply(fide_offer, 1, "accept_draw", CONTEXT)
    return {
        "start": _chess(),
        "start-fide": _chess(ruleset=Ruleset.FIDE),
        "one-move-in": _chess(("e2e4",)),
        "castling": _chess(fen="r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1"),
        "en-passant": _chess(fen="4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1"),
        "promotion": _chess(fen="8/4P3/8/8/8/8/k7/4K3 w - - 0 1"),
        "black-promotes": _chess(fen="4k3/8/8/8/8/8/3p4/K7 b - - 0 1"),
        "draw-offered": fide_offer,
        "mated": _chess(("f2f3", "e7e5", "g2g4", "d8h4")),
        "draw-agreed": agreed,
    }


CHESS_STATES = _chess_states()


def _chess_snapshot(state: ChessState, listed: bool = True) -> tuple[Any, ...]:
    """What a chess state is (with its legal actions unless ``listed`` is false: listing them fills the
    state's memo of them, which changes the path ``apply`` takes)."""
    legal = (CHESS.legal_actions(state, 0), CHESS.legal_actions(state, 1)) if listed else ()
    return (
        state.fen,
        tuple(move.uci() for move in state.board().move_stack),
        state.moves_uci,
        state.moves_san,
        state.draw_offer,
        state.result,
        state.remaining_ms,
        state.claimable_draw,
        state.options,
        *legal,
    )


def chess_texts(state: ChessState) -> st.SearchStrategy[str]:
    """What a player might type in ``state``: anything, move-shaped strings, the draw words, and the
    legal moves of both seats (UCI and SAN), with spaces around some."""
    legal = [*CHESS.legal_actions(state, 0), *CHESS.legal_actions(state, 1)]
    sans = list(CHESS.view(state, None).legal_moves_san)
    shaped = st.one_of(
        st.from_regex(UCI_LIKE),
        st.from_regex(SAN_LIKE),
        st.sampled_from(DRAW_WORDS),
        *([st.sampled_from(legal + sans)] if legal or sans else []),
    )
    padded = st.builds(
        lambda pad, text: f"{pad}{text}{pad}", st.sampled_from((" ", "\t", "\n", "\u00a0")), shaped
    )
    return st.one_of(texts(), shaped, shaped, padded)


@pytest.mark.parametrize("name", sorted(CHESS_STATES))
@fuzz(40)
@given(data=st.data())
def test_chess_actions_are_applied_or_refused(name: str, data: st.DataObject) -> None:
    state = CHESS_STATES[name]
    seat = data.draw(st.sampled_from((0, 1)), label="seat")
    text = data.draw(chess_texts(state), label="action")
    if data.draw(st.booleans(), label="fresh"):
        # The same position without its legal moves listed yet: apply then resolves the move itself
        # (what replaying a log does) instead of looking it up in the list.
        state = dataclasses.replace(state, _board=state.board())
    before = _chess_snapshot(state, listed=False)
    try:
        after = CHESS.apply(state, seat, text, CONTEXT)
    except REFUSALS:
        assert _chess_snapshot(state, listed=False) == before, "a refused action changed the state"
        return
    assert _chess_snapshot(state, listed=False) == before, "applying an action changed its state"
    action = parse_chess(text)
    offered = CHESS.legal_actions(state, seat)
    if isinstance(action, Move):
        assert after.moves_uci[-1] in offered, (text, offered)
        assert after.ply_count == state.ply_count + 1
    else:
        assert action.notation in offered, (text, offered)


@given(text=st.one_of(texts(), st.from_regex(UCI_LIKE), st.from_regex(SAN_LIKE), st.sampled_from(DRAW_WORDS)))
@fuzz(200)
def test_chess_parser_reads_or_says_malformed(text: str) -> None:
    try:
        action = parse_chess(text)
    except MalformedActionError:
        return
    assert parse_chess(action.notation) == action  # what it read, it reads back


def _action_overrides() -> dict[str, st.SearchStrategy[Any]]:
    return {
        "move": st.one_of(st.from_regex(UCI_LIKE), st.from_regex(SAN_LIKE)),
        "GinAction.action": st.sampled_from(("stock", "take", "discard 7H")),
    }


@given(
    action=st.one_of(
        messages(rules_pb2.Action, overrides=_action_overrides()),
        messages(rules_pb2.Action, overrides=_action_overrides(), hostile=False),
    ),
    name=st.sampled_from(sorted(CHESS_STATES)),
    seat=st.sampled_from((0, 1)),
)
@fuzz(100)
def test_chess_family_reads_any_action_message(action: rules_pb2.Action, name: str, seat: int) -> None:
    """An Action message of any shape: read (then applied or refused) or MalformedActionError."""
    family = ChessFamily()
    try:
        parsed = family.action_from_proto(action)
    except MalformedActionError:
        return
    assert family.action_from_json(family.action_to_json(parsed)) == parsed
    state = CHESS_STATES[name]
    before = _chess_snapshot(state)
    try:
        CHESS.apply(state, seat, parsed, CONTEXT)
    except REFUSALS:
        pass
    else:
        family.describe(state, parsed)  # the record's notation of an accepted action
    assert _chess_snapshot(state) == before


FEN_LIKE = (
    r"\A([1-8pnbrqkPNBRQK]{1,8}/){7}[1-8pnbrqkPNBRQK]{1,8} [wb] (-|K?Q?k?q?) (-|[a-h][36]) \d{1,4} \d{1,4}\Z"
)


@given(
    options=messages(
        rules_pb2.MatchOptions,
        overrides={"initial_fen": st.one_of(st.from_regex(FEN_LIKE), st.just(""))},
    )
)
@fuzz(100)
def test_chess_family_reads_any_options(options: rules_pb2.MatchOptions) -> None:
    """MatchOptions of any shape (FENs of any sort): a game, or InvalidOptionsError."""
    family = ChessFamily()
    try:
        parsed = family.options_from_proto(options)
    except InvalidOptionsError:
        return
    engine = family.engine  # standard chess or Skirmish Chess, by the options
    state = engine.new_game(parsed)
    assert family.options_from_json(family.options_to_json(parsed)) == parsed
    assert engine.legal_actions(state, engine.to_move(state) or 0)


# -- gin rummy ----------------------------------------------------------------------------------------------


def gin_texts(state: GinState) -> st.SearchStrategy[str]:
    """Anything, gin's words, and the legal actions of both seats."""
    legal = [*GIN.legal_actions(state, 0), *GIN.legal_actions(state, 1)]
    worded = gin_words()
    return st.one_of(texts(), worded, worded, *([st.sampled_from(legal)] * 2 if legal else []))


def _deal(state: GinState, permutation: list[int]) -> GinState:
    request = GIN.chance_needed(state)
    assert request is not None
    if request.kind == "coin":
        state = GIN.apply_chance(state, request, (permutation[0] % 2,))
        request = GIN.chance_needed(state)
        assert request is not None
    return GIN.apply_chance(state, request, tuple(permutation))


@st.composite
def gin_states(draw: st.DrawFn) -> GinState:
    """A gin match: waiting for its deal, or dealt from a drawn shuffle and walked some legal actions in
    (ending hands when it can: knocks and gins first), possibly to its end."""
    options = GinOptions(draw(st.sampled_from(tuple(Variant))), draw(st.sampled_from((1, 1, 3))))
    state = GIN.new_game(options)
    if draw(st.integers(0, 9)) == 0:
        return state
    steps = draw(st.integers(0, 80))
    for _ in range(steps):
        if GIN.is_over(state):
            break
        if GIN.chance_needed(state) is not None:
            state = _deal(state, draw(st.permutations(range(52))))
            continue
        seat = GIN.to_move(state)
        assert seat is not None
        legal = GIN.legal_actions(state, seat)
        enders = [a for a in legal if a.split()[0] in ("knock", "gin", "biggin")]
        choice = draw(st.sampled_from(enders)) if enders else draw(st.sampled_from(legal))
        state = GIN.apply(state, seat, choice, CONTEXT)
    return state


def _gin_snapshot(state: GinState) -> tuple[Any, ...]:
    return (copy.deepcopy(state), GIN.legal_actions(state, 0), GIN.legal_actions(state, 1))


@given(state=gin_states(), data=st.data())
@fuzz(120)
def test_gin_actions_are_applied_or_refused(state: GinState, data: st.DataObject) -> None:
    seat = data.draw(st.sampled_from((0, 1)), label="seat")
    text = data.draw(gin_texts(state), label="action")
    before = _gin_snapshot(state)
    try:
        after = GIN.apply(state, seat, text, CONTEXT)
    except REFUSALS:
        assert _gin_snapshot(state) == before, "a refused action changed the state"
        return
    assert _gin_snapshot(state) == before, "applying an action changed the state it was applied to"
    offered = GIN.legal_actions(state, seat)
    assert parse_gin(text).notation in offered, (text, offered)
    assert state.phase not in (Phase.DEALING, Phase.MATCH_OVER)
    if after.phase is not Phase.DEALING and not GIN.is_over(after):
        assert sorted(_cards(after)) == list(range(52)), "a card was lost or doubled"


def _cards(state: GinState) -> list[int]:
    """Every card of a hand in play: both hands, the stock and the discard pile."""
    held = [card for seat in (0, 1) for card in range(52) if state.hands[seat] >> card & 1]
    return [*held, *state.stock, *state.discard_pile]


@given(
    action=st.one_of(
        messages(rules_pb2.Action, overrides=_action_overrides()),
        messages(rules_pb2.Action, overrides=_action_overrides(), hostile=False),
    ),
    state=gin_states(),
    seat=st.sampled_from((0, 1)),
)
@fuzz(60)
def test_gin_family_reads_any_action_message(action: rules_pb2.Action, state: GinState, seat: int) -> None:
    family = GinFamily()
    try:
        parsed = family.action_from_proto(action)
    except MalformedActionError:
        return
    assert family.action_from_json(family.action_to_json(parsed)) == parsed
    before = _gin_snapshot(state)
    with contextlib.suppress(*REFUSALS):
        GIN.apply(state, seat, parsed, CONTEXT)
    assert _gin_snapshot(state) == before


@given(options=messages(rules_pb2.MatchOptions))
@fuzz(100)
def test_gin_family_reads_any_options(options: rules_pb2.MatchOptions) -> None:
    family = GinFamily()
    try:
        parsed = family.options_from_proto(options)
    except InvalidOptionsError:
        return
    assert family.options_from_json(family.options_to_json(parsed)) == parsed
    GIN.new_game(parsed)


@given(
    text=st.one_of(
        texts(),
        st.builds(
            lambda w, c: f"{w} {c}", st.sampled_from(GIN_WORDS), st.sampled_from(CARD_TEXT + NOT_CARDS)
        ),
    )
)
@fuzz(200)
def test_gin_parser_reads_or_says_malformed(text: str) -> None:
    try:
        action = parse_gin(text)
    except MalformedActionError:
        return
    assert parse_gin(action.notation) == action


# -- backgammon --------------------------------------------------------------------------------------------

PLAY_LIKE = r"\A((bar|25|[0-9]{1,2})/((off|[0-9]{1,2})\*?/?){1,3}(\([0-9]\))? ?){1,4}\Z"
"""Play-shaped text: steps from the bar or a point to a point or off, hits, chained steps, repeats."""
BACKGAMMON_WORDS = (
    "roll", "double", "take", "drop", "pass", "beaver", "accept", "reject", "continue",
    "resign", "resign single", "resign gammon", "resign backgammon", "resign triple", "ROLL", "0", "1",
    "99", "-1", "1.5",
)  # fmt: skip


def _backgammon_states() -> dict[str, Any]:
    """States of every phase: reached by random walks of legal actions with seeded dice."""
    import random

    from libs.engines.backgammon import BACKGAMMON, BackgammonOptions, Variant

    setups = {
        "money": BackgammonOptions(),
        "cube": BackgammonOptions(cube=True, gammons=True, beavers=True),
        "match": BackgammonOptions(cube=True, gammons=True, match_to=3),
        "hyper": BackgammonOptions(variant=Variant.HYPERGAMMON, auto_bearoff=True),
    }
    states: dict[str, Any] = {}
    rng = random.Random(2026)
    for name, options in setups.items():
        state = BACKGAMMON.new_game(options)
        acted, seen = 0, set()
        for _ in range(600):
            request = BACKGAMMON.chance_needed(state)
            if request is not None:
                state = BACKGAMMON.apply_chance(state, request, (rng.randint(1, 6), rng.randint(1, 6)))
                continue
            seat = BACKGAMMON.to_move(state)
            if seat is None:
                break
            if acted % 9 == 0 or state.phase.value not in seen:
                seen.add(state.phase.value)
                states[f"{name}-{acted}-{state.phase.value}"] = state
            state = BACKGAMMON.apply(state, seat, rng.choice(BACKGAMMON.legal_actions(state, seat)), CONTEXT)
            acted += 1
        states[f"{name}-end-{state.phase.value}"] = state
    return states


BACKGAMMON_STATES = _backgammon_states()


@pytest.mark.parametrize("name", sorted(BACKGAMMON_STATES))
@fuzz(40)
@given(data=st.data())
def test_backgammon_actions_are_applied_or_refused(name: str, data: st.DataObject) -> None:
    from libs.engines.backgammon import BACKGAMMON

    state = BACKGAMMON_STATES[name]
    seat = data.draw(st.sampled_from((0, 1)), label="seat")
    legal = [*BACKGAMMON.legal_actions(state, 0), *BACKGAMMON.legal_actions(state, 1)]
    shaped = st.one_of(
        st.from_regex(PLAY_LIKE),
        st.sampled_from(BACKGAMMON_WORDS),
        *([st.sampled_from(legal)] if legal else []),
    )
    text = data.draw(st.one_of(texts(), shaped, shaped), label="action")
    before = copy.deepcopy(state)
    try:
        after = BACKGAMMON.apply(state, seat, text, CONTEXT)
    except REFUSALS:
        assert state == before, "a refused action changed the state"
        return
    assert state == before, "applying an action changed its state"
    assert after != state
    offered = BACKGAMMON.legal_actions(state, seat)
    assert offered, (text, "accepted from a seat with nothing to do")


@given(text=st.one_of(texts(), st.from_regex(PLAY_LIKE), st.sampled_from(BACKGAMMON_WORDS)))
@fuzz(200)
def test_backgammon_parser_reads_or_says_malformed(text: str) -> None:
    from libs.engines.backgammon import parse_action

    try:
        action = parse_action(text)
    except MalformedActionError:
        return
    assert parse_action(str(action)) == action  # what it read, it reads back


# -- go ----------------------------------------------------------------------------------------------------

POINT_LIKE = r"\A ?[A-Za-z][0-9]{1,2} ?\Z"
"""Point-shaped text: a letter and a row, on the board or off it (column I, row 0, row 20...)."""
GO_WORDS = ("pass", "PASS", "accept", "resume", "resign", "D4", "I5", "A0", "T19", "Z1", "d 4", "")


def _go_states() -> dict[str, Any]:
    """9x9 and 13x13 states from random walks of legal actions: the start, mid-game (a ko on the board
    when one came up), the count (nobody, one seat accepted) and the end."""
    import random

    from libs.engines.go import GO, GoOptions, Phase

    states: dict[str, Any] = {}
    rng = random.Random(2026)
    for name, options in {"9": GoOptions(size=9), "13h": GoOptions(size=13, handicap=3)}.items():
        state = GO.new_game(options)
        states[f"{name}-start"] = state
        for ply in range(160):
            seat = GO.to_move(state)
            assert seat is not None
            points = [a for a in GO.legal_actions(state, seat) if a != "pass"]
            state = GO.apply(state, seat, rng.choice(points) if points else "pass", CONTEXT)
            if ply % 40 == 39 or (state.board.ko is not None and f"{name}-ko" not in states):
                states[f"{name}-{'ko' if state.board.ko is not None else ply}"] = state
        seat = GO.to_move(state)
        assert seat is not None
        state = GO.apply(GO.apply(state, seat, "pass", CONTEXT), 1 - seat, "pass", CONTEXT)
        assert state.phase is Phase.COUNT
        states[f"{name}-count"] = state
        state = GO.apply(state, 1, "accept", CONTEXT)
        states[f"{name}-count-one-accepted"] = state
        states[f"{name}-over"] = GO.apply(state, 0, "accept", CONTEXT)
    return states


GO_STATES = _go_states()


@pytest.mark.parametrize("name", sorted(GO_STATES))
@fuzz(40)
@given(data=st.data())
def test_go_actions_are_applied_or_refused(name: str, data: st.DataObject) -> None:
    from libs.engines.go import GO

    state = GO_STATES[name]
    seat = data.draw(st.sampled_from((0, 1)), label="seat")
    legal = [*GO.legal_actions(state, 0), *GO.legal_actions(state, 1)]
    shaped = st.one_of(
        st.from_regex(POINT_LIKE), st.sampled_from(GO_WORDS), *([st.sampled_from(legal)] if legal else [])
    )
    text = data.draw(st.one_of(texts(), shaped, shaped), label="action")
    before = copy.deepcopy(state)
    try:
        after = GO.apply(state, seat, text, CONTEXT)
    except REFUSALS:
        assert state == before, "a refused action changed the state"
        return
    assert state == before, "applying an action changed its state"
    assert after != state
    assert text.strip().upper() in {a.upper() for a in GO.legal_actions(state, seat)}, (
        text,
        "accepted but not offered",
    )


@given(text=st.one_of(texts(), st.from_regex(POINT_LIKE), st.sampled_from(GO_WORDS)))
@fuzz(200)
def test_go_parser_reads_or_says_malformed(text: str) -> None:
    from libs.engines.go import parse_action

    try:
        action = parse_action(text)
    except MalformedActionError:
        return
    assert parse_action(action) == action  # what it read, it reads back


# -- Game of the Generals ------------------------------------------------------------------------------------

MOVE_LIKE = r"\A ?[a-kA-K][0-9]-?[a-kA-K][0-9] ?\Z"
"""Move-shaped text: two squares, on the board or off it, with or without the dash."""
GENERALS_WORDS = (
    "ready", "draw", "accept", "decline", "resign", "setup", "setup a1=FLG", "setup a1=flg b1=PVT",
    "setup a9=FLG", "setup a1=XYZ", "setup a1=FLG a1=PVT", "setup a7=FLG", "b3-b4", "b3-c4", "a1-a9",
)  # fmt: skip


def _generals_states() -> dict[str, Any]:
    """The setup (empty, one seat ready), play after a few random moves, with a draw offer pending, and
    over: from random walks with seeded setups and draws."""
    import random

    from libs.engines.generals import GENERALS, Phase
    from tests.libs.engines.generals.helpers import FULL_BLACK, FULL_WHITE, random_setup

    states: dict[str, Any] = {"setup": GENERALS.new_game()}
    ready = GENERALS.apply(GENERALS.new_game(), 1, f"setup {FULL_BLACK}", CONTEXT)
    states["setup-one-ready"] = GENERALS.apply(ready, 1, "ready", CONTEXT)
    rng = random.Random(2026)
    for name in ("a", "b"):
        state = GENERALS.new_game()
        for seat in (0, 1):
            text = FULL_WHITE if (seat == 0 and name == "a") else random_setup(rng, seat)
            state = GENERALS.apply(state, seat, f"setup {text}", CONTEXT)
            state = GENERALS.apply(state, seat, "ready", CONTEXT)
        request = GENERALS.chance_needed(state)
        assert request is not None
        state = GENERALS.apply_chance(state, request, (rng.randrange(2),))
        for ply in range(120):
            if state.phase is not Phase.PLAY:
                break
            mover = GENERALS.to_move(state)
            assert mover is not None
            moves = [a for a in GENERALS.legal_actions(state, mover) if "-" in a]
            if ply % 30 == 10:
                states[f"play-{name}-{ply}"] = state
            if ply == 60 and "draw" in GENERALS.legal_actions(state, mover):
                states[f"offer-{name}"] = GENERALS.apply(state, mover, "draw", CONTEXT)
            state = GENERALS.apply(state, mover, rng.choice(moves), CONTEXT)
        states[f"end-{name}-{state.phase.value}"] = state
    return states


GENERALS_STATES = _generals_states()


@pytest.mark.parametrize("name", sorted(GENERALS_STATES))
@fuzz(40)
@given(data=st.data())
def test_generals_actions_are_applied_or_refused(name: str, data: st.DataObject) -> None:
    from libs.engines.generals import GENERALS

    state = GENERALS_STATES[name]
    seat = data.draw(st.sampled_from((0, 1)), label="seat")
    legal = [*GENERALS.legal_actions(state, 0), *GENERALS.legal_actions(state, 1)]
    shaped = st.one_of(
        st.from_regex(MOVE_LIKE),
        st.sampled_from(GENERALS_WORDS),
        *([st.sampled_from(legal)] if legal else []),
    )
    text = data.draw(st.one_of(texts(), shaped, shaped), label="action")
    before = copy.deepcopy(state)
    try:
        after = GENERALS.apply(state, seat, text, CONTEXT)
    except REFUSALS:
        assert state == before, "a refused action changed the state"
        return
    assert state == before, "applying an action changed its state"
    if not text.strip().lower().startswith("setup"):  # the same arrangement sent again changes nothing
        assert after != state


@given(text=st.one_of(texts(), st.from_regex(MOVE_LIKE), st.sampled_from(GENERALS_WORDS)))
@fuzz(200)
def test_generals_parser_reads_or_says_malformed(text: str) -> None:
    from libs.engines.generals import parse_action

    try:
        action = parse_action(text)
    except MalformedActionError:
        return
    assert parse_action(action) == action  # what it read, it reads back


# -- Skirmish Chess -----------------------------------------------------------------------------------------


def _skirmish_states() -> dict[str, Any]:
    """Skirmish Chess positions: on the main board, with a king attackable after a failed capture, and in
    a duel (its first move made)."""
    from libs.engines.chess.skirmish import SKIRMISH_CHESS, SkirmishChessOptions

    duel_context = ActionContext(remaining_ms=(60_000, 60_000), phase_elapsed_ms=100)
    start = SKIRMISH_CHESS.new_game(SkirmishChessOptions())
    opened = start
    for seat, move in enumerate(("e2e4", "d7d5")):
        opened = SKIRMISH_CHESS.apply(opened, seat, move, duel_context)
    in_duel = SKIRMISH_CHESS.apply(opened, 0, "e4d5", duel_context)
    in_duel = SKIRMISH_CHESS.apply(in_duel, 0, "a2a3", duel_context)
    pinned = SKIRMISH_CHESS.new_game(SkirmishChessOptions(initial_fen="4k3/8/8/8/1b6/8/3B4/4K3 w - - 0 1"))
    return {"start": start, "opened": opened, "in_duel": in_duel, "pinned": pinned}


SKIRMISH_STATES = _skirmish_states()


@pytest.mark.parametrize("name", sorted(SKIRMISH_STATES))
@fuzz(40)
@given(data=st.data())
def test_skirmish_actions_are_applied_or_refused(name: str, data: st.DataObject) -> None:
    """Any text on either board, from either seat: applied (then it was offered) or refused with a rules
    error, and the state it was applied to is unchanged."""
    from libs.engines.chess.skirmish import SKIRMISH_CHESS

    state = SKIRMISH_STATES[name]
    seat = data.draw(st.sampled_from((0, 1)), label="seat")
    legal = [*SKIRMISH_CHESS.legal_actions(state, 0), *SKIRMISH_CHESS.legal_actions(state, 1)]
    text = data.draw(
        st.one_of(
            texts(), st.from_regex(UCI_LIKE), st.from_regex(SAN_LIKE), st.sampled_from([*legal, *DRAW_WORDS])
        ),
        label="action",
    )
    before = (state.moves_uci, state.fen, state.pending)
    context = ActionContext(remaining_ms=(60_000, 60_000), phase_elapsed_ms=50)
    try:
        after = SKIRMISH_CHESS.apply(state, seat, text, context)
    except REFUSALS:
        assert (state.moves_uci, state.fen, state.pending) == before
        return
    assert (state.moves_uci, state.fen, state.pending) == before
    offered = SKIRMISH_CHESS.legal_actions(state, seat)
    if state.pending is not None:  # a duel move: the one it played was offered
        duel = after.pending.duel if after.pending is not None else None
        played = duel.moves_uci[-1] if duel is not None else after.duels[-1].moves_uci[-1]
        assert played in offered, (text, offered)
    elif len(after.moves_uci) > len(state.moves_uci):  # a main-board move
        assert after.moves_uci[-1] in offered, (text, offered)
    else:  # a draw action
        assert text.strip() in offered, (text, offered)
