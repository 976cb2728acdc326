"""The Kubernetes manifests under ``deploy/k8s``, checked against the code they run.

Every YAML document is parsed with PyYAML. The checks run on the base's files as written and, when
``kubectl`` (or ``kustomize``) is installed, on what kustomize renders for the base, the dev overlay, the
dev overlay with the optional gateway autoscaler and the production overlay; without either tool those are
skipped with a message (the base's files are always checked). What is checked:

- each container's ports, ``GRPC_PORT``/``METRICS_PORT``, probes, Services and Prometheus annotations
  agree with :data:`libs.runtime.ports.DEFAULT_PORTS` (metrics = gRPC - 40900);
- each container's ``args`` is a module ``python -m`` can run, and every service of the launcher's
  registry is deployed;
- each pod's environment, as Kubernetes would build it for every pod of the workload (downward API,
  ``$(VAR)`` expansion, Secrets), is accepted by the service's own configuration code in production;
- rules shard N talks to clock shard N, the clock has a shard for every rules shard, and matchmaking and
  the gateway list every rules shard, in order, by its per-pod DNS name, in the one place they read the
  lists from: the ConfigMap ``rules-shards``, mounted as a directory and named by ``RULES_SHARDS_FILE``
  (read here with the services' own :class:`~libs.match.routing.ShardDirectory`);
- secrets only through ``secretKeyRef``, no Secret object outside the development pieces;
- every pod non-root with a read-only root filesystem, and the rest of the hardening;
- every kustomization lists every file of its folder;
- every service has its own certificate from cert-manager's CSI driver, whose SPIFFE ID is the pod's
  ``SERVICE_IDENTITY`` as the code parses it, and the ``TLS_*`` files point into it; probes go to the
  plaintext health port; the gateway checks JWTs against a mounted JWKS and holds no token key;
- the NetworkPolicies, evaluated as Kubernetes does (:func:`may_connect`), allow exactly the call graph
  (:data:`CALLS`, which must also be what the pods' addresses and the code's authorisation table say),
  DNS, PostgreSQL for the database users, probes and Prometheus, and nothing else.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from libs.launcher.registry import SERVICES, available_services, module_exists
from libs.match.routing import SHARDS_FILE_VARIABLE, ShardDirectory, parse_shards_file
from libs.runtime.config import ConfigError, ServiceConfig
from libs.runtime.ports import DEFAULT_PORTS
from services.clock.service import ClockService
from services.fairness.service import FairnessService
from services.gateway.service import GatewayService
from services.matchmaking.families import FAMILIES
from services.matchmaking.service import MatchmakingService
from services.rules_backgammon.service import backgammon_rules_service
from services.rules_chess.service import chess_rules_service
from services.rules_generals.service import generals_rules_service
from services.rules_gin.service import gin_rules_service
from services.rules_go.service import go_rules_service

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
NAMESPACE = "skillclassics"
DEV_ONLY = "skillclassics.io/dev-only"
POD_INDEX = "metadata.labels['apps.kubernetes.io/pod-index']"
METRICS_OFFSET = 40900
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")
SERVING_KINDS = ("Deployment", "StatefulSet")

Doc = dict[str, Any]
Factory = Callable[[ServiceConfig, Mapping[str, str]], object]

FACTORIES: dict[str, Factory] = {
    "services.fairness": FairnessService,
    "services.clock": ClockService,
    "services.rules_chess": chess_rules_service,
    "services.rules_backgammon": backgammon_rules_service,
    "services.rules_gin": gin_rules_service,
    "services.rules_go": go_rules_service,
    "services.rules_generals": generals_rules_service,
    "services.matchmaking": MatchmakingService,
    "services.gateway": GatewayService,
}
"""What each service module's ``__main__`` hands to ``run_service``: built here with a pod's environment."""

PLACEHOLDER_SECRETS: dict[tuple[str, str], str] = {
    ("skillclassics-database", "url"): "postgresql+asyncpg://skillclassics:placeholder@postgres:5432/db",
    ("skillclassics-fairness", "seed-key"): base64.b64encode(bytes(32)).decode(),
}
"""Stand-ins for the Secrets the base references but does not create (docs/deployment.md, "Secrets"); a
rendered overlay that generates its Secrets is checked with their real (development) values instead."""

DEV_JWKS = K8S / "overlays" / "dev" / "dev-jwks.json"
PLACEHOLDER_CONFIG_MAPS: dict[tuple[str, str], str] = {
    ("skillclassics-token-issuers", "issuers"): "https://login.example.com",
    ("skillclassics-token-issuers", "jwks.json"): DEV_JWKS.read_text(),
}
"""Stand-ins for the ConfigMaps the base references but does not create, likewise."""

NOT_SECRETS = {
    "GATEWAY_TOKEN_ISSUERS": "the names of the accepted token issuers",
    "GATEWAY_TOKEN_AUDIENCE": "the audience tokens must name",
    "GATEWAY_TOKEN_MAX_LIFETIME_SECONDS": "a number of seconds",
}
"""Variables whose names look secret but are not (paths, ``*_FILE``, are checked separately)."""

RULES_SHARDS_CONFIG_MAP = "rules-shards"
RULES_SHARDS_KEY = "rules-shards.env"
"""The ConfigMap (base/rules-shards.yaml) whose key lists every family's rules shards, for matchmaking and
the gateway (``RULES_SHARDS_FILE``)."""
_ADDRESS_LIST = re.compile(r"RULES_[A-Z]+_ADDRESSES")

CSI_DRIVER = "csi.cert-manager.io"
TLS_FILES = {"TLS_CA_FILE": "ca-file", "TLS_CERT_FILE": "certificate-file", "TLS_KEY_FILE": "privatekey-file"}
"""Each certificate variable, and the csi-driver attribute naming its file in the volume."""
CSI_FILE_DEFAULTS = {"ca-file": "ca.crt", "certificate-file": "tls.crt", "privatekey-file": "tls.key"}
MAX_CERTIFICATE_LIFETIME = datetime.timedelta(days=90)

_SECRET_NAME = re.compile(r"(^|_)(KEY|KEYS|SECRET|SECRETS|PASSWORD|TOKEN|CREDENTIALS?)(_|$)")
_URL_WITH_PASSWORD = re.compile(r"://[^/\s:@]+:[^/\s@]+@")


# -- loading -------------------------------------------------------------------------------------------


def _parse(text: str, origin: str) -> list[Doc]:
    docs: list[Doc] = []
    for doc in yaml.safe_load_all(text):
        assert isinstance(doc, dict), f"{origin}: a YAML document that is not a mapping: {doc!r}"
        docs.append(doc)
    return docs


def _yaml_files() -> list[Path]:
    return sorted(K8S.rglob("*.yaml"))


def _base_files() -> list[Doc]:
    docs: list[Doc] = []
    for path in sorted(BASE.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs.extend(_parse(path.read_text(), str(path.relative_to(ROOT))))
    return docs


def _kustomize_command() -> list[str] | None:
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    return None


def _render(directory: Path) -> list[Doc]:
    command = _kustomize_command()
    assert command is not None
    done = subprocess.run(
        [*command, str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{' '.join(command)} {directory} failed:\n{done.stderr}"
    return _parse(done.stdout, f"{' '.join(command)} {directory}")


@cache
def _build(target: str) -> tuple[Doc, ...]:
    """What kustomize renders for ``target``: a folder under deploy/k8s, or ``dev+gateway-hpa``."""
    if target != "dev+gateway-hpa":
        return tuple(_render(K8S / target))
    # An overlay of the dev overlay with the optional component, as a real overlay would opt in. Kustomize
    # refuses absolute paths to other kustomizations, hence the relative ones.
    with tempfile.TemporaryDirectory() as scratch:
        here = Path(scratch).resolve()
        dev = os.path.relpath(K8S / "overlays" / "dev", here)
        hpa = os.path.relpath(K8S / "components" / "gateway-hpa", here)
        (here / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\n"
            "kind: Kustomization\n"
            f"namespace: {NAMESPACE}\n"
            f"resources:\n  - {dev}\n"
            f"components:\n  - {hpa}\n"
        )
        return tuple(_render(here))


@dataclass(frozen=True)
class Manifests:
    """One set of Kubernetes objects: the base's files, or one kustomize build."""

    source: str
    docs: tuple[Doc, ...]
    rendered: bool
    """Rendered by kustomize (namespaces and image tags set), rather than the files as written."""
    complete: bool
    """It generates Secrets (a development overlay), so it must carry every Secret it references; the
    others (the base, a production overlay) leave them to the secret manager and get stand-ins."""

    def of_kind(self, *kinds: str) -> list[Doc]:
        return [doc for doc in self.docs if doc.get("kind") in kinds]

    def find(self, kind: str, name: str) -> Doc | None:
        for doc in self.of_kind(kind):
            if doc["metadata"]["name"] == name:
                return doc
        return None

    def get(self, kind: str, name: str) -> Doc:
        found = self.find(kind, name)
        if found is None:
            names = sorted(doc["metadata"]["name"] for doc in self.of_kind(kind))
            pytest.fail(f"{self.source}: no {kind} named {name!r} (there are: {names})")
        return found

    def workloads(self, kinds: tuple[str, ...] = WORKLOAD_KINDS) -> list[Doc]:
        """Our workloads: everything but the development-only ones (the throw-away PostgreSQL)."""
        return [doc for doc in self.of_kind(*kinds) if not _dev_only(doc)]

    def services(self) -> list[tuple[Doc, str]]:
        """Every Deployment or StatefulSet running a registered service, with the service's name."""
        modules = {spec.module: spec.name for spec in SERVICES}
        found = []
        for workload in self.workloads(SERVING_KINDS):
            module = _main_container(workload).get("args", [None])[0]
            assert module in modules, f"{_ref(workload)} runs {module!r}, which is not a registered service"
            found.append((workload, modules[module]))
        return found

    def service(self, name: str) -> Doc:
        for workload, service in self.services():
            if service == name:
                return workload
        pytest.fail(f"{self.source}: no workload runs the service {name!r}")

    def rules_statefulsets(self) -> list[Doc]:
        return [w for w, name in self.services() if name.startswith("rules-") and w["kind"] == "StatefulSet"]


