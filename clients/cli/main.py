"""The ``skillclassics`` command line: ``skillclassics COMMAND [ARGS...]``.

Commands (see ``docs/cli.md``):

* ``verify PROOF.json``: check a match's fairness proof offline (``-`` reads standard input), and
  against the commitment, client seed and draws the player recorded (``--commitment``, ``--client-seed``,
  ``--seat``, ``--draw``).
* ``proof MATCH_ID``: fetch a finished match's proof through the gateway, save it and verify it against
  what ``play`` recorded for the match (``$XDG_CONFIG_HOME/skillclassics/fairness/PLAYER/MATCH_ID.json``).
* ``login PLAYER``: mint a development token with the stack's key and keep it for the other commands.
* ``whoami``, ``ratings``, ``tables``, ``create``, ``join TABLE_ID``, ``queue``: the lobby, through the
  gateway (``create --wait``, ``join`` and ``queue`` then play the match).
* ``formations [list | save NAME FILE | delete NAME]``: the player's saved Game of the Generals
  formations.
* ``play MATCH_ID``: the interactive board; ``watch MATCH_ID``: follow a match as a spectator;
  ``record MATCH_ID``: a finished match's record (PGN for chess, MAT for backgammon).
* ``bot``: a bot that finds a game and plays it (``--games N`` in a row).

The gateway is ``--gateway`` or ``GATEWAY_ADDRESS`` (default ``127.0.0.1:50050``); the token is
``--token``, ``SKILLCLASSICS_TOKEN``, or the file ``login`` wrote (``$XDG_CONFIG_HOME/skillclassics/token``,
by default ``~/.config/skillclassics/token``).

Exit status: 0 when the command succeeded (for ``verify``: the proof is valid), 1 when it ran but the
answer is negative (the proof does not verify, the gateway refused: ``error: CODE: reason``), 2 for a
usage error or unreadable/malformed input.

To add a command, write a ``_register_NAME(subparsers)`` function that adds its sub-parser and sets
``handler`` (a :data:`Handler`) or ``async_handler`` (an :data:`AsyncHandler`) with ``set_defaults``,
and append it to :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TextIO, TypeAlias

import grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2

from clients.bot import BotSettings, run_bot
from clients.fairness import FairnessBook, FairnessCheck
from clients.families import (
    FamilyClient,
    InputError,
    UnknownFamily,
    clock_line,
    family,
    family_names,
    family_of_match,
    resign_action,
    result_line,
    seat_names,
    with_capped_bonus,
)
from clients.load.cli import register as _register_load
from clients.player import (
    DEFAULT_GATEWAY,
    DevKeyMissing,
    GatewayError,
    MatchStream,
    PlayerSession,
    development_token,
    expires_at_ms,
    is_over,
)
from libs.fairness import FairnessError, Proof, UsedDraw, verify
from libs.runtime import eventloop
from libs.runtime.private_files import write_private

__all__ = [
    "COMMANDS",
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_OK",
    "AsyncHandler",
    "CommandError",
    "Handler",
    "InteractiveGame",
    "Screen",
    "SubParsers",
    "build_parser",
    "dev_token",
    "fairness_folder",
    "main",
    "main_async",
    "token_file",
]

PROG: Final = "skillclassics"
EXIT_OK: Final = 0
"""The command succeeded."""
EXIT_FAILED: Final = 1
"""The command ran and the answer is negative (the proof does not verify, the gateway refused)."""
EXIT_ERROR: Final = 2
"""Usage error, or the input could not be read or parsed."""
EXIT_INTERRUPTED: Final = 130
EXIT_TERMINATED: Final = 143

Handler = Callable[[argparse.Namespace], int]
"""Runs a parsed command and returns its exit status."""
AsyncHandler = Callable[[argparse.Namespace], Awaitable[int]]
"""Runs a parsed command in an event loop and returns its exit status."""
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""The object commands register their sub-parser with (``subparsers.add_parser(...)``)."""

TOKEN_VARIABLE: Final = "SKILLCLASSICS_TOKEN"
GATEWAY_VARIABLE: Final = "GATEWAY_ADDRESS"
LOGIN_TTL_S: Final = 24 * 3600


class CommandError(Exception):
    """A command cannot run (unreadable input and the like): reported on stderr with exit status 2."""


def _say(text: str = "") -> None:
    print(text, file=sys.stdout, flush=True)


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
    parser.add_argument(
        "--commitment",
        metavar="HEX",
        help="the commitment announced before the match (64 hex digits): the proof must commit to it",
    )
    parser.add_argument(
        "--client-seed",
        metavar="HEX",
        help="your own client seed, in hex: it must be in the proof (for --seat, else for any seat)",
    )
    parser.add_argument("--seat", type=int, metavar="N", help="your seat (0 or 1), with --client-seed")
    parser.add_argument(
        "--draw",
        action="append",
        default=[],
        metavar="STREAM:INDEX",
        help="a draw the match used (e.g. shuffle:0): it must be in the proof; repeat for each",
    )
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
    seeds: dict[int, bytes] | list[bytes] | None = None
    if args.client_seed is not None:
        seed = _client_seed(args.client_seed)
        seeds = [seed] if args.seat is None else {args.seat: seed}
    elif args.seat is not None:
        raise CommandError("--seat goes with --client-seed (the seat whose seed it is)")
    try:
        report = verify(
            proof,
            commitment=_commitment(args.commitment) if args.commitment is not None else None,
            client_seeds=seeds,
            used_draws=[_used_draw(text) for text in args.draw],
        )
    except FairnessError as exc:  # an expected value that is out of range (a seat, a seed)
        raise CommandError(str(exc)) from None
    for line in report.lines():
        print(line, file=sys.stdout)
    return EXIT_OK if report.ok else EXIT_FAILED


