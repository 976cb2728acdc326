"""Keep each annotated field's ``Rules:`` comment line in step with its validation rules.

Every field (and oneof) of ``protos/`` that carries ``skillclassics.validate.v1`` rules ends its leading
comment with one line that says them in words, derived from the annotation::

    // Required: the match id, "<family>.<shard>.<unique>" (INVALID_ARGUMENT when malformed, ...).
    // Rules: required; pattern ^[a-z]{2,32}\\.[0-9]{1,4}\\.[A-Za-z0-9_-]{1,80}$.
    string match_id = 1 [(skillclassics.validate.v1.field) = {required: true, pattern: "..."}];

Code generators for every language (protoc-gen-es, Go, Java, the mypy stubs here) copy leading comments
into the generated code, so this is how a client in any language sees the rules without reading the
options. ``python -m tools.proto_rules --write`` rewrites the lines (``make protos`` runs it); without
``--write`` it only checks and exits non-zero naming each line that is missing, stale or left over
(``make check-protos`` runs that), so the comments and the rules cannot drift apart.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor, OneofDescriptor
from grpc_tools import protoc

from libs.runtime import validation

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
PREFIX = "// Rules: "

_MESSAGE_TYPE = 4  # FileDescriptorProto.message_type
_NESTED_TYPE = 3  # DescriptorProto.nested_type
_FIELD = 2  # DescriptorProto.field
_ONEOF = 8  # DescriptorProto.oneof_decl


@dataclass(frozen=True)
class Element:
    """One field or oneof of a proto file: where its declaration starts and the Rules line it needs."""

    file: Path
    full_name: str
    line: int
    """The 0-based line its declaration starts on."""
    rules: str | None
    """The Rules line's text without the prefix (``None``: it has no rules, so no Rules line)."""


