"""Checks shared by the clock values and their JSON forms (private to :mod:`libs.clocks`)."""

from __future__ import annotations

from collections.abc import Mapping

from libs.clocks.errors import ClockError, ClockFormatError

__all__ = ["check_count", "int_field", "mapping_field", "optional_int_field"]


def _is_int(value: object) -> bool:
    # bool is an int subclass, but True is not a number of milliseconds.
    return isinstance(value, int) and not isinstance(value, bool)


def check_count(name: str, value: object, error: type[ClockError], *, minimum: int = 0) -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) of at least ``minimum``, else raise ``error``."""
    if not _is_int(value):
        raise error(f"{name} must be an integer, got {value!r}")
    assert isinstance(value, int)
    if value < minimum:
        raise error(f"{name} must be at least {minimum}, got {value}")
    return value


def int_field(data: Mapping[str, object], key: str) -> int:
    """The non-negative integer ``data[key]``, or :class:`ClockFormatError`."""
    if key not in data:
        raise ClockFormatError(f"missing field {key!r}")
    return check_count(key, data[key], ClockFormatError)


def optional_int_field(data: Mapping[str, object], key: str) -> int | None:
    """The non-negative integer or ``None`` at ``data[key]`` (missing means ``None``)."""
    if data.get(key) is None:
        return None
    return int_field(data, key)


def mapping_field(data: Mapping[str, object], key: str) -> Mapping[str, object]:
    """The JSON object ``data[key]``, or :class:`ClockFormatError`."""
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise ClockFormatError(f"field {key!r} must be an object, got {value!r}")
    return value
