"""The production overlay against issue #23's list, and every manifest against the Kubernetes schemas.

- **Schemas, strictly.** Every object of every rendered kustomization (the base, the dev overlay, the dev
  overlay with the gateway autoscaler, the production overlay: together they include every component) and
  of every resource file as written is validated against the Kubernetes OpenAPI schemas of
  :data:`KUBERNETES_VERSIONS`, the "strict" variant that refuses unknown fields, with the schemas bundled by
  the ``kubernetes-validate`` package (pinned in pyproject.toml's dev extras; no network). The CRD kinds,
  which those schemas do not have, are validated against hand-written schemas of the parts we use, unknown
  fields refused (the approach of tests/deploy/test_monitoring.py, whose ServiceMonitor and PrometheusRule
  schemas are reused): cert-manager's Issuer and Certificate and the Gateway API's Gateway and GRPCRoute.
  A kind with no schema fails. A missing validator FAILS (never skips): ``make setup`` installs it.
- **External PostgreSQL from a Secret.** In production every database user (services and the migrate
  Job) reads ``DATABASE_URL`` from the Secret ``skillclassics-database`` (key ``url``), which the overlay
  does not create; the gateway gets its credential-free stand-in; nothing of postgres-dev is there.
- **Replicas and resources.** The gateway's count is its autoscaler's (3 at least), matchmaking stays at
  one replica, the shards keep the base's shard counts, every container has requests and limits, and each
  rules shard's memory limit holds its planned live matches at the per-match figures of docs/benchmarks.md.
- **The Gateway API.** A Gateway with an HTTPS listener on 443 terminating TLS with a certificate, and a
  GRPCRoute from that listener to the gateway Service's grpc port, for the gateway's gRPC service only; the
  environment-specific values are marked REPLACE.
- **Migrations.** The migrate Job's own command, run with the Job's own environment against a scratch
  SQLite database, creates every table that any service's code uses, and exactly the schema of
  ``libs/persistence/schema.py``, at the Alembic head; and the Job reads the same database URL as every
  service.
"""

from __future__ import annotations

import ast
import atexit
import functools
import importlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from skillclassics.gateway.v1 import gateway_pb2
from sqlalchemy import create_engine

from libs.persistence.migrate import SERVICES_WITHOUT_DATABASE, alembic_config
from libs.persistence.schema import metadata
from tests.deploy.test_manifests import (
    K8S,
    NAMESPACE,
    ROOT,
    Doc,
    Manifests,
    _build,
    _dev_only,
    _env_entry,
    _kustomize_command,
    _literal_env,
    _main_container,
    _ref,
    _replicas,
)
from tests.deploy.test_monitoring import PROMETHEUS_RULE, SERVICE_MONITOR, Schema, validate

PRODUCTION = K8S / "overlays" / "prod"
GATEWAY_API_COMPONENT = K8S / "components" / "gateway-api"

KUBERNETES_VERSIONS = ("1.28", "1.30")
"""The oldest Kubernetes the manifests support (the pod-index label, docs/deployment.md) and the version
they are pinned to; kubernetes-validate uses the newest bundled schemas not newer than each."""

RENDERED = ("base", "overlays/dev", "dev+gateway-hpa", "overlays/prod")
"""Every kustomize build tests/deploy/test_manifests.py checks; between them they include every component."""

DATABASE_SECRET = {"name": "skillclassics-database", "key": "url"}
GATEWAY_DATABASE_URL = "none://the-gateway-has-no-database"

# -- the validator -------------------------------------------------------------------------------------


def _kubernetes_validate() -> ModuleType:
    """The validator, or a loud failure: it is pinned in the dev extras, which ``make setup`` installs."""
    try:
        module = importlib.import_module("kubernetes_validate")
    except ImportError:
        pytest.fail(
            "kubernetes-validate is not installed: it is pinned in pyproject.toml's dev extras; run "
            "`make setup` (or `.venv/bin/pip install -e '.[dev]'`). The manifests are NOT schema-checked."
        )
    # validate() reads its schema and the version's whole _definitions.json from the package for every
    # object (40 ms each); both are fixed files of the pinned package, so read each once.
    utils = importlib.import_module("kubernetes_validate.utils")
    if not hasattr(utils.schema_contents, "cache_info"):
        setattr(utils, "schema_contents", functools.cache(utils.schema_contents))  # noqa: B010
    return module