SOURCES = [
    "files:base",
    "build:base",
    "build:overlays/dev",
    "build:dev+gateway-hpa",
    "build:overlays/prod",
]
"""What the checks run on; add an overlay of your own as ``build:overlays/<name>``."""


@pytest.fixture(params=SOURCES)
def manifests(request: pytest.FixtureRequest) -> Manifests:
    source: str = request.param
    if source == "files:base":
        return Manifests(source, tuple(_base_files()), rendered=False, complete=False)
    if _kustomize_command() is None:
        pytest.skip(
            "neither kubectl nor kustomize is installed: the rendered overlays are not checked "
            "(the base's files are)"
        )
    docs = _build(source.removeprefix("build:"))
    generates_secrets = any(doc["kind"] == "Secret" for doc in docs)
    return Manifests(source, docs, rendered=True, complete=generates_secrets)


# -- small helpers -------------------------------------------------------------------------------------


def _ref(doc: Doc) -> str:
    return f"{doc['kind']}/{doc['metadata']['name']}"


def _dev_only(doc: Doc) -> bool:
    return bool(doc.get("metadata", {}).get("labels", {}).get(DEV_ONLY) == "true")


def _pod_spec(workload: Doc) -> Doc:
    spec: Doc = workload["spec"]["template"]["spec"]
    return spec


def _pod_labels(workload: Doc) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def _containers(workload: Doc) -> list[Doc]:
    containers: list[Doc] = _pod_spec(workload)["containers"]
    return containers


def _main_container(workload: Doc) -> Doc:
    containers = _containers(workload)
    assert len(containers) == 1, f"{_ref(workload)}: one container per pod expected"
    return containers[0]


def _replicas(workload: Doc) -> int:
    return int(workload["spec"].get("replicas", 1))


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def _env_entries(container: Doc) -> list[Doc]:
    entries: list[Doc] = container.get("env", [])
    return entries


def _env_entry(container: Doc, name: str) -> Doc | None:
    for entry in _env_entries(container):
        if entry["name"] == name:
            return entry
    return None


def _literal_env(container: Doc) -> dict[str, str]:
    return {e["name"]: str(e["value"]) for e in _env_entries(container) if "value" in e}


def _ports(container: Doc) -> dict[str, int]:
    return {port["name"]: int(port["containerPort"]) for port in container.get("ports", [])}


def _ordinals(workload: Doc) -> list[int | None]:
    """The pods to simulate: every ordinal of a StatefulSet, one pod of anything else."""
    if workload["kind"] == "StatefulSet":
        return list(range(_replicas(workload)))
    return [None]


# -- the pod's environment, as the kubelet builds it ----------------------------------------------------

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _expand(value: str, defined: Mapping[str, str]) -> str:
    """Kubernetes' dependent variables: ``$(NAME)`` of an EARLIER entry is replaced, ``$$`` is ``$``."""

    def replace(found: re.Match[str]) -> str:
        if found[0] == "$$":
            return "$"
        return defined.get(found[1], found[0])

    return _REFERENCE.sub(replace, value)


def _secret_value(m: Manifests, name: str, key: str, optional: bool) -> str | None:
    secret = m.find("Secret", name)
    if secret is not None:
        data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        data.update(secret.get("stringData") or {})
        if key not in data and not optional:
            pytest.fail(f"{m.source}: Secret {name} has no key {key!r}")
        return data.get(key)
    if m.complete and not optional:
        pytest.fail(f"{m.source}: Secret {name} (key {key!r}) is referenced but not provided")
    if (name, key) not in PLACEHOLDER_SECRETS and not optional:
        pytest.fail(f"Secret {name}/{key} is new: document it and add a stand-in to PLACEHOLDER_SECRETS")
    return PLACEHOLDER_SECRETS.get((name, key))


def _config_map_data(m: Manifests, name: str) -> dict[str, str] | None:
    """The data of ConfigMap ``name``: from the manifests, or the stand-ins where they leave it to the
    environment (``None``: it has no stand-in either)."""
    config_map = m.find("ConfigMap", name)
    if config_map is not None:
        return {str(k): str(v) for k, v in (config_map.get("data") or {}).items()}
    if m.complete:
        pytest.fail(f"{m.source}: ConfigMap {name} is referenced but not provided")
    data = {key: value for (cm, key), value in PLACEHOLDER_CONFIG_MAPS.items() if cm == name}
    return data or None


def _config_map_value(m: Manifests, name: str, key: str, optional: bool) -> str | None:
    data = _config_map_data(m, name)
    if data is None and not optional:
        pytest.fail(f"ConfigMap {name} is new: document it and add a stand-in to PLACEHOLDER_CONFIG_MAPS")
    value = (data or {}).get(key)
    if value is None and not optional:
        pytest.fail(f"{m.source}: ConfigMap {name} has no key {key!r}")
    return value


def _pod_name(workload: Doc, ordinal: int | None) -> str:
    name = workload["metadata"]["name"]
    return f"{name}-{ordinal}" if ordinal is not None else f"{name}-7d9f8c6b5d-x2x7q"


def pod_environment(m: Manifests, workload: Doc, container: Doc, ordinal: int | None) -> dict[str, str]:
    """The environment of ``container`` in the pod with ``ordinal`` (``None``: a Deployment's pod)."""
    pod_name = _pod_name(workload, ordinal)
    env: dict[str, str] = {}
    for entry in _env_entries(container):
        where = f"{m.source}: {_ref(workload)} env {entry['name']}"
        value: str | None
        source = entry.get("valueFrom")
        if source is None:
            value = _expand(str(entry.get("value", "")), env)
            assert "$(" not in value, f"{where}: {value!r} refers to a variable not defined above it"
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            value = _secret_value(m, ref["name"], ref["key"], bool(ref.get("optional", False)))
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            value = _config_map_value(m, ref["name"], ref["key"], bool(ref.get("optional", False)))
        elif "fieldRef" in source:
            field = source["fieldRef"]["fieldPath"]
            if field == POD_INDEX:
                assert ordinal is not None, f"{where}: only StatefulSet pods carry the pod-index label"
                value = str(ordinal)
            elif field == "metadata.name":
                value = pod_name
            elif field == "metadata.namespace":
                value = NAMESPACE
            else:
                pytest.fail(f"{where}: fieldRef {field} is not simulated here")
        else:
            pytest.fail(f"{where}: {sorted(source)} is not simulated here")
        if value is not None:
            env[entry["name"]] = value
    return env


# -- addresses -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What an address reaches: a workload, and the one pod for a per-pod name."""

    workload: str
    ordinal: int | None


def _service_port(m: Manifests, service: Doc, port: int, workload: Doc) -> None:
    for entry in service["spec"]["ports"]:
        if int(entry["port"]) == port:
            target = entry.get("targetPort", port)
            ports = _ports(_main_container(workload))
            number = ports.get(target) if isinstance(target, str) else int(target)
            assert number == ports.get("grpc"), (
                f"{m.source}: {_ref(service)} port {port} goes to {target!r}, not the grpc port of "
                f"{_ref(workload)}"
            )
            return
    pytest.fail(f"{m.source}: {_ref(service)} has no port {port}")


def _selected_workload(m: Manifests, service: Doc) -> Doc:
    selector = service["spec"].get("selector") or {}
    selected = [w for w in m.workloads(SERVING_KINDS) if _selects(selector, _pod_labels(w))]
    assert len(selected) == 1, f"{m.source}: {_ref(service)} selects {[_ref(w) for w in selected]}"
    return selected[0]


def resolve(m: Manifests, address: str) -> Target:
    """Where ``host:port`` leads, from a pod in the namespace; fails unless it reaches a gRPC port.

    ``dns:///<service>:port`` names every ready replica of a Deployment through a headless Service, for a
    channel that balances over them (libs/runtime/targets.py); a StatefulSet's pods are named one by one.
    """
    if address.startswith("dns:///"):
        host, colon, port_text = address.removeprefix("dns:///").rpartition(":")
        assert colon, f"{address!r} is not dns:///host:port"
        assert port_text.isdigit(), f"{address!r} is not dns:///host:port"
        assert "." not in host, f"{address}: use the short name of a Service of the namespace"
        service = m.get("Service", host)
        assert service["spec"].get("clusterIP") == "None", (
            f"{address}: {host} must be headless, so its name resolves to every replica"
        )
        assert not service["spec"].get("publishNotReadyAddresses"), (
            f"{address}: a balanced name must leave out replicas that are not ready"
        )
        workload = _selected_workload(m, service)
        assert workload["kind"] == "Deployment", f"{address}: balance over a Deployment's replicas"
        _service_port(m, service, int(port_text), workload)
        return Target(workload["metadata"]["name"], None)
    host, colon, port_text = address.rpartition(":")
    assert colon, f"{address!r} is not host:port"
    assert port_text.isdigit(), f"{address!r} is not host:port"
    port = int(port_text)
    labels = host.split(".")
    if len(labels) == 1:
        service = m.get("Service", host)
        assert service["spec"].get("clusterIP") != "None", (
            f"{address}: {host} is headless, so its name resolves to every pod; name one pod"
        )
        workload = _selected_workload(m, service)
        _service_port(m, service, port, workload)
        return Target(workload["metadata"]["name"], None)
    assert len(labels) == 2, f"{address}: use the short names of the namespace (<service> or <pod>.<service>)"
    pod, governing = labels
    named = re.fullmatch(r"(?P<set>[a-z0-9-]+)-(?P<ordinal>[0-9]+)", pod)
    assert named is not None, f"{address}: {pod!r} is not a StatefulSet pod name"
    statefulset = m.get("StatefulSet", named["set"])
    assert statefulset["spec"]["serviceName"] == governing, (
        f"{address}: per-pod names exist under the StatefulSet's serviceName, "
        f"{statefulset['spec']['serviceName']!r}, not {governing!r}"
    )
    service = m.get("Service", governing)
    assert service["spec"].get("clusterIP") == "None", f"{address}: {governing} must be headless"
    assert _selected_workload(m, service) is statefulset
    _service_port(m, service, port, statefulset)
    ordinal = int(named["ordinal"])
    assert ordinal < _replicas(statefulset), (
        f"{address}: {_ref(statefulset)} has {_replicas(statefulset)} replicas, so no pod {pod}"
    )
    return Target(statefulset["metadata"]["name"], ordinal)


