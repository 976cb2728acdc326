"""The live matches themselves, fuzzed with everything their own players and the gateway may send that
must not change them: actions of the seat whose turn it is not (any action but resigning), actions the
seat to move cannot have meant (text that is no move of the family), seats that do not exist, reused
idempotency keys, on SubmitAction, inside an Exchange stream, and through the gateway with the players'
own tokens. Each call is refused (or, for an exact retry, answered as the first time), and after each
example the matches look exactly as before (:meth:`tests.fuzz.harness.Platform.snapshot`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from skillclassics.chess.v1 import chess_pb2
from skillclassics.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from skillclassics.gin.v1 import gin_pb2
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.engines.base import MalformedActionError
from libs.engines.chess.notation import is_move_notation
from libs.engines.gin import parse_action as parse_gin
from tests.fuzz.conftest import fuzz
from tests.fuzz.harness import LIVE_PLAYERS, UNARY_TIMEOUT_S, Platform, bearer, differences
from tests.fuzz.notation import DRAW_WORDS, SAN_LIKE, UCI_LIKE, gin_words
from tests.fuzz.strategies import texts

pytestmark = pytest.mark.usefixtures("platform_intact")

REFUSED = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.PERMISSION_DENIED,
    }
)
BAD_SEATS = (2, 3, 255, 2**31, 2**32 - 1)


def _unreadable_chess(text: str) -> bool:
    """Text the seat to move cannot have meant as a chess action (contest: no draw word is legal)."""
    stripped = text.strip()
    return not is_move_notation(stripped) or stripped in DRAW_WORDS


def _unreadable_gin(text: str) -> bool:
    try:
        parse_gin(text)
    except MalformedActionError:
        return True
    return False


def chess_actions(seat_to_move: bool) -> st.SearchStrategy[rules_pb2.Action]:
    """Chess actions for the live chess match: any for the seat not to move, only unreadable ones (and
    draw actions, all refused in contest chess) for the seat to move; gin actions and empty actions."""
    words = st.one_of(texts(), st.from_regex(UCI_LIKE), st.from_regex(SAN_LIKE), st.sampled_from(DRAW_WORDS))
    if seat_to_move:
        words = words.filter(_unreadable_chess)
    move = words.map(lambda text: rules_pb2.Action(chess=chess_pb2.ChessAction(move=text)))
    draw = st.integers(-(2**31), 2**31 - 1).map(
        lambda d: rules_pb2.Action(chess=chess_pb2.ChessAction(draw=d))  # type: ignore[arg-type]
    )
    gin = texts().map(lambda text: rules_pb2.Action(gin=gin_pb2.GinAction(action=text)))
    return st.one_of(move, move, draw, gin, st.just(rules_pb2.Action()))


def _gin_actions(seat_to_act: bool) -> st.SearchStrategy[rules_pb2.Action]:
    """Gin actions for the live gin match: any for the seat not to act, only unreadable ones for the
    seat to act; chess actions and empty actions."""
    words = st.one_of(texts(), gin_words(), gin_words())
    if seat_to_act:
        words = words.filter(_unreadable_gin)
    gin = words.map(lambda text: rules_pb2.Action(gin=gin_pb2.GinAction(action=text)))
    chess = texts().map(lambda text: rules_pb2.Action(chess=chess_pb2.ChessAction(move=text)))
    return st.one_of(gin, gin, chess, st.just(rules_pb2.Action()))


async def _to_move(platform: Platform, server: str, match_id: str) -> int:
    stub = rules_pb2_grpc.RulesServiceStub(platform.channel(server, "gateway"))
    update = (await stub.GetMatch(rules_pb2.GetMatchRequest(match_id=match_id, spectator=True))).update
    assert update.HasField("to_move")
    return int(update.to_move)


@st.composite
def _submits(draw: st.DrawFn, match_id: str, to_move: int, actions: Any) -> rules_pb2.SubmitActionRequest:
    """A SubmitAction on a live match that must be refused: a seat that does not exist (any action,
    resigning included), the seat not to move (any action but resigning), or the seat to move (only
    what it cannot have meant)."""
    kind = draw(st.sampled_from(("bad-seat", "wrong-seat", "to-move")))
    key = draw(st.sampled_from(("live-1", "fuzz-key", "")))
    if kind == "bad-seat":
        seat = draw(st.sampled_from(BAD_SEATS))
        action = draw(st.one_of(actions(False), st.just(rules_pb2.Action(resign=rules_pb2.Resign()))))
    else:
        seat = 1 - to_move if kind == "wrong-seat" else to_move
        action = draw(actions(kind == "to-move"))
    return rules_pb2.SubmitActionRequest(match_id=match_id, seat=seat, idempotency_key=key, action=action)


async def _answer(call: Any) -> tuple[grpc.StatusCode, str]:
    """How a unary call ended: its code and details."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


