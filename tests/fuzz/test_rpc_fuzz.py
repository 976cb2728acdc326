"""Every method of every service, called with requests drawn from its descriptor (and with requests cut
short, bytes overwritten and raw bytes): no crash, no hang, never INTERNAL or UNKNOWN, and the live
matches untouched.

Each method is called as the identity the authorisation table lets call it (the gateway's as players
with a valid token, none, or a bad one), and fields that name things are drawn half the time from a
small pool of the right shape (match ids of the shard called, the fuzz players, a few idempotency keys)
so that calls get past the first checks and meet each other: a match created by a fuzzed CreateMatch
is then played by fuzzed SubmitActions; ids only servers make (tables, page tokens, timer arms, the
matches matchmaking pairs the fuzz players into) are taken from replies for later requests. After every
method's examples, every service must still answer its health check SERVING, no call may still be
handled once its caller has gone, and the live chess and gin matches must look exactly as they did
(:meth:`tests.fuzz.harness.Platform.snapshot`).
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import MethodDescriptor
from hypothesis import given
from hypothesis import strategies as st
from skillclassics.chess.v1 import chess_pb2
from skillclassics.clock.v1 import clock_pb2
from skillclassics.fairness.v1 import fairness_pb2
from skillclassics.gateway.v1 import gateway_pb2
from skillclassics.gin.v1 import gin_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.runtime.authz import CLOCK, FAIRNESS, GATEWAY, MATCHMAKING, POLICY, RULES
from libs.runtime.identity import OPERATOR
from tests.fuzz.conftest import fuzz
from tests.fuzz.harness import (
    FUZZ_PLAYERS,
    Outcome,
    Platform,
    bearer,
    call_raw,
    discovered,
    new_faults,
    server_faults,
)
from tests.fuzz.strategies import Overrides, any_payload, weighted

FENS = (
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
    "7k/4Q3/6K1/8/8/8/8/8 w - - 0 1",  # stalemate in one
    "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1",  # stalemate: no legal move
    "8/8/8/8/8/8/8/8 w - - 0 1",  # no kings
    "4k3/8/8/8/8/8/8/4K3 w - - 0 1",  # insufficient material
    "4k3/P7/8/8/8/8/8/4K3 w - - 149 200",
    "not a fen",
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1 extra",
)
MOVES = (
    "e2e4",
    "e7e5",
    "e2e5",
    "e1g1",
    "e7e8q",
    "e7e8",
    "0000",
    "Nf3",
    "O-O",
    "O-O-O",
    "exd5",
    "e8=Q+",
    "Ka1",
)
GIN_ACTIONS = (
    "take",
    "pass",
    "stock",
    "biggin",
    "discard 7H",
    "knock TH",
    "gin AS",
    "discard",
    "discard 10C",
)

FORMATIONS = (
    "a1=FLG b1=SPY c1=SPY d1=PVT e1=PVT f1=PVT g1=PVT h1=PVT i1=PVT "
    "a2=5* b2=4* c2=3* d2=2* e2=1* f2=COL g2=LTC h2=MAJ i2=CPT a3=1LT b3=2LT c3=SGT",
    "c3=sgt b3=2lt a3=1lt i2=cpt h2=maj g2=ltc f2=col e2=1* d2=2* c2=3* b2=4* a2=5* "
    "i1=pvt h1=pvt g1=pvt f1=pvt e1=pvt d1=pvt c1=spy b1=spy a1=flg",
    "a4=PVT a1=FLG b1=FLG",
    "a1=FLG",
    "a1=FLG a1=SPY",
    "a1=KING zz",
)
"""Game of the Generals formations: two legal (one as typed), four not."""
FORMATION_NAMES = st.sampled_from(("Wall", "wall", "f1", "Blitz left-flank v2"))


def match_ids(family: str, shard: int) -> list[str]:
    return [f"{family}.{shard}.fz{i}" for i in range(3)]


def _deadlines() -> st.SearchStrategy[int]:
    """Clock deadlines around now (drawn as offsets: the draw, not the value, is what replays)."""
    offsets = st.sampled_from((-120_000, -1, 0, 50, 1_000, 60_000, 86_400_000))
    return st.builds(lambda offset: int(time.time() * 1000) + offset, offsets)


def _seats() -> st.SearchStrategy[list[rules_pb2.SeatAssignment]]:
    players = st.sampled_from((*FUZZ_PLAYERS, *FUZZ_PLAYERS, "fuzz-c"))
    seat = st.builds(rules_pb2.SeatAssignment, seat=st.sampled_from((0, 1, 1, 2)), player_id=players)
    pair = st.builds(
        lambda ab: [rules_pb2.SeatAssignment(seat=i, player_id=p) for i, p in enumerate(ab)],
        st.permutations(FUZZ_PLAYERS),
    )
    return weighted((4, pair), (1, st.lists(seat, max_size=3)))


def _actions() -> st.SearchStrategy[rules_pb2.Action]:
    """Mostly a move of either family (the fuzz matches should not all be resigned at once)."""
    chess = st.builds(
        lambda move: rules_pb2.Action(chess=chess_pb2.ChessAction(move=move)), st.sampled_from(MOVES)
    )
    draw = st.builds(
        lambda d: rules_pb2.Action(chess=chess_pb2.ChessAction(draw=d)), st.sampled_from((0, 1, 2, 3, 4, 9))
    )
    gin = st.builds(
        lambda text: rules_pb2.Action(gin=gin_pb2.GinAction(action=text)), st.sampled_from(GIN_ACTIONS)
    )
    resign = st.just(rules_pb2.Action(resign=rules_pb2.Resign()))
    return st.one_of(chess, chess, draw, gin, gin, gin, resign)


def _time_controls() -> st.SearchStrategy[rules_pb2.TimeControl]:
    """Mostly the lobby's clocks (3 to 30 minutes, 0 or 5 s increment)."""
    return st.builds(
        rules_pb2.TimeControl,
        base_ms=st.sampled_from((180_000, 300_000, 600_000, 1_000)),
        increment_ms=weighted((3, st.just(0)), (1, st.just(5_000))),
    )


