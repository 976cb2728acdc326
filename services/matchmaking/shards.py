"""Where each family's rules shards listen, and creating matches there.

``RULES_<FAMILY>_ADDRESSES`` (e.g. ``RULES_CHESS_ADDRESSES=10.0.0.5:50060,10.0.0.6:50060``) lists a
family's shards in shard order: the n-th address serves shard n, and the match id names the shard
(``chess.<n>.<unique>``). A new match goes to the shard its unique part hashes to.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping

import grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.match.ids import MatchId
from libs.match.routing import RulesChannels, address_variable, all_shard_addresses
from libs.runtime.errors import ErrorReason, Unavailable
from libs.runtime.tls import TransportSecurity

CALL_TIMEOUT_S = 5.0


class RulesShards:
    """gRPC stubs for every rules shard of every configured family."""

    def __init__(self, env: Mapping[str, str], families: list[str], transport: TransportSecurity) -> None:
        self._addresses = all_shard_addresses(env, families)
        self.transport = transport
        """How matchmaking calls other services (mutual TLS)."""
        self._channels = RulesChannels(transport)

    def require(self, family: str) -> list[str]:
        """``family``'s shard addresses; ``Unavailable`` when it has none (its matches cannot be made)."""
        shards = self._addresses.get(family) or []
        if not shards:
            raise Unavailable(
                f"no {family} rules shard is configured ({address_variable(family)})",
                reason=ErrorReason.ERROR_REASON_NOT_CONFIGURED,
            )
        return shards

    def new_match_id(self, family: str) -> str:
        shards = self.require(family)
        unique = uuid.uuid4().hex
        shard = int.from_bytes(hashlib.sha256(unique.encode()).digest()[:4], "big") % len(shards)
        return str(MatchId(family, shard, unique))

    def stub(self, match_id: str) -> rules_pb2_grpc.RulesServiceStub:
        parsed = MatchId.parse(match_id)
        return self._channels.stub(self._addresses[parsed.family][parsed.shard], parsed.family)

    async def create_match(self, request: rules_pb2.CreateMatchRequest) -> None:
        """Create the match on its shard (idempotent: the request carries its idempotency key)."""
        try:
            await self.stub(request.match_id).CreateMatch(request, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as error:
            raise Unavailable(
                f"the rules shard of {request.match_id} refused: {error.details()}",
                reason=ErrorReason.ERROR_REASON_BACKEND_UNAVAILABLE,
            ) from None

    async def close(self) -> None:
        await self._channels.close()