# -- hand-written schemas of the CRD kinds (the parts we use; unknown fields refused) ------------------

_STRING: Schema = {"type": "string"}
_STRING_MAP: Schema = {"type": "map", "values": _STRING}
_STRINGS: Schema = {"type": "array", "items": _STRING}
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_HOSTNAME = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_GROUP = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_KIND = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"
_GO_DURATION = r"^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$"


def _metadata_schema() -> Schema:
    return {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": _DNS_LABEL},
            "namespace": {"type": "string", "pattern": _DNS_LABEL},
            "labels": _STRING_MAP,
            "annotations": _STRING_MAP,
        },
    }


def _crd(api_version: str, kind: str, spec: Schema) -> Schema:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"type": "string", "enum": [api_version]},
            "kind": {"type": "string", "enum": [kind]},
            "metadata": _metadata_schema(),
            "spec": spec,
        },
    }


_ISSUER_REF: Schema = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": _STRING,
        "kind": {"type": "string", "enum": ["Issuer", "ClusterIssuer"]},
        "group": _STRING,
    },
}
_KEY_USAGES = [
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth",
    "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel",
    "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
]  # fmt: skip

CERT_MANAGER_ISSUER = _crd(
    "cert-manager.io/v1",
    "Issuer",
    {
        "type": "object",
        "properties": {
            "ca": {
                "type": "object",
                "required": ["secretName"],
                "properties": {"secretName": _STRING, "crlDistributionPoints": _STRINGS},
            },
            "selfSigned": {"type": "object", "properties": {"crlDistributionPoints": _STRINGS}},
        },
    },
)
"""cert-manager's Issuer (cert-manager.io/v1), the CA and self-signed kinds only: an overlay that replaces
the Issuer by a Vault or ACME one extends this schema."""

CERT_MANAGER_CERTIFICATE = _crd(
    "cert-manager.io/v1",
    "Certificate",
    {
        "type": "object",
        "required": ["secretName", "issuerRef"],
        "properties": {
            "secretName": _STRING,
            "issuerRef": _ISSUER_REF,
            "commonName": _STRING,
            "dnsNames": _STRINGS,
            "uris": _STRINGS,
            "ipAddresses": _STRINGS,
            "emailAddresses": _STRINGS,
            "isCA": {"type": "boolean"},
            "duration": {"type": "string", "pattern": _GO_DURATION},
            "renewBefore": {"type": "string", "pattern": _GO_DURATION},
            "usages": {"type": "array", "items": {"type": "string", "enum": _KEY_USAGES}},
            "privateKey": {
                "type": "object",
                "properties": {
                    "algorithm": {"type": "string", "enum": ["RSA", "ECDSA", "Ed25519"]},
                    "size": {"type": "integer"},
                    "encoding": {"type": "string", "enum": ["PKCS1", "PKCS8"]},
                    "rotationPolicy": {"type": "string", "enum": ["Never", "Always"]},
                },
            },
            "secretTemplate": {
                "type": "object",
                "properties": {"labels": _STRING_MAP, "annotations": _STRING_MAP},
            },
        },
    },
)
"""cert-manager's Certificate (cert-manager.io/v1), the fields we use."""

_PARENT_REF: Schema = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "group": {"type": "string", "pattern": _GROUP},
        "kind": {"type": "string", "pattern": _KIND},
        "namespace": {"type": "string", "pattern": _DNS_LABEL},
        "name": {"type": "string", "pattern": _DNS_SUBDOMAIN},
        "sectionName": {"type": "string", "pattern": _DNS_SUBDOMAIN},
        "port": {"type": "integer"},
    },
}
_OBJECT_REF: Schema = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "group": {"type": "string", "pattern": _GROUP},
        "kind": {"type": "string", "pattern": _KIND},
        "name": {"type": "string", "pattern": _DNS_SUBDOMAIN},
        "namespace": {"type": "string", "pattern": _DNS_LABEL},
    },
}
_HEADER_MATCH: Schema = {
    "type": "object",
    "required": ["name", "value"],
    "properties": {
        "type": {"type": "string", "enum": ["Exact", "RegularExpression"]},
        "name": _STRING,
        "value": _STRING,
    },
}