def _chess_options() -> st.SearchStrategy[rules_pb2.MatchOptions]:
    return st.builds(
        lambda ruleset, fen: rules_pb2.MatchOptions(
            chess=chess_pb2.ChessOptions(ruleset=ruleset, initial_fen=fen)
        ),
        st.sampled_from((0, 1, 2)),
        weighted((3, st.just("")), (1, st.sampled_from(FENS))),
    )


def _gin_options() -> st.SearchStrategy[rules_pb2.MatchOptions]:
    return st.builds(
        lambda variant, hands: rules_pb2.MatchOptions(
            gin=gin_pb2.GinOptions(variant=variant, hands_to_win=hands)
        ),
        st.sampled_from((0, 1, 2, 3)),
        weighted((3, st.just(3)), (1, st.sampled_from((0, 1, 11)))),
    )


def _options(family: str | None = None) -> st.SearchStrategy[rules_pb2.MatchOptions]:
    """A family's options (mostly; sometimes the other family's), or either family's."""
    chess, gin = _chess_options(), _gin_options()
    if family == "chess":
        return weighted((4, chess), (1, gin))
    if family == "gin":
        return weighted((4, gin), (1, chess))
    return weighted((3, chess), (1, gin))


COMMON: dict[str, st.SearchStrategy[Any]] = {
    "time_control": _time_controls(),
    "options": _options(),
    "SubmitActionRequest.action": _actions(),
    "PlayAction.action": _actions(),
    "player_id": st.sampled_from(FUZZ_PLAYERS),
    "seat": st.sampled_from((0, 1, 1, 2)),
    "seats": _seats(),
    "family": weighted((3, st.just("chess")), (1, st.just("gin"))),  # chess is what _options favours
    "idempotency_key": st.sampled_from(("k1", "k2", "k3")),
    "currency": weighted((4, st.sampled_from(("USD", "EUR"))), (1, st.sampled_from(("", "XXX", "usd")))),
    "entry_fee_minor": st.sampled_from((0, 0, 100, -1)),
    "initial_fen": st.sampled_from(("", "", "", *FENS)),
    "move": st.sampled_from(MOVES),
    "GinAction.action": st.sampled_from(GIN_ACTIONS),
    "stream": st.sampled_from(("dealer", "shuffle", "fz")),
    "owner": st.just("rules-chess-1"),
    "timer_id": st.sampled_from(("t1", "t2")),
    "arm_id": weighted((3, discovered("arm_id", 0)), (1, st.sampled_from((0, 1, 2)))),
    "deadline_ms": _deadlines(),
    "page_token": weighted((1, st.just("")), (1, discovered("page_token"))),
    "fairness_commitment": discovered("fairness_commitment"),
    "table_id": discovered("table_id"),
    "fairness_version": st.just(0),
    "from_sequence": st.sampled_from((0, 0, 1, 2, 5)),
    "client_seed_window_ms": st.just(0),
    "first_move_timeout_ms": st.sampled_from((0, 1, 50, 60_000)),
    "disconnect_forfeit_ms": st.sampled_from((0, 1, 50, 60_000)),
    "SaveFormationRequest.name": FORMATION_NAMES,
    "DeleteFormationRequest.name": FORMATION_NAMES,
    "SaveFormationRequest.formation": weighted(
        (2, st.sampled_from(FORMATIONS[:2])), (1, st.sampled_from(FORMATIONS[2:]))
    ),
}
"""Plausible values of the fields that name things or must fit together (a hostile message draws from
these or from anything of the field's type)."""