def _shard_addresses(statefulset: Doc) -> list[str]:
    """The per-pod addresses of every shard of a StatefulSet, in ordinal order."""
    name = statefulset["metadata"]["name"]
    governing = statefulset["spec"]["serviceName"]
    grpc = _ports(_main_container(statefulset))["grpc"]
    return [f"{name}-{i}.{governing}:{grpc}" for i in range(_replicas(statefulset))]


# -- volumes: certificates and ConfigMaps --------------------------------------------------------------


def _volume_at(workload: Doc, container: Doc, path: str) -> Doc | None:
    """The volume mounted in ``container`` where ``path`` is, if any."""
    volumes = {volume["name"]: volume for volume in _pod_spec(workload).get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        root = mount["mountPath"].rstrip("/")
        if path == root or path.startswith(root + "/"):
            volume: Doc = volumes[mount["name"]]
            return volume
    return None


def _certificate_volumes(workload: Doc) -> list[Doc]:
    return [
        volume
        for volume in _pod_spec(workload).get("volumes", [])
        if volume.get("csi", {}).get("driver") == CSI_DRIVER
    ]


def _csi_attributes(volume: Doc) -> dict[str, str]:
    """The csi-driver's volume attributes, without their ``csi.cert-manager.io/`` prefix."""
    prefix = CSI_DRIVER + "/"
    raw = volume["csi"].get("volumeAttributes") or {}
    return {key.removeprefix(prefix): str(value) for key, value in raw.items() if key.startswith(prefix)}


_CSI_VARIABLE = re.compile(r"\$(?:\{([^}]*)\}|([A-Za-z0-9_]+))")


def _csi_expand(value: str, variables: Mapping[str, str]) -> str:
    """The csi-driver's expansion (Go's os.Expand) of ``${POD_NAME}`` and friends; unknown ones fail."""

    def replace(found: re.Match[str]) -> str:
        name = found[1] if found[1] is not None else found[2]
        assert name in variables, f"the csi-driver expands no variable {name!r} (only {sorted(variables)})"
        return variables[name]

    return _CSI_VARIABLE.sub(replace, value)


@dataclass(frozen=True)
class CertificateRequest:
    """What the csi-driver asks cert-manager for, for one pod."""

    common_name: str
    dns_names: tuple[str, ...]
    uris: tuple[str, ...]
    usages: frozenset[str]
    duration: datetime.timedelta
    renew_before: datetime.timedelta | None


_GO_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(h|m|s|ms)")


def _go_duration(text: str) -> datetime.timedelta:
    parts = _GO_DURATION.findall(text)
    assert "".join(a + b for a, b in parts) == text, f"{text!r} is not a Go duration"
    assert parts, f"{text!r} is not a Go duration"
    seconds = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return datetime.timedelta(seconds=sum(float(amount) * seconds[unit] for amount, unit in parts))


def _certificate_request(workload: Doc, volume: Doc, ordinal: int | None) -> CertificateRequest:
    attributes = _csi_attributes(volume)
    variables = {
        "POD_NAME": _pod_name(workload, ordinal),
        "POD_NAMESPACE": workload["metadata"].get("namespace", NAMESPACE),
        "POD_UID": "0b5bd3e5-7f63-4c4e-9a63-1f0e8e0c1b2d",
        "SERVICE_ACCOUNT_NAME": _pod_spec(workload).get("serviceAccountName", "default"),
    }

    def listed(attribute: str, default: str = "") -> tuple[str, ...]:
        value = _csi_expand(attributes.get(attribute, default), variables)
        return tuple(item.strip() for item in value.split(",") if item.strip())

    renew_before = attributes.get("renew-before")
    return CertificateRequest(
        common_name=_csi_expand(attributes.get("common-name", ""), variables),
        dns_names=listed("dns-names"),
        uris=listed("uri-sans"),
        # The driver's defaults, as its pkg/apis/defaults sets them.
        usages=frozenset(listed("key-usages", "digital signature,key encipherment")),
        duration=_go_duration(attributes.get("duration", "2160h")),
        renew_before=None if renew_before is None else _go_duration(renew_before),
    )


@cache
def _test_ca() -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tests/deploy CA")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, certificate


def _issue_certificate(workload: Doc, volume: Doc, ordinal: int | None, folder: Path) -> None:
    """Write what the csi-driver would: this pod's key, its certificate (with the requested names) and
    the CA's certificate, under the file names the volume asks for."""
    request = _certificate_request(workload, volume, ordinal)
    attributes = _csi_attributes(volume)
    ca_key, ca = _test_ca()
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in request.dns_names]
    names += [x509.UniformResourceIdentifier(uri) for uri in request.uris]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, request.common_name or "pod")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + request.duration)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = {
        attribute: attributes.get(attribute, default) for attribute, default in CSI_FILE_DEFAULTS.items()
    }
    (folder / files["ca-file"]).write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / files["certificate-file"]).write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (folder / files["privatekey-file"]).write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def _project_config_map(m: Manifests, source: Doc, folder: Path) -> None:
    data = _config_map_data(m, source["name"])
    if data is None:
        assert source.get("optional", False), f"{m.source}: ConfigMap {source['name']} is missing"
        return
    items = source.get("items") or [{"key": key, "path": key} for key in data]
    for item in items:
        assert item["key"] in data, f"{m.source}: ConfigMap {source['name']} has no key {item['key']!r}"
        target = folder / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(data[item["key"]])


def _mount_volumes(
    m: Manifests, workload: Doc, container: Doc, ordinal: int | None, scratch: Path, env: Mapping[str, str]
) -> dict[str, str]:
    """Fill the pod's volumes under ``scratch`` and return ``env`` with paths into them moved there."""
    volumes = {volume["name"]: volume for volume in _pod_spec(workload).get("volumes", [])}
    moved: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        folder = scratch / mount["name"]
        folder.mkdir()
        if volume.get("csi", {}).get("driver") == CSI_DRIVER:
            _issue_certificate(workload, volume, ordinal, folder)
        elif "configMap" in volume:
            _project_config_map(m, volume["configMap"], folder)
        elif "emptyDir" not in volume:
            pytest.fail(f"{_ref(workload)}: volume {mount['name']} is not simulated here")
        moved[mount["mountPath"].rstrip("/")] = folder
    local: dict[str, str] = {}
    for name, value in env.items():
        for root, folder in moved.items():
            if value == root or value.startswith(root + "/"):
                value = str(folder) + value[len(root) :]
                break
        local[name] = value
    return local


# -- network policies, evaluated -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Endpoint:
    """One end of a connection: a pod (with a namespace) or an address outside any pod (``None``)."""

    name: str
    namespace: str | None
    labels: Mapping[str, str]
    ports: Mapping[str, int]
    """Its named ports (a pod's container ports), for the destinations it offers."""


OUTSIDERS = (
    # Players' devices, and any address outside the cluster (a token issuer's JWKS URL, say).
    Endpoint("internet", None, {}, {"https": 443}),
    # The node: the kubelet's probes come from its address.
    Endpoint("kubelet", None, {}, {}),
    # A managed PostgreSQL outside the cluster.
    Endpoint("managed-postgres", None, {}, {"postgres": 5432}),
    # The L7 load balancer in front of the gateway, when it runs in the cluster.
    Endpoint("ingress-controller", "ingress-nginx", {"app.kubernetes.io/name": "ingress-nginx"}, {}),
    Endpoint("prometheus", "monitoring", {"app.kubernetes.io/name": "prometheus"}, {}),
    # Its neighbour, which may not scrape.
    Endpoint("grafana", "monitoring", {"app.kubernetes.io/name": "grafana"}, {}),
    Endpoint("kube-dns", "kube-system", {"k8s-app": "kube-dns"}, {"dns": 53}),
    # A pod of another namespace wearing our labels: labels only count in our namespace.
    Endpoint("impostor", "default", {"app.kubernetes.io/name": "gateway"}, {}),
    # A stray pod in our namespace (kubectl run debug ...): the default deny holds it too.
    Endpoint("debug-pod", NAMESPACE, {"run": "debug"}, {"http": 8000}),
)
"""Everything that is not one of the manifests' pods, as the policies see it."""

PROBE_PORT = 8080
"""A port nothing listens on, tried on every pod: no policy may open ports wholesale."""

CALLS: dict[str, set[str]] = {
    "gateway": {
        "matchmaking",
        "fairness",
        "rules-chess",
        "rules-backgammon",
        "rules-gin",
        "rules-go",
        "rules-generals",
    },
    "matchmaking": {"rules-chess", "rules-backgammon", "rules-gin", "rules-go", "rules-generals", "fairness"},
    "rules-chess": {"clock", "fairness", "matchmaking"},
    "rules-backgammon": {"clock", "fairness", "matchmaking"},
    "rules-gin": {"clock", "fairness", "matchmaking"},
    "rules-go": {"clock", "fairness", "matchmaking"},
    "rules-generals": {"clock", "fairness", "matchmaking"},
}
"""The call graph: which services each service calls, on their gRPC ports (fairness and the clock call
nobody). Checked against the pods' addresses and against libs/runtime/authz.py."""