GATEWAY = _crd(
    "gateway.networking.k8s.io/v1",
    "Gateway",
    {
        "type": "object",
        "required": ["gatewayClassName", "listeners"],
        "properties": {
            # A GatewayClass is an object: its name is a DNS subdomain (so "REPLACE" in capitals never
            # names one; the placeholder is lower case, marked REPLACE in a comment).
            "gatewayClassName": {"type": "string", "pattern": _DNS_SUBDOMAIN},
            "listeners": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "port", "protocol"],
                    "properties": {
                        "name": {"type": "string", "pattern": _DNS_SUBDOMAIN},
                        "hostname": {"type": "string", "pattern": _HOSTNAME},
                        "port": {"type": "integer"},
                        "protocol": {
                            "type": "string",
                            "pattern": r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$",
                        },
                        "tls": {
                            "type": "object",
                            "properties": {
                                "mode": {"type": "string", "enum": ["Terminate", "Passthrough"]},
                                "certificateRefs": {"type": "array", "items": _OBJECT_REF},
                                "options": _STRING_MAP,
                            },
                        },
                        "allowedRoutes": {
                            "type": "object",
                            "properties": {
                                "namespaces": {
                                    "type": "object",
                                    "properties": {
                                        "from": {"type": "string", "enum": ["All", "Selector", "Same"]},
                                    },
                                },
                                "kinds": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["kind"],
                                        "properties": {
                                            "group": {"type": "string", "pattern": _GROUP},
                                            "kind": {"type": "string", "pattern": _KIND},
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
)
"""The Gateway API's Gateway (gateway.networking.k8s.io/v1, standard channel), the fields we use."""

GRPC_ROUTE = _crd(
    "gateway.networking.k8s.io/v1",
    "GRPCRoute",
    {
        "type": "object",
        "properties": {
            "parentRefs": {"type": "array", "items": _PARENT_REF},
            "hostnames": {"type": "array", "items": {"type": "string", "pattern": _HOSTNAME}},
            "rules": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "matches": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "method": {
                                        "type": "object",
                                        "properties": {
                                            "type": {
                                                "type": "string",
                                                "enum": ["Exact", "RegularExpression"],
                                            },
                                            "service": {
                                                "type": "string",
                                                "pattern": r"(?i)^\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$",
                                            },
                                            "method": {
                                                "type": "string",
                                                "pattern": r"^[A-Za-z_][A-Za-z_0-9]*$",
                                            },
                                        },
                                    },
                                    "headers": {"type": "array", "items": _HEADER_MATCH},
                                },
                            },
                        },
                        "backendRefs": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    **_OBJECT_REF["properties"],
                                    "port": {"type": "integer"},
                                    "weight": {"type": "integer"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
)
"""The Gateway API's GRPCRoute (gateway.networking.k8s.io/v1, standard channel since v1.1), likewise."""

CRD_SCHEMAS: dict[tuple[str, str], Schema] = {
    ("cert-manager.io/v1", "Issuer"): CERT_MANAGER_ISSUER,
    ("cert-manager.io/v1", "Certificate"): CERT_MANAGER_CERTIFICATE,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE,
    ("gateway.networking.k8s.io/v1", "Gateway"): GATEWAY,
    ("gateway.networking.k8s.io/v1", "GRPCRoute"): GRPC_ROUTE,
}
"""The kinds the Kubernetes schemas do not have, and ours for them."""


def _ports_in_range(doc: Doc, where: str) -> None:
    """The one bound our schema language cannot say: ports are 1-65535."""
    spec = doc["spec"]
    ports = [listener["port"] for listener in spec.get("listeners", [])]
    ports += [
        ref["port"] for rule in spec.get("rules", []) for ref in rule.get("backendRefs", []) if "port" in ref
    ]
    ports += [ref["port"] for ref in spec.get("parentRefs", []) if "port" in ref]
    for port in ports:
        assert 1 <= port <= 65535, f"{where}: port {port} out of range"


def check_schema(doc: Doc, version: str, where: str) -> None:
    """``doc`` against its kind's schema: Kubernetes' own (strict) for built-in kinds, ours for CRDs."""
    kubernetes_validate = _kubernetes_validate()
    ref = f"{where}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
    crd = CRD_SCHEMAS.get((doc.get("apiVersion", ""), doc.get("kind", "")))
    if crd is not None:
        validate(doc, crd, ref)
        if doc["kind"] in ("Gateway", "GRPCRoute"):
            _ports_in_range(doc, ref)
        return
    problem: str | None = None
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        problem = (
            f"{doc['apiVersion']} {doc['kind']} is in neither the Kubernetes {version} schemas nor "
            "CRD_SCHEMAS: add a schema for it"
        )
    except kubernetes_validate.ValidationError as error:
        path = ".".join(str(part) for part in error.path) or "(the object)"
        problem = f"invalid for Kubernetes {version} (strict) at {path}: {error.message}"
    if problem is not None:  # failed outside the handler: no chained traceback of the validator's
        pytest.fail(f"{ref}: {problem}")


def _resource_files() -> Iterator[Path]:
    """Every file a kustomization lists as a resource (patch files are partial objects: not these)."""
    for kustomization_path in sorted(K8S.rglob("kustomization.yaml")):
        kustomization = yaml.safe_load(kustomization_path.read_text())
        for entry in kustomization.get("resources", []):
            path = (kustomization_path.parent / entry).resolve()
            if path.is_file():
                yield path


def _require_kustomize() -> None:
    if _kustomize_command() is None:
        pytest.skip("neither kubectl nor kustomize is installed: the rendered manifests are not checked")


def test_the_validator_is_installed_and_has_the_pinned_versions() -> None:
    kubernetes_validate = _kubernetes_validate()
    bundled = {".".join(v.split(".")[:2]) for v in kubernetes_validate.utils.all_versions()}
    for version in KUBERNETES_VERSIONS:
        assert version in bundled, f"kubernetes-validate bundles no schemas for Kubernetes {version}"


def test_the_strict_check_refuses_unknown_fields_and_kinds() -> None:
    deployment: Doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "x", "image": "x"}]},
            },
        },
    }
    for version in KUBERNETES_VERSIONS:
        check_schema(deployment, version, "ok")
        container = {"name": "x", "image": "x", "resource": {}}  # `resources`, misspelt
        template = {**deployment["spec"]["template"], "spec": {"containers": [container]}}
        misspelt = {**deployment, "spec": {**deployment["spec"], "template": template}}
        with pytest.raises(pytest.fail.Exception, match="resource"):
            check_schema(misspelt, version, "misspelt")
        wrong_type = {**deployment, "spec": {**deployment["spec"], "replicas": "three"}}
        with pytest.raises(pytest.fail.Exception, match="replicas"):
            check_schema(wrong_type, version, "wrong type")
        with pytest.raises(pytest.fail.Exception, match="add a schema"):
            check_schema({**deployment, "apiVersion": "example.com/v1", "kind": "Widget"}, version, "unknown")
    route: Doc = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GRPCRoute",
        "metadata": {"name": "x"},
        "spec": {"rules": [{"backendRefs": [{"name": "gateway", "port": 50050}]}]},
    }
    check_schema(route, "1.30", "ok")
    with pytest.raises(AssertionError, match="unknown field"):
        check_schema({**route, "spec": {"rules": [{"backendRef": []}]}}, "1.30", "misspelt")
    with pytest.raises(AssertionError, match="out of range"):
        check_schema(
            {**route, "spec": {"rules": [{"backendRefs": [{"name": "g", "port": 0}]}]}}, "1.30", "port"
        )


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_resource_file_follows_the_schemas(version: str) -> None:
    files = list(_resource_files())
    assert files
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                check_schema(doc, version, str(path.relative_to(ROOT)))


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("target", RENDERED)
def test_every_rendered_object_follows_the_schemas(target: str, version: str) -> None:
    _require_kustomize()
    docs = _build(target)
    assert docs
    for doc in docs:
        check_schema(doc, version, target)