def _commitment(text: str) -> str:
    value = text.strip().lower()
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise CommandError(f"--commitment must be 64 hex digits (a SHA-256), got {text!r}")
    return value


def _client_seed(text: str) -> bytes:
    try:
        seed = bytes.fromhex(text.strip())
    except ValueError:
        raise CommandError(f"--client-seed must be hex digits, got {text!r}") from None
    if not 1 <= len(seed) <= 64:
        raise CommandError(f"--client-seed must be 1 to 64 bytes, got {len(seed)}")
    return seed


def _used_draw(text: str) -> UsedDraw:
    stream, _, index = text.rpartition(":")
    try:
        return UsedDraw(stream, int(index))
    except (ValueError, FairnessError):
        raise CommandError(f"--draw must be STREAM:INDEX (e.g. shuffle:0), got {text!r}") from None


# --- tokens and the gateway ---


def token_file(env: Mapping[str, str]) -> Path:
    """Where ``login`` keeps the token: ``$XDG_CONFIG_HOME/skillclassics/token`` (``~/.config`` by
    default)."""
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "skillclassics" / "token"


def _save_token(path: Path, token: str) -> None:
    """Write ``token`` to ``path`` readable by its owner only (mode 0600), replacing it atomically."""
    write_private(path, token + "\n")


def dev_token(player: str, env: Mapping[str, str], ttl_s: int = LOGIN_TTL_S) -> str:
    """A development token for ``player`` (:func:`clients.player.development_token`)."""
    try:
        return development_token(player, env, ttl_s)
    except (DevKeyMissing, ValueError) as error:  # ConfigError is a ValueError too
        raise CommandError(str(error)) from None


def _stored_token(args: argparse.Namespace) -> str:
    token = (getattr(args, "token", None) or os.environ.get(TOKEN_VARIABLE, "")).strip()
    if token:
        return token
    path = token_file(os.environ)
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror or error}") from None
    if not token:
        raise CommandError(
            f"not signed in: run `{PROG} login PLAYER` (or pass --token, or set {TOKEN_VARIABLE})"
        )
    return token


def _address(args: argparse.Namespace) -> str:
    return str(getattr(args, "gateway", None) or os.environ.get(GATEWAY_VARIABLE) or DEFAULT_GATEWAY)


def fairness_folder(env: Mapping[str, str]) -> Path:
    """Where the command line keeps what players recorded about their matches' fairness, one JSON file
    per player and match (and the proofs ``play`` and ``proof`` fetched): next to the token,
    ``$XDG_CONFIG_HOME/skillclassics/fairness``."""
    return token_file(env).parent / "fairness"


def _session(args: argparse.Namespace, token: str | None = None) -> PlayerSession:
    book = FairnessBook(fairness_folder(os.environ))
    return PlayerSession(_address(args), token or _stored_token(args), fairness_book=book)


def _gateway_options(parser: argparse.ArgumentParser, *, token: bool = True) -> None:
    parser.add_argument(
        "--gateway",
        metavar="HOST:PORT",
        help=f"the gateway (default: ${GATEWAY_VARIABLE} or {DEFAULT_GATEWAY})",
    )
    if token:
        parser.add_argument(
            "--token", help=f"the bearer token (default: ${TOKEN_VARIABLE} or the file `login` wrote)"
        )


def _family_options() -> dict[str, tuple[list[str], list[str] | None]]:
    """Every family's option names (the registry's), with what each family says of them and the values
    they take (``None`` when some family's option takes any value)."""
    found: dict[str, tuple[list[str], list[str] | None]] = {}
    for name in family_names():
        fam = family(name)
        for option in fam.option_names:
            helps, choices = found.get(option, ([], []))
            helps.append(fam.option_help.get(option, f"{name}: {option}"))
            mine = fam.option_choices.get(option)
            if choices is None or mine is None:
                choices = None
            else:
                choices += [value for value in mine if value not in choices]
            found[option] = (helps, choices)
    return found


def _game_options(parser: argparse.ArgumentParser, *, minutes: float | None) -> None:
    families = ", ".join(family_names())
    parser.add_argument("--family", default="chess", help=f"the game family: {families} (default: chess)")
    quickest = ", ".join(f"{name} {family(name).quick_minutes:g}" for name in family_names())
    default = f"{minutes:g}" if minutes is not None else f"the family's shortest lobby clock: {quickest}"
    parser.add_argument(
        "--minutes", type=float, default=minutes, help=f"main time per player (default: {default})"
    )
    parser.add_argument(
        "--increment", type=float, default=0, metavar="SECONDS", help="added per move (default: 0)"
    )
    parser.add_argument(
        "--bonus-within",
        type=float,
        default=0,
        metavar="SECONDS",
        help="a capped-bonus clock (seed 002's backgammon): the increment is added only for a move made "
        "within SECONDS (default: 0, every move); 002's quick clock is "
        "--minutes 0.5 --increment 10 --bonus-within 10 --cap 30",
    )
    parser.add_argument(
        "--cap",
        type=float,
        default=0,
        metavar="SECONDS",
        help="with a capped bonus: the clock never rises above SECONDS (default: 0, no cap)",
    )
    parser.add_argument(
        "--fee", type=int, default=0, metavar="MINOR", help="entry fee in minor units, cents (default: 0)"
    )
    parser.add_argument("--currency", default="USD", help="ISO 4217 currency of the fee (default: USD)")
    # The families' options, from the registry: one flag per option name, whichever families have it.
    for option, (helps, choices) in sorted(_family_options().items()):
        flag = f"--{option.replace('_', '-')}"
        parser.add_argument(flag, dest=option, choices=choices, help="; ".join(helps))


def _policy_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stand-in",
        action="store_true",
        help="a player away for 120 s is played by a stand-in instead of forfeiting after 60 s "
        "(backgammon and gin)",
    )