def _label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (``{}`` selects everything)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In":
            matched = key in labels and labels[key] in values
        elif operator == "NotIn":
            matched = key not in labels or labels[key] not in values
        elif operator == "Exists":
            matched = key in labels
        elif operator == "DoesNotExist":
            matched = key not in labels
        else:
            pytest.fail(f"label selector operator {operator!r} is not simulated here")
        if not matched:
            return False
    return True


def _policy_namespace(policy: Doc) -> str:
    return str(policy["metadata"].get("namespace", NAMESPACE))


def _policy_types(policy: Doc) -> set[str]:
    spec = policy["spec"]
    if "policyTypes" in spec:
        return set(spec["policyTypes"])
    return {"Ingress", *(["Egress"] if "egress" in spec else [])}


def _peer_matches(peer: Doc, policy_namespace: str, endpoint: Endpoint) -> bool:
    """One ``from``/``to`` entry. An ipBlock is taken to match anything (an address range may cover pods,
    nodes and the internet alike), which errs towards finding a connection allowed."""
    if "ipBlock" in peer:
        return True
    if endpoint.namespace is None:
        return False
    namespaces = peer.get("namespaceSelector")
    if namespaces is None:
        in_namespace = endpoint.namespace == policy_namespace
    else:
        in_namespace = _label_selector_matches(
            namespaces, {"kubernetes.io/metadata.name": endpoint.namespace}
        )
    pods = peer.get("podSelector")
    return in_namespace and (pods is None or _label_selector_matches(pods, endpoint.labels))


def _port_matches(entries: list[Doc] | None, destination: Endpoint, port: int, protocol: str) -> bool:
    if not entries:
        return True
    for entry in entries:
        if entry.get("protocol", "TCP") != protocol:
            continue
        wanted = entry.get("port")
        if wanted is None:
            return True
        if isinstance(wanted, str):
            # A named port is looked up on the destination pod.
            if destination.namespace is not None and destination.ports.get(wanted) == port:
                return True
        elif int(wanted) <= port <= int(entry.get("endPort") or wanted):
            return True
    return False


def _direction_allows(
    policies: list[Doc],
    direction: str,
    subject: Endpoint,
    peer: Endpoint,
    destination: Endpoint,
    port: int,
    protocol: str,
) -> bool:
    """Whether the policies selecting ``subject`` let it talk to ``peer`` in ``direction``."""
    selecting = [
        policy
        for policy in policies
        if _policy_namespace(policy) == subject.namespace
        and direction in _policy_types(policy)
        and _label_selector_matches(policy["spec"].get("podSelector") or {}, subject.labels)
    ]
    if not selecting:
        return True  # a pod no policy selects (for this direction) is not isolated
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    for policy in selecting:
        for rule in policy["spec"].get(key) or []:
            peers = rule.get(peers_key)
            if peers and not any(_peer_matches(p, _policy_namespace(policy), peer) for p in peers):
                continue
            if _port_matches(rule.get("ports"), destination, port, protocol):
                return True
    return False


def may_connect(
    policies: list[Doc], source: Endpoint, destination: Endpoint, port: int, protocol: str = "TCP"
) -> bool:
    """Whether ``source`` may open a connection to ``destination`` on ``port``: the egress policies of
    the source and the ingress policies of the destination must both allow it (NetworkPolicy semantics:
    a pod selected by no policy of a direction is open in that direction; rules only ever add)."""
    if source.namespace is not None and not _direction_allows(
        policies, "Egress", source, destination, destination, port, protocol
    ):
        return False
    return destination.namespace is None or _direction_allows(
        policies, "Ingress", destination, source, destination, port, protocol
    )


def _endpoints(m: Manifests) -> list[Endpoint]:
    pods = [
        Endpoint(
            workload["metadata"]["name"],
            workload["metadata"].get("namespace", NAMESPACE),
            _pod_labels(workload),
            {name: port for container in _containers(workload) for name, port in _ports(container).items()},
        )
        for workload in m.of_kind(*WORKLOAD_KINDS)
    ]
    return [*pods, *OUTSIDERS]


def _database_users(m: Manifests) -> set[str]:
    users = set()
    for workload in m.of_kind(*WORKLOAD_KINDS):
        for container in _containers(workload):
            entry = _env_entry(container, "DATABASE_URL")
            if entry is not None and "secretKeyRef" in entry.get("valueFrom", {}):
                users.add(workload["metadata"]["name"])
    return users


Connection = tuple[str, str, int, str]
"""source, destination, port, protocol."""


def _expected_connections(m: Manifests, endpoints: list[Endpoint]) -> set[Connection]:
    """What the policies must allow: the call graph, DNS and the database from our pods; from outside
    the namespace, the gateway's port, the health ports and (for Prometheus) the metrics ports."""
    database_users = _database_users(m)
    expected: set[Connection] = set()
    for source in endpoints:
        for destination in endpoints:
            pair = (source.name, destination.name)
            if source.namespace == NAMESPACE:
                if destination.name == "kube-dns":
                    expected |= {(*pair, 53, "UDP"), (*pair, 53, "TCP")}
                if destination.name in CALLS.get(source.name, ()):
                    expected.add((*pair, destination.ports["grpc"], "TCP"))
                if source.name in database_users and destination.name in ("managed-postgres", "postgres"):
                    expected.add((*pair, 5432, "TCP"))
            elif destination.namespace == NAMESPACE:
                if destination.name == "gateway":
                    expected.add((*pair, destination.ports["grpc"], "TCP"))
                if "health" in destination.ports:
                    expected.add((*pair, destination.ports["health"], "TCP"))
                if source.name == "prometheus" and "metrics" in destination.ports:
                    expected.add((*pair, destination.ports["metrics"], "TCP"))
    return expected


def _allowed_connections(policies: list[Doc], endpoints: list[Endpoint]) -> set[Connection]:
    """Every connection the policies allow, tried on every port of every destination (and on
    :data:`PROBE_PORT`), where at least one end is in the namespace."""
    allowed: set[Connection] = set()
    for source in endpoints:
        for destination in endpoints:
            if NAMESPACE not in (source.namespace, destination.namespace):
                continue
            tries = {(port, "TCP") for port in destination.ports.values()} | {(PROBE_PORT, "TCP")}
            tries |= {(port, "UDP") for port in destination.ports.values() if port == 53}
            for port, protocol in sorted(tries):
                if may_connect(policies, source, destination, port, protocol):
                    allowed.add((source.name, destination.name, port, protocol))
    return allowed


# -- the files and the kustomizations ------------------------------------------------------------------


def test_every_yaml_file_parses() -> None:
    files = _yaml_files()
    assert files
    for path in files:
        docs = _parse(path.read_text(), str(path.relative_to(ROOT)))
        assert docs, f"{path}: empty"
        for doc in docs:
            assert "apiVersion" in doc, f"{path}: a document without apiVersion"
            assert "kind" in doc, f"{path}: a document without kind"
            if doc["kind"] not in ("Kustomization", "Component"):
                assert doc.get("metadata", {}).get("name"), f"{path}: a {doc['kind']} without a name"


def _kustomizations() -> list[Path]:
    return sorted(K8S.rglob("kustomization.yaml"))


def test_kustomizations_list_every_file() -> None:
    for path in _kustomizations():
        folder = path.parent
        (kustomization,) = _parse(path.read_text(), str(path))
        listed = kustomization.get("resources", [])
        for entry in [*listed, *kustomization.get("components", [])]:
            target = (folder / entry).resolve()
            assert target.exists(), f"{path}: {entry} does not exist"
            if target.is_dir():
                assert (target / "kustomization.yaml").is_file(), f"{path}: {entry} is no kustomization"
        files = {p.name for p in folder.glob("*.yaml") if p.name != "kustomization.yaml"}
        patch_files = [patch["path"] for patch in kustomization.get("patches", []) if "path" in patch]
        listed_files = {entry for entry in [*listed, *patch_files] if (folder / entry).is_file()}
        assert files == listed_files, (
            f"{path}: files not listed: {sorted(files - listed_files)}, listed but absent: "
            f"{sorted(listed_files - files)}"
        )


def test_only_development_pieces_generate_secrets() -> None:
    for path in _kustomizations():
        (kustomization,) = _parse(path.read_text(), str(path))
        generators = kustomization.get("secretGenerator", [])
        if path.parent == BASE:
            assert not generators, f"{path}: the base must not create Secrets"
        for generator in generators:
            labels = generator.get("options", {}).get("labels", {})
            assert labels.get(DEV_ONLY) == "true", (
                f'{path}: generated Secret {generator["name"]} must be labelled {DEV_ONLY}: "true"'
            )


@pytest.mark.parametrize("target", ["base", "overlays/dev", "dev+gateway-hpa", "overlays/prod"])
def test_kustomize_builds(target: str) -> None:
    if _kustomize_command() is None:
        pytest.skip("neither kubectl nor kustomize is installed: `kustomize build` is not checked")
    docs = _build(target)
    kinds = {doc["kind"] for doc in docs}
    assert {"Namespace", "Deployment", "StatefulSet", "Service", "PodDisruptionBudget"} <= kinds
    assert {"NetworkPolicy", "Issuer"} <= kinds
    for doc in docs:
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == NAMESPACE, (
                f"{target}: {_ref(doc)} outside the namespace"
            )


