"""Service identities: who a workload is, as its certificate says.

Every workload of the platform has one identity, a name such as ``gateway``, ``matchmaking``,
``fairness``, ``clock`` or ``clock-0``, ``rules-chess-0`` (a rules shard: the family's service and the
shard's ordinal, which is also the pod's name in its StatefulSet) or ``operator`` (a person or tool
operating the platform). Its certificate carries it as a SPIFFE ID in a URI subject alternative name,
``spiffe://<trust domain>/<identity>``, and as DNS names: the identity and its service (the identity
without the shard), which is what a client checks the server's certificate against.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

DEFAULT_TRUST_DOMAIN = "skillclassics.local"
"""The SPIFFE trust domain of the platform's identities (``TLS_TRUST_DOMAIN``)."""
OPERATOR = "operator"
"""The identity of people and tools operating the platform (read-only calls, reflection)."""

_IDENTITY = re.compile(r"(?P<service>[a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)*)(?:-(?P<shard>[0-9]{1,4}))?")
_TRUST_DOMAIN = re.compile(r"[a-z0-9]([a-z0-9.-]{0,250}[a-z0-9])?")


class IdentityError(ValueError):
    """A malformed identity, trust domain or SPIFFE ID."""


@dataclass(frozen=True, slots=True)
class Identity:
    """One workload's identity."""

    name: str
    """The whole identity, e.g. ``rules-chess-0``."""
    service: str
    """The service it runs, e.g. ``rules-chess`` (the name without the shard)."""
    shard: int | None
    """The shard's ordinal, when the identity names one."""

    @classmethod
    def parse(cls, name: str) -> Identity:
        """The identity called ``name``; :class:`IdentityError` when it is not one."""
        found = _IDENTITY.fullmatch(name)
        if found is None or len(name) > 63:
            raise IdentityError(
                f"{name[:70]!r} is not a service identity (lowercase words joined by '-', optionally "
                "ending in '-<shard>', at most 63 characters)"
            )
        shard = found["shard"]
        return cls(name, found["service"], None if shard is None else int(shard))

    def spiffe_id(self, trust_domain: str = DEFAULT_TRUST_DOMAIN) -> str:
        """The SPIFFE ID its certificate carries."""
        return f"spiffe://{trust_domain}/{self.name}"

    @property
    def is_rules_shard(self) -> bool:
        """Whether it is a shard of a rules service (``rules-<family>-<shard>``)."""
        return self.service.startswith("rules-") and self.shard is not None

    def owns_shard(self, family: str, shard: int) -> bool:
        """Whether it is the rules shard that serves ``family``'s shard ``shard``."""
        return self.service == f"rules-{family}" and self.shard == shard

    def __str__(self) -> str:
        return self.name


def check_trust_domain(trust_domain: str) -> str:
    """``trust_domain`` if it is a valid SPIFFE trust domain name; :class:`IdentityError` otherwise."""
    if not _TRUST_DOMAIN.fullmatch(trust_domain):
        raise IdentityError(
            f"{trust_domain[:70]!r} is not a trust domain (lowercase letters, digits, '.', '-')"
        )
    return trust_domain


@functools.lru_cache(maxsize=1024)
def identity_from_spiffe_id(uri: str, trust_domain: str) -> Identity | None:
    """The identity a SPIFFE ID of ``trust_domain`` names, or ``None`` when it is of another trust
    domain or not an identity of the platform (remembered: every call of a service asks it again for
    the same few callers)."""
    prefix = f"spiffe://{trust_domain}/"
    if not uri.startswith(prefix):
        return None
    try:
        return Identity.parse(uri[len(prefix) :])
    except IdentityError:
        return None