def _family(name: str) -> FamilyClient:
    try:
        return family(name)
    except UnknownFamily as error:
        raise CommandError(str(error)) from None


def _settings(args: argparse.Namespace) -> dict[str, str]:
    """The family options given as flags (the family judges them: another family's flag is an error)."""
    names = _family_options()
    return {name: str(getattr(args, name)) for name in names if getattr(args, name, None) is not None}


def _table_setup(
    args: argparse.Namespace,
) -> tuple[FamilyClient, rules_pb2.MatchOptions, rules_pb2.TimeControl]:
    fam = _family(args.family)
    try:
        options = fam.options(_settings(args))
    except InputError as error:
        raise CommandError(str(error)) from None
    minutes = fam.quick_minutes if args.minutes is None else args.minutes
    if minutes <= 0 or args.increment < 0:
        raise CommandError("--minutes must be positive and --increment not negative")
    if args.fee < 0:
        raise CommandError("--fee cannot be negative")
    try:
        control = fam.time_control(minutes, args.increment)
    except InputError as error:
        raise CommandError(str(error)) from None
    if args.bonus_within < 0 or args.cap < 0:
        raise CommandError("--bonus-within and --cap cannot be negative")
    return fam, options, with_capped_bonus(control, args.bonus_within, args.cap)


def _fee(minor: int, currency: str) -> str:
    return "free" if not minor else f"{minor / 100:.2f} {currency}"


def _clock(control: rules_pb2.TimeControl) -> str:
    """A clock in a few characters: ``5+3`` (minutes + seconds per move), ``0.5+10 within 10s cap 30s``
    (a capped bonus), ``10 + 5x30s`` (byo-yomi), ``60s/move, 3 strikes`` (a per-move clock)."""
    if control.periods and not control.base_ms:
        return f"{control.period_ms / 1000:g}s/move, {control.periods} strikes"
    if control.periods:
        return f"{control.base_ms / 60_000:g} + {control.periods}x{control.period_ms / 1000:g}s"
    clock = f"{control.base_ms / 60_000:g}+{control.increment_ms / 1000:g}"
    if control.increment_within_ms:
        clock += f" within {control.increment_within_ms / 1000:g}s"
    if control.cap_ms:
        clock += f" cap {control.cap_ms / 1000:g}s"
    return clock


def _policy(args: argparse.Namespace) -> mm.DisconnectPolicy.ValueType:
    return mm.DISCONNECT_POLICY_STAND_IN if getattr(args, "stand_in", False) else mm.DISCONNECT_POLICY_FORFEIT


def _describe_table(table: mm.Table) -> str:
    try:
        options = family(table.family).describe_options(table.options)
    except UnknownFamily:
        options = ""
    stand_in = "stand-in after 120 s" if table.disconnect_policy == mm.DISCONNECT_POLICY_STAND_IN else ""
    parts = [
        table.family,
        _clock(table.time_control),
        options,
        stand_in,
        _fee(table.entry_fee_minor, table.currency),
    ]
    return ", ".join(part for part in parts if part)


# --- login, whoami, ratings ---


def _register_login(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "login",
        help="sign in for development: mint a token with the stack's key and keep it",
        description=(
            "Mint a development token for PLAYER with the local stack's development key "
            "(DATA_DIR/gateway-token-signing.pem as `make run` keeps it) and save it, mode 0600, to "
            "$XDG_CONFIG_HOME/skillclassics/token (default ~/.config/skillclassics/token). "
            "Production tokens come from the platform's login service."
        ),
    )
    parser.add_argument("player", help="the player id (1-128 of A-Z a-z 0-9 . _ : @ -)")
    parser.add_argument(
        "--ttl", type=int, default=LOGIN_TTL_S, metavar="SECONDS", help="token lifetime (default: one day)"
    )
    _gateway_options(parser, token=False)
    parser.set_defaults(async_handler=_run_login)