def test_gateway_autoscaler_owns_the_replica_count() -> None:
    if _kustomize_command() is None:
        pytest.skip("neither kubectl nor kustomize is installed: the gateway-hpa component is not checked")
    m = Manifests("dev+gateway-hpa", _build("dev+gateway-hpa"), rendered=True, complete=True)
    (hpa,) = m.of_kind("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gateway"}
    assert hpa["spec"]["minReplicas"] >= 2
    assert "replicas" not in m.get("Deployment", "gateway")["spec"]


# -- services, modules, ports --------------------------------------------------------------------------


def test_every_registered_service_is_deployed_once(manifests: Manifests) -> None:
    deployed = [name for _, name in manifests.services()]
    expected = [spec.name for spec in available_services()]
    assert sorted(deployed) == sorted(expected)
    assert set(FACTORIES) == {spec.module for spec in available_services()}, (
        "a service was added or removed: update FACTORIES in this test"
    )
    for workload, name in manifests.services():
        assert workload["metadata"]["name"] == name, f"{_ref(workload)} runs {name}: name it so"


def test_containers_run_modules_that_exist(manifests: Manifests) -> None:
    for workload in manifests.workloads():
        for container in _containers(workload):
            assert "command" not in container, (
                f"{_ref(workload)}: keep the image's ENTRYPOINT (python -m); the module goes in args"
            )
            args = container.get("args")
            assert args, f"{_ref(workload)}: args must name the module to run"
            assert module_exists(args[0]), f"{_ref(workload)}: `python -m {args[0]}` has nothing to run"
            repository = str(container["image"]).split("@")[0].rsplit("/", 1)[-1]
            assert repository.split(":")[0] == "skillclassics", f"{_ref(workload)}: the one image"


def test_ports_match_the_service_table(manifests: Manifests) -> None:
    for workload, name in manifests.services():
        expected = DEFAULT_PORTS[name]
        assert expected.metrics == expected.grpc - METRICS_OFFSET, f"ports.py: {name}'s metrics port"
        container = _main_container(workload)
        where = f"{manifests.source}: {_ref(workload)}"
        assert _ports(container) == {
            "grpc": expected.grpc,
            "metrics": expected.metrics,
            "health": expected.health,
        }, where
        env = _literal_env(container)
        assert env.get("GRPC_PORT") == str(expected.grpc), f"{where}: GRPC_PORT"
        assert env.get("METRICS_PORT") == str(expected.metrics), f"{where}: METRICS_PORT"
        assert env.get("HEALTH_PORT") == str(expected.health), f"{where}: HEALTH_PORT"
        assert env.get("GRPC_HOST") == "0.0.0.0", f"{where}: GRPC_HOST must accept the probes and callers"
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            # The kubelet has no client certificate: its probes must use the plaintext health port (a gRPC
            # probe takes a number, not a port name).
            assert container[probe]["grpc"] == {"port": expected.health}, f"{where}: {probe}"
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        assert annotations == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(expected.metrics),
            "prometheus.io/path": "/metrics",
        }, where
        for service in manifests.of_kind("Service"):
            if _selects(service["spec"].get("selector") or {}, _pod_labels(workload)):
                _service_port(manifests, service, expected.grpc, workload)


# -- configuration -------------------------------------------------------------------------------------


def test_every_pod_configuration_starts_in_production(manifests: Manifests) -> None:
    """The service's own configuration code accepts each pod's environment: nothing required is missing."""
    for workload, name in manifests.services():
        container = _main_container(workload)
        factory = FACTORIES[container["args"][0]]
        for ordinal in _ordinals(workload):
            env = pod_environment(manifests, workload, container, ordinal)
            where = f"{manifests.source}: {_ref(workload)} pod {ordinal}"
            assert env["DATA_DIR"] in {m["mountPath"] for m in container["volumeMounts"]}, (
                f"{where}: DATA_DIR must be a mounted (writable) volume"
            )
            with tempfile.TemporaryDirectory() as scratch:
                # The pod's volumes as the kubelet and the CSI driver would fill them, under a scratch
                # folder: the variables naming files in them (TLS_*_FILE, GATEWAY_JWKS_FILE, DATA_DIR)
                # then name real files with the content the pod would see.
                local = _mount_volumes(manifests, workload, container, ordinal, Path(scratch), env)
                try:
                    config = ServiceConfig.from_env(name, local)
                    factory(config, local)
                except ConfigError as error:
                    pytest.fail(f"{where}: the service refuses this configuration: {error}")
            assert config.is_production, f"{where}: SKILLCLASSICS_ENV must be production"


def test_rules_shards_use_their_clock_shard(manifests: Manifests) -> None:
    clock = manifests.service("clock")
    assert clock["kind"] == "StatefulSet"
    assert _env_entry(_main_container(clock), "CLOCK_SHARD") == {
        "name": "CLOCK_SHARD",
        "valueFrom": {"fieldRef": {"fieldPath": POD_INDEX}},
    }
    rules = manifests.rules_statefulsets()
    assert {w["metadata"]["name"] for w in rules} >= {f"rules-{family}" for family in FAMILIES}, (
        "matchmaking offers a family that has no rules StatefulSet"
    )
    for statefulset in rules:
        where = f"{manifests.source}: {_ref(statefulset)}"
        family = statefulset["metadata"]["name"].removeprefix("rules-")
        container = _main_container(statefulset)
        assert _env_entry(container, "RULES_SHARD") == {
            "name": "RULES_SHARD",
            "valueFrom": {"fieldRef": {"fieldPath": POD_INDEX}},
        }, f"{where}: the shard is the pod's ordinal"
        assert _replicas(clock) >= _replicas(statefulset), (
            f"{where}: {_replicas(statefulset)} shards but only {_replicas(clock)} clock shards"
        )
        for ordinal in _ordinals(statefulset):
            env = pod_environment(manifests, statefulset, container, ordinal)
            assert env["RULES_SHARD"] == str(ordinal)
            assert resolve(manifests, env["CLOCK_ADDRESS"]) == Target("clock", ordinal), (
                f"{where}: shard {ordinal} must use clock shard {ordinal}"
            )
            assert resolve(manifests, env["MATCHMAKING_ADDRESS"]) == Target("matchmaking", None)
            if "FAIRNESS_ADDRESS" in env or FAMILIES[family].uses_chance:
                assert "FAIRNESS_ADDRESS" in env, f"{where}: {family} draws from fairness"
                assert resolve(manifests, env["FAIRNESS_ADDRESS"]) == Target("fairness", None)


def _rules_directory(m: Manifests, workload: Doc) -> dict[str, list[str]]:
    """The rules shards ``workload``'s pod routes to at start, as the services' own ShardDirectory reads
    them: from its environment and the ``RULES_SHARDS_FILE`` in its mounted volumes."""
    container = _main_container(workload)
    ordinal = _ordinals(workload)[0]
    env = pod_environment(m, workload, container, ordinal)
    with tempfile.TemporaryDirectory() as scratch:
        local = _mount_volumes(m, workload, container, ordinal, Path(scratch), env)
        return dict(ShardDirectory(local))


def _shards_config_map_lists(m: Manifests) -> dict[str, list[str]]:
    """Every family's list in the ConfigMap rules-shards, parsed as the services parse the file."""
    config_map = m.get("ConfigMap", RULES_SHARDS_CONFIG_MAP)
    data = config_map.get("data") or {}
    assert set(data) == {RULES_SHARDS_KEY}, (
        f"{m.source}: {_ref(config_map)} holds one key, {RULES_SHARDS_KEY}"
    )
    try:
        return parse_shards_file(str(data[RULES_SHARDS_KEY]))
    except ValueError as error:
        pytest.fail(f"{m.source}: {_ref(config_map)} does not parse, the services would refuse it: {error}")


def test_the_rules_shards_config_map_lists_every_rules_shard_in_order(manifests: Manifests) -> None:
    """The ConfigMap, read directly: one line per family, one address per rules pod in ordinal order,
    exactly the StatefulSets' replicas (an overlay that scales a rules StatefulSet patches it too)."""
    lists = _shards_config_map_lists(manifests)
    rules = {w["metadata"]["name"]: w for w in manifests.rules_statefulsets()}
    assert set(lists) == {name.removeprefix("rules-") for name in rules}, (
        f"{manifests.source}: ConfigMap {RULES_SHARDS_CONFIG_MAP} must list exactly the rules StatefulSets' "
        f"families"
    )
    for name, statefulset in rules.items():
        family = name.removeprefix("rules-")
        assert lists[family] == _shard_addresses(statefulset), (
            f"{manifests.source}: ConfigMap {RULES_SHARDS_CONFIG_MAP}: RULES_{family.upper()}_ADDRESSES must "
            f"list the {_replicas(statefulset)} shards of {_ref(statefulset)} in ordinal order"
        )
        targets = [resolve(manifests, address) for address in lists[family]]
        assert targets == [Target(name, i) for i in range(_replicas(statefulset))], manifests.source


