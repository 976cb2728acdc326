"""The development PKI: a local certificate authority and one certificate per identity, made once.

In production certificates come from files mounted from Kubernetes (cert-manager, see
docs/security.md). In development, ``TLS_DIR`` (default ``DATA_DIR/pki``) holds a local CA
(``ca.pem``, ``ca.key``) and a certificate and key per identity (``<identity>.pem``, ``<identity>.key``),
made the first time something asks for them and kept across restarts, like the development keys. Every
private key file is mode 0600. Several processes starting at once (``make run``) take a file lock, so
exactly one CA is made.

Certificates are ECDSA P-256, usable for both server and client authentication, and carry the
identity's SPIFFE ID and DNS names (see :mod:`libs.runtime.identity`) plus ``localhost``, ``127.0.0.1``
and ``::1``, so operators can reach a local service by address (``buf curl --cacert ...``).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from libs.runtime.identity import DEFAULT_TRUST_DOMAIN, Identity
from libs.runtime.private_files import write_private

CA_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
CA_DAYS = 3650
LEAF_DAYS = 825
_LOCK_FILE = ".lock"
PUBLIC = 0o644
"""The mode of certificates (keys are 0600)."""


@dataclass(frozen=True, slots=True)
class CertificateFiles:
    """Where one identity's certificate, key and trusted CA bundle are."""

    ca: Path
    certificate: Path
    key: Path


@dataclass(frozen=True, slots=True)
class Authority:
    """A certificate authority that can issue certificates (development and tests only)."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @classmethod
    def create(cls, name: str = "SkillClassics development CA") -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = _now()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(key, certificate)

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        identity: str,
        *,
        trust_domain: str = DEFAULT_TRUST_DOMAIN,
        days: int = LEAF_DAYS,
        not_before: datetime.datetime | None = None,
    ) -> tuple[bytes, bytes]:
        """A certificate for ``identity`` signed by this authority: ``(certificate PEM, key PEM)``."""
        parsed = Identity.parse(identity)
        key = ec.generate_private_key(ec.SECP256R1())
        start = not_before if not_before is not None else _now() - datetime.timedelta(minutes=5)
        names: list[x509.GeneralName] = [
            x509.UniformResourceIdentifier(parsed.spiffe_id(trust_domain)),
            x509.DNSName(parsed.name),
        ]
        if parsed.service != parsed.name:
            names.append(x509.DNSName(parsed.service))
        names += [
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, parsed.name)]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        return certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key)

    @classmethod
    def load(cls, directory: Path) -> Authority:
        key = serialization.load_pem_private_key((directory / CA_KEY_FILE).read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{directory / CA_KEY_FILE} is not an EC private key")
        return cls(key, x509.load_pem_x509_certificate((directory / CA_FILE).read_bytes()))


def development_certificates(
    directory: Path, identity: str, trust_domain: str = DEFAULT_TRUST_DOMAIN
) -> CertificateFiles:
    """The files of ``identity`` in the development PKI at ``directory``, made there if missing (and
    the CA with them, the first time)."""
    return ensure_development_pki(directory, [identity], trust_domain)[identity]


def ensure_development_pki(
    directory: Path, identities: Iterable[str], trust_domain: str = DEFAULT_TRUST_DOMAIN
) -> dict[str, CertificateFiles]:
    """Make the development PKI at ``directory`` hold a certificate for each of ``identities``."""
    wanted = [Identity.parse(name).name for name in identities]
    files = {name: _files(directory, name) for name in wanted}
    if (
        all(f.certificate.exists() and f.key.exists() for f in files.values())
        and (directory / CA_FILE).exists()
    ):
        return files
    with _locked(directory):
        if (directory / CA_FILE).exists() and (directory / CA_KEY_FILE).exists():
            authority = Authority.load(directory)
        else:
            authority = Authority.create()
            write_private(directory / CA_KEY_FILE, _key_pem(authority.key))
            write_private(directory / CA_FILE, authority.certificate_pem, mode=PUBLIC)
        for name, paths in files.items():
            if paths.certificate.exists() and paths.key.exists():
                continue
            certificate, key = authority.issue(name, trust_domain=trust_domain)
            write_private(paths.key, key)
            write_private(paths.certificate, certificate, mode=PUBLIC)
    return files


def _files(directory: Path, identity: str) -> CertificateFiles:
    return CertificateFiles(directory / CA_FILE, directory / f"{identity}.pem", directory / f"{identity}.key")


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / _LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
