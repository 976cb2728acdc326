"""The Kubernetes manifests under ``deploy/k8s``, checked against the code they run.

Every YAML document is parsed with PyYAML. The checks run on the base's files as written and, when
``kubectl`` (or ``kustomize``) is installed, on what kustomize renders for the base, the dev overlay, and
the dev overlay with the optional gateway autoscaler; without either tool those three are skipped with a
message. What is checked:

- each container's ports, ``GRPC_PORT``/``METRICS_PORT``, probes, Services and Prometheus annotations
  agree with :data:`libs.runtime.ports.DEFAULT_PORTS` (metrics = gRPC - 40900);
- each container's ``args`` is a module ``python -m`` can run, and every service of the launcher's
  registry is deployed;
- each pod's environment, as Kubernetes would build it for every pod of the workload (downward API,
  ``$(VAR)`` expansion, Secrets), is accepted by the service's own configuration code in production;
- rules shard N talks to clock shard N, the clock has a shard for every rules shard, and matchmaking and
  the gateway list every rules shard, in order, by its per-pod DNS name;
- secrets only through ``secretKeyRef``, no Secret object outside the development pieces;
- every pod non-root with a read-only root filesystem, and the rest of the hardening;
- every kustomization lists every file of its folder.
"""

from __future__ import annotations

import base64
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

from libs.launcher.registry import SERVICES, available_services, module_exists
from libs.runtime.config import ConfigError, ServiceConfig
from libs.runtime.ports import DEFAULT_PORTS
from services.clock.service import ClockService
from services.fairness.service import FairnessService
from services.gateway.service import GatewayService
from services.matchmaking.families import FAMILIES
from services.matchmaking.service import MatchmakingService
from services.rules_chess.service import chess_rules_service
from services.rules_gin.service import gin_rules_service

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
    "services.rules_gin": gin_rules_service,
    "services.matchmaking": MatchmakingService,
    "services.gateway": GatewayService,
}
"""What each service module's ``__main__`` hands to ``run_service``: built here with a pod's environment."""

PLACEHOLDER_SECRETS: dict[tuple[str, str], str] = {
    ("skillclassics-database", "url"): "postgresql+asyncpg://skillclassics:placeholder@postgres:5432/db",
    ("skillclassics-fairness", "seed-key"): base64.b64encode(bytes(32)).decode(),
    ("skillclassics-gateway", "token-key"): base64.b64encode(bytes(32)).decode(),
}
"""Stand-ins for the Secrets the base references but does not create (docs/deployment.md, "Secrets"); a
rendered overlay that generates its Secrets is checked with their real (development) values instead."""

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


SOURCES = ["files:base", "build:base", "build:overlays/dev", "build:dev+gateway-hpa"]
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


def pod_environment(m: Manifests, workload: Doc, container: Doc, ordinal: int | None) -> dict[str, str]:
    """The environment of ``container`` in the pod with ``ordinal`` (``None``: a Deployment's pod)."""
    name = workload["metadata"]["name"]
    pod_name = f"{name}-{ordinal}" if ordinal is not None else f"{name}-7d9f8c6b5d-x2x7q"
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
    """Where ``host:port`` leads, from a pod in the namespace; fails unless it reaches a gRPC port."""
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
        listed_files = {entry for entry in listed if (folder / entry).is_file()}
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


