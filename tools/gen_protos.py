"""Generate the Python and mypy stubs for every proto under ``protos/``.

Writes the installable ``skillclassics-protos`` package in ``libs/protos/src`` (or into ``--out`` when
checking for drift). One command, reproducible: the same protos always give the same files. First it
brings each annotated field's ``Rules:`` comment line in step with its validation rules
(:mod:`tools.proto_rules`), so the stubs' comments say them.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
DEFAULT_OUT = ROOT / "libs" / "protos" / "src"


def generate(out: Path) -> list[Path]:
    """Compile every proto into ``out`` and add ``__init__.py``/``py.typed`` so it is a package."""
    protos = sorted(PROTO_ROOT.rglob("*.proto"))
    generated_root = out / "skillclassics"
    if generated_root.exists():
        shutil.rmtree(generated_root)
    out.mkdir(parents=True, exist_ok=True)
    well_known = Path(protoc.__file__).parent / "_proto"
    plugins = Path(sys.executable).parent
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--plugin=protoc-gen-mypy={plugins / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={plugins / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *[str(p.relative_to(PROTO_ROOT)) for p in protos],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for directory in [generated_root, *sorted(p for p in generated_root.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    (generated_root / "py.typed").touch()
    return protos


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    protos = generate(args.out)
    # Each annotated field's comment ends with its validation rules in words (tools/proto_rules.py);
    # the generated stubs carry the comments, so rewritten ones are generated again. Imported only
    # now: it reads the rules with the stubs just generated.
    importlib.invalidate_caches()
    from tools import proto_rules

    if proto_rules.write():
        print("rewrote the Rules comment lines of protos/ (tools/proto_rules.py); generating again")
        generate(args.out)
    from tools import errors_doc  # docs/errors.md, from the error catalogue just generated

    if errors_doc.write():
        print("rewrote docs/errors.md from the error catalogue (tools/errors_doc.py)")
    print(f"generated stubs for {len(protos)} proto file(s) in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
