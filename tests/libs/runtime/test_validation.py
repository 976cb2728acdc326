"""Request validation from the contracts (docs/validation.md): each kind of rule passing and failing with
its exact field path, the Rules comment lines of every request field in step with its rules, and a bad
request refused over real gRPC with INVALID_ARGUMENT and a BadRequest naming each field."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from skillclassics.chess.v1 import chess_pb2
from skillclassics.clock.v1 import clock_pb2, clock_pb2_grpc
from skillclassics.fairness.v1 import fairness_pb2
from skillclassics.gateway.v1 import gateway_pb2
from skillclassics.gin.v1 import gin_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb2
from skillclassics.rules.v1 import rules_pb2

from libs.runtime import validation
from libs.runtime.errors import ErrorReason, InvalidArgument, Problem, Violation
from libs.runtime.validation import check, violations
from tools import proto_rules

MATCH = "chess.0.9f2c1a7e"
M = TypeVar("M", bound=Message)


def make(message_type: type[M], /, **fields: Any) -> M:
    """A message of ``message_type`` from plain values (dicts for sub-messages, any number for an enum)."""
    return message_type(**fields)


def paths(message: Message) -> dict[str, str]:
    return {v.field: v.description for v in violations(message)}


# -- each rule kind --------------------------------------------------------------------------------------


def test_a_valid_request_has_no_violations_and_passes() -> None:
    request = gateway_pb2.SubmitActionRequest(
        match_id=MATCH, idempotency_key="k-1", action=rules_pb2.Action(chess=chess_pb2.ChessAction(move="e4"))
    )
    assert violations(request) == []
    check(request)  # does not raise


def test_required_string_bytes_number_message_and_list() -> None:
    found = paths(gateway_pb2.SubmitActionRequest())
    # A required string with a length is told the length it needs; otherwise "is required".
    assert found == {
        "match_id": "is required",
        "idempotency_key": "must be 1-128 characters, got 0",
        "action": "is required",
    }
    assert paths(gateway_pb2.AddClientSeedRequest(match_id=MATCH)) == {
        "client_seed": "must be 1-64 bytes, got 0"
    }
    found = paths(rules_pb2.CreateMatchRequest(match_id=MATCH, idempotency_key="k"))
    assert found == {"seats": "is required: give at least one item"}
    assert paths(gin_pb2.GinAction()) == {"action": "is required"}


def test_lengths_count_characters_of_strings_and_bytes_of_bytes() -> None:
    ok = fairness_pb2.CommitRequest(match_id="m", idempotency_key="é" * 128)  # 128 characters, 256 bytes
    assert violations(ok) == []
    found = paths(fairness_pb2.CommitRequest(match_id="m", idempotency_key="k" * 129))
    assert found == {"idempotency_key": "must be 1-128 characters, got 129"}
    found = paths(fairness_pb2.AddClientSeedRequest(match_id="m", client_seed=b"x" * 65))
    assert found == {"client_seed": "must be 1-64 bytes, got 65"}
    assert paths(clock_pb2.ArmRequest(owner="o", timer_id="t", payload=b"\0" * 4097)) == {
        "payload": "must be at most 4096 bytes, got 4097"
    }


def test_a_pattern_must_match_the_whole_string() -> None:
    for good in (MATCH, "gin.12.a_b-C"):
        assert violations(rules_pb2.GetRecordRequest(match_id=good)) == []
    for bad in ("chess.0.9f2c1a7e\n", "xchess.0.1 ", "Chess.0.1", "chess.12345.1", "chess.0."):
        found = paths(rules_pb2.GetRecordRequest(match_id=bad))
        assert list(found) == ["match_id"], bad
        assert found["match_id"].startswith(
            r"must match ^[a-z]{2,32}\.[0-9]{1,4}\.[A-Za-z0-9_-]{1,80}$, got "
        )
    assert list(paths(mm_pb2.LeaveQueueRequest(player_id="bob smith"))) == ["player_id"]
    # Which currencies are active is configuration: the contract only requires one where a fee is set.
    assert paths(mm_pb2.ListTablesRequest(family="chess", currency="")) == {}  # empty: any currency
    assert paths(mm_pb2.ListTablesRequest(family="chess", currency="usd")) == {}  # the service's to refuse


def test_numeric_ranges_signed_and_unsigned() -> None:
    def fee(value: int) -> dict[str, str]:
        return paths(
            make(
                gateway_pb2.EnterQueueRequest,
                family="chess",
                time_control={},
                currency="USD",
                entry_fee_minor=value,
            )
        )

    assert fee(0) == {}
    assert fee(10**12) == {}
    assert fee(-1) == {"entry_fee_minor": "must not be negative, got -1"}
    assert fee(10**12 + 1) == {"entry_fee_minor": "must be from 0 to 1000000000000, got 1000000000001"}
    draw = {"match_id": "m", "stream": "dice", "kind": fairness_pb2.DRAW_KIND_INTEGER}
    assert paths(make(fairness_pb2.DrawRequest, **draw, count=1, bound=2**32)) == {}
    assert paths(make(fairness_pb2.DrawRequest, **draw, count=1, bound=2**32 + 1)) == {
        "bound": "must be at most 4294967296, got 4294967297"
    }
    assert paths(rules_pb2.ListMatchesRequest(page_size=-1)) == {"page_size": "must not be negative, got -1"}


def test_enums_defined_only_and_not_unspecified() -> None:
    draw = {"match_id": "m", "stream": "dice", "count": 1}
    assert paths(make(fairness_pb2.DrawRequest, **draw)) == {"kind": "must not be DRAW_KIND_UNSPECIFIED (0)"}
    found = paths(make(fairness_pb2.DrawRequest, **draw, kind=9))
    assert found["kind"].startswith("must be a defined DrawKind (DRAW_KIND_DICE, ")
    assert found["kind"].endswith("got 9")
    create = {"family": "gin", "time_control": {}, "currency": "USD", "idempotency_key": "k"}
    assert paths(make(gateway_pb2.CreateTableRequest, **create, visibility=0)) == {}  # UNSPECIFIED: public
    assert list(paths(make(gateway_pb2.CreateTableRequest, **create, visibility=7))) == ["visibility"]


def test_repeated_enum_items_are_each_checked_by_index() -> None:
    found = paths(make(rules_pb2.ListMatchesRequest, statuses=[1, 0, 3, 9]))
    assert found == {
        "statuses[1]": "must not be MATCH_STATUS_UNSPECIFIED (0)",
        "statuses[3]": found["statuses[3]"],
    }
    assert found["statuses[3]"].startswith("must be a defined MatchStatus")
    assert found["statuses[3]"].endswith("got 9")


def test_max_items_and_paths_into_repeated_messages() -> None:
    seats = [rules_pb2.SeatAssignment(seat=s, player_id="p" if s else "") for s in range(3)]
    found = paths(rules_pb2.CreateMatchRequest(match_id=MATCH, idempotency_key="k", seats=seats))
    assert found == {
        "seats": "must hold at most 2 items, got 3",
        "seats[0].player_id": "must be 1-128 characters, got 0",
    }


def test_oneofs_that_must_be_set_and_paths_into_set_sub_messages() -> None:
    assert paths(rules_pb2.WatchRequest(match_id=MATCH)) == {
        "viewer": "is required: set one of seat, spectator"
    }
    assert paths(rules_pb2.WatchRequest(match_id=MATCH, spectator=False)) == {}  # set, even to false
    assert paths(rules_pb2.WatchRequest(match_id=MATCH, seat=2)) == {"seat": "must be at most 1, got 2"}
    empty_action = gateway_pb2.SubmitActionRequest(
        match_id=MATCH, idempotency_key="k", action=rules_pb2.Action()
    )
    (description,) = paths(empty_action).values()  # every family's action is one more member
    assert set(paths(empty_action)) == {"action.kind"}
    assert description.startswith("is required: set one of resign, chess, gin")
    found = paths(
        gateway_pb2.SubmitActionRequest(
            match_id=MATCH, idempotency_key="k", action=rules_pb2.Action(chess=chess_pb2.ChessAction())
        )
    )
    assert found == {"action.chess.kind": "is required: set one of move, draw"}
    found = paths(
        make(
            rules_pb2.SubmitActionRequest, match_id=MATCH, idempotency_key="k", action={"chess": {"draw": 0}}
        )
    )
    assert found == {"action.chess.draw": "must not be DRAW_ACTION_UNSPECIFIED (0)"}
    found = paths(gateway_pb2.CreateTableRequest(family="chess", currency="USD", idempotency_key="k"))
    assert found == {"time_control": "is required"}
    options = rules_pb2.MatchOptions(chess=make(chess_pb2.ChessOptions, ruleset=5))
    create = {"family": "chess", "time_control": {}, "currency": "USD", "idempotency_key": "k"}
    found = paths(make(gateway_pb2.CreateTableRequest, **create, options=options))
    assert list(found) == ["options.chess.ruleset"]


def test_skipped_fields_are_left_to_their_handler() -> None:
    # One bad call of an Exchange batch (or one bad action of a Play stream) is refused alone by the
    # handler, never by ending a stream every player of the shard shares.
    assert violations(rules_pb2.ExchangeRequest(calls=[make(rules_pb2.ExchangeCall, submit={})])) == []
    assert violations(gateway_pb2.PlayRequest(action=gateway_pb2.PlayAction())) == []
    assert paths(gateway_pb2.PlayRequest()) == {"kind": "is required: set one of open, action"}
    assert paths(make(gateway_pb2.PlayRequest, open={})) == {"open.match_id": "is required"}
    # The handler checks an item itself with the same rules.
    assert list(paths(rules_pb2.SubmitActionRequest())) == ["match_id", "idempotency_key", "action"]


def test_check_refuses_with_invalid_fields_a_sentence_and_every_violation() -> None:
    with pytest.raises(InvalidArgument) as refused:
        check(gateway_pb2.SubmitActionRequest(match_id="nope", idempotency_key="k" * 200), "SubmitAction")
    error = refused.value
    assert error.reason == ErrorReason.ERROR_REASON_INVALID_FIELDS
    assert [v.field for v in error.violations] == ["match_id", "idempotency_key", "action"]
    assert error.message.startswith("invalid request to SubmitAction, 3 fields: match_id must match ")
    assert "idempotency_key must be 1-128 characters, got 200; action is required" in error.message
    with pytest.raises(InvalidArgument) as one:
        check(clock_pb2.WatchExpirationsRequest())
    assert one.value.message == "invalid request: owner must be 1-128 characters, got 0"
    assert one.value.violations == (Violation("owner", "must be 1-128 characters, got 0"),)


def test_a_rule_that_does_not_fit_its_field_is_a_mistake_named_at_compile_time() -> None:
    from skillclassics.validate.v1 import validate_pb2

    field = rules_pb2.ListMatchesRequest.DESCRIPTOR.fields_by_name["page_size"]
    with pytest.raises(validation.RuleError, match="pattern cannot apply"):
        validation._item_problem(field, validate_pb2.FieldRules(pattern="x"), False)


def test_each_type_is_compiled_once_and_a_type_without_rules_has_no_checks() -> None:
    """The figures are in `make bench` (benchmarks/contracts.py); here, what makes them small."""
    request = gateway_pb2.SubmitActionRequest(
        match_id=MATCH, idempotency_key="k-1", action=rules_pb2.Action(chess=chess_pb2.ChessAction(move="e4"))
    )
    check(request)
    plan = validation._PLANS[request.DESCRIPTOR.full_name]
    check(request)
    assert validation._PLANS[request.DESCRIPTOR.full_name] is plan  # cached, not compiled per call
    assert plan.checks
    check(gateway_pb2.WhoAmIRequest())
    assert not validation._PLANS[gateway_pb2.WhoAmIRequest.DESCRIPTOR.full_name].checks


# -- the Rules comment lines -----------------------------------------------------------------------------

SERVICES = [
    gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"],
    mm_pb2.DESCRIPTOR.services_by_name["MatchmakingService"],
    rules_pb2.DESCRIPTOR.services_by_name["RulesService"],
    clock_pb2.DESCRIPTOR.services_by_name["ClockService"],
    fairness_pb2.DESCRIPTOR.services_by_name["FairnessService"],
]


def _request_fields(descriptor: Descriptor, seen: set[str]) -> Iterator[FieldDescriptor]:
    if descriptor.full_name in seen:
        return
    seen.add(descriptor.full_name)
    for field in descriptor.fields:
        yield field
        if field.message_type is not None and not field.message_type.GetOptions().map_entry:
            yield from _request_fields(field.message_type, seen)


def test_every_annotated_request_field_ends_its_comment_with_its_rules() -> None:
    documented = proto_rules.documented()
    seen: set[str] = set()
    annotated = 0
    for service in SERVICES:
        for method in service.methods:
            for field in _request_fields(method.input_type, seen):
                rules = validation.rules_of(field)
                if rules is not None:
                    annotated += 1
                    assert documented.get(field.full_name) == validation.describe(rules, field) + ".", (
                        field.full_name
                    )
                else:
                    assert field.full_name not in documented, field.full_name
            for oneof in method.input_type.oneofs:
                if validation.oneof_required(oneof):
                    assert documented.get(oneof.full_name) == validation.describe_oneof(oneof) + "."
    assert annotated > 50
    for name in seen:  # every request type and every type inside one compiles (RuleError otherwise)
        validation.has_rules(descriptor_pool.Default().FindMessageTypeByName(name))
    assert proto_rules.rewritten() == {}, "run `make protos`: the Rules lines differ from the rules"


def test_the_tool_writes_checks_and_removes_rules_lines(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(proto_rules.PROTO_ROOT, tmp_path / "protos")
    root = tmp_path / "protos"
    clock = root / "skillclassics" / "clock" / "v1" / "clock.proto"
    text = clock.read_text()
    stale = text.replace("// Rules: at most 4096 bytes.", "// Rules: at most 9 bytes.")
    clock.write_text(
        stale.replace("  // Rules: required; 1-128 characters; pattern ^[A-Za-z0-9._:/-]+$.\n", "", 1)
    )
    assert proto_rules.main(["--protos", str(root)]) == 1
    changed = proto_rules.rewritten(root)
    notes = changed[clock][2]
    assert any("ArmRequest.owner: no Rules line" in n for n in notes)
    assert any("ArmRequest.payload: Rules line is '// Rules: at most 9 bytes.'" in n for n in notes)
    proto_rules.write(root)
    assert clock.read_text() == text
    assert proto_rules.main(["--protos", str(root)]) == 0


# -- over real gRPC ----------------------------------------------------------------------------------------


async def test_a_bad_request_is_refused_before_the_handler_with_a_bad_request_detail(tmp_path: Path) -> None:
    from libs.runtime.config import sqlite_url
    from tests.services.clock.support import OWNER, start
    from tests.support import backend_channel

    running = await start(sqlite_url(tmp_path / "clock.db"))
    try:
        async with backend_channel(running.address, OWNER) as channel:
            stub = clock_pb2_grpc.ClockServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Arm(clock_pb2.ArmRequest(owner=OWNER, timer_id="bad id!", payload=b"x" * 5000))
            problem = Problem.from_rpc_error(refused.value)
            assert problem.code is grpc.StatusCode.INVALID_ARGUMENT
            assert problem.reason == "INVALID_FIELDS"
            assert problem.domain == "skillclassics.io"
            assert [v.field for v in problem.violations] == ["timer_id", "payload"]
            assert problem.violations[1].description == "must be at most 4096 bytes, got 5000"
            assert problem.message.startswith("invalid request to Arm, 2 fields: timer_id must match")
            # Authorisation comes first: a caller may not learn a contract's rules for calls it cannot make.
            with pytest.raises(grpc.aio.AioRpcError) as stream_refused:
                async for _ in stub.WatchExpirations(clock_pb2.WatchExpirationsRequest(owner=OWNER + " ")):
                    pass
            assert stream_refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
            # And a good one still works.
            reply = await stub.Arm(
                clock_pb2.ArmRequest(
                    owner=OWNER, timer_id="t-1", deadline_ms=int(time.time() * 1000) + 60_000
                )
            )
            assert reply.timer.timer_id == "t-1"
    finally:
        await running.stop(grace=0.5)


def test_a_request_that_is_not_a_message_has_no_rules() -> None:
    check(b"raw bytes of a handler without a deserializer")  # type: ignore[arg-type]


def test_only_types_with_rules_cost_a_walk() -> None:
    assert validation.has_rules(rules_pb2.SubmitActionRequest.DESCRIPTOR)
    assert validation.has_rules(gateway_pb2.PlayRequest.DESCRIPTOR)
    assert not validation.has_rules(gateway_pb2.WhoAmIRequest.DESCRIPTOR)
    assert not validation.has_rules(rules_pb2.ExchangeRequest.DESCRIPTOR)  # its calls are the handler's