def descriptor_set(proto_root: Path) -> descriptor_pb2.FileDescriptorSet:
    """Every proto under ``proto_root`` compiled with its comments (source info) and imports."""
    protos = sorted(proto_root.rglob("*.proto"))
    well_known = Path(protoc.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "set.binpb"
        args = [
            "grpc_tools.protoc",
            f"-I{proto_root}",
            f"-I{well_known}",
            f"--descriptor_set_out={out}",
            "--include_source_info",
            "--include_imports",
            *[str(p.relative_to(proto_root)) for p in protos],
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def elements(proto_root: Path = PROTO_ROOT) -> list[Element]:
    """Every field and oneof declared in ``proto_root``'s files, with its place and its Rules text."""
    found_set = descriptor_set(proto_root)
    pool = descriptor_pool.DescriptorPool()
    for file_proto in found_set.file:
        pool.Add(file_proto)
    found: list[Element] = []
    for file_proto in found_set.file:
        path = proto_root / file_proto.name
        if not path.is_file():
            continue  # an import from outside protos/ (descriptor.proto)
        spans = {tuple(loc.path): loc.span[0] for loc in file_proto.source_code_info.location}
        file_descriptor = pool.FindFileByName(file_proto.name)
        for index, message_proto in enumerate(file_proto.message_type):
            message = file_descriptor.message_types_by_name[message_proto.name]
            found += _walk(path, message, (_MESSAGE_TYPE, index), spans)
    return found


def _walk(
    path: Path, message: Descriptor, at: tuple[int, ...], spans: dict[tuple[int, ...], int]
) -> Iterator[Element]:
    for field in message.fields:
        rules = validation.rules_of(field)
        text = validation.describe(rules, field) if rules is not None else None
        yield Element(path, field.full_name, spans[(*at, _FIELD, field.index)], text or None)
    for index, oneof in enumerate(message.oneofs):
        if not _declared(oneof):
            continue
        text = validation.describe_oneof(oneof) if validation.oneof_required(oneof) else None
        yield Element(path, oneof.full_name, spans[(*at, _ONEOF, index)], text)
    for index, nested in enumerate(message.nested_types):
        if nested.GetOptions().map_entry:
            continue  # a map field's entry type, written by protoc, not in the file
        yield from _walk(path, nested, (*at, _NESTED_TYPE, index), spans)


def _declared(oneof: OneofDescriptor) -> bool:
    """A oneof written in the file (not a proto3 ``optional`` field's synthetic one)."""
    field: FieldDescriptor = oneof.fields[0]
    return not (len(oneof.fields) == 1 and oneof.name == f"_{field.name}")


def _comment_start(lines: list[str], line: int) -> int:
    """The first line of the comment block right above ``line`` (``line`` itself: none)."""
    start = line
    while start > 0 and lines[start - 1].lstrip().startswith("//"):
        start -= 1
    return start


def rewritten(proto_root: Path = PROTO_ROOT) -> dict[Path, tuple[str, str, list[str]]]:
    """Each proto file whose Rules lines are not as the rules say: its text now, its text as it should
    be, and what differs (one entry per field)."""
    by_file: dict[Path, list[Element]] = {}
    for element in elements(proto_root):
        by_file.setdefault(element.file, []).append(element)
    changed: dict[Path, tuple[str, str, list[str]]] = {}
    for path, found in sorted(by_file.items()):
        text = path.read_text()
        lines = text.split("\n")
        notes: list[str] = []
        for element in sorted(found, key=lambda e: e.line, reverse=True):  # from the bottom: lines move
            declaration = lines[element.line]
            indent = declaration[: len(declaration) - len(declaration.lstrip())]
            start = _comment_start(lines, element.line)
            last = element.line - 1
            has_line = last >= start and lines[last].lstrip().startswith(PREFIX)
            wanted = f"{indent}{PREFIX}{element.rules}." if element.rules is not None else None
            where = f"{path.relative_to(proto_root)}:{element.line + 1} {element.full_name}"
            if wanted is None:
                if has_line:
                    del lines[last]
                    notes.append(f"{where}: a Rules line but no rules")
            elif has_line:
                if lines[last] != wanted:
                    notes.append(
                        f"{where}: Rules line is {lines[last].strip()!r}, should be {wanted.strip()!r}"
                    )
                    lines[last] = wanted
            else:
                lines.insert(element.line, wanted)
                notes.append(f"{where}: no Rules line, should end its comment with {wanted.strip()!r}")
        new = "\n".join(lines)
        if new != text:
            changed[path] = (text, new, list(reversed(notes)))
    return changed


def write(proto_root: Path = PROTO_ROOT) -> list[str]:
    """Rewrite the Rules lines that differ from the rules; what was changed (empty: nothing)."""
    changed = rewritten(proto_root)
    for path, (_, new, _) in changed.items():
        path.write_text(new)
    return [note for _, _, notes in changed.values() for note in notes]


def documented(proto_root: Path = PROTO_ROOT) -> dict[str, str]:
    """The Rules line each field or oneof's comment ends with now (by full name; absent: none)."""
    found: dict[str, str] = {}
    cache: dict[Path, list[str]] = {}
    for element in elements(proto_root):
        lines = cache.setdefault(element.file, element.file.read_text().split("\n"))
        last = lines[element.line - 1].strip() if element.line else ""
        if last.startswith(PREFIX):
            found[element.full_name] = last.removeprefix(PREFIX)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--write", action="store_true", help="rewrite the Rules lines instead of checking them"
    )
    parser.add_argument("--protos", type=Path, default=PROTO_ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write:
        notes = write(args.protos)
        print(f"proto rules: {len(notes)} Rules comment line(s) rewritten")
        return 0
    changed = rewritten(args.protos)
    if changed:
        print(
            "Rules comment lines differ from the fields' rules; run `make protos` "
            "(python -m tools.proto_rules --write):"
        )
        for _, _, notes in changed.values():
            for note in notes:
                print(f"  {note}")
        return 1
    print("Rules comment lines match the fields' rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