@pytest.mark.parametrize("caller", ["matchmaking", "gateway"])
def test_callers_list_every_rules_shard_in_order(manifests: Manifests, caller: str) -> None:
    workload = manifests.service(caller)
    container = _main_container(workload)
    env = pod_environment(manifests, workload, container, None)
    where = f"{manifests.source}: {_ref(workload)}"
    # One source: the lists are the ConfigMap's, mounted; no RULES_<FAMILY>_ADDRESSES variables beside it
    # (they would be a second copy to keep in step; base/matchmaking.yaml says why).
    variables = sorted(name for name in env if _ADDRESS_LIST.fullmatch(name))
    assert not variables, f"{where}: {variables}: the lists belong in ConfigMap {RULES_SHARDS_CONFIG_MAP}"
    assert SHARDS_FILE_VARIABLE in env, (
        f"{where}: {SHARDS_FILE_VARIABLE} must name the mounted ConfigMap's file"
    )
    path = env[SHARDS_FILE_VARIABLE]
    volume = _volume_at(workload, container, path)
    assert volume is not None, f"{where}: {SHARDS_FILE_VARIABLE} must be in a mounted volume"
    assert volume.get("configMap", {}).get("name") == RULES_SHARDS_CONFIG_MAP, (
        f"{where}: {SHARDS_FILE_VARIABLE} from ConfigMap {RULES_SHARDS_CONFIG_MAP} (a plain one: a generated "
        f"name with a content hash would roll the Deployment on every edit)"
    )
    assert not volume["configMap"].get("optional", False), f"{where}: the pod must not start without it"
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert not {"subPath", "subPathExpr"} & set(mount), (
        f"{where}: mount the ConfigMap as a directory: a subPath mount never receives its updates"
    )
    assert mount.get("readOnly") is True, where
    relative = path[len(mount["mountPath"].rstrip("/")) + 1 :]
    items = volume["configMap"].get("items") or [{"key": RULES_SHARDS_KEY, "path": RULES_SHARDS_KEY}]
    assert {"key": RULES_SHARDS_KEY, "path": relative} in items, (
        f"{where}: {SHARDS_FILE_VARIABLE} must be the projection of key {RULES_SHARDS_KEY}"
    )
    # What the service reads, with its own code, equals the StatefulSets' shards.
    directory = _rules_directory(manifests, workload)
    rules = {w["metadata"]["name"]: w for w in manifests.rules_statefulsets()}
    assert set(directory) == {name.removeprefix("rules-") for name in rules}, where
    for name, statefulset in rules.items():
        family = name.removeprefix("rules-")
        assert directory[family] == _shard_addresses(statefulset), (
            f"{where}: the {family} shards it reads must be the {_replicas(statefulset)} shards of "
            f"{_ref(statefulset)}, in ordinal order"
        )
    assert resolve(manifests, env["FAIRNESS_ADDRESS"]) == Target("fairness", None), where
    if caller == "gateway":
        assert resolve(manifests, env["MATCHMAKING_ADDRESS"]) == Target("matchmaking", None), where


def test_matchmaking_runs_as_replicas_rolled_one_at_a_time(manifests: Manifests) -> None:
    """Any replica serves the lobby, one pairs the queue under a lease (docs/matchmaking.md, "Replicas"):
    two at least, never both down in a rollout or a drain."""
    matchmaking = manifests.service("matchmaking")
    assert matchmaking["kind"] == "Deployment"
    assert _replicas(matchmaking) >= 2
    assert matchmaking["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    (budget,) = [
        b for b in manifests.of_kind("PodDisruptionBudget") if b["metadata"]["name"] == "matchmaking"
    ]
    assert budget["spec"]["maxUnavailable"] == 1
    # Its callers spread their calls over every replica (a ClusterIP would pin each caller's connection,
    # and so all its calls, to one), and find replicas added later.
    callers = [manifests.service("gateway"), *manifests.rules_statefulsets()]
    for caller in callers:
        address = _literal_env(_main_container(caller))["MATCHMAKING_ADDRESS"]
        assert address.startswith("dns:///"), f"{manifests.source}: {_ref(caller)} calls {address}"
        assert resolve(manifests, address) == Target("matchmaking", None)
    assert int(_literal_env(_main_container(matchmaking))["GRPC_MAX_CONNECTION_AGE_MS"]) > 0


# -- secrets -------------------------------------------------------------------------------------------


def test_no_plain_text_secrets(manifests: Manifests) -> None:
    for secret in manifests.of_kind("Secret"):
        # Only kustomize's secretGenerator of the development pieces makes Secrets (checked above).
        where = f"{manifests.source}: {_ref(secret)}"
        assert manifests.rendered, f"{where}: real Secrets come from the secret manager, never from here"
        assert _dev_only(secret), f"{where}: only development Secrets may be generated here"
    for workload in manifests.of_kind(*WORKLOAD_KINDS):
        for container in _containers(workload):
            for entry in _env_entries(container):
                where = f"{manifests.source}: {_ref(workload)} env {entry['name']}"
                if entry["name"].endswith("_FILE") and _SECRET_NAME.search(entry["name"]):
                    # A path to a key (TLS_KEY_FILE): the key itself must come from a read-only volume
                    # that brings it (the CSI driver, a Secret), never from scratch space.
                    volume = _volume_at(workload, container, str(entry.get("value", "")))
                    assert volume is not None, f"{where}: must name a file in a mounted volume"
                    assert "csi" in volume or "secret" in volume, f"{where}: must be in a certificate volume"
                elif "value" in entry:
                    value = str(entry["value"])
                    assert not _URL_WITH_PASSWORD.search(value), f"{where}: a password in plain text"
                    if entry["name"] == "DATABASE_URL":
                        assert "@" not in value, f"{where}: database credentials must come from a Secret"
                    elif entry["name"] not in NOT_SECRETS:
                        assert not _SECRET_NAME.search(entry["name"]), f"{where}: must be a secretKeyRef"
                elif _SECRET_NAME.search(entry["name"]) and entry["name"] not in NOT_SECRETS:
                    assert "secretKeyRef" in entry["valueFrom"], f"{where}: must be a secretKeyRef"
            assert "envFrom" not in container, f"{_ref(workload)}: name each secret variable explicitly"


# -- hardening -----------------------------------------------------------------------------------------


def _persistent_volumes(workload: Doc) -> Iterator[str]:
    """Volumes other than scratch emptyDirs, certificates from the CSI driver and ConfigMaps."""
    for volume in _pod_spec(workload).get("volumes", []):
        certificate = volume.get("csi", {}).get("driver") == CSI_DRIVER
        if "emptyDir" not in volume and "configMap" not in volume and not certificate:
            yield volume["name"]


def test_pods_are_locked_down(manifests: Manifests) -> None:
    accounts = {doc["metadata"]["name"]: doc for doc in manifests.of_kind("ServiceAccount")}
    for workload in manifests.workloads():
        where = f"{manifests.source}: {_ref(workload)}"
        pod = _pod_spec(workload)
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True, where
        assert context["runAsUser"] == 10001, where
        assert context["runAsGroup"] == 10001, where
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert pod["automountServiceAccountToken"] is False, f"{where}: no service talks to the API"
        account = accounts.get(pod["serviceAccountName"])
        assert account is not None, f"{where}: ServiceAccount {pod['serviceAccountName']} is missing"
        assert account["automountServiceAccountToken"] is False, where
        assert not list(_persistent_volumes(workload)), (
            f"{where}: only emptyDir scratch volumes, certificates and ConfigMaps"
        )
        volumes = {volume["name"]: volume for volume in pod.get("volumes", [])}
        for container in _containers(workload):
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["runAsNonRoot"] is True, where
            assert security["allowPrivilegeEscalation"] is False, where
            assert security.get("privileged", False) is False, where
            assert security["capabilities"]["drop"] == ["ALL"], where
            assert "add" not in security["capabilities"], where
            resources = container["resources"]
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources[kind]), f"{where}: {kind} for cpu and memory"
            mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
            assert "/tmp" in mounts, f"{where}: a writable /tmp"
            for mount in container["volumeMounts"]:
                volume = volumes[mount["name"]]
                if "emptyDir" not in volume:
                    assert mount.get("readOnly") is True, f"{where}: mount {mount['name']} read-only"
                if "csi" in volume:
                    assert volume["csi"].get("readOnly") is True, f"{where}: the CSI driver needs readOnly"


def test_services_shut_down_within_their_grace(manifests: Manifests) -> None:
    for workload, _ in manifests.services():
        where = f"{manifests.source}: {_ref(workload)}"
        container = _main_container(workload)
        grace = float(_literal_env(container)["SHUTDOWN_GRACE_SECONDS"])
        pause = 0.0
        pre_stop = container.get("lifecycle", {}).get("preStop")
        if pre_stop is not None:
            command = pre_stop["exec"]["command"]
            assert command[0] == "sleep", f"{where}: preStop is a plain sleep"
            assert len(command) == 2, f"{where}: preStop is a plain sleep"
            pause = float(command[1])
        period = _pod_spec(workload)["terminationGracePeriodSeconds"]
        assert period >= pause + grace + 5, (
            f"{where}: terminationGracePeriodSeconds {period} leaves no margin over preStop {pause} s "
            f"+ SHUTDOWN_GRACE_SECONDS {grace} s"
        )


# -- Services, budgets, shards -------------------------------------------------------------------------


def test_every_workload_has_its_service_and_budget(manifests: Manifests) -> None:
    budgets = manifests.of_kind("PodDisruptionBudget")
    services = manifests.of_kind("Service")
    for workload, _ in manifests.services():
        where = f"{manifests.source}: {_ref(workload)}"
        labels = _pod_labels(workload)
        assert _selects(workload["spec"]["selector"]["matchLabels"], labels), where
        (budget,) = [b for b in budgets if _selects(b["spec"]["selector"]["matchLabels"], labels)]
        selecting = [s for s in services if _selects(s["spec"].get("selector") or {}, labels)]
        if workload["kind"] == "StatefulSet":
            # Every pod is a shard: stop at most one at a time, and give each pod its own DNS name.
            assert budget["spec"] == {"maxUnavailable": 1, "selector": budget["spec"]["selector"]}, where
            assert workload["spec"]["podManagementPolicy"] == "Parallel", where
            governing = manifests.get("Service", workload["spec"]["serviceName"])
            assert governing in selecting, f"{where}: its serviceName must select its pods"
            assert governing["spec"]["clusterIP"] == "None", where
            assert governing["spec"]["publishNotReadyAddresses"] is True, where
        else:
            assert any(s["spec"].get("clusterIP") != "None" for s in selecting), f"{where}: no Service"
            if "minAvailable" in budget["spec"]:
                # A budget nobody can satisfy blocks every node drain.
                assert budget["spec"]["minAvailable"] < _replicas(workload), where
    for service in services:
        if not _dev_only(service):
            _selected_workload(manifests, service)