async def _run_login(args: argparse.Namespace) -> int:
    token = dev_token(args.player, os.environ, args.ttl)
    path = token_file(os.environ)
    address = _address(args)
    note = ""
    async with PlayerSession(address, token) as session:
        try:
            me = await session.whoami()
        except GatewayError as error:
            if error.code == grpc.StatusCode.UNAUTHENTICATED:
                raise GatewayError(
                    error.code,
                    f"{error.details} (the gateway at {address} trusts another key: run login where "
                    "the stack keeps its data folder, or set DATA_DIR)",
                ) from None
            note = f" (the gateway at {address} did not answer: {error})"
            expires = int(time.time()) + args.ttl
        else:
            expires = expires_at_ms(me) // 1000
    _save_token(path, token)
    until = datetime.fromtimestamp(expires, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    _say(f"signed in as {args.player} until {until}; token saved to {path}{note}")
    return EXIT_OK


def _register_whoami(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser("whoami", help="who the token signs you in as")
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_whoami)


async def _run_whoami(args: argparse.Namespace) -> int:
    async with _session(args) as session:
        me = await session.whoami()
    until = datetime.fromtimestamp(expires_at_ms(me) / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    _say(f"{me.player_id} (token valid until {until})")
    return EXIT_OK


def _register_ratings(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser("ratings", help="your rating in each family")
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_ratings)


async def _run_ratings(args: argparse.Namespace) -> int:
    async with _session(args) as session:
        reply = await session.ratings()
    if not reply.ratings:
        _say("no rated games yet (everyone starts at 1500)")
    for rating in reply.ratings:
        _say(f"{rating.family}: {rating.rating} after {rating.games} games")
    return EXIT_OK


# --- formations ---


def _register_formations(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "formations",
        help="your saved Game of the Generals formations: list, save NAME FILE, delete NAME",
        description="List, save or delete your saved Game of the Generals formations. A formation is "
        "placements in your own orientation (row 1 your back row), like 'a1=FLG b1=PVT ...': "
        "see docs/generals.md.",
    )
    actions = parser.add_subparsers(dest="formations_action", metavar="ACTION")
    actions.add_parser("list", help="list them (the default)")
    save = actions.add_parser("save", help="save FILE ('-': standard input) as NAME, replacing NAME")
    save.add_argument("name", metavar="NAME")
    save.add_argument("file", metavar="FILE")
    delete = actions.add_parser("delete", help="delete NAME")
    delete.add_argument("name", metavar="NAME")
    _gateway_options(parser)
    for sub in actions.choices.values():  # after the action too; not unset there when given before it
        sub.add_argument("--gateway", metavar="HOST:PORT", default=argparse.SUPPRESS, help="as above")
        sub.add_argument("--token", default=argparse.SUPPRESS, help="as above")
    parser.set_defaults(async_handler=_run_formations)


async def _run_formations(args: argparse.Namespace) -> int:
    action = args.formations_action or "list"
    text = ""
    if action == "save":
        try:
            text = _read_input(args.file).decode("utf-8")
        except UnicodeDecodeError:
            raise CommandError(f"{args.file} is not UTF-8 text") from None
    async with _session(args) as session:
        if action == "save":
            formation, replaced = await session.save_formation(args.name, text)
            _say(f"{'replaced' if replaced else 'saved'} {formation.name}: {formation.formation}")
        elif action == "delete":
            formation = await session.delete_formation(args.name)
            _say(f"deleted {formation.name}: {formation.formation}")
        else:
            formations = await session.list_formations()
            if not formations:
                _say("no saved formations")
            for formation in formations:
                _say(f"{formation.name}: {formation.formation}")
    return EXIT_OK


# --- tables ---


def _register_tables(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser("tables", help="list the open tables")
    parser.add_argument("--family", help="only this family (default: every family there is)")
    parser.add_argument("--minutes", type=float, help="only tables with this main time")
    parser.add_argument("--max-fee", type=int, default=0, metavar="MINOR", help="only fees up to this")
    parser.add_argument("--currency", default="", help="only tables in this currency")
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_tables)


async def _run_tables(args: argparse.Namespace) -> int:
    names = [_family(args.family).name] if args.family else list(family_names())
    base_ms = round(args.minutes * 60_000) if args.minutes else 0
    found: list[mm.Table] = []
    async with _session(args) as session:
        for name in names:
            try:
                found += await session.list_tables(
                    name, base_ms=base_ms, max_entry_fee_minor=args.max_fee, currency=args.currency
                )
            except GatewayError as error:
                if args.family or error.reason != "UNKNOWN_FAMILY":
                    raise
                # A family the clients know but this stack does not offer (yet): skipped.
    if not found:
        _say("no open tables")
    now_ms = int(time.time() * 1000)
    for table in found:
        age = max(0, now_ms - table.created_at_ms) // 1000
        _say(f"{table.table_id}  {_describe_table(table)}  by {table.creator_id}, {age} s ago")
    return EXIT_OK


def _register_create(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "create",
        help="open a table (it prints the table id; --wait plays the match once someone joins)",
    )
    _game_options(parser, minutes=5)
    _policy_option(parser)
    parser.add_argument("--private", action="store_true", help="unlisted: joined by its id only")
    parser.add_argument("--wait", action="store_true", help="wait for an opponent, then play")
    _play_options(parser)
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_create)


async def _run_create(args: argparse.Namespace) -> int:
    fam, options, control = _table_setup(args)
    visibility = mm.VISIBILITY_PRIVATE if args.private else mm.VISIBILITY_PUBLIC
    async with _session(args) as session:
        async with contextlib.AsyncExitStack() as scope:
            # With --wait the lobby stream opens first, so the MatchReady cannot slip past.
            lobby = await scope.enter_async_context(session.lobby()) if args.wait else None
            table = await session.create_table(
                fam.name,
                options=options,
                time_control=control,
                entry_fee_minor=args.fee,
                currency=args.currency,
                visibility=visibility,
                disconnect_policy=_policy(args),
            )
            _say(table.table_id)
            if lobby is None:
                return EXIT_OK
            _say(f"table {table.table_id} ({_describe_table(table)}): waiting for an opponent")
            _say("(Ctrl-C cancels the table)")
            try:
                ready = await lobby.match_ready(table_id=table.table_id)
            except asyncio.CancelledError:
                with contextlib.suppress(GatewayError):
                    await session.leave_table(table.table_id)
                    print(f"table {table.table_id} cancelled", file=sys.stderr)
                raise
        _say(f"{ready.opponent_id} joined: match {ready.match_id}")
        return await _play(session, ready.match_id, args)


def _register_join(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser("join", help="join a table and play its match")
    parser.add_argument("table_id", metavar="TABLE_ID")
    _play_options(parser)
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_join)


async def _run_join(args: argparse.Namespace) -> int:
    async with _session(args) as session:
        async with session.lobby() as lobby:
            table = await session.join_table(args.table_id)
            if table.status == mm.TABLE_STATUS_PLAYING and table.match_id:
                match_id = table.match_id
            else:
                _say(f"joined table {table.table_id}; waiting for its match to be created")
                match_id = (await lobby.match_ready(table_id=table.table_id)).match_id
        _say(f"joined table {table.table_id} of {table.creator_id}: match {match_id}")
        return await _play(session, match_id, args)


def _register_queue(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser("queue", help="wait in the quick-match queue, then play")
    _game_options(parser, minutes=5)
    _policy_option(parser)
    _play_options(parser)
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_queue)


async def _run_queue(args: argparse.Namespace) -> int:
    fam, options, control = _table_setup(args)
    async with _session(args) as session:
        async with session.lobby() as lobby:
            entered = await session.enter_queue(
                fam.name,
                options=options,
                time_control=control,
                entry_fee_minor=args.fee,
                currency=args.currency,
                disconnect_policy=_policy(args),
            )
            _say(f"queued (rating {entered.rating}); waiting for a pairing (Ctrl-C leaves the queue)")
            try:
                ready = await lobby.match_ready()
            except asyncio.CancelledError:
                with contextlib.suppress(GatewayError):
                    await session.leave_queue()
                    print("left the queue", file=sys.stderr)
                raise
        _say(f"paired with {ready.opponent_id}: match {ready.match_id}")
        return await _play(session, ready.match_id, args)


# --- play and watch ---


def _play_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ascii", action="store_true", help="draw with ASCII only (no chess glyphs, suits)")
    parser.add_argument(
        "--plain", action="store_true", help="no live clock line (also the default when not on a terminal)"
    )


def _register_play(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "play",
        help="play a match you are seated in (interactive)",
        description=(
            "Draws the match, both clocks and the opponent's moves as they happen. Type a move "
            "(chess: SAN or UCI; backgammon: 24/18 13/8 or a play's number), ? for the legal moves, "
            "board to redraw, resign, or quit to leave "
            "(the match goes on without you). Moves typed before your turn are played when it comes. "
            "Standard input may be a file or a pipe: each line is one command."
        ),
    )
    parser.add_argument("match_id", metavar="MATCH_ID")
    _play_options(parser)
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_play)


