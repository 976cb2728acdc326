"""Fail when the committed stubs in ``libs/protos/src`` differ from what the protos generate.

CI runs this (``make check-protos``) so a proto change without ``make protos`` cannot land. It also fails
when an annotated field's ``Rules:`` comment line differs from its validation rules
(:mod:`tools.proto_rules`), or ``docs/errors.md`` from the error catalogue (:mod:`tools.errors_doc`).
"""

from __future__ import annotations

import filecmp
import sys
import tempfile
from pathlib import Path

from tools import errors_doc, proto_rules
from tools.gen_protos import DEFAULT_OUT, generate


def _files(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch)
        generate(fresh)
        committed_files = _files(DEFAULT_OUT / "skillclassics")
        fresh_files = _files(fresh / "skillclassics")
        drift = sorted(str(p) for p in committed_files ^ fresh_files)
        drift += sorted(
            str(p)
            for p in committed_files & fresh_files
            if not filecmp.cmp(DEFAULT_OUT / "skillclassics" / p, fresh / "skillclassics" / p, shallow=False)
        )
    if drift:
        print("generated stubs are out of date; run `make protos` and commit. Differing files:")
        for name in drift:
            print(f"  skillclassics/{name}")
        return 1
    print("generated stubs match the protos")
    # Each annotated field's Rules comment line matches its rules, and docs/errors.md the catalogue.
    return proto_rules.main([]) or errors_doc.main([])


if __name__ == "__main__":
    sys.exit(main())
