"""Service configuration from the environment: defaults, overrides and refusals."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from libs.runtime import ConfigError, ServiceConfig
from libs.runtime.config import DEFAULT_GC_THRESHOLDS


def test_defaults_are_local_and_safe() -> None:
    config = ServiceConfig.from_env("fairness", {})
    assert config.grpc_host == "127.0.0.1"
    assert (config.grpc_port, config.metrics_port) == (50052, 9152)
    assert config.database_url == "sqlite+aiosqlite:///data/fairness.db"
    assert config.environment == "development"
    assert config.migrate_on_start
    assert config.gc_thresholds == DEFAULT_GC_THRESHOLDS
    assert config.event_loop == "uvloop"


def test_environment_overrides_every_default() -> None:
    config = ServiceConfig.from_env(
        "fairness",
        {
            "GRPC_HOST": "0.0.0.0",
            "GRPC_PORT": "0",
            "METRICS_PORT": "-1",
            "DATA_DIR": "/var/lib/sc",
            "DATABASE_URL": "postgresql+asyncpg://db/sc",
            "LOG_LEVEL": "DEBUG",
            "LOG_FORMAT": "json",
            "SHUTDOWN_GRACE_SECONDS": "2.5",
            "MIGRATE_ON_START": "false",
            "SKILLCLASSICS_ENV": "production",
            "GC_THRESHOLDS": "700,10,10",
            "EVENT_LOOP": "AsyncIO",
            "TLS_CA_FILE": "/etc/sc/tls/ca.pem",
            "TLS_CERT_FILE": "/etc/sc/tls/tls.crt",
            "TLS_KEY_FILE": "/etc/sc/tls/tls.key",
            "SERVICE_IDENTITY": "fairness",
            "HEALTH_PORT": "7001",
            "GRPC_REFLECTION": "false",
            "GRPC_MAX_CONNECTION_AGE_MS": "300000",
        },
    )
    assert config.max_connection_age_ms == 300_000
    assert config.transport is not None
    assert config.transport.is_mutual
    assert config.transport.files().certificate == Path("/etc/sc/tls/tls.crt")
    assert config.health_port == 7001
    assert not config.reflection
    assert config.grpc_host == "0.0.0.0"
    assert config.grpc_port == 0
    assert config.metrics_port is None
    assert config.data_dir == Path("/var/lib/sc")
    assert config.database_url == "postgresql+asyncpg://db/sc"
    assert config.log_level == "debug"
    assert config.shutdown_grace_seconds == 2.5
    assert not config.migrate_on_start
    assert config.is_production
    assert config.gc_thresholds == (700, 10, 10)
    assert config.event_loop == "asyncio"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GRPC_PORT": "fifty"}, "GRPC_PORT must be an integer"),
        ({"METRICS_PORT": "-2"}, "METRICS_PORT must be at least -1"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL must be one of"),
        ({"MIGRATE_ON_START": "maybe"}, "MIGRATE_ON_START must be true or false"),
        ({"SHUTDOWN_GRACE_SECONDS": "-1"}, "must not be negative"),
        ({"SKILLCLASSICS_ENV": "production"}, "DATABASE_URL must be set in production"),
        ({"GC_THRESHOLDS": "20000,20"}, "GC_THRESHOLDS must be three integers"),
        ({"GC_THRESHOLDS": "0,20,100"}, "GC_THRESHOLDS must be three integers"),
        ({"GC_THRESHOLDS": "a,b,c"}, "GC_THRESHOLDS must be three integers"),
        ({"EVENT_LOOP": "trio"}, "EVENT_LOOP must be one of uvloop, asyncio"),
    ],
)
def test_bad_values_fail_fast_with_the_variable_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ServiceConfig.from_env("fairness", env)


def test_without_uvloop_the_default_loop_is_asyncios_and_asking_for_uvloop_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> object:
        return None if name == "uvloop" else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert ServiceConfig.from_env("fairness", {}).event_loop == "asyncio"
    with pytest.raises(ConfigError, match="uvloop is not installed"):
        ServiceConfig.from_env("fairness", {"EVENT_LOOP": "uvloop"})


@pytest.mark.parametrize("uvloop_installed", [True, False])
def test_a_config_built_without_a_loop_has_the_same_default_as_from_env(
    monkeypatch: pytest.MonkeyPatch, uvloop_installed: bool
) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> object:
        return None if name == "uvloop" and not uvloop_installed else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    from_env = ServiceConfig.from_env("fairness", {})
    fields = {
        f.name: getattr(from_env, f.name) for f in dataclasses.fields(from_env) if f.name != "event_loop"
    }
    built = ServiceConfig(**fields)
    assert built.event_loop == from_env.event_loop == ("uvloop" if uvloop_installed else "asyncio")
