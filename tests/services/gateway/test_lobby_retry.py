"""Which lobby calls the gateway lets gRPC try again on another matchmaking replica (``LOBBY_RETRY``):
only methods that a second delivery cannot change the answer of. The retry itself is tested with real
servers in tests/libs/runtime/test_targets.py; a repeated CreateTable answering the first table in
tests/services/matchmaking/test_matchmaking_service.py."""

from __future__ import annotations

from skillclassics.matchmaking.v1 import matchmaking_pb2

from services.gateway.service import LOBBY_RETRY

SERVICE = matchmaking_pb2.DESCRIPTOR.services_by_name["MatchmakingService"]


def test_the_retried_lobby_calls_are_unary_matchmaking_methods_safe_to_run_twice() -> None:
    names = LOBBY_RETRY["name"]
    assert isinstance(names, list)
    assert {entry["service"] for entry in names} == {SERVICE.full_name}
    methods = {entry["method"] for entry in names}
    assert methods == {"CreateTable", "ListTables", "GetRatings", "GetMatchHistory", "ListFormations"}
    for method in methods:
        descriptor = SERVICE.methods_by_name[method]
        assert not descriptor.client_streaming
        assert not descriptor.server_streaming
    # A repeat of these after they took effect would be refused (or answered otherwise): never retried.
    once = {"JoinTable", "EnterQueue", "LeaveTable", "LeaveQueue", "SaveFormation", "DeleteFormation"}
    assert not methods & once
    assert LOBBY_RETRY["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]  # type: ignore[index]