async def _run_play(args: argparse.Namespace) -> int:
    async with _session(args) as session:
        return await _play(session, args.match_id, args, wait_s=0)


async def _play(
    session: PlayerSession, match_id: str, args: argparse.Namespace, wait_s: float | None = None
) -> int:
    """Play ``match_id``; ``wait_s``: how long it may take to appear (default: the session's wait for a
    match just paired)."""
    fam = _family_of_match(match_id)
    if fam.may_draw_chance and session.player_id is None:
        await session.whoami()  # the fairness record is kept per player
    terminal = sys.stdin.isatty()
    live = terminal and sys.stdout.isatty() and not args.plain
    lines = _stdin_lines()
    game = InteractiveGame(
        session, match_id, fam, lines, ascii=args.ascii, live=live, sequential=not terminal
    )
    return await game.run()


def _stdin_lines() -> asyncio.Queue[str | None]:
    """Standard input, line by line, read by a thread (it works the same for a terminal, a pipe or a
    file); ``None`` marks its end."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    stdin = sys.stdin

    def put(item: str | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening any more
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def read() -> None:
        try:
            while line := stdin.readline():
                put(line.rstrip("\r\n"))
        except (OSError, ValueError):
            pass
        put(None)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    return queue


class Screen:
    """Where a game is shown. On a terminal (``live``) a clock line and a prompt stay at the bottom and
    the clocks tick; otherwise text is just printed."""

    STATUS_UP: Final = "\x1b7\x1b[1A\r\x1b[2K{}\x1b8"

    def __init__(self, out: TextIO, *, live: bool) -> None:
        self.out = out
        self.live = live
        self._drawn = False
        self.status = ""
        self.prompt = "> "

    def show(self, text: str) -> None:
        if self.live and self._drawn:
            self.out.write("\r\x1b[2K\x1b[1A\r\x1b[2K")
        self.out.write(text + "\n")
        if self.live:
            self.out.write(f"{self.status}\n{self.prompt}")
            self._drawn = True
        self.out.flush()

    def typed(self) -> None:
        """The player pressed Enter: the prompt line scrolled up and stays as it is."""
        self._drawn = False

    def redraw(self) -> None:
        if self.live and not self._drawn:
            self.out.write(f"{self.status}\n{self.prompt}")
            self._drawn = True
            self.out.flush()

    def tick(self, status: str) -> None:
        self.status = status
        if self.live and self._drawn:
            self.out.write(self.STATUS_UP.format(status))
            self.out.flush()


HELP = (
    "commands: ? (legal moves), board, resign, cancel (forget moves typed ahead), quit (leave; the "
    "match goes on and you forfeit if away too long), help"
)


class InteractiveGame:
    """A match as a player plays it on the command line: the stream and the typed commands at once.

    On a terminal, a move typed before one's turn is kept and played when the turn comes (``cancel``
    forgets it) and other commands run at once. With ``sequential`` (standard input is a file or a pipe)
    the lines are a script run in order: a move waits for the turn, the next line for the move.
    """

    def __init__(
        self,
        session: PlayerSession,
        match_id: str,
        fam: FamilyClient,
        lines: asyncio.Queue[str | None],
        *,
        ascii: bool = False,
        live: bool = False,
        sequential: bool = False,
        out: TextIO | None = None,
    ) -> None:
        self.session = session
        self.match_id = match_id
        self.fam = fam
        self.lines = lines
        self.ascii = ascii
        self.sequential = sequential
        self.screen = Screen(out or sys.stdout, live=live)
        self.seat: int | None = None
        self.draws_chance = fam.uses_chance
        """Whether this match draws from a fairness stream (known once its options are read)."""
        self.names: dict[int, str] = {}
        self.latest = rules_pb2.MatchUpdate()
        """The newest update known (from the stream or an action's answer)."""
        self.ahead: collections.deque[tuple[str, rules_pb2.Action]] = collections.deque()
        self.result: rules_pb2.Result | None = None
        self._turn = asyncio.Event()

    def _note(self, update: rules_pb2.MatchUpdate) -> None:
        """Remember ``update`` if it is the newest, and whose turn it says it is."""
        if update.sequence < self.latest.sequence:
            return
        self.latest = update
        # Our turn: we have legal actions and are the seat to move (a seat not to move may have some too,
        # a draw offer or an answer in a timed phase, which need no turn and are sent at once).
        mine = not update.HasField("to_move") or update.to_move == self.seat
        if update.legal_actions and mine and not is_over(update):
            self._turn.set()
        else:
            self._turn.clear()

    def _who(self, seat: int) -> str:
        if seat == self.seat:
            return "you"
        name = self.names.get(seat, "")
        return f"{self.fam.seat_label(seat)} ({name})" if name else self.fam.seat_label(seat)

    def _clocks(self) -> str:
        line = clock_line(self.latest, self.fam, self.names, int(time.time() * 1000), viewer=self.seat)
        return line + ("   your move" if self._turn.is_set() else "")

    def _show_position(self, before: str = "") -> None:
        self.screen.status = self._clocks()
        parts = [before] if before else []
        parts.append(self.fam.render(self.latest, self.seat, ascii=self.ascii))
        if not self.screen.live:
            parts.append(self._clocks())
        self.screen.show("\n".join(parts))

    async def run(self, wait_s: float = 0.0) -> int:
        """Play until the match ends or the player leaves; ``wait_s``: how long the match may take to
        exist (just paired)."""
        info = await self.session.get_match(self.match_id, wait_s=wait_s)
        if not info.HasField("seat"):
            raise GatewayError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"you are not seated in match {self.match_id}; `watch` it instead",
            )
        self.seat = info.seat
        self.names = seat_names(info.seats)
        self.draws_chance = self.fam.draws_chance(info.options)
        if hasattr(self.fam, "set_formations"):  # Game of the Generals: `load NAME` in the setup
            with contextlib.suppress(GatewayError):
                formations = await self.session.list_formations()
                self.fam.set_formations({f.name: f.formation for f in formations})
        self._note(info.update)
        players = " vs ".join(f"{self.fam.seat_label(s)} {n}" for s, n in sorted(self.names.items()))
        header = (
            f"match {self.match_id}: {players}; you play {self.fam.seat_label(self.seat)}; "
            f"{_clock(info.time_control)} {self.fam.describe_options(info.options)}".rstrip()
        )
        self._show_position(f"{header}\n{self.fam.input_help()}; ? lists your moves, help the commands")
        if self.draws_chance:
            self.screen.show(self._commitment_line())
        if is_over(self.latest):
            self.result = self.latest.result
            self.screen.live = False
            self.screen.show(result_line(self.latest.result, self.fam, self.names))
            return await self._check_fairness()
        stream = self.session.watch_match(self.match_id, from_sequence=self.latest.sequence)
        follow = asyncio.create_task(self._follow(stream), name="follow")
        commands = asyncio.create_task(self._commands(), name="commands")
        ticker = asyncio.create_task(self._tick(), name="ticker")
        try:
            done, _ = await asyncio.wait({follow, commands}, return_when=asyncio.FIRST_COMPLETED)
            if commands in done and commands.result() == "eof" and not follow.done():
                self.screen.show("(standard input ended; following the match to its end, Ctrl-C to leave)")
                await follow
            elif follow not in done:
                self.screen.live = False
                self.screen.show("you left the match; it goes on (`play` it again to come back)")
                return EXIT_OK
            follow.result()  # a refusal of the stream is the command's error
            return await self._check_fairness() if self.result is not None else EXIT_OK
        finally:
            stream.close()
            for task in (follow, commands, ticker):
                task.cancel()
            await asyncio.gather(follow, commands, ticker, return_exceptions=True)

    def _commitment_line(self) -> str:
        """What the player learnt of the match's random stream before its first draw."""
        record = self.session.fairness(self.match_id)
        if record is None or not record.commitment:
            return (
                "fairness: no commitment was announced for this match, so its proof cannot be checked "
                "against one"
            )
        where = ""
        book = self.session.fairness_book
        if book is not None and self.session.player_id is not None:
            with contextlib.suppress(ValueError):
                where = f"; recorded in {book.path(self.session.player_id, self.match_id)}"
        return (
            f"fairness: the server committed to {record.commitment} (format version {record.version}) "
            f"before the first draw{where}"
        )

    async def _check_fairness(self) -> int:
        """The match is over: fetch its proof and check it against what was recorded (chance families)."""
        if not self.draws_chance or self.result is None:
            return EXIT_OK
        try:
            check = await self.session.check_fairness(self.match_id)
        except GatewayError as error:
            self.screen.show(
                f"fairness: the proof could not be fetched ({error}); "
                f"check it later with `{PROG} proof {self.match_id}`"
            )
            return EXIT_OK
        except FairnessError as error:
            self.screen.show(f"fairness: FAIL: the gateway's proof is malformed: {error}")
            return EXIT_FAILED
        saved = _save_proof(self.session, self.match_id, check, None)
        for line in check.lines():
            self.screen.show(f"fairness: {line}")
        if saved is not None:
            self.screen.show(f"fairness: proof saved to {saved}")
        return EXIT_OK if check.ok else EXIT_FAILED

    async def _tick(self) -> None:
        while self.screen.live:
            await asyncio.sleep(0.5)
            if self.latest.status == rules_pb2.MATCH_STATUS_LIVE:
                self.screen.tick(self._clocks())

    async def _follow(self, stream: MatchStream) -> None:
        async for update in stream:
            self._note(update)
            event = update.event
            said = ""
            if event.kind == "action" and event.HasField("seat"):
                said = f"{self._who(event.seat)} played {event.description}"
            elif event.kind == "resign" and event.HasField("seat"):
                said = f"{self._who(event.seat)} resigned"
            elif event.kind == "presence" and event.HasField("seat") and event.seat != self.seat:
                state = "connected" if event.seat in update.connected_seats else "disconnected"
                said = f"{self._who(event.seat)} {state}"
            elif event.kind not in ("action", "presence", "created") and event.description:
                said = event.description
            if is_over(update):
                self.result = update.result
                self.screen.live = False
                if event.kind == "action":
                    self._show_position(said)
                elif said:
                    self.screen.show(said)
                self.screen.show(result_line(update.result, self.fam, self.names))
                return
            if event.kind == "presence":
                self.screen.status = self._clocks()
                if said:
                    self.screen.show(said)
                continue
            self._show_position(said)
            if self._turn.is_set() and self.ahead and not self.sequential:
                text, action = self.ahead.popleft()
                self.screen.show(f"playing {text} (typed ahead)")
                await self._submit(action)

    async def _submit(self, action: rules_pb2.Action) -> None:
        try:
            reply = await self.session.submit(self.match_id, action)
        except GatewayError as error:
            self.screen.show(f"error: {error.explained()}")
        else:
            self._note(reply.update)

    async def _commands(self) -> str:
        while True:
            line = await self.lines.get()
            if line is None:
                return "eof"
            self.screen.typed()
            text = line.strip()
            lowered = text.lower()
            if not text:
                self.screen.redraw()
            elif lowered in ("?", "moves", "legal"):
                self.screen.show(self.fam.describe_legal(self.latest))
            elif lowered in ("help", "h"):
                self.screen.show(f"{self.fam.input_help()}\n{HELP}")
            elif lowered in ("board", "b"):
                self._show_position()
            elif lowered in ("quit", "exit", "q"):
                return "quit"
            elif lowered == "cancel":
                self.ahead.clear()
                self.screen.show("moves typed ahead forgotten")
            elif lowered == "resign":
                await self._submit(resign_action())
                self.screen.redraw()
            else:
                await self._typed_action(text)

    async def _typed_action(self, text: str) -> None:
        try:
            action = self.fam.parse(text, self.latest)
        except InputError as error:
            self.screen.show(str(error))
            return
        if self.fam.needs_turn(action) and not self._turn.is_set():
            if self.sequential:
                await self._turn.wait()  # a script: its next move waits for the turn
            else:
                self.ahead.append((text, action))
                self.screen.show(f"not your turn: {text} will be played when it is (cancel forgets it)")
                return
        await self._submit(action)
        self.screen.redraw()