def test_every_kind_in_use_has_a_schema() -> None:
    """No CRD schema here is dead weight, and each rendered kind is checked by one or the other."""
    _require_kustomize()
    used = {(doc["apiVersion"], doc["kind"]) for target in RENDERED for doc in _build(target)}
    assert set(CRD_SCHEMAS) <= used, f"schemas for kinds no manifest uses: {sorted(set(CRD_SCHEMAS) - used)}"


# -- the production overlay ------------------------------------------------------------------------------


def _production() -> Manifests:
    _require_kustomize()
    return Manifests("build:overlays/prod", _build("overlays/prod"), rendered=True, complete=False)


def _base() -> Manifests:
    _require_kustomize()
    return Manifests("build:base", _build("base"), rendered=True, complete=False)


def test_production_reads_the_database_url_from_the_secret() -> None:
    m = _production()
    assert not [_ref(doc) for doc in m.docs if "postgres" in doc["metadata"]["name"]], "no postgres-dev"
    assert not m.of_kind("Secret"), "the database Secret comes from the secret manager"
    # Every service with a database (the launcher's registry says which), and the migrate Job.
    users = [(workload, name) for workload, name in m.services() if name not in SERVICES_WITHOUT_DATABASE]
    users += [(_migrate_job(m), "migrate Job")]
    assert len(users) >= 4
    for workload, name in users:
        entry = _env_entry(_main_container(workload), "DATABASE_URL")
        assert entry is not None, f"{name}: no DATABASE_URL"
        assert entry.get("valueFrom") == {"secretKeyRef": DATABASE_SECRET}, (
            f"{_ref(workload)}: DATABASE_URL must come from Secret {DATABASE_SECRET['name']} key "
            f"{DATABASE_SECRET['key']} (required, not optional): {entry}"
        )
    for workload, name in m.services():
        if name in SERVICES_WITHOUT_DATABASE:
            entry = _env_entry(_main_container(workload), "DATABASE_URL")
            assert entry == {"name": "DATABASE_URL", "value": GATEWAY_DATABASE_URL}, f"{name} has no database"