def test_clock_has_a_shard_for_every_rules_shard(manifests: Manifests) -> None:
    clock = manifests.service("clock")
    for statefulset in manifests.rules_statefulsets():
        assert _replicas(clock) >= _replicas(statefulset), (
            f"{manifests.source}: clock has {_replicas(clock)} replicas, "
            f"{_ref(statefulset)} {_replicas(statefulset)}: rules shard N needs clock shard N"
        )


# -- certificates and mutual TLS -----------------------------------------------------------------------


def _check_certificate(m: Manifests, workload: Doc, service: str | None) -> None:
    """``workload``'s pods each get a certificate from cert-manager's CSI driver whose SPIFFE ID names the
    pod's ``SERVICE_IDENTITY``, and its ``TLS_*`` variables are that volume's files. ``service``: the
    service it runs (``None``: a Job, whose identity is its name)."""
    from libs.runtime.identity import DEFAULT_TRUST_DOMAIN, Identity, identity_from_spiffe_id

    issuers = {doc["metadata"]["name"]: doc for doc in m.of_kind("Issuer")}
    where = f"{m.source}: {_ref(workload)}"
    container = _main_container(workload)
    env = _literal_env(container)
    assert env.get("TLS_MODE") == "mtls", f"{where}: TLS_MODE"
    trust_domain = env.get("TLS_TRUST_DOMAIN", "")
    assert trust_domain == DEFAULT_TRUST_DOMAIN, f"{where}: TLS_TRUST_DOMAIN"
    (volume,) = _certificate_volumes(workload)
    assert volume["csi"].get("readOnly") is True, f"{where}: the csi-driver mounts read-only volumes only"
    attributes = _csi_attributes(volume)
    (mount,) = [mount for mount in container["volumeMounts"] if mount["name"] == volume["name"]]
    root = mount["mountPath"].rstrip("/")
    for variable, attribute in TLS_FILES.items():
        file_name = attributes.get(attribute, CSI_FILE_DEFAULTS[attribute])
        assert env.get(variable) == f"{root}/{file_name}", f"{where}: {variable} must be its {attribute}"
    issuer = issuers.get(attributes.get("issuer-name", ""))
    assert issuer is not None, f"{where}: no Issuer {attributes.get('issuer-name')!r} in the manifests"
    assert attributes.get("issuer-kind", "Issuer") == "Issuer", where
    assert attributes.get("issuer-group", "cert-manager.io") == "cert-manager.io", where
    assert attributes.get("fs-group") == str(_pod_spec(workload)["securityContext"]["runAsGroup"]), (
        f"{where}: the driver writes root-owned 0440 files; fs-group must be the pod's group"
    )
    name = workload["metadata"]["name"]
    for ordinal in _ordinals(workload):
        pod = f"{where} pod {ordinal}"
        identity = Identity.parse(pod_environment(m, workload, container, ordinal)["SERVICE_IDENTITY"])
        expected = _pod_name(workload, ordinal) if workload["kind"] == "StatefulSet" else name
        assert identity.name == expected, f"{pod}: SERVICE_IDENTITY {identity.name}, not {expected}"
        assert identity.service == (service or name), pod
        if name.startswith("rules-"):
            assert identity.shard == ordinal, f"{pod}: a rules shard's identity names its shard"
        request = _certificate_request(workload, volume, ordinal)
        assert request.uris == (identity.spiffe_id(trust_domain),), f"{pod}: URI SANs {request.uris}"
        assert identity_from_spiffe_id(request.uris[0], trust_domain) == identity, pod
        assert {identity.name, identity.service} <= set(request.dns_names), (
            f"{pod}: DNS names {request.dns_names} must hold the identity and the service name"
        )
        assert "client auth" in request.usages, f"{pod}: every workload is a client"
        # Every backend serves mutual TLS; the gateway's own port is plaintext (the players' door), and
        # a Job serves nothing.
        serves = service is not None and service != "gateway"
        assert ("server auth" in request.usages) == serves, f"{pod}: server auth only for servers"
        assert request.duration <= MAX_CERTIFICATE_LIFETIME, pod
        assert request.renew_before is not None, f"{pod}: set renew-before (docs/deployment.md)"
        assert datetime.timedelta(0) < request.renew_before < request.duration, pod


def test_every_service_has_its_own_certificate(manifests: Manifests) -> None:
    for workload, name in manifests.services():
        _check_certificate(manifests, workload, name)


def test_jobs_have_certificates_for_identities_that_may_call_nothing(manifests: Manifests) -> None:
    """The migrate Job calls no service, but the runtime's configuration wants certificate files in
    production: it has a certificate for an identity of its own that the authorisation table grants
    nothing, and the configuration the migration reads accepts its environment."""
    from libs.persistence.migrate import database_urls
    from libs.runtime import authz

    jobs = manifests.workloads(("Job",))
    assert jobs, f"{manifests.source}: the migrate Job is gone: drop this test"
    for job in jobs:
        _check_certificate(manifests, job, None)
        identity = job["metadata"]["name"]
        for method, rule in authz.POLICY.items():
            assert identity not in rule, f"{identity} may call {method}: a Job's identity may call nothing"
        container = _main_container(job)
        assert container["args"][0] == "libs.persistence.migrate", _ref(job)
        env = pod_environment(manifests, job, container, None)
        with tempfile.TemporaryDirectory() as scratch:
            local = _mount_volumes(manifests, job, container, None, Path(scratch), env)
            try:
                urls = database_urls(container["args"][1:], local)
            except ConfigError as error:
                pytest.fail(
                    f"{manifests.source}: {_ref(job)}: the migration refuses its environment: {error}"
                )
        assert list(urls) == [local["DATABASE_URL"]], _ref(job)