def _family_of_match(match_id: str) -> FamilyClient:
    """The family a match id names; a usage error when it names none this command line plays."""
    try:
        return family_of_match(match_id)
    except UnknownFamily as error:
        raise CommandError(str(error)) from None


def _register_watch(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser("watch", help="follow a match as a spectator, printing each update")
    parser.add_argument("match_id", metavar="MATCH_ID")
    parser.add_argument("--from-start", action="store_true", help="replay the match from its first update")
    parser.add_argument("--brief", action="store_true", help="one line per update, no board")
    parser.add_argument("--ascii", action="store_true", help="draw with ASCII only")
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_watch)


async def _run_watch(args: argparse.Namespace) -> int:
    fam = _family_of_match(args.match_id)
    async with _session(args) as session:
        info = await session.get_match(args.match_id, spectator=True)
        names = seat_names(info.seats)
        players = " vs ".join(f"{fam.seat_label(s)} {n}" for s, n in sorted(names.items()))
        setup = f"{_clock(info.time_control)} {fam.describe_options(info.options)}"
        _say(f"match {args.match_id}: {players}; {setup}")
        start = 0 if args.from_start else info.update.sequence

        def show(update: rules_pb2.MatchUpdate) -> None:
            event = update.event
            who = ""
            if event.HasField("seat"):
                name = names.get(event.seat, "")
                who = f"{fam.seat_label(event.seat)} ({name}) " if name else f"{fam.seat_label(event.seat)} "
            what = event.description
            if event.kind == "presence" and event.HasField("seat"):
                what = "connected" if event.seat in update.connected_seats else "disconnected"
            _say(f"#{update.sequence} {event.kind}: {who}{what}".rstrip())
            if not args.brief and event.kind != "presence":
                _say(fam.render(update, None, ascii=args.ascii))
                _say(clock_line(update, fam, names))
            if is_over(update):
                _say(result_line(update.result, fam, names))

        if not args.from_start:
            show(info.update)
            if is_over(info.update):
                return EXIT_OK
        async for update in session.watch_match(args.match_id, spectator=True, from_sequence=start):
            show(update)
    return EXIT_OK


