"""Request validation from the contracts: the rules declared on the request messages' fields
(``skillclassics.validate.v1``, docs/validation.md), checked before any handler runs.

The runtime's interceptor calls :func:`check` on every unary request and every message of a client
stream; a request that breaks a rule is refused with ``INVALID_ARGUMENT``, reason ``INVALID_FIELDS``, and
a ``BadRequest`` naming each bad field by its path from the request (``time_control.base_ms``,
``action.chess.move``, ``statuses[2]``).

Each message type's rules are read from its descriptor once and compiled into a plan (a tuple of small
closures), cached by type: a call walks only the fields that have rules or lead to messages that have
some, and a message type without any rules costs one dictionary lookup.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor, OneofDescriptor
from google.protobuf.message import Message
from skillclassics.errors.v1.errors_pb2 import ErrorReason
from skillclassics.validate.v1 import validate_pb2

from libs.runtime.errors import InvalidArgument, Violation, shown

__all__ = ["RuleError", "check", "describe", "has_rules", "rules_of", "violations"]

_Check = Callable[[Any, str, list[Violation]], None]
"""One compiled check: (message, path prefix, violations found so far)."""
_Problem = Callable[[Any], "str | None"]
"""What is wrong with one value (``None``: nothing)."""

_STRINGS = {FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES}
_MESSAGES = {FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP}
_BOOL = FieldDescriptor.TYPE_BOOL
_ENUM = FieldDescriptor.TYPE_ENUM
_FLOATS = {FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE}


class RuleError(TypeError):
    """A rule that does not fit its field (a length on a number, a pattern that does not compile): a
    mistake in the protos, reported when the message type is first compiled."""


def rules_of(field: FieldDescriptor) -> validate_pb2.FieldRules | None:
    """The rules declared on ``field`` (``None``: none)."""
    options = field.GetOptions()
    if not options.HasExtension(validate_pb2.field):
        return None
    rules: validate_pb2.FieldRules = options.Extensions[validate_pb2.field]
    return rules


def oneof_required(oneof: OneofDescriptor) -> bool:
    """Whether one field of ``oneof`` must be set."""
    return bool(oneof.GetOptions().Extensions[validate_pb2.required])


# -- compiling -------------------------------------------------------------------------------------------


class _Plan:
    """The compiled checks of one message type (``checks`` empty: nothing to check there)."""

    __slots__ = ("checks",)

    def __init__(self) -> None:
        self.checks: tuple[_Check, ...] = ()

    def run(self, message: Any, prefix: str, found: list[Violation]) -> None:
        for one in self.checks:
            one(message, prefix, found)


_PLANS: dict[str, _Plan] = {}
_COMPILING: set[str] = set()


def _plan(descriptor: Descriptor) -> _Plan:
    plan = _PLANS.get(descriptor.full_name)
    if plan is None:
        plan = _PLANS[descriptor.full_name] = _Plan()  # placed first: a recursive type finds itself
        _COMPILING.add(descriptor.full_name)
        try:
            plan.checks = tuple(_compile(descriptor))
        except BaseException:
            del _PLANS[descriptor.full_name]
            raise
        finally:
            _COMPILING.discard(descriptor.full_name)
    return plan


def has_rules(descriptor: Descriptor) -> bool:
    """Whether a message of this type has anything to check (its own rules or its sub-messages')."""
    return bool(_plan(descriptor).checks)


def _compile(descriptor: Descriptor) -> list[_Check]:
    checks: list[_Check] = []
    for oneof in descriptor.oneofs:
        if not _synthetic(oneof):
            compiled = _oneof_check(oneof)
            if compiled is not None:
                checks.append(compiled)
    for field in descriptor.fields:
        container = field.containing_oneof
        if container is not None and not _synthetic(container):
            continue  # checked with its oneof: one WhichOneof instead of a HasField per member
        rules = rules_of(field)
        if field.type in _MESSAGES:
            compiled = _message_check(field, rules)
        elif rules is not None:
            compiled = _value_check(field, rules)
        else:
            compiled = None
        if compiled is not None:
            checks.append(compiled)
    return checks


def _synthetic(oneof: OneofDescriptor) -> bool:
    """A proto3 ``optional`` field's own oneof (not a oneof of the contract)."""
    return len(oneof.fields) == 1 and oneof.name == f"_{oneof.fields[0].name}"


def _oneof_check(oneof: OneofDescriptor) -> _Check | None:
    """The check of a oneof: that one member is set (when it is required), and the set member's rules."""
    name = oneof.name
    required = oneof_required(oneof)
    problem = f"is required: set one of {', '.join(f.name for f in oneof.fields)}"
    members: dict[str, _Check] = {}
    for field in oneof.fields:
        member = _member_check(field)
        if member is not None:
            members[field.name] = member
    if not (required or members):
        return None
    get = members.get

    def check(message: Any, prefix: str, found: list[Violation]) -> None:
        which = message.WhichOneof(name)
        if which is None:
            if required:
                found.append(Violation(prefix + name, problem))
            return
        member = get(which)
        if member is not None:
            member(message, prefix, found)

    return check


def _member_check(field: FieldDescriptor) -> _Check | None:
    """The check of a oneof's member, run only when it is the member set."""
    rules = rules_of(field)
    name = field.name
    if field.type in _MESSAGES:
        if rules is not None:
            _only(field, rules, "required", "skip")  # (set is all required can ask of a member)
            if rules.skip:
                return None
        inner = _plan(_message_type(field))
        if not (inner.checks or _message_type(field).full_name in _COMPILING):
            return None

        def check_message(message: Any, prefix: str, found: list[Violation]) -> None:
            if inner.checks:
                inner.run(getattr(message, name), f"{prefix}{name}.", found)

        return check_message
    if rules is None:
        return None
    return _value_check(field, rules)  # a member is checked as a field (it is set when this runs)


def _message_type(field: FieldDescriptor) -> Descriptor:
    found = field.message_type
    assert found is not None, field.full_name
    return found


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _message_check(field: FieldDescriptor, rules: validate_pb2.FieldRules | None) -> _Check | None:
    name = field.name
    repeated = field.is_repeated
    if rules is not None:
        _only(field, rules, "required", "max_items", "skip")
        if rules.max_items and not repeated:
            raise RuleError(f"{field.full_name}: max_items is for repeated fields")
    required = rules is not None and rules.required
    max_items = rules.max_items if rules is not None else 0
    skip = (rules is not None and rules.skip) or _is_map(field)
    inner = None if skip else _plan(_message_type(field))
    pending = inner is not None and _message_type(field).full_name in _COMPILING  # a recursive type
    if not (required or max_items or pending or (inner is not None and inner.checks)):
        return None

    if repeated:
        too_many = f"must hold at most {max_items} items" if max_items else ""

        def check_list(message: Any, prefix: str, found: list[Violation]) -> None:
            items = getattr(message, name)
            if not items:
                if required:
                    found.append(Violation(prefix + name, "is required: give at least one item"))
                return
            if max_items and len(items) > max_items:
                found.append(Violation(prefix + name, f"{too_many}, got {len(items)}"))
            if inner is not None and inner.checks:
                for index, item in enumerate(items):
                    inner.run(item, f"{prefix}{name}[{index}].", found)

        return check_list

    def check_one(message: Any, prefix: str, found: list[Violation]) -> None:
        if message.HasField(name):
            if inner is not None and inner.checks:
                inner.run(getattr(message, name), f"{prefix}{name}.", found)
        elif required:
            found.append(Violation(prefix + name, "is required"))

    return check_one


def _value_check(field: FieldDescriptor, rules: validate_pb2.FieldRules) -> _Check | None:
    name = field.name
    repeated = field.is_repeated
    presence = not repeated and field.has_presence
    if rules.skip:
        raise RuleError(f"{field.full_name}: skip is for message fields")
    if rules.max_items and not repeated:
        raise RuleError(f"{field.full_name}: max_items is for repeated fields")
    if field.type == _BOOL and rules.required:
        raise RuleError(f"{field.full_name}: a bool cannot be required (false is a value)")
    item = _item_problem(field, rules, repeated)
    required = rules.required
    empty_problem = _empty_problem(field, rules)
    max_items = rules.max_items

    if repeated:

        def check_list(message: Any, prefix: str, found: list[Violation]) -> None:
            items = getattr(message, name)
            if not items:
                if required:
                    found.append(Violation(prefix + name, "is required: give at least one item"))
                return
            if max_items and len(items) > max_items:
                found.append(
                    Violation(prefix + name, f"must hold at most {max_items} items, got {len(items)}")
                )
            if item is not None:
                for index, value in enumerate(items):
                    problem = item(value)
                    if problem is not None:
                        found.append(Violation(f"{prefix}{name}[{index}]", problem))

        return check_list

    def check_value(message: Any, prefix: str, found: list[Violation]) -> None:
        if presence and not message.HasField(name):
            if required:
                found.append(Violation(prefix + name, "is required"))
            return
        value = getattr(message, name)
        if empty_problem is not None and not value:
            found.append(Violation(prefix + name, empty_problem))
            return
        if item is not None:
            problem = item(value)
            if problem is not None:
                found.append(Violation(prefix + name, problem))

    if item is None and not required:
        return None
    return check_value


def _empty_problem(field: FieldDescriptor, rules: validate_pb2.FieldRules) -> str | None:
    """What a required field's empty value is told: its length rule when it has one ("must be 1-128
    characters, got 0", which says what is wanted), "is required" otherwise (``None``: not required)."""
    if not rules.required:
        return None
    if field.type in _STRINGS and rules.max_len:
        unit = "characters" if field.type == FieldDescriptor.TYPE_STRING else "bytes"
        return f"must be {_length_words(rules.min_len or 1, rules.max_len, unit)}, got 0"
    return "is required"


def _only(field: FieldDescriptor, rules: validate_pb2.FieldRules, *allowed: str) -> None:
    given = [f.name for f, _ in rules.ListFields() if f.name not in allowed]
    if given:
        raise RuleError(f"{field.full_name}: {', '.join(given)} cannot apply to this field's type")


def _item_problem(field: FieldDescriptor, rules: validate_pb2.FieldRules, repeated: bool) -> _Problem | None:
    """The check of one value (one item of a repeated field) against every rule but required and
    max_items, or ``None`` when there is none."""
    problems: list[_Problem] = []
    if field.type in _STRINGS:
        _only(field, rules, "required", "min_len", "max_len", "pattern", "max_items")
        problems += _length(field, rules)
        if rules.pattern:
            problems.append(_pattern(field, rules.pattern))
    elif field.type == _ENUM:
        _only(field, rules, "required", "defined_only", "not_unspecified", "max_items")
        assert field.enum_type is not None
        problems += _enum(field.enum_type, rules)
    elif field.type in _FLOATS or field.type == _BOOL:
        _only(field, rules, "required", "max_items")
    else:  # an integer
        _only(field, rules, "required", "min", "max", "max_items")
        problems += _range(rules)
    if not problems:
        return None
    if len(problems) == 1:
        return problems[0]
    steps = tuple(problems)

    def first(value: Any) -> str | None:
        for step in steps:
            problem = step(value)
            if problem is not None:
                return problem
        return None

    return first


def _length(field: FieldDescriptor, rules: validate_pb2.FieldRules) -> list[_Problem]:
    least, most = rules.min_len, rules.max_len
    if not (least or most):
        return []
    if most and least > most:
        raise RuleError(f"{field.full_name}: min_len {least} is above max_len {most}")
    unit = "characters" if field.type == FieldDescriptor.TYPE_STRING else "bytes"
    said = least or (1 if rules.required and not field.is_repeated else 0)  # required: not empty
    wanted = _length_words(said, most, unit)
    limit = most or float("inf")

    def problem(value: str | bytes) -> str | None:
        size = len(value)
        if size < least or size > limit:
            return f"must be {wanted}, got {size}"
        return None

    return [problem]


def _length_words(least: int, most: int, unit: str) -> str:
    if least and most:
        return f"{least} {unit}" if least == most else f"{least}-{most} {unit}"
    if most:
        return f"at most {most} {unit}"
    return f"at least {least} {unit}"


def _pattern(field: FieldDescriptor, pattern: str) -> _Problem:
    if field.type != FieldDescriptor.TYPE_STRING:
        raise RuleError(f"{field.full_name}: pattern is for string fields")
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise RuleError(f"{field.full_name}: pattern {pattern!r} does not compile: {error}") from None
    fullmatch = compiled.fullmatch

    def problem(value: str) -> str | None:
        if fullmatch(value) is None:
            return f"must match {pattern}, got {shown(value)}"
        return None

    return problem


def _range(rules: validate_pb2.FieldRules) -> list[_Problem]:
    least = rules.min if rules.HasField("min") else None
    most = rules.max if rules.HasField("max") else None
    if least is None and most is None:
        return []
    wanted = _range_words(least, most)
    low = least if least is not None else -(2**64)
    high = most if most is not None else 2**64

    def problem(value: int) -> str | None:
        if value < low or value > high:
            if low == 0 and value < 0:
                return f"must not be negative, got {value}"
            return f"must be {wanted}, got {value}"
        return None

    return [problem]


def _range_words(least: int | None, most: int | None) -> str:
    if least is not None and most is not None:
        return f"from {least} to {most}"
    if most is not None:
        return f"at most {most}"
    return f"at least {least}"


def _enum(enum: EnumDescriptor, rules: validate_pb2.FieldRules) -> list[_Problem]:
    problems: list[_Problem] = []
    if rules.not_unspecified:
        zero = enum.values_by_number.get(0)
        zero_name = zero.name if zero is not None else "0"

        def unspecified(value: int) -> str | None:
            return f"must not be {zero_name} (0)" if value == 0 else None

        problems.append(unspecified)
    if rules.defined_only:
        defined = frozenset(enum.values_by_number)
        names = ", ".join(v.name for v in enum.values if v.number or not rules.not_unspecified)

        def undefined(value: int) -> str | None:
            return None if value in defined else f"must be a defined {enum.name} ({names}), got {value}"

        problems.append(undefined)
    return problems


# -- checking --------------------------------------------------------------------------------------------


def violations(message: Message) -> list[Violation]:
    """Every rule ``message`` breaks, by field path from it (empty: none)."""
    descriptor: Descriptor = message.DESCRIPTOR  # type: ignore[assignment]  # (upb's is the same type)
    plan = _PLANS.get(descriptor.full_name)
    if plan is None:
        plan = _plan(descriptor)
    if not plan.checks:
        return []
    found: list[Violation] = []
    plan.run(message, "", found)
    return found


def check(message: Message, call: str = "") -> None:
    """Refuse ``message`` (``InvalidArgument``, reason ``INVALID_FIELDS``, each bad field a
    :class:`~libs.runtime.errors.Violation`) when it breaks a rule of its contract; ``call`` names the
    method for the message. A request that is not a message (raw bytes: a handler without a
    deserializer) has no rules."""
    try:
        descriptor: Descriptor = message.DESCRIPTOR  # type: ignore[assignment]  # (upb's is the same type)
    except AttributeError:
        return
    plan = _PLANS.get(descriptor.full_name)
    if plan is None:
        plan = _plan(descriptor)
    if not plan.checks:
        return
    found: list[Violation] = []
    plan.run(message, "", found)
    if found:
        raise InvalidArgument(
            _sentence(found, call), reason=ErrorReason.ERROR_REASON_INVALID_FIELDS, violations=found
        )


def _sentence(found: Sequence[Violation], call: str) -> str:
    to = f" to {call}" if call else ""
    if len(found) == 1:
        return f"invalid request{to}: {found[0].field} {found[0].description}"
    fields = "; ".join(f"{v.field} {v.description}" for v in found)
    return f"invalid request{to}, {len(found)} fields: {fields}"


# -- documenting -----------------------------------------------------------------------------------------


def describe(rules: validate_pb2.FieldRules, field: FieldDescriptor) -> str:
    """The rules of ``field`` in words, as its comment's ``Rules:`` line gives them (without the prefix):
    ``required; 1-128 characters; pattern ^[A-Za-z0-9._:-]+$``."""
    repeated = field.is_repeated
    each = "each item " if repeated else ""
    parts: list[str] = []
    if rules.required:
        parts.append("required (at least one item)" if repeated else "required")
    if rules.max_items:
        parts.append(f"at most {rules.max_items} items")
    if rules.min_len or rules.max_len:
        unit = "characters" if field.type == FieldDescriptor.TYPE_STRING else "bytes"
        shortest = rules.min_len or (1 if rules.required and not repeated else 0)  # required: not empty
        parts.append(each + _length_words(shortest, rules.max_len, unit))
    if rules.pattern:
        parts.append(f"{each}pattern {rules.pattern}")
    if rules.HasField("min") or rules.HasField("max"):
        least = rules.min if rules.HasField("min") else None
        most = rules.max if rules.HasField("max") else None
        parts.append(each + _range_words(least, most))
    if rules.not_unspecified and field.enum_type is not None:
        zero = field.enum_type.values_by_number.get(0)
        parts.append(f"{each}not {zero.name if zero is not None else '0'}")
    if rules.defined_only:
        parts.append(f"{each}a defined value")
    if rules.skip:
        parts.append("its message's rules are checked by the handler, one item at a time")
    return "; ".join(parts)


def describe_oneof(oneof: OneofDescriptor) -> str:
    """A required oneof's rule in words (without the ``Rules:`` prefix)."""
    return "required: exactly one of " + ", ".join(f.name for f in oneof.fields)
