"""The gateway routes a match to the shard its id names, reading the shards file again at once when the id
names a shard it has not read yet (matchmaking may have read a newly appended shard first)."""

from __future__ import annotations

from pathlib import Path

import pytest
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.match.routing import (
    REFRESH_VARIABLE,
    SHARDS_FILE_VARIABLE,
    RulesChannels,
    ShardDirectory,
    write_shards_file,
)
from libs.runtime.errors import NotFound
from libs.runtime.tls import TransportSecurity
from services.gateway.servicer import Backends

MATCH_ON_2 = "chess.2.0123456789abcdef0123456789abcdef"


def backends(tmp_path: Path, chess: list[str]) -> tuple[Backends, Path]:
    path = tmp_path / "rules-shards.env"
    write_shards_file(path, {"chess": chess})
    # A periodic read far in the future: only a read on the routing path can see the added shard.
    directory = ShardDirectory({SHARDS_FILE_VARIABLE: str(path), REFRESH_VARIABLE: "3600000"})
    return Backends(None, directory, RulesChannels(TransportSecurity.plaintext(), []), 1.0), path


async def test_a_match_on_a_shard_appended_since_the_last_read_is_routed(tmp_path: Path) -> None:
    # (async: routing opens the shard's grpc.aio channel, which needs a running event loop, as in the
    # gateway; a plain test only had one when an earlier test in its worker had left one behind)
    routes, path = backends(tmp_path, ["127.0.0.1:50060", "127.0.0.1:50260"])
    write_shards_file(path, {"chess": ["127.0.0.1:50060", "127.0.0.1:50260", "127.0.0.1:50460"]})
    try:
        name, stub = routes.route(MATCH_ON_2)
        assert name == "rules-chess shard 2"
        assert isinstance(stub, rules_pb2_grpc.RulesServiceStub)
        assert routes.shards["chess"][2] == "127.0.0.1:50460"
    finally:
        await routes.channels.close()


def test_a_shard_the_file_does_not_list_either_is_not_found(tmp_path: Path) -> None:
    routes, _ = backends(tmp_path, ["127.0.0.1:50060", "127.0.0.1:50260"])
    with pytest.raises(NotFound, match=r"no match chess\.2\..*: chess has shards 0-1"):
        routes.route(MATCH_ON_2)