def test_production_replicas() -> None:
    m = _production()
    base = _base()
    (hpa,) = m.of_kind("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gateway"}
    assert 3 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"], "at least one gateway per zone"
    assert "replicas" not in m.get("Deployment", "gateway")["spec"], "the autoscaler owns the count"
    # Replicas: one pairs under the lease, every one serves the lobby (docs/matchmaking.md, "Replicas").
    assert _replicas(m.get("Deployment", "matchmaking")) >= 3
    assert _replicas(m.get("Deployment", "fairness")) >= 3
    # Replica counts of StatefulSets are shard counts: the address lists depend on them.
    for statefulset in base.of_kind("StatefulSet"):
        name = statefulset["metadata"]["name"]
        assert _replicas(m.get("StatefulSet", name)) == _replicas(statefulset), f"{name}: shard count changed"


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def _bytes(quantity: str) -> int:
    for suffix, factor in _UNITS.items():
        if quantity.endswith(suffix):
            return int(quantity.removesuffix(suffix)) * factor
    return int(quantity)


def _millicores(quantity: str) -> int:
    return int(quantity.removesuffix("m")) if quantity.endswith("m") else int(float(quantity) * 1000)


PROCESS_MIB = 85
"""A rules process before its matches (docs/benchmarks.md: 102 MiB with 1,000 chess matches of 17 KiB)."""
PLANNED_LIVE_MATCHES: dict[str, tuple[int, int]] = {
    "rules-chess": (40_000, 18),
    "rules-gin": (40_000, 17),
    "rules-backgammon": (3_000, 280),
    "rules-go": (10_000, 80),
    "rules-generals": (16_000, 46),
}
"""Per rules shard: the live matches production-sizing.yaml plans for, and KiB per live match as measured
(docs/benchmarks.md, docs/performance.md)."""
HEADROOM = 1.5
"""The memory limit over the planned load: bursts, a recovery reloading the shard, the collector's slack."""


def test_production_resources() -> None:
    m = _production()
    for workload in m.workloads():
        container = _main_container(workload)
        where = _ref(workload)
        resources = container.get("resources", {})
        for bound in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources.get(bound, {})), f"{where}: {bound} of cpu and memory"
        assert _bytes(resources["requests"]["memory"]) <= _bytes(resources["limits"]["memory"]), where
        assert _millicores(resources["requests"]["cpu"]) <= _millicores(resources["limits"]["cpu"]), where
        name = workload["metadata"]["name"]
        if workload["kind"] == "StatefulSet" or name == "matchmaking":
            # In-memory shards: never evicted for using more than they asked for.
            assert resources["requests"]["memory"] == resources["limits"]["memory"], where
            assert _millicores(resources["limits"]["cpu"]) >= 1000, f"{where}: no throttling below a core"
    for name, (matches, kib) in PLANNED_LIVE_MATCHES.items():
        limit = _bytes(_main_container(m.get("StatefulSet", name))["resources"]["limits"]["memory"])
        planned = PROCESS_MIB * 2**20 + matches * kib * 2**10
        assert limit >= planned * HEADROOM, f"{name}: {limit} bytes do not hold {matches} live matches"
    # The clock shard N holds a wake-up per live match of rules shard N of every family, ~1 KiB each.
    timers = sum(matches for matches, _ in PLANNED_LIVE_MATCHES.values())
    clock_limit = _bytes(_main_container(m.get("StatefulSet", "clock"))["resources"]["limits"]["memory"])
    assert clock_limit >= (80 * 2**20 + timers * 2**10) * HEADROOM