def _register_record(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "record", help="a finished match's result and record (PGN for chess, MAT for backgammon)"
    )
    parser.add_argument("match_id", metavar="MATCH_ID")
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_record)


async def _run_record(args: argparse.Namespace) -> int:
    async with _session(args) as session:
        record = await session.get_record(args.match_id)
    _say(record.record.rstrip("\n"))
    return EXIT_OK


# --- proof ---


def _register_proof(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "proof",
        help="fetch a finished match's fairness proof, save it and verify it against what you recorded",
        description=(
            "Fetches the proof of a finished match through the gateway (GetFairnessProof) and its record "
            "(the draws the match used), saves the proof, and verifies it against what `play` recorded "
            "for you before and during the match: the commitment announced before the first draw, your "
            "own client seed (for your seat) and every draw the match used. "
            "Exit status: 0 valid, 1 does not verify (or the gateway refused), 2 usage error."
        ),
    )
    parser.add_argument("match_id", metavar="MATCH_ID")
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="where to save the proof (default: next to the match's record, "
        "$XDG_CONFIG_HOME/skillclassics/fairness/PLAYER/MATCH_ID.proof.json)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for a match that just ended to have its proof (default: 10)",
    )
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_proof)


async def _run_proof(args: argparse.Namespace) -> int:
    fam = _family_of_match(args.match_id)
    if not fam.may_draw_chance:
        raise CommandError(f"{fam.name} uses no chance: match {args.match_id} has no fairness proof")
    async with _session(args) as session:
        await session.whoami()
        try:
            check = await session.check_fairness(args.match_id, wait_s=max(0.0, args.wait))
        except FairnessError as error:
            _say(f"FAIL: the gateway's proof of {args.match_id} is malformed: {error}")
            return EXIT_FAILED
        saved = _save_proof(session, args.match_id, check, args.out)
    for line in check.lines():
        _say(line)
    if saved is not None:
        _say(f"proof saved to {saved}")
    return EXIT_OK if check.ok else EXIT_FAILED


