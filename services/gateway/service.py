"""The gateway service as the runtime starts it.

Configuration on top of the runtime's (the gateway has no database of its own):

==============================  ===============================================================  =========
variable                        meaning                                                          default
==============================  ===============================================================  =========
``GATEWAY_JWKS_FILE``           a JWKS file of the token issuers' public keys                    dev key
``GATEWAY_JWKS_URL``            a JWKS URL of the token issuers' public keys (cached, 300 s)     dev key
``GATEWAY_TOKEN_ISSUERS``       the accepted ``iss`` values, comma-separated                     dev issuer
``GATEWAY_TOKEN_AUDIENCE``      the required ``aud``                                             skillclassics
``MATCHMAKING_ADDRESS``         host:port of matchmaking                                         unset
``FAIRNESS_ADDRESS``            host:port of fairness (fairness proofs of finished matches)      unset
``RULES_<FAMILY>_ADDRESSES``    each family's rules shards, comma-separated, in shard order      unset
``RULES_SHARDS_FILE``           a file of those lines, re-read when it changes (shards added)    unset
``GATEWAY_CALL_RATE``           unary calls per second per player (token bucket refill)          20
``GATEWAY_CALL_BURST``          unary calls a player may make at once (bucket size)              40
``GATEWAY_STREAM_RATE``         stream opens per second per player                               5
``GATEWAY_STREAM_BURST``        stream opens a player may make at once                           10
``GATEWAY_BACKEND_TIMEOUT_MS``  the deadline of every unary call to matchmaking or a rules shard  5000
``GATEWAY_MAX_CALLS``           unary calls in flight at once (past it: RESOURCE_EXHAUSTED)      2048
``GATEWAY_MAX_STREAMS``         streams open at once                                             20000
``GATEWAY_PRESENCE_RENEW_MS``   how often each shard's presence leases are renewed               2000
``GATEWAY_PRESENCE_LEASE_MS``   how long a renewed presence lease lasts (>= 2 renewals)          6000
==============================  ===============================================================  =========

``GATEWAY_TOKEN_MAX_LIFETIME_SECONDS`` (default 86400) bounds ``exp - iat`` and how far ahead ``exp`` may
be. In development, without a JWKS, the gateway trusts a key pair generated once into
``DATA_DIR/gateway-token-signing.pem`` (issuer ``skillclassics-dev``); in production a JWKS and the
issuers must be set (:mod:`services.gateway.tokens`, docs/gateway.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import grpc
from skillclassics.fairness.v1 import fairness_pb2_grpc
from skillclassics.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2, matchmaking_pb2_grpc

from libs.match.routing import RulesChannels, ShardDirectory
from libs.runtime import Service, ServiceConfig
from libs.runtime import server as runtime_server
from libs.runtime.config import env_int
from libs.runtime.server import MAX_MESSAGE_BYTES
from libs.runtime.targets import retry_policy
from services.gateway.limits import Admission, TokenBuckets
from services.gateway.presence import presence_settings
from services.gateway.servicer import DEFAULT_MAX_CALLS, DEFAULT_MAX_STREAMS, Backends, GatewayServicer
from services.gateway.shard_link import ShardLinks
from services.gateway.tokens import token_verifier


def channel_options() -> list[tuple[str, object]]:
    """The options of the gateway's channels to the backends: the message size, and the platform's
    keepalive policy (:data:`libs.runtime.server.KEEPALIVE`, which the servers accept), as it is now."""
    return [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        *runtime_server.KEEPALIVE.channel_options(),
    ]


LOBBY_RETRY = retry_policy(
    matchmaking_pb2.DESCRIPTOR.services_by_name["MatchmakingService"].full_name,
    ("CreateTable", "ListTables", "GetRatings", "GetMatchHistory", "ListFormations"),
)
"""The lobby calls gRPC tries again (on another matchmaking replica) when they end ``UNAVAILABLE``: reads,
and ``CreateTable``, which a repeat answers unchanged (the same idempotency key returns the table the first
one made). Not ``JoinTable``, ``EnterQueue``, ``LeaveTable``, ``LeaveQueue``, ``SaveFormation`` or
``DeleteFormation``: a second delivery of one that had taken effect would be refused or answered
differently, hiding that it had (the player sees ``UNAVAILABLE`` and looks)."""


class GatewayService(Service):
    """``skillclassics.gateway.v1.GatewayService``."""

    name = "gateway"
    public = True
    """The players' door: no client certificate is asked for; each method checks the bearer token."""

    def __init__(self, config: ServiceConfig, env: Mapping[str, str] | None = None) -> None:
        environ = os.environ if env is None else env
        self._config = config
        self.tokens = token_verifier(environ, config.data_dir, config.is_production)
        """The token keys and claim rules (docs/gateway.md, Tokens)."""
        self._matchmaking_address = environ.get("MATCHMAKING_ADDRESS", "").strip()
        self._fairness_address = environ.get("FAIRNESS_ADDRESS", "").strip()
        self._shards = ShardDirectory(environ)  # (shards appended to RULES_SHARDS_FILE are routed to)
        self._call_rate = env_int(environ, "GATEWAY_CALL_RATE", 20, minimum=1)
        self._call_burst = env_int(environ, "GATEWAY_CALL_BURST", 40, minimum=1)
        self._stream_rate = env_int(environ, "GATEWAY_STREAM_RATE", 5, minimum=1)
        self._stream_burst = env_int(environ, "GATEWAY_STREAM_BURST", 10, minimum=1)
        self._timeout_s = env_int(environ, "GATEWAY_BACKEND_TIMEOUT_MS", 5000, minimum=1) / 1000
        self._presence_renew_ms, self._presence_lease_ms = presence_settings(environ)
        self._admission = Admission(
            env_int(environ, "GATEWAY_MAX_CALLS", DEFAULT_MAX_CALLS, minimum=1),
            env_int(environ, "GATEWAY_MAX_STREAMS", DEFAULT_MAX_STREAMS, minimum=1),
        )
        self._channels = RulesChannels(config.tls, channel_options())
        self.links = ShardLinks(self._channels)
        """One ``Exchange`` stream per rules shard, shared by every Play stream (docs/gateway.md)."""
        self._matchmaking: grpc.aio.Channel | None = None
        self._fairness: grpc.aio.Channel | None = None
        self.servicer: GatewayServicer | None = None

    @property
    def service_names(self) -> Sequence[str]:
        return [gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"].full_name]

    async def start(self, server: grpc.aio.Server) -> None:
        lobby = None
        if self._matchmaking_address:
            self._matchmaking = self._config.tls.channel(
                self._matchmaking_address, "matchmaking", options=channel_options(), retry=[LOBBY_RETRY]
            )
            lobby = matchmaking_pb2_grpc.MatchmakingServiceStub(self._matchmaking)
        proofs = None
        if self._fairness_address:
            self._fairness = self._config.tls.channel(
                self._fairness_address, "fairness", options=channel_options()
            )
            proofs = fairness_pb2_grpc.FairnessServiceStub(self._fairness)
        await self.tokens.start()  # a GATEWAY_JWKS_URL is fetched once, off the event loop
        self._shards.start()
        self.servicer = GatewayServicer(
            self.tokens,
            Backends(lobby, self._shards, self._channels, self._timeout_s, proofs, self.links),
            TokenBuckets("calls", self._call_rate, self._call_burst),
            TokenBuckets("stream opens", self._stream_rate, self._stream_burst),
            admission=self._admission,
            # Presence leases on the rules shards (services/gateway/presence.py, docs/match-runtime.md).
            presence=(self._presence_renew_ms, self._presence_lease_ms),
        )
        gateway_pb2_grpc.add_GatewayServiceServicer_to_server(self.servicer, server)

    async def drain(self, grace_s: float | None = None) -> None:
        # Ends WatchMatch and Play streams at once, and cuts the unary calls still waiting for a backend
        # just before the grace ends (UNAVAILABLE, retry); close() then closes the shard links.
        if self.servicer is not None:
            self.servicer.drain(grace_s)

    async def close(self) -> None:
        await self._shards.close()
        if self.servicer is not None:
            await self.servicer.presence.close()
        await self.links.close()
        await self._channels.close()
        for channel in (self._matchmaking, self._fairness):
            if channel is not None:
                await channel.close()
