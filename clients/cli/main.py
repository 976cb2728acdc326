"""The ``skillclassics`` command line: ``skillclassics COMMAND [ARGS...]``.

Commands:

* ``verify PROOF.json``: check a match's fairness proof offline (``-`` reads standard input).

Exit status: 0 when the command succeeded (for ``verify``: the proof is valid), 1 when it ran but the
answer is negative (the proof does not verify), 2 for a usage error or unreadable/malformed input.

To add a command, write a ``_register_NAME(subparsers)`` function that adds its sub-parser and sets
``handler`` (a :data:`Handler`) with ``set_defaults``, and append it to :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, TypeAlias

from libs.fairness import FairnessError, Proof, verify

__all__ = [
    "COMMANDS",
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_OK",
    "CommandError",
    "Handler",
    "SubParsers",
    "build_parser",
    "main",
]

PROG: Final = "skillclassics"
EXIT_OK: Final = 0
"""The command succeeded."""
EXIT_FAILED: Final = 1
"""The command ran and the answer is negative (e.g. the proof does not verify)."""
EXIT_ERROR: Final = 2
"""Usage error, or the input could not be read or parsed."""

Handler = Callable[[argparse.Namespace], int]
"""Runs a parsed command and returns its exit status."""
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""The object commands register their sub-parser with (``subparsers.add_parser(...)``)."""


class CommandError(Exception):
    """A command cannot run (unreadable input and the like): reported on stderr with exit status 2."""


# --- verify ---


def _register_verify(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="verify a match's fairness proof offline",
        description=(
            "Recompute the commitment and every draw of a fairness proof "
            "(format skillclassics-fairness-proof/1, see docs/fairness.md). "
            "Exit status: 0 valid, 1 does not verify, 2 unreadable or malformed."
        ),
    )
    parser.add_argument("proof", metavar="PROOF.json", help="the proof file, or - to read standard input")
    parser.set_defaults(handler=_run_verify)


def _read_input(path: str) -> bytes:
    if path == "-":
        stdin = sys.stdin
        buffer = getattr(stdin, "buffer", None)
        try:
            return buffer.read() if buffer is not None else stdin.read().encode("utf-8")
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read standard input: {exc}") from None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CommandError(f"cannot read {path}: {reason}") from None


def _run_verify(args: argparse.Namespace) -> int:
    path: str = args.proof
    name = "standard input" if path == "-" else path
    data = _read_input(path)
    try:
        proof = Proof.from_json(data)
    except FairnessError as exc:
        raise CommandError(f"{name} is not a valid fairness proof: {exc}") from None
    report = verify(proof)
    print(report.summary(), file=sys.stdout)
    return EXIT_OK if report.ok else EXIT_FAILED


# --- the parser ---

COMMANDS: Final[tuple[Callable[[SubParsers], None], ...]] = (_register_verify,)
"""Every command's registration function, in the order ``--help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(prog=PROG, description="SkillClassics command-line client.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in COMMANDS:
        register(subparsers)
    return parser


def _print_error(command: str | None, message: str) -> None:
    prefix = f"{PROG} {command}" if command else PROG
    print(f"{prefix}: error: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``) and return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors and --help: argparse has already printed its message
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    handler: Handler = args.handler
    try:
        return handler(args)
    except CommandError as exc:
        _print_error(args.command, str(exc))
        return EXIT_ERROR
