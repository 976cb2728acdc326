"""Where a family's rules shards listen, and the channel to the shard a match id names.

``RULES_<FAMILY>_ADDRESSES`` (e.g. ``RULES_CHESS_ADDRESSES=10.0.0.5:50060,10.0.0.6:50060``) lists a
family's shards in shard order: the n-th address serves shard n, and the match id names the shard
(``chess.<n>.<unique>``, see :mod:`libs.match.ids`). Matchmaking and the gateway both route this way.

Shards can be added without restarting anyone: ``RULES_SHARDS_FILE`` names a file of the same lines
(``RULES_CHESS_ADDRESSES=host:port,host:port``, one family a line, ``#`` comments) that a
:class:`ShardDirectory` reads at start and again whenever it changes (checked every
``RULES_SHARDS_REFRESH_MS``, default 2000): a family the file lists takes the file's list instead of the
variable's. A list may only grow (a shard appended) or have a shard's address replaced; a shorter list is
refused with a warning and the previous one kept (match ids still name the shards it would drop), as is a
file that does not parse. In Kubernetes the file is a mounted ConfigMap (docs/matchmaking.md, "Placement").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import grpc
from skillclassics.rules.v1 import rules_pb2_grpc

from libs.runtime.config import env_int
from libs.runtime.log import get_logger
from libs.runtime.tls import TransportSecurity

_log = get_logger(__name__)
SHARDS_FILE_VARIABLE = "RULES_SHARDS_FILE"
REFRESH_VARIABLE = "RULES_SHARDS_REFRESH_MS"
DEFAULT_REFRESH_MS = 2000

_VARIABLE = re.compile(r"RULES_([A-Z]{2,32})_ADDRESSES")
RECONNECT_CHANNEL_OPTIONS: list[tuple[str, object]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]
"""How soon a channel to a rules shard tries again after failing to connect: after 0.1 s, growing to at
most 0.5 s (grpc's defaults: 1 s growing to 120 s). A restarting shard is then reached within about half
a second of reporting SERVING, not seconds later (with the defaults the gateway still refused every Play
stream for some 1.5-3 s after a shard's restart). A refused connect attempt to a shard that is down costs
next to nothing; the time a single attempt may take stays grpc's (20 s)."""


def address_variable(family: str) -> str:
    """The variable that lists ``family``'s shards."""
    return f"RULES_{family.upper()}_ADDRESSES"


def shard_addresses(env: Mapping[str, str], family: str) -> list[str]:
    """``family``'s shard addresses in shard order (empty when none is configured)."""
    raw = env.get(address_variable(family), "")
    return [a.strip() for a in raw.split(",") if a.strip()]


def all_shard_addresses(
    env: Mapping[str, str], families: Iterable[str] | None = None
) -> dict[str, list[str]]:
    """Every configured family's shards: those of ``families``, or of every ``RULES_*_ADDRESSES``."""
    if families is None:
        families = [m[1].lower() for m in (_VARIABLE.fullmatch(name) for name in env) if m is not None]
    return {family: shard_addresses(env, family) for family in families}


def parse_shards_file(text: str) -> dict[str, list[str]]:
    """The families' shard lists in a ``RULES_SHARDS_FILE``; :class:`ValueError` for a line that is not
    ``RULES_<FAMILY>_ADDRESSES=...``, a comment or blank."""
    shards: dict[str, list[str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        match = _VARIABLE.fullmatch(name.strip())
        if not sep or match is None:
            raise ValueError(f"line {number}: expected RULES_<FAMILY>_ADDRESSES=host:port,..., got {line!r}")
        shards[match[1].lower()] = [a.strip() for a in value.split(",") if a.strip()]
    return shards


class ShardDirectory(dict[str, list[str]]):
    """Every family's shard addresses in shard order (a dict, family to list), from the variables and,
    with ``RULES_SHARDS_FILE``, from that file, re-read when it changes while :meth:`start`'s task runs.
    Readers look a family up on every call, so an added shard is routed to as soon as it is read."""

    def __init__(self, env: Mapping[str, str], families: Iterable[str] | None = None) -> None:
        self._families = None if families is None else set(families)
        super().__init__(all_shard_addresses(env, self._families))
        raw = env.get(SHARDS_FILE_VARIABLE, "").strip()
        self.path = Path(raw) if raw else None
        """The directory file, ``None`` without one."""
        self.refresh_s = env_int(env, REFRESH_VARIABLE, DEFAULT_REFRESH_MS, minimum=50) / 1000
        self._stamp: tuple[int, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self.refresh()

    def refresh(self) -> bool:
        """Read the file again if it changed; whether a family's shards changed."""
        if self.path is None:
            return False
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp == self._stamp:
                return False
            listed = parse_shards_file(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            _log.warning("rules_shards.file_unreadable", path=str(self.path), error=str(error))
            return False
        self._stamp = stamp
        changed = False
        for family, addresses in listed.items():
            if self._families is not None and family not in self._families:
                continue
            before = self.get(family, [])
            if len(addresses) < len(before):
                _log.warning(
                    "rules_shards.shrink_refused",
                    family=family,
                    shards=len(before),
                    listed=len(addresses),
                    reason="match ids name every shard: shards are added, never removed",
                )
                continue
            if addresses != before:
                self[family] = addresses
                changed = True
                _log.info("rules_shards.changed", family=family, shards=len(addresses), addresses=addresses)
        return changed

    def start(self) -> None:
        """Re-read the file every ``refresh_s`` in the running event loop (nothing without a file)."""
        if self.path is None or self._task is not None:
            return
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            self.refresh()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def write_shards_file(path: str | os.PathLike[str], shards: Mapping[str, Iterable[str]]) -> None:
    """Write a ``RULES_SHARDS_FILE`` atomically (readers never see half a file)."""
    target = Path(path)
    text = "".join(f"{address_variable(f)}={','.join(a)}\n" for f, a in sorted(shards.items()))
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text("# Written by the launcher: each family's rules shards, in shard order.\n" + text)
    os.replace(partial, target)


class RulesChannels:
    """One lazily opened channel, and one stub over it, per rules shard address (a stub builds a
    callable per method: made once, not on every forwarded call), over ``transport``'s mutual TLS, with
    ``options`` and a short reconnect backoff (:data:`RECONNECT_CHANNEL_OPTIONS`)."""

    def __init__(self, transport: TransportSecurity, options: list[tuple[str, object]] | None = None) -> None:
        self._transport = transport
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, rules_pb2_grpc.RulesServiceStub] = {}
        self._options = [*(options or []), *RECONNECT_CHANNEL_OPTIONS]

    def stub(self, address: str, family: str) -> rules_pb2_grpc.RulesServiceStub:
        """The stub of ``family``'s shard at ``address`` (whose certificate must be ``rules-<family>``'s)."""
        stub = self._stubs.get(address)
        if stub is None:
            channel = self._channels[address] = self._transport.channel(
                address, f"rules-{family}", options=self._options
            )
            stub = self._stubs[address] = rules_pb2_grpc.RulesServiceStub(channel)
        return stub

    def channel(self, address: str, family: str) -> grpc.aio.Channel:
        """The channel to ``family``'s shard at ``address`` (for its health service)."""
        self.stub(address, family)
        return self._channels[address]

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
        self._stubs.clear()
