"""The full-stack tests' stack (``tests/fullstack/conftest.py``), reused as it is: a stack started by the
launcher once per database backend for this folder, reached through the gateway with signed tokens."""

from tests.fullstack.conftest import platform

__all__ = ["platform"]