def overrides(*ids: str, family: str | None = None) -> Overrides:
    """:data:`COMMON`, with match ids from ``ids`` (the fuzz pool) or, a third of the time, from the
    matches replies have named (those matchmaking made by pairing the fuzz players, among others)."""
    match_ids = weighted((2, st.sampled_from(ids)), (1, discovered("match_id", ids[0])))
    return {**COMMON, "match_id": match_ids, "options": _options(family)}


@dataclass(frozen=True)
class Target:
    """One method of one service, called as ``identity`` (``None``: a player at the gateway)."""

    server: str
    method: MethodDescriptor
    identity: str | None
    overrides: Overrides

    def __str__(self) -> str:
        return f"{self.server}.{self.method.name}"


CALLER_PREFERENCE = (GATEWAY, MATCHMAKING, RULES, OPERATOR, CLOCK, FAIRNESS)


def caller(method: MethodDescriptor, shard: str) -> str:
    """Who calls ``method`` here: the first of :data:`CALLER_PREFERENCE` the authorisation table lets
    call it (``shard`` for a rules shard; the operator for a method the table does not list, which
    every caller is refused)."""
    rule = POLICY.get(f"/{method.containing_service.full_name}/{method.name}", {})
    for kind in CALLER_PREFERENCE:
        if kind in rule:
            return shard if kind == RULES else kind
    return OPERATOR


def _targets() -> list[Target]:
    rules = rules_pb2.DESCRIPTOR.services_by_name["RulesService"]
    fairness = fairness_pb2.DESCRIPTOR.services_by_name["FairnessService"]
    clock = clock_pb2.DESCRIPTOR.services_by_name["ClockService"]
    matchmaking = matchmaking_pb2.DESCRIPTOR.services_by_name["MatchmakingService"]
    gateway = gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"]
    chess_ids, gin_ids = match_ids("chess", 0), match_ids("gin", 0)
    targets: list[Target] = []
    for family, ids in (("chess", chess_ids), ("gin", gin_ids)):
        for method in rules.methods:
            targets.append(
                Target(
                    f"rules-{family}",
                    method,
                    caller(method, f"rules-{family}-0"),
                    overrides(*ids, family=family),
                )
            )
    for method in fairness.methods:
        pool = (*match_ids("gin", 1), "chess.1.fz0")
        targets.append(Target("fairness", method, caller(method, "rules-gin-1"), overrides(*pool)))
    for method in clock.methods:
        targets.append(Target("clock", method, caller(method, "rules-chess-1"), COMMON))
    for method in matchmaking.methods:
        targets.append(Target("matchmaking", method, caller(method, "rules-chess-0"), overrides(*chess_ids)))
    for method in gateway.methods:
        targets.append(Target("gateway", method, None, overrides(*chess_ids, *gin_ids)))
    return targets


