"""Mutual TLS between services: this workload's certificate, its servers' credentials, its channels.

Every call between services is mutual TLS (grpcio's own): the server requires a client certificate
signed by a trusted CA, the client checks the server's certificate against the service it meant to
call, and the server reads the caller's identity from the SPIFFE ID in the peer certificate
(:func:`peer_identity`; what each identity may call is :mod:`libs.runtime.authz`).

Configuration (environment variables, read by :meth:`TransportSecurity.from_env`):

=========================  =========================================================  =====================
variable                   meaning                                                    default
=========================  =========================================================  =====================
``TLS_MODE``               ``mtls``, or ``plaintext`` for local debugging only         ``mtls``
                           (refused in production; every caller is then trusted)
``SERVICE_IDENTITY``       this workload's identity (:mod:`libs.runtime.identity`)    the service's name;
                                                                                      ``rules-<family>-
                                                                                      <RULES_SHARD>``
``TLS_TRUST_DOMAIN``       the SPIFFE trust domain                                    ``skillclassics.local``
``TLS_CA_FILE``            PEM bundle of the CAs whose certificates are trusted       the development PKI
``TLS_CERT_FILE``          this workload's certificate (chain), PEM                   the development PKI
``TLS_KEY_FILE``           its private key, PEM                                       the development PKI
``TLS_DIR``                the development PKI's folder (:mod:`libs.runtime.pki`)     ``DATA_DIR/pki``
=========================  =========================================================  =====================

In production the three files must be set (mounted from Kubernetes); in development, files not given
come from the development PKI, made on first use. A server reads its files again when they change, so a
renewed certificate is served from the next connection on, without a restart; a client's certificate
is read when the process starts (docs/security.md: rotation).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import grpc

from libs.runtime.config import ConfigError
from libs.runtime.identity import (
    DEFAULT_TRUST_DOMAIN,
    Identity,
    IdentityError,
    check_trust_domain,
    identity_from_spiffe_id,
)
from libs.runtime.log import get_logger
from libs.runtime.pki import CertificateFiles, development_certificates
from libs.runtime.targets import replica_target

TlsMode = Literal["mtls", "plaintext"]
_log = get_logger(__name__)


def default_identity(service: str, env: Mapping[str, str]) -> str:
    """The identity a service has when ``SERVICE_IDENTITY`` is unset: its name, and for a rules
    service its shard (``rules-chess-0``), as the pod of its StatefulSet is named."""
    if service.startswith("rules-"):
        shard = env.get("RULES_SHARD", "").strip() or "0"
        return f"{service}-{shard}"
    return service


class TransportSecurity:
    """How one workload talks to the others: its identity, certificates, and the credentials made
    from them."""

    def __init__(
        self,
        mode: TlsMode,
        identity: Identity,
        *,
        trust_domain: str = DEFAULT_TRUST_DOMAIN,
        files: CertificateFiles | None = None,
        development_dir: Path | None = None,
    ) -> None:
        if mode == "mtls" and files is None and development_dir is None:
            raise ConfigError("mutual TLS needs certificate files or a development PKI folder")
        self.mode: TlsMode = mode
        self.identity = identity
        self.trust_domain = trust_domain
        self._files = files
        self._development_dir = development_dir
        self._channel_credentials: grpc.ChannelCredentials | None = None

    @classmethod
    def from_env(
        cls, service: str, env: Mapping[str, str], data_dir: Path, *, production: bool
    ) -> TransportSecurity:
        """What ``env`` configures for ``service`` (see the module docstring)."""
        mode = env.get("TLS_MODE", "").strip().lower() or "mtls"
        if mode not in ("mtls", "plaintext"):
            raise ConfigError(f"TLS_MODE must be mtls or plaintext, got {mode[:40]!r}")
        if mode == "plaintext" and production:
            raise ConfigError("TLS_MODE=plaintext is for local debugging only; production requires mtls")
        try:
            identity = Identity.parse(
                env.get("SERVICE_IDENTITY", "").strip() or default_identity(service, env)
            )
            trust_domain = check_trust_domain(env.get("TLS_TRUST_DOMAIN", "").strip() or DEFAULT_TRUST_DOMAIN)
        except IdentityError as error:
            raise ConfigError(f"SERVICE_IDENTITY or TLS_TRUST_DOMAIN: {error}") from None
        given = [env.get(name, "").strip() for name in ("TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE")]
        files: CertificateFiles | None = None
        if any(given):
            if not all(given):
                raise ConfigError("TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE must be set together")
            files = CertificateFiles(Path(given[0]), Path(given[1]), Path(given[2]))
        elif production and mode == "mtls":
            raise ConfigError("TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE must be set in production")
        development_dir = Path(env.get("TLS_DIR", "").strip() or data_dir / "pki")
        return cls(
            mode,  # type: ignore[arg-type]
            identity,
            trust_domain=trust_domain,
            files=files,
            development_dir=None if files is not None else development_dir,
        )

    @classmethod
    def plaintext(cls, identity: str = "operator") -> TransportSecurity:
        """No TLS at all (local debugging, and clients of the gateway's public port)."""
        return cls("plaintext", Identity.parse(identity))

    @property
    def is_mutual(self) -> bool:
        return self.mode == "mtls"

    def files(self) -> CertificateFiles:
        """This workload's certificate files (made in the development PKI when none are configured)."""
        if self._files is None:
            assert self._development_dir is not None
            self._files = development_certificates(
                self._development_dir, self.identity.name, self.trust_domain
            )
        return self._files

    # -- serving ----------------------------------------------------------------------------------------

    def server_credentials(self) -> grpc.ServerCredentials:
        """Credentials for a server port that requires a client certificate from a trusted CA, and
        serves the certificate files as they are at each new connection (renewals need no restart)."""
        files = self.files()
        loaded = {"stamp": _stamp(files)}

        def configuration() -> grpc.ServerCertificateConfiguration:
            return grpc.ssl_server_certificate_configuration(
                [(files.key.read_bytes(), files.certificate.read_bytes())],
                root_certificates=files.ca.read_bytes(),
            )

        def fetch() -> grpc.ServerCertificateConfiguration | None:
            stamp = _stamp(files)
            if stamp == loaded["stamp"]:
                return None
            try:
                renewed = configuration()
            except OSError as error:  # half-rotated files: keep serving the last good ones
                _log.warning("tls.reload_failed", error=str(error))
                return None
            loaded["stamp"] = stamp
            _log.info("tls.reloaded", certificate=str(files.certificate))
            return renewed

        return grpc.dynamic_ssl_server_credentials(configuration(), fetch, require_client_authentication=True)

    # -- calling ----------------------------------------------------------------------------------------

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """This workload's client credentials (its certificate, and the CAs it trusts)."""
        if self._channel_credentials is None:
            files = self.files()
            self._channel_credentials = grpc.ssl_channel_credentials(
                root_certificates=files.ca.read_bytes(),
                private_key=files.key.read_bytes(),
                certificate_chain=files.certificate.read_bytes(),
            )
        return self._channel_credentials

    def channel(
        self,
        address: str,
        service: str,
        options: Sequence[tuple[str, object]] | None = None,
        *,
        retry: Sequence[dict[str, object]] = (),
    ) -> grpc.aio.Channel:
        """A channel to ``service`` (e.g. ``fairness``, ``rules-chess``) at ``address``: mutual TLS, the
        server's certificate checked against the service's name whatever the address is. ``address`` may
        name several replicas (a list of ``ip:port``, or ``dns:///name:port``): calls are then spread over
        them, and calls of the methods ``retry`` names tried again on ``UNAVAILABLE``
        (:func:`libs.runtime.targets.replica_target`, :func:`~libs.runtime.targets.retry_policy`)."""
        target, balancing = replica_target(address, retry)
        opts = [*(options or []), *balancing]
        if not self.is_mutual:
            return grpc.aio.insecure_channel(target, options=opts)
        opts.append(("grpc.ssl_target_name_override", service))
        return grpc.aio.secure_channel(target, self.channel_credentials(), options=opts)


def peer_identity(context: grpc.aio.ServicerContext, trust_domain: str) -> Identity | None:
    """The identity of the caller, from the SPIFFE ID of its verified certificate (``None`` on a
    connection without one)."""
    names = context.peer_identities()
    if not names:
        return None
    for name in names:
        text = name.decode("ascii", "replace") if isinstance(name, bytes) else str(name)
        if text.startswith("spiffe://"):
            return identity_from_spiffe_id(text, trust_domain)
    return None


def _stamp(files: CertificateFiles) -> tuple[tuple[int, int], ...]:
    stamps = []
    for path in (files.ca, files.certificate, files.key):
        try:
            status = os.stat(path)
        except OSError:
            stamps.append((-1, -1))
        else:
            stamps.append((status.st_mtime_ns, status.st_size))
    return tuple(stamps)
