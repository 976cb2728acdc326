"""Hypothesis strategies built from protobuf descriptors, for fuzzing any request of any service.

:func:`messages` walks a message's descriptor field by field and draws, for each one that it sets,

- scalars of the field's type, with the extremes of that type drawn often (0, -1, the minimum and the
  maximum of each integer width; NaN, infinities and -0.0 for floats);
- strings that are empty, blank, unicode (any code point UTF-8 can carry: no surrogates), control
  characters, very long (up to 100,000 characters), or look like ids and injections; bytes likewise;
- enums: each defined number, and for open (proto3) enums any other ``int32`` too;
- nested messages (down to a depth), repeated fields (empty, short, or one value repeated many times),
  map fields, proto3 ``optional`` fields (set or not) and oneofs (none or exactly one member set).

``hostile=False`` draws plausible messages instead (every field set, small numbers, short plain strings,
defined enums), which get past validation to the code behind it. ``overrides`` maps a field *name* (or
``Message.field``, for one message's field alone) to a strategy of plausible values for that field
wherever it occurs (``match_id`` to ids of the right shape, so that calls get past the first check; for
a repeated field, of whole lists): a plausible message draws that field from it alone, a hostile one
from it or from its type, half and half.

On top of whole messages: :func:`truncated` cuts a message's encoding short, :func:`mutated` overwrites
some of its bytes, and :func:`wire_bytes` draws raw bytes, so a server also sees what no well-behaved
client sends.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from functools import cache
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

Overrides = Mapping[str, st.SearchStrategy[Any]]

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT32 = (0, 2**32 - 1)
UINT64 = (0, 2**64 - 1)

_T = FieldDescriptor
_SIGNED_32 = {_T.TYPE_INT32, _T.TYPE_SINT32, _T.TYPE_SFIXED32}
_SIGNED_64 = {_T.TYPE_INT64, _T.TYPE_SINT64, _T.TYPE_SFIXED64}
_UNSIGNED_32 = {_T.TYPE_UINT32, _T.TYPE_FIXED32}
_UNSIGNED_64 = {_T.TYPE_UINT64, _T.TYPE_FIXED64}

SPECIAL_STRINGS = (
    "",
    " ",
    "\t\n",
    "\x00",
    "é",
    "💥",
    "\u202e",  # right-to-left override
    "\ufeff",
    "null",
    "None",
    "0",
    "-1",
    "..",
    "../../etc/passwd",
    "' OR 1=1 --",
    "%s%n%x",
    "{}",
    "[]",
    "chess",
    "gin",
    "chess.0.",
    "chess.0.x",
    "gin.0.x",
    "chess.99999999999999999999.x",
    "chess.-1.x",
    ".0.x",
    "rules-chess-0",
    "e2e4",
    "O-O",
    "discard 7H",
    "offer_draw",
)


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of ``choices`` (weight, strategy), each drawn in proportion to its weight (``st.one_of``
    cannot weight: a strategy given to it twice counts once)."""
    pool = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(range(len(pool))).flatmap(pool.__getitem__)


def integers(low: int, high: int) -> st.SearchStrategy[int]:
    """Integers from ``low`` to ``high``, with the edges (and 0, 1, -1 where in range) drawn often."""
    edges = sorted({v for v in (low, low + 1, high - 1, high, 0, 1, -1) if low <= v <= high})
    return st.one_of(st.sampled_from(edges), st.integers(low, high))


def texts() -> st.SearchStrategy[str]:
    """Strings as a hostile client sends them: empty, special, short unicode, control characters or
    very long (one character repeated, up to 100,000)."""
    characters = st.characters(exclude_categories=["Cs"])  # UTF-8 cannot carry lone surrogates
    return st.one_of(
        st.sampled_from(SPECIAL_STRINGS),
        st.text(characters, max_size=40),
        st.text(st.characters(codec="ascii"), max_size=20),
        st.builds(
            lambda c, n: c * n, st.sampled_from(("a", "é", "💥", "\x00", " ")), st.integers(256, 100_000)
        ),
    )


def blobs() -> st.SearchStrategy[bytes]:
    """Bytes: empty, short random, or long (up to 100,000)."""
    return st.one_of(
        st.just(b""),
        st.binary(max_size=64),
        st.builds(lambda b, n: b * n, st.sampled_from((b"\x00", b"\xff", b"ab")), st.integers(256, 100_000)),
    )


def floats(width: int) -> st.SearchStrategy[float]:
    edges = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e-45 if width == 32 else 5e-324]
    return st.one_of(st.sampled_from(edges), st.floats(width=width))  # type: ignore[arg-type]


def scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    """Values of a scalar or enum field's type."""
    kind = field.type
    if kind in _SIGNED_32:
        return integers(*INT32)
    if kind in _SIGNED_64:
        return integers(*INT64)
    if kind in _UNSIGNED_32:
        return integers(*UINT32)
    if kind in _UNSIGNED_64:
        return integers(*UINT64)
    if kind == _T.TYPE_BOOL:
        return st.booleans()
    if kind == _T.TYPE_FLOAT:
        return floats(32)
    if kind == _T.TYPE_DOUBLE:
        return floats(64)
    if kind == _T.TYPE_STRING:
        return texts()
    if kind == _T.TYPE_BYTES:
        return blobs()
    if kind == _T.TYPE_ENUM:
        enum = field.enum_type
        assert enum is not None
        defined = st.sampled_from([value.number for value in enum.values])
        if enum.is_closed:
            return defined
        return st.one_of(defined, integers(*INT32))  # open enums carry any number
    raise TypeError(f"not a scalar field: {field.full_name}")


def _is_map(field: FieldDescriptor) -> bool:
    message = field.message_type
    return message is not None and message.GetOptions().map_entry


def _is_repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _lists(element: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """Repeated values: a few, or one value many times."""
    return st.one_of(
        st.lists(element, max_size=4),
        st.builds(lambda v, n: [v] * n, element, st.integers(50, 2_000)),
    )


def tame_scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    """Values a well-behaved client would send: small numbers and typical durations, short plain
    strings, defined enum numbers."""
    kind = field.type
    if kind in _SIGNED_32 | _UNSIGNED_32:
        return st.integers(0, 4)
    if kind in _SIGNED_64 | _UNSIGNED_64:
        return st.sampled_from((0, 1, 2, 1_000, 60_000, 300_000, 3_600_000))
    if kind == _T.TYPE_BOOL:
        return st.booleans()
    if kind in (_T.TYPE_FLOAT, _T.TYPE_DOUBLE):
        return st.sampled_from((0.0, 0.5, 1.0))
    if kind == _T.TYPE_STRING:
        return st.text("abcxyz019-", min_size=1, max_size=8)
    if kind == _T.TYPE_BYTES:
        return st.binary(min_size=1, max_size=32)
    if kind == _T.TYPE_ENUM:
        enum = field.enum_type
        assert enum is not None
        return st.sampled_from([value.number for value in enum.values])
    raise TypeError(f"not a scalar field: {field.full_name}")


def _value(
    field: Any, depth: int, overrides: Overrides, hostile: bool, *, element: bool = False
) -> st.SearchStrategy[Any] | None:
    """A strategy for one value of ``field`` (``None`` when a message field is too deep to draw); an
    ``element`` of a repeated field ignores the override (which stands for the whole list)."""
    if field.type in (_T.TYPE_MESSAGE, _T.TYPE_GROUP):
        base = None if depth <= 0 else _messages(field.message_type, _freeze(overrides), depth - 1, hostile)
    else:
        base = scalar(field) if hostile else tame_scalar(field)
    extra = None if element else _override(field, overrides)
    if extra is None:
        return base
    if base is None or not hostile:
        return extra
    return st.one_of(extra, base)


def _override(field: FieldDescriptor, overrides: Overrides) -> st.SearchStrategy[Any] | None:
    """The override of ``field``: by ``Message.field`` first, then by the field's name alone."""
    owner = field.containing_type
    found = None if owner is None else overrides.get(f"{owner.name}.{field.name}")
    return overrides.get(field.name) if found is None else found


def messages(
    descriptor: Descriptor | type[Message],
    *,
    overrides: Overrides | None = None,
    depth: int = 3,
    hostile: bool = True,
) -> st.SearchStrategy[Message]:
    """Messages of ``descriptor``'s type (a descriptor or a generated class): every field independently
    set or left at its default, a oneof's members never more than one, nested messages down to
    ``depth`` levels. ``hostile=False`` draws only what a well-behaved client would send, every field
    set (:func:`tame_scalar`, or the override alone where there is one), to get past validation and
    reach the code behind it."""
    resolved: Any = descriptor if isinstance(descriptor, Descriptor) else descriptor.DESCRIPTOR
    return _messages(resolved, _freeze(overrides or {}), depth, hostile)


def _freeze(overrides: Overrides) -> tuple[tuple[str, st.SearchStrategy[Any]], ...]:
    return tuple(sorted(overrides.items(), key=lambda item: item[0]))


@cache
def _messages(
    descriptor: Any, frozen: tuple[tuple[str, st.SearchStrategy[Any]], ...], depth: int, hostile: bool
) -> st.SearchStrategy[Message]:
    overrides = dict(frozen)
    cls = GetMessageClass(descriptor)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    oneofs: dict[str, list[st.SearchStrategy[tuple[str, Any]]]] = {}
    for field in descriptor.fields:
        if _is_map(field):
            entry = field.message_type
            key = _value(entry.fields_by_name["key"], depth, overrides, hostile)
            value = _value(entry.fields_by_name["value"], depth, overrides, hostile)
            if key is not None and value is not None:
                fields[field.name] = st.dictionaries(key, value, max_size=4)
            continue
        if _is_repeated(field):
            item = _value(field, depth, overrides, hostile, element=True)
            many = None if item is None else _lists(item) if hostile else st.lists(item, max_size=3)
            extra = _override(field, overrides)
            if extra is not None:
                many = extra if many is None or not hostile else st.one_of(extra, many)
            if many is not None:
                fields[field.name] = many
            continue
        value = _value(field, depth, overrides, hostile)
        if value is None:
            continue
        if field.containing_oneof is not None and not _synthetic(field):
            oneofs.setdefault(field.containing_oneof.name, []).append(
                value.map(functools.partial(_named, field.name))
            )
        else:
            fields[field.name] = value
    for group, members in oneofs.items():
        fields[f"oneof:{group}"] = st.one_of(members)

    def build(values: dict[str, Any]) -> Message:
        return _build(cls, values)

    if hostile:  # any field may be missing
        return st.fixed_dictionaries({}, optional=fields).map(build)
    return st.fixed_dictionaries(fields).map(build)  # every field set (a oneof: one member)


def _named(name: str, value: Any) -> tuple[str, Any]:
    return name, value


def _synthetic(field: FieldDescriptor) -> bool:
    """Whether ``field``'s oneof is the synthetic one of a proto3 ``optional`` field."""
    oneof = field.containing_oneof
    if oneof is None:
        return False
    synthetic = getattr(oneof, "is_synthetic", None)
    if synthetic is not None:
        return bool(synthetic)
    return len(oneof.fields) == 1 and oneof.name == f"_{field.name}"


def _build(cls: type[Message], values: Mapping[str, Any]) -> Message:
    message = cls()
    for name, value in values.items():
        if name.startswith("oneof:"):
            name, value = value
        _set(message, name, value)
    return message


def _set(message: Message, name: str, value: Any) -> None:
    field: Any = message.DESCRIPTOR.fields_by_name[name]
    if _is_map(field):
        target = getattr(message, name)
        for key, item in value.items():
            if isinstance(item, Message):
                target[key].CopyFrom(item)
            else:
                target[key] = item
    elif _is_repeated(field):
        target = getattr(message, name)
        if field.type == _T.TYPE_MESSAGE:
            for item in value:
                target.add().CopyFrom(item)
        else:
            target.extend(value)
    elif field.type == _T.TYPE_MESSAGE:
        target = getattr(message, name)
        target.SetInParent()  # an empty message still sets its oneof
        target.MergeFrom(value)
    else:
        setattr(message, name, value)


def encoded(
    descriptor: Descriptor | type[Message],
    *,
    overrides: Overrides | None = None,
    depth: int = 3,
    hostile: bool = True,
) -> st.SearchStrategy[bytes]:
    """The wire encoding of :func:`messages`."""
    drawn = messages(descriptor, overrides=overrides, depth=depth, hostile=hostile)
    return drawn.map(lambda m: m.SerializeToString())


def truncated(payloads: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """A non-empty encoding cut short at a random point (often mid-field or mid-varint)."""

    @st.composite
    def cut(draw: st.DrawFn) -> bytes:
        data = draw(payloads.filter(lambda b: len(b) > 1))
        return data[: draw(st.integers(1, len(data) - 1))]

    return cut()


def mutated(payloads: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """An encoding with a few of its bytes overwritten (wrong wire types, huge lengths, bad UTF-8)."""

    @st.composite
    def flip(draw: st.DrawFn) -> bytes:
        data = bytearray(draw(payloads.filter(bool)))
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.sampled_from((0x00, 0x7F, 0x80, 0xFF, 0xC0)))
        return bytes(data)

    return flip()


def wire_bytes() -> st.SearchStrategy[bytes]:
    """Raw bytes: random, or hand-made encodings no message of ours has (unknown fields, a length that
    runs past the end, a varint of eleven bytes, a group tag)."""
    return st.one_of(
        st.binary(max_size=200),
        st.sampled_from(
            (
                b"\x0a\xff\xff\xff\xff\x0f",  # field 1, length 2^32-1, no payload
                b"\x08" + b"\xff" * 10 + b"\x01",  # an eleven-byte varint
                b"\x0b\x0c",  # a group start and end (proto3 has none)
                b"\xf8\xff\xff\xff\x0f\x01",  # field 2^28-1 as a varint
                b"\x0a\x02\xc3\x28",  # field 1 as a string of invalid UTF-8
                b"\x12\x03\x0a\x01",  # a nested message shorter than its length
                b"\x00",  # field number 0
                b"\x07",  # wire type 7
            )
        ),
    )


def any_payload(
    descriptor: Descriptor | type[Message], overrides: Overrides | None = None
) -> st.SearchStrategy[bytes]:
    """What a fuzzer sends for one request: a plausible message (to reach deep) about half the time, a
    hostile one a quarter, otherwise a plausible one cut short or with bytes overwritten, or raw
    bytes."""
    tame = encoded(descriptor, overrides=overrides, hostile=False)
    return weighted(
        (4, tame),
        (2, encoded(descriptor, overrides=overrides)),
        (1, truncated(tame)),
        (1, mutated(tame)),
        (1, wire_bytes()),
    )
