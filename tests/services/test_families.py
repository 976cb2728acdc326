"""The families the platform serves, read from their own declarations (services/families.py): every
``rules-<family>`` service of the launcher's registry, its package's ``FAMILY``. Matchmaking and the chaos
checks read them there and name no family."""

from __future__ import annotations

import types

import pytest

from libs.launcher.registry import SERVICES, ServiceSpec
from services import families
from services.matchmaking.families import FAMILIES
from services.rules_chess.family import ChessFamily


def test_every_rules_service_of_the_registry_declares_its_family() -> None:
    served = [spec.kind.removeprefix("rules-") for spec in SERVICES if spec.kind.startswith("rules-")]
    declared = families.rules_families()
    assert list(declared) == served == ["chess", "backgammon", "gin", "go", "generals"]
    assert isinstance(declared["chess"], ChessFamily)
    assert list(FAMILIES) == served  # what matchmaking offers is what is served
    assert all(FAMILIES[name].family is declared[name] for name in served)


def test_a_declaration_of_another_family_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real_import = importlib.import_module

    def misdeclared(name: str) -> types.ModuleType:
        if name == "services.rules_chess.family":
            return types.SimpleNamespace(FAMILY=types.SimpleNamespace(name="checkers"))  # type: ignore[return-value]
        return real_import(name)

    monkeypatch.setattr(importlib, "import_module", misdeclared)
    monkeypatch.setattr(families, "SERVICES", (ServiceSpec("rules-chess", "services.rules_chess"),))
    families.rules_families.cache_clear()
    try:
        with pytest.raises(ValueError, match="declares 'checkers', but its service is rules-chess"):
            families.rules_families()
    finally:
        monkeypatch.undo()
        families.rules_families.cache_clear()


def test_a_planned_service_without_a_package_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    planned = ServiceSpec("rules-checkers", "services.rules_checkers")
    monkeypatch.setattr(families, "SERVICES", (*SERVICES, planned))
    families.rules_families.cache_clear()
    try:
        assert "checkers" not in families.rules_families()
        assert "chess" in families.rules_families()
    finally:
        monkeypatch.undo()
        families.rules_families.cache_clear()