def _save_proof(session: PlayerSession, match_id: str, check: FairnessCheck, out: str | None) -> Path | None:
    """Save the proof ``check`` verified: to ``out``, else next to the match's fairness record (``None``
    when there is nowhere to put it). ``CommandError`` when ``out`` cannot be written."""
    if out is not None:
        path = Path(out)
        try:
            path.write_text(check.proof_json, encoding="utf-8")
        except OSError as error:
            raise CommandError(f"cannot write {path}: {error.strerror or error}") from None
        return path
    book = session.fairness_book
    if book is None or session.player_id is None:
        return None
    try:
        path = book.path(session.player_id, match_id, ".proof.json")
        write_private(path, check.proof_json)
    except (OSError, ValueError):
        return None
    return path


# --- bot ---


def _register_bot(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "bot",
        help="a bot: join an open table of the family (or open one and wait), play to the end",
        description=(
            "Joins an open table of the family with the same clock, options and fee, or opens one and "
            "waits for an opponent; plays the match to the end and prints the result; --games repeats."
        ),
    )
    _game_options(parser, minutes=None)
    parser.add_argument("--strategy", default="random", help="random or greedy (default: random)")
    parser.add_argument("--games", type=int, default=1, help="how many games in a row (default: 1)")
    parser.add_argument(
        "--player", help="play as this player with a development token (default: the signed-in player)"
    )
    parser.add_argument(
        "--max-plies", type=int, metavar="N", help="resign once the game is N moves long (default: no cap)"
    )
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS", help="pause before each move")
    parser.add_argument("--seed", type=int, help="seed the bot's random choices")
    _policy_option(parser)
    _gateway_options(parser)
    parser.set_defaults(async_handler=_run_bot)


async def _run_bot(args: argparse.Namespace) -> int:
    fam, _, _ = _table_setup(args)
    if args.strategy not in fam.strategies:
        raise CommandError(f"{fam.name} bots are {', '.join(fam.strategies)}, not {args.strategy!r}")
    if args.games < 1:
        raise CommandError("--games must be at least 1")
    token = dev_token(args.player, os.environ) if args.player else None
    tally = collections.Counter[str]()
    async with _session(args, token) as session:
        me = (await session.whoami()).player_id
        for game in range(args.games):
            settings = BotSettings(
                family=fam.name,
                strategy=args.strategy,
                minutes=args.minutes,
                increment_s=args.increment,
                bonus_within_s=args.bonus_within,
                cap_s=args.cap,
                stand_in=args.stand_in,
                options=_settings(args),
                entry_fee_minor=args.fee,
                currency=args.currency,
                max_plies=args.max_plies,
                move_delay_s=args.delay,
                seed=None if args.seed is None else args.seed + game,
            )
            result = await run_bot(session, settings, say=lambda text: _say(f"{me}: {text}"))
            tally["won" if result.won else "lost" if result.won is False else "drawn or aborted"] += 1
            _say(f"{me}: {result.line()}")
    if args.games > 1:
        _say(
            f"{me}: {args.games} games: "
            + ", ".join(f"{count} {what}" for what, count in sorted(tally.items()))
        )
    return EXIT_OK


# --- the parser ---

COMMANDS: Final[tuple[Callable[[SubParsers], None], ...]] = (
    _register_login,
    _register_whoami,
    _register_ratings,
    _register_formations,
    _register_tables,
    _register_create,
    _register_join,
    _register_queue,
    _register_play,
    _register_watch,
    _register_record,
    _register_bot,
    _register_load,
    _register_verify,
    _register_proof,
)
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


def _parse(argv: Sequence[str] | None) -> argparse.Namespace | int:
    parser = build_parser()
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:  # usage errors and --help: argparse has already printed its message
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR


async def _run_async(args: argparse.Namespace) -> int:
    handler: AsyncHandler = args.async_handler
    try:
        return await handler(args)
    except CommandError as exc:
        _print_error(args.command, str(exc))
        return EXIT_ERROR
    except GatewayError as exc:
        _print_error(args.command, exc.explained())
        return EXIT_FAILED


def _run_sync(args: argparse.Namespace) -> int:
    handler: Handler = args.handler
    try:
        return handler(args)
    except CommandError as exc:
        _print_error(args.command, str(exc))
        return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``) and return the exit status."""
    args = _parse(argv)
    if isinstance(args, int):
        return args
    if getattr(args, "async_handler", None) is None:
        return _run_sync(args)
    try:
        return eventloop.run(_run_until_signalled(args))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except asyncio.CancelledError:  # SIGTERM: cancelled like Ctrl-C, so tables and queues are left
        return EXIT_TERMINATED


async def _run_until_signalled(args: argparse.Namespace) -> int:
    """:func:`_run_async`, cancelled on SIGTERM as asyncio.run cancels it on Ctrl-C (cleanups run)."""
    task = asyncio.current_task()
    if task is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals here (not the main thread)
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await _run_async(args)


async def main_async(argv: Sequence[str]) -> int:
    """:func:`main` for a caller that already runs an event loop (tests, other tools)."""
    args = _parse(argv)
    if isinstance(args, int):
        return args
    if getattr(args, "async_handler", None) is None:
        return _run_sync(args)
    return await _run_async(args)