@pytest.mark.parametrize("target", ["base", "overlays/dev", "dev+gateway-hpa"])
def test_kustomize_builds(target: str) -> None:
    if _kustomize_command() is None:
        pytest.skip("neither kubectl nor kustomize is installed: `kustomize build` is not checked")
    docs = _build(target)
    kinds = {doc["kind"] for doc in docs}
    assert {"Namespace", "Deployment", "StatefulSet", "Service", "PodDisruptionBudget"} <= kinds
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
        assert _ports(container) == {"grpc": expected.grpc, "metrics": expected.metrics}, where
        env = _literal_env(container)
        assert env.get("GRPC_PORT") == str(expected.grpc), f"{where}: GRPC_PORT"
        assert env.get("METRICS_PORT") == str(expected.metrics), f"{where}: METRICS_PORT"
        assert env.get("GRPC_HOST") == "0.0.0.0", f"{where}: GRPC_HOST must accept the probes and callers"
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"]["port"] == expected.grpc, f"{where}: {probe}"
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
            try:
                config = ServiceConfig.from_env(name, env)
                factory(config, env)
            except ConfigError as error:
                pytest.fail(f"{where}: the service refuses this configuration: {error}")
            assert config.is_production, f"{where}: SKILLCLASSICS_ENV must be production"
            assert env["DATA_DIR"] in {m["mountPath"] for m in container["volumeMounts"]}, (
                f"{where}: DATA_DIR must be a mounted (writable) volume"
            )


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


@pytest.mark.parametrize("caller", ["matchmaking", "gateway"])
def test_callers_list_every_rules_shard_in_order(manifests: Manifests, caller: str) -> None:
    workload = manifests.service(caller)
    env = pod_environment(manifests, workload, _main_container(workload), None)
    where = f"{manifests.source}: {_ref(workload)}"
    rules = {w["metadata"]["name"]: w for w in manifests.rules_statefulsets()}
    listed = {name for name in env if re.fullmatch(r"RULES_[A-Z]+_ADDRESSES", name)}
    assert listed == {f"RULES_{name.removeprefix('rules-').upper()}_ADDRESSES" for name in rules}, where
    for name, statefulset in rules.items():
        variable = f"RULES_{name.removeprefix('rules-').upper()}_ADDRESSES"
        addresses = [a.strip() for a in env[variable].split(",")]
        assert addresses == _shard_addresses(statefulset), (
            f"{where}: {variable} must list the {_replicas(statefulset)} shards of {_ref(statefulset)} "
            f"in ordinal order"
        )
        targets = [resolve(manifests, address) for address in addresses]
        assert targets == [Target(name, i) for i in range(_replicas(statefulset))], where
    assert resolve(manifests, env["FAIRNESS_ADDRESS"]) == Target("fairness", None), where
    if caller == "gateway":
        assert resolve(manifests, env["MATCHMAKING_ADDRESS"]) == Target("matchmaking", None), where


def test_matchmaking_runs_exactly_one_replica(manifests: Manifests) -> None:
    """Its quick-match queue and lobby streams are in-process (deploy/k8s/base/matchmaking.yaml)."""
    matchmaking = manifests.service("matchmaking")
    assert matchmaking["kind"] == "Deployment"
    assert _replicas(matchmaking) == 1
    assert matchmaking["spec"]["strategy"] == {"type": "Recreate"}
    for hpa in manifests.of_kind("HorizontalPodAutoscaler"):
        assert hpa["spec"]["scaleTargetRef"]["name"] != "matchmaking"


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
                if "value" in entry:
                    value = str(entry["value"])
                    assert not _URL_WITH_PASSWORD.search(value), f"{where}: a password in plain text"
                    if entry["name"] == "DATABASE_URL":
                        assert "@" not in value, f"{where}: database credentials must come from a Secret"
                    else:
                        assert not _SECRET_NAME.search(entry["name"]), f"{where}: must be a secretKeyRef"
                elif _SECRET_NAME.search(entry["name"]):
                    assert "secretKeyRef" in entry["valueFrom"], f"{where}: must be a secretKeyRef"
            assert "envFrom" not in container, f"{_ref(workload)}: name each secret variable explicitly"


# -- hardening -----------------------------------------------------------------------------------------


def _persistent_volumes(workload: Doc) -> Iterator[str]:
    for volume in _pod_spec(workload).get("volumes", []):
        if "emptyDir" not in volume:
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
        assert not list(_persistent_volumes(workload)), f"{where}: only emptyDir scratch volumes"
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