def test_production_exposes_the_gateway_through_the_gateway_api() -> None:
    m = _production()
    (gateway,) = m.of_kind("Gateway")
    (route,) = m.of_kind("GRPCRoute")
    (listener,) = gateway["spec"]["listeners"]
    assert listener["port"] == 443
    assert listener["protocol"] == "HTTPS"
    # Terminated: the gateway pods' public port is plaintext h2c (libs/runtime/server.py).
    assert listener["tls"]["mode"] == "Terminate"
    assert listener["tls"]["certificateRefs"], "a certificate for the players' host name"
    assert {"group": "gateway.networking.k8s.io", "kind": "GRPCRoute"} in listener["allowedRoutes"]["kinds"]
    (parent,) = route["spec"]["parentRefs"]
    assert parent["name"] == gateway["metadata"]["name"]
    assert parent.get("namespace", route["metadata"]["namespace"]) == gateway["metadata"]["namespace"]
    assert parent["sectionName"] == listener["name"]
    assert route["spec"]["hostnames"] == [listener["hostname"]]
    service = m.get("Service", "gateway")
    (grpc_port,) = [port for port in service["spec"]["ports"] if port["name"] == "grpc"]
    assert grpc_port["appProtocol"] == "kubernetes.io/h2c", "the proxy must speak HTTP/2 to the pods"
    (rule,) = route["spec"]["rules"]
    (backend,) = rule["backendRefs"]
    assert backend.get("kind", "Service") == "Service"
    assert backend["name"] == "gateway"
    assert backend["port"] == grpc_port["port"], "the grpc port, never the metrics port"
    # Only the players' API goes through: every method of the service the gateway serves, nothing else.
    services = [match["method"]["service"] for match in rule["matches"]]
    assert services == [gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"].full_name]
    assert "method" not in rule["matches"][0]["method"], "every method of the service"


def test_the_gateway_api_placeholders_are_marked() -> None:
    text = (GATEWAY_API_COMPONENT / "gateway.yaml").read_text()
    docs = list(yaml.safe_load_all(text))
    (gateway,) = [doc for doc in docs if doc["kind"] == "Gateway"]
    (route,) = [doc for doc in docs if doc["kind"] == "GRPCRoute"]
    listener = gateway["spec"]["listeners"][0]
    placeholders = [
        gateway["spec"]["gatewayClassName"],
        listener["hostname"],
        listener["tls"]["certificateRefs"][0]["name"],
        *route["spec"]["hostnames"],
    ]
    lines = text.splitlines()
    for value in placeholders:
        marked = [line for line in lines if f": {value}" in line or f"- {value}" in line]
        assert marked, value
        assert all("# REPLACE" in line for line in marked), f"{value!r} must be marked # REPLACE"
    assert listener["hostname"].endswith("example.com"), "a placeholder host name, never a real one"


def test_production_overlay_includes_what_the_issue_lists() -> None:
    kustomization = yaml.safe_load((PRODUCTION / "kustomization.yaml").read_text())
    components = kustomization.get("components", [])
    for component in ("monitoring", "gateway-hpa", "gateway-api"):
        assert f"../../components/{component}" in components
    for forbidden in ("postgres-dev", "pki-dev"):
        assert f"../../components/{forbidden}" not in components
    assert "secretGenerator" not in kustomization
    m = _production()
    for workload in m.workloads():
        assert "@sha256:" in _main_container(workload)["image"], f"{_ref(workload)}: image by digest"
        env = _literal_env(_main_container(workload))
        if workload["kind"] != "Job":
            assert env.get("GRPC_REFLECTION") == "false", _ref(workload)
    for doc in m.docs:
        assert not _dev_only(doc), _ref(doc)
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == NAMESPACE, _ref(doc)


# -- migrations ----------------------------------------------------------------------------------------


def _tables_used_by(path: Path) -> set[str]:
    """The tables of libs/persistence/schema.py that the module at ``path`` imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "libs.persistence.schema":
            names.update(alias.name for alias in node.names)
        elif (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "schema"
        ):
            names.add(node.attr)
    tables = {table.name: table for table in metadata.tables.values()}
    from libs.persistence import schema

    return {getattr(schema, name).name for name in names if getattr(schema, name, None) in tables.values()}


@functools.cache
def tables_in_use() -> dict[str, set[str]]:
    """Per module of services/ and libs/ (the schema and the migrations aside), the tables it uses."""
    used: dict[str, set[str]] = {}
    for folder in (ROOT / "services", ROOT / "libs"):
        for path in sorted(folder.rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative.parts[:2] == ("libs", "protos") or relative.parts[:3] == (
                "libs",
                "persistence",
                "migrations",
            ):
                continue
            if relative == Path("libs/persistence/schema.py"):
                continue
            tables = _tables_used_by(path)
            if tables:
                used[str(relative)] = tables
    return used


@functools.cache
def _run_migration(args: tuple[str, ...], literal_env: tuple[tuple[str, str], ...]) -> Path:
    """Runs ``python -m *args`` with that environment on a new SQLite file, once per command: the file."""
    scratch = Path(tempfile.mkdtemp(prefix="skillclassics-migrate-"))
    atexit.register(shutil.rmtree, scratch, True)
    database = scratch / "skillclassics.db"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        **dict(literal_env),
        "DATA_DIR": str(scratch),
        "DATABASE_URL": f"sqlite+aiosqlite:///{database}",
    }
    done = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return database


def _migrate_job(m: Manifests) -> Doc:
    (job,) = [
        doc for doc in m.workloads(("Job",)) if _main_container(doc)["args"][0] == "libs.persistence.migrate"
    ]
    return job


def test_every_service_area_uses_tables_of_the_schema() -> None:
    """The scan below finds each area's tables (so the migration check covers them all)."""
    used = tables_in_use()
    areas = {
        "services/fairness/": "fairness_",
        "services/clock/": "clock_",
        "services/matchmaking/": "mm_",
        "libs/match/": "match",
        "libs/persistence/ownership.py": "shard_owners",
    }
    for where, prefix in areas.items():
        found = {t for module, tables in used.items() if module.startswith(where) for t in tables}
        assert found, f"no table found in use under {where}"
        assert all(t.startswith(prefix) for t in found), (where, found)


@pytest.mark.parametrize("target", ["files:base", "build:overlays/prod"])
def test_the_migrate_job_migrates_every_services_tables(target: str) -> None:
    if target == "files:base":
        docs: list[Doc] = []
        for path in sorted((K8S / "base").glob("*.yaml")):
            if path.name != "kustomization.yaml":
                docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
        m = Manifests(target, tuple(docs), rendered=False, complete=False)
    else:
        m = _production()
    job = _migrate_job(m)
    container = _main_container(job)
    module, *services = container["args"]
    assert module == "libs.persistence.migrate"
    from libs.launcher.registry import SERVICES

    database_services = {spec.name for spec in SERVICES} - SERVICES_WITHOUT_DATABASE
    assert set(services) <= database_services, services
    # The same database as every service that has one: the migration (one Alembic history for all the
    # tables) then creates and upgrades all of theirs, whichever service the argument names.
    job_url = _env_entry(container, "DATABASE_URL")
    assert job_url is not None
    for workload in m.workloads(("Deployment", "StatefulSet")):
        entry = _env_entry(_main_container(workload), "DATABASE_URL")
        if entry is not None and "valueFrom" in entry:
            assert entry["valueFrom"] == job_url["valueFrom"], f"{_ref(workload)}: another database"
    # Run the Job's command (the image's entrypoint is `python -m`) with the Job's own environment,
    # DATABASE_URL a scratch SQLite file instead of the Secret's PostgreSQL.
    literal = _literal_env(container)
    assert literal["SKILLCLASSICS_ENV"] == "production"
    database = _run_migration(tuple(container["args"]), tuple(sorted(literal.items())))
    with sqlite3.connect(database) as connection:
        created = {
            row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        (version,) = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert version == head, "the Job migrates to the Alembic head"
    for module, tables in tables_in_use().items():
        assert tables <= created, f"{module} uses {sorted(tables - created)}, which the Job does not create"
    assert created - {"alembic_version"} == set(metadata.tables)
    engine = create_engine(f"sqlite:///{database}")
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            diff: list[Any] = list(compare_metadata(context, metadata))
    finally:
        engine.dispose()
    assert diff == [], f"the migrated schema differs from libs/persistence/schema.py: {diff}"