pytestmark = pytest.mark.usefixtures("platform_intact")
TARGETS = _targets()
BAD_TOKENS: tuple[tuple[tuple[str, str], ...], ...] = (
    (),
    (("authorization", "Bearer not-a-token"),),
    (("authorization", "Bearer " + "a" * 4000),),
    (("authorization", "Basic Zm9vOmJhcg=="),),
    (("authorization", f"{bearer(FUZZ_PLAYERS[0])[0][1]}x"),),  # a valid token, one character longer
)
PLAYER_METADATA = weighted(
    (3, st.sampled_from(FUZZ_PLAYERS).map(bearer)),  # minted when drawn: a long run outlives a token
    (1, st.sampled_from(BAD_TOKENS)),
)
"""What a player presents at the gateway: a valid token for one of the fuzz players, none, or a bad one."""
REQUEST_ID_METADATA = weighted(
    (3, st.just(())),
    (
        1,
        st.tuples(
            st.tuples(
                st.just("x-request-id"),
                st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=300),
            )
        ),
    ),
)
"""Sometimes a request id of the caller's own (any printable ASCII, up to 300 characters)."""


def test_every_method_is_fuzzed() -> None:
    """No method of any service escapes: a method added to a proto gets fuzzed without more code."""
    services = {
        "rules-chess": rules_pb2.DESCRIPTOR.services_by_name["RulesService"],
        "rules-gin": rules_pb2.DESCRIPTOR.services_by_name["RulesService"],
        "fairness": fairness_pb2.DESCRIPTOR.services_by_name["FairnessService"],
        "clock": clock_pb2.DESCRIPTOR.services_by_name["ClockService"],
        "matchmaking": matchmaking_pb2.DESCRIPTOR.services_by_name["MatchmakingService"],
        "gateway": gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"],
    }
    expected = {
        f"{server}.{method.name}" for server, service in services.items() for method in service.methods
    }
    assert {str(target) for target in TARGETS} == expected


CODES: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
"""How the fuzzed calls ended, by method (``FUZZ_REPORT=path`` writes it there at the end)."""


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    path = os.environ.get("FUZZ_REPORT")
    if path:
        lines = [
            f"{method:60} {', '.join(f'{code} {n}' for code, n in counts.most_common())}"
            for method, counts in sorted(CODES.items())
        ]
        Path(path).write_text("\n".join(lines) + "\n")


def _problems(outcomes: list[Outcome]) -> list[str]:
    return [problem for outcome in outcomes if (problem := outcome.problem()) is not None]


@pytest.mark.parametrize("target", TARGETS, ids=str)
@fuzz(12)
@given(data=st.data())
async def test_fuzz_method(platform: Platform, target: Target, data: st.DataObject) -> None:
    payload = any_payload(target.method.input_type, target.overrides)
    if target.method.client_streaming:  # one stream of a few messages
        batch = [data.draw(st.lists(payload, min_size=1, max_size=4), label="stream")]
    else:  # a few calls at once
        batch = [[p] for p in data.draw(st.lists(payload, min_size=1, max_size=3), label="calls")]
    metadata = data.draw(PLAYER_METADATA, label="token") if target.identity is None else ()
    metadata = (*metadata, *data.draw(REQUEST_ID_METADATA, label="request id"))
    channel = platform.channel(target.server, target.identity)
    faults = server_faults()
    outcomes = await asyncio.gather(*(call_raw(channel, target.method, p, metadata) for p in batch))
    for outcome in outcomes:
        CODES[str(target)]["idle" if outcome.idle else outcome.code.name] += 1
    assert not _problems(list(outcomes)), outcomes
    assert not new_faults(faults, server_faults()), (new_faults(faults, server_faults()), outcomes)