def test_the_ca_issuer_and_its_development_bootstrap() -> None:
    """The base's Issuer signs with the Secret skillclassics-ca; components/pki-dev makes that Secret
    from a self-signed bootstrap; components/operator-cert issues the operator's client certificate."""
    (issuer,) = _parse((BASE / "pki.yaml").read_text(), "base/pki.yaml")
    assert (issuer["kind"], issuer["metadata"]["name"]) == ("Issuer", "skillclassics-ca")
    assert issuer["spec"] == {"ca": {"secretName": "skillclassics-ca"}}

    pki_dev = K8S / "components" / "pki-dev"
    docs = _parse((pki_dev / "ca.yaml").read_text(), "components/pki-dev/ca.yaml")
    assert all(_dev_only(doc) for doc in docs), "everything of pki-dev is dev-only"
    (self_signed,) = [d for d in docs if d["kind"] == "Issuer"]
    assert self_signed["spec"] == {"selfSigned": {}}
    (ca,) = [d for d in docs if d["kind"] == "Certificate"]
    assert ca["spec"]["isCA"] is True
    assert ca["spec"]["secretName"] == issuer["spec"]["ca"]["secretName"]
    assert ca["spec"]["secretTemplate"]["labels"][DEV_ONLY] == "true"
    assert ca["spec"]["issuerRef"]["name"] == self_signed["metadata"]["name"]
    # A renewal keeps the CA's key, so certificates signed before and after verify against either.
    assert ca["spec"]["privateKey"]["rotationPolicy"] == "Never"

    (operator,) = _parse(
        (K8S / "components" / "operator-cert" / "operator-certificate.yaml").read_text(), "operator-cert"
    )
    spec = operator["spec"]
    assert spec["secretName"] == "skillclassics-operator-tls"
    assert spec["uris"] == ["spiffe://skillclassics.local/operator"]
    assert "client auth" in spec["usages"]
    assert "server auth" not in spec["usages"], "the operator serves nothing"
    assert spec["issuerRef"] == {"name": "skillclassics-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert _go_duration(spec["renewBefore"]) < _go_duration(spec["duration"]) <= datetime.timedelta(days=7)

    if _kustomize_command() is not None:
        dev = Manifests("build:overlays/dev", _build("overlays/dev"), rendered=True, complete=True)
        names = {doc["metadata"]["name"] for doc in dev.of_kind("Certificate")}
        assert names == {"skillclassics-ca", "skillclassics-operator"}, names


# -- the gateway's tokens ------------------------------------------------------------------------------


def test_gateway_checks_tokens_against_the_issuers_public_keys(manifests: Manifests) -> None:
    for workload in manifests.of_kind(*WORKLOAD_KINDS):
        for container in _containers(workload):
            for entry in _env_entries(container):
                assert entry["name"] not in ("GATEWAY_TOKEN_KEY", "GATEWAY_OLD_TOKEN_KEYS"), (
                    f"{manifests.source}: {_ref(workload)}: the HMAC token key is gone (JWTs, public keys)"
                )
                ref = entry.get("valueFrom", {}).get("secretKeyRef", {})
                assert not str(ref.get("name", "")).startswith("skillclassics-gateway"), _ref(workload)
    for secret in manifests.of_kind("Secret"):
        assert not secret["metadata"]["name"].startswith("skillclassics-gateway"), _ref(secret)

    gateway = manifests.service("gateway")
    container = _main_container(gateway)
    where = f"{manifests.source}: {_ref(gateway)}"
    env = pod_environment(manifests, gateway, container, None)
    assert "GATEWAY_JWKS_URL" not in env, f"{where}: one source of keys: the mounted JWKS"
    volume = _volume_at(gateway, container, env["GATEWAY_JWKS_FILE"])
    assert volume is not None, f"{where}: GATEWAY_JWKS_FILE must be in a mounted volume"
    assert "configMap" in volume, f"{where}: GATEWAY_JWKS_FILE from a ConfigMap (public keys)"
    assert volume["configMap"]["name"].startswith("skillclassics-token-issuers"), where
    with tempfile.TemporaryDirectory() as scratch:
        local = _mount_volumes(manifests, gateway, container, None, Path(scratch), env)
        jwks = json.loads(Path(local["GATEWAY_JWKS_FILE"]).read_text())
    assert jwks["keys"], f"{where}: no key in the JWKS"
    for key in jwks["keys"]:
        assert key.get("kid"), f"{where}: every key needs a kid"
        assert "d" not in key, f"{where}: a private key in the JWKS"
    assert [i.strip() for i in env["GATEWAY_TOKEN_ISSUERS"].split(",") if i.strip()], where
    assert env["GATEWAY_TOKEN_AUDIENCE"] == "skillclassics", where
    assert 0 < int(env["GATEWAY_TOKEN_MAX_LIFETIME_SECONDS"]) <= 86400, where


def test_the_dev_token_issuer_is_the_documented_fake_key() -> None:
    """docs/deployment.md mints development tokens for the dev overlay with the gateway's own tool and the
    P-256 private key 1; the dev overlay's JWKS and issuer must be what the gateway then accepts."""
    from services.gateway.tokens import DEV_ISSUER, SigningKey, mint_token, token_verifier

    (kustomization,) = _parse((K8S / "overlays" / "dev" / "kustomization.yaml").read_text(), "dev")
    (generator,) = [
        g for g in kustomization["configMapGenerator"] if g["name"] == "skillclassics-token-issuers"
    ]
    assert generator["files"] == [f"jwks.json={DEV_JWKS.name}"]
    assert generator["literals"] == [f"issuers={DEV_ISSUER}"]
    assert generator["options"]["labels"][DEV_ONLY] == "true"
    key = SigningKey.of(ec.derive_private_key(1, ec.SECP256R1()), issuer=DEV_ISSUER)
    assert json.loads(DEV_JWKS.read_text()) == key.jwks(), "dev-jwks.json: the public JWKS of the key 1"
    env = {
        "SKILLCLASSICS_ENV": "production",
        "GATEWAY_JWKS_FILE": str(DEV_JWKS),
        "GATEWAY_TOKEN_ISSUERS": DEV_ISSUER,
        "GATEWAY_TOKEN_AUDIENCE": "skillclassics",
    }
    now = int(datetime.datetime.now(datetime.UTC).timestamp())
    claims = token_verifier(env).verify(mint_token(key, "alice", 3600, now), now)
    assert claims.player_id == "alice"


# -- the production overlay ----------------------------------------------------------------------------


def test_production_overlay_has_no_reflection_and_nothing_for_development() -> None:
    if _kustomize_command() is None:
        pytest.skip("neither kubectl nor kustomize is installed: the production overlay is not checked")
    m = Manifests("build:overlays/prod", _build("overlays/prod"), rendered=True, complete=False)
    assert not [_ref(doc) for doc in m.docs if _dev_only(doc)], "no development piece in production"
    assert not m.of_kind("Secret"), "production Secrets come from the secret manager"
    assert not m.of_kind("Certificate"), "the CA comes from the operator, not a self-signed bootstrap"
    assert all("selfSigned" not in issuer["spec"] for issuer in m.of_kind("Issuer"))
    for workload, _ in m.services():
        env = _literal_env(_main_container(workload))
        assert env.get("GRPC_REFLECTION") == "false", f"{_ref(workload)}: reflection off in production"
        assert env.get("SKILLCLASSICS_ENV") == "production", _ref(workload)
        assert "@sha256:" in _main_container(workload)["image"], f"{_ref(workload)}: image by digest"


# -- network policies ----------------------------------------------------------------------------------


def test_the_namespace_denies_everything_by_default(manifests: Manifests) -> None:
    deny = [
        policy
        for policy in manifests.of_kind("NetworkPolicy")
        if policy["spec"]["podSelector"] == {}
        and _policy_types(policy) == {"Ingress", "Egress"}
        and not policy["spec"].get("ingress")
        and not policy["spec"].get("egress")
    ]
    assert len(deny) == 1, f"{manifests.source}: one default-deny policy for the whole namespace"


def test_network_policies_allow_exactly_the_call_graph(manifests: Manifests) -> None:
    """The whole matrix: every source (our pods, and the outsiders) to every port of every destination,
    evaluated from the policies, equals what the platform needs, nothing more and nothing less."""
    endpoints = _endpoints(manifests)
    allowed = _allowed_connections(manifests.of_kind("NetworkPolicy"), endpoints)
    expected = _expected_connections(manifests, endpoints)
    extra = sorted(allowed - expected)
    missing = sorted(expected - allowed)
    assert not extra, f"{manifests.source}: the policies allow connections nothing needs: {extra}"
    assert not missing, f"{manifests.source}: the policies refuse connections the platform needs: {missing}"
    # The gist, spelled out for the reader (all implied by the equality above):
    policies = manifests.of_kind("NetworkPolicy")
    pods = {endpoint.name: endpoint for endpoint in endpoints}
    assert may_connect(policies, pods["gateway"], pods["rules-chess"], 50060)
    assert may_connect(policies, pods["rules-gin"], pods["clock"], 50053)
    assert not may_connect(policies, pods["gateway"], pods["clock"], 50053)
    assert not may_connect(policies, pods["impostor"], pods["fairness"], 50052)
    assert not may_connect(policies, pods["debug-pod"], pods["matchmaking"], 50051)
    assert may_connect(policies, pods["internet"], pods["gateway"], 50050)
    assert not may_connect(policies, pods["gateway"], pods["internet"], 443)


def test_call_graph_is_what_the_pods_address(manifests: Manifests) -> None:
    """:data:`CALLS` is what each service's *_ADDRESS(ES) variables point at."""
    for workload, name in manifests.services():
        env = pod_environment(manifests, workload, _main_container(workload), _ordinals(workload)[0])
        addresses = [
            address.strip()
            for variable, value in env.items()
            if re.fullmatch(r"[A-Z]+_ADDRESS|RULES_[A-Z]+_ADDRESSES", variable)
            for address in value.split(",")
            if address.strip()
        ]
        if SHARDS_FILE_VARIABLE in env:  # the rules shards' addresses, from the mounted ConfigMap
            addresses += [a for shards in _rules_directory(manifests, workload).values() for a in shards]
        called = {resolve(manifests, address).workload for address in addresses}
        assert called == CALLS.get(name, set()), (
            f"{manifests.source}: {_ref(workload)} calls {sorted(called)}"
        )


def test_call_graph_is_what_the_authorisation_table_allows() -> None:
    """The network lets through exactly the callers that libs/runtime/authz.py accepts (the operator
    comes through `kubectl port-forward`, which no NetworkPolicy sees; anyone may call the gateway)."""
    from libs.runtime import authz
    from libs.runtime.identity import OPERATOR

    rules = {f"rules-{family}" for family in FAMILIES}
    services = {
        "skillclassics.fairness.v1.FairnessService": {"fairness"},
        "skillclassics.clock.v1.ClockService": {"clock"},
        "skillclassics.rules.v1.RulesService": rules,
        "skillclassics.matchmaking.v1.MatchmakingService": {"matchmaking"},
    }
    callers: dict[str, set[str]] = {}
    for method, rule in authz.POLICY.items():
        for callee in services.get(method.lstrip("/").split("/")[0], set()):
            for who in rule:
                if who not in (authz.ANYONE, OPERATOR):
                    callers.setdefault(callee, set()).update(rules if who == authz.RULES else {who})
    from_calls: dict[str, set[str]] = {}
    for caller, callees in CALLS.items():
        for callee in callees:
            from_calls.setdefault(callee, set()).add(caller)
    assert from_calls == callers


def test_the_policy_evaluator_follows_kubernetes() -> None:
    """:func:`may_connect` on small cases whose answer Kubernetes documents."""

    def policy(spec: Doc) -> Doc:
        return {"kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": NAMESPACE}, "spec": spec}

    a = Endpoint("a", NAMESPACE, {"app": "a"}, {"grpc": 1000})
    b = Endpoint("b", NAMESPACE, {"app": "b"}, {"grpc": 2000, "health": 2100})
    elsewhere = Endpoint("c", "other", {"app": "a"}, {})
    assert may_connect([], a, b, 2000), "no policy: open"
    isolate_b = policy({"podSelector": {"matchLabels": {"app": "b"}}, "policyTypes": ["Ingress"]})
    assert not may_connect([isolate_b], a, b, 2000), "selected with no rule: closed"
    assert may_connect([isolate_b], b, a, 1000), "only b's ingress is isolated"
    from_a = policy(
        {
            "podSelector": {"matchLabels": {"app": "b"}},
            "ingress": [
                {"from": [{"podSelector": {"matchLabels": {"app": "a"}}}], "ports": [{"port": "grpc"}]}
            ],
        }
    )
    assert may_connect([isolate_b, from_a], a, b, 2000), "rules add up; a named port is the destination's"
    assert not may_connect([isolate_b, from_a], a, b, 2100), "only the port named"
    assert not may_connect([from_a], elsewhere, b, 2000), "a podSelector alone: the policy's namespace"
    both = policy(
        {
            "podSelector": {},
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}},
                            "podSelector": {"matchLabels": {"app": "a"}},
                        }
                    ]
                }
            ],
        }
    )
    assert may_connect([both], elsewhere, b, 2000), "namespace AND pod selector in one peer"
    assert not may_connect([both], a, b, 2000)
    deny_egress = policy({"podSelector": {}, "policyTypes": ["Egress"]})
    assert not may_connect([deny_egress], a, b, 2000), "the source's egress counts too"
    assert may_connect([deny_egress], elsewhere, b, 2000), "other namespaces' egress is theirs"