def _check(
    request: rules_pb2.SubmitActionRequest, code: grpc.StatusCode, details: str, chess_match: str
) -> None:
    """A submit on a live match is refused; only an exact retry of the chess match's first move (key
    ``live-1``, seat 0) may be answered, as the first time."""
    if code == grpc.StatusCode.OK:
        assert request.idempotency_key == "live-1", request
        assert request.match_id == chess_match, request
        assert request.seat == 0, request
    else:
        assert code in REFUSED, (request, code, details)


async def _unchanged(platform: Platform) -> None:
    changed = differences(platform.baseline, await platform.snapshot())
    assert not changed, f"the live matches changed: {changed}"


@fuzz(20)
@given(data=st.data())
async def test_live_matches_refuse_what_their_seats_may_not_do(
    platform: Platform, data: st.DataObject
) -> None:
    chess_to_move = await _to_move(platform, "rules-chess", platform.chess_match)
    gin_to_move = await _to_move(platform, "rules-gin", platform.gin_match)
    chess = data.draw(_submits(platform.chess_match, chess_to_move, chess_actions), label="chess")
    gin = data.draw(_submits(platform.gin_match, gin_to_move, _gin_actions), label="gin")
    chess_stub = rules_pb2_grpc.RulesServiceStub(platform.channel("rules-chess", "gateway"))
    gin_stub = rules_pb2_grpc.RulesServiceStub(platform.channel("rules-gin", "gateway"))
    answers = await asyncio.gather(
        _answer(chess_stub.SubmitAction(chess, timeout=UNARY_TIMEOUT_S)),
        _answer(gin_stub.SubmitAction(gin, timeout=UNARY_TIMEOUT_S)),
    )
    for request, (code, details) in zip((chess, gin), answers, strict=True):
        _check(request, code, details, platform.chess_match)
    await _unchanged(platform)


def _gateway_submit(request: rules_pb2.SubmitActionRequest) -> gateway_pb2.SubmitActionRequest:
    return gateway_pb2.SubmitActionRequest(
        match_id=request.match_id, idempotency_key=request.idempotency_key, action=request.action
    )


@fuzz(15)
@given(data=st.data())
async def test_live_matches_refuse_their_players_at_the_gateway(
    platform: Platform, data: st.DataObject
) -> None:
    """The same through the gateway, as the live players themselves (their tokens pick their seats)."""
    gateway = gateway_pb2_grpc.GatewayServiceStub(platform.channel("gateway", None))
    calls = []
    for server, match_id, actions in (
        ("rules-chess", platform.chess_match, chess_actions),
        ("rules-gin", platform.gin_match, _gin_actions),
    ):
        to_move = await _to_move(platform, server, match_id)
        request = data.draw(_submits(match_id, to_move, actions).filter(lambda r: r.seat in (0, 1)))
        metadata = bearer(LIVE_PLAYERS[request.seat])
        calls.append(
            (
                request,
                gateway.SubmitAction(_gateway_submit(request), metadata=metadata, timeout=UNARY_TIMEOUT_S),
            )
        )
    for request, call in calls:
        code, details = await _answer(call)
        _check(request, code, details, platform.chess_match)
    await _unchanged(platform)


@fuzz(12)
@given(data=st.data())
async def test_live_matches_refuse_inside_an_exchange(platform: Platform, data: st.DataObject) -> None:
    """Submits that must be refused, and watches, on one Exchange stream: every submit answered with a
    refusal (or, for the exact retry, as the first time)."""
    chess_to_move = await _to_move(platform, "rules-chess", platform.chess_match)
    submits = data.draw(
        st.lists(_submits(platform.chess_match, chess_to_move, chess_actions), min_size=1, max_size=4)
    )
    calls = [rules_pb2.ExchangeCall(id=i + 1, submit=request) for i, request in enumerate(submits)]
    watch = rules_pb2.WatchRequest(match_id=platform.chess_match, spectator=True)
    calls.append(rules_pb2.ExchangeCall(id=100, watch=watch))
    stream = rules_pb2_grpc.RulesServiceStub(platform.channel("rules-chess", "gateway")).Exchange()
    answered: dict[int, rules_pb2.ExchangeReply] = {}
    try:
        await stream.write(rules_pb2.ExchangeRequest(calls=calls))
        async with asyncio.timeout(UNARY_TIMEOUT_S):
            while len(answered) < len(submits):
                response = await stream.read()
                assert response is not grpc.aio.EOF, answered
                for reply in response.replies:
                    if reply.id != 100:
                        answered[reply.id] = reply
    finally:
        stream.cancel()
    for call in calls[:-1]:
        reply = answered[call.id]
        if reply.WhichOneof("reply") == "submitted":
            _check(call.submit, grpc.StatusCode.OK, "", platform.chess_match)
        else:
            assert reply.WhichOneof("reply") == "refused", reply
            assert reply.refused.code in REFUSED_NUMBERS, reply
    await _unchanged(platform)


REFUSED_NUMBERS = frozenset(code.value[0] for code in REFUSED)
