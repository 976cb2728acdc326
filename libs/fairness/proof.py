"""Fairness proofs: the revealed record of a match's randomness, its JSON form and its offline verifier.

A :class:`Proof` holds everything needed to recompute a match's draws: the match id, the commitment
published before the match, the revealed server seed, the players' client seeds and every draw with
its recorded values. :func:`verify` recomputes the commitment and every draw and reports the first
discrepancy; given what a player recorded before and during the match (the commitment announced, their
own client seed, the draws the match used), it also compares the proof with that and reports each
difference. The JSON format (``skillclassics-fairness-proof/1``) is specified in ``docs/fairness.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypeVar

from libs.fairness.derivation import (
    FAIRNESS_VERSION,
    DrawKind,
    DrawSpec,
    FairnessError,
    commitment,
    draw_values,
    stream_key,
    validate_client_seed,
    validate_index,
    validate_match_id,
    validate_seat,
    validate_server_seed,
    validate_stream_name,
)

__all__ = [
    "PROOF_FORMAT",
    "ClientSeed",
    "DrawRecord",
    "Failure",
    "FailureKind",
    "Proof",
    "ProofFormatError",
    "UsedDraw",
    "VerificationReport",
    "build_proof",
    "verify",
]

PROOF_FORMAT: Final = f"skillclassics-fairness-proof/{FAIRNESS_VERSION}"
"""The value of the ``format`` member of a proof of this version (:data:`FAIRNESS_VERSION`)."""

_FORMAT_PREFIX: Final = "skillclassics-fairness-proof/"
_COMMITMENT_RE: Final = re.compile(r"[0-9a-f]{64}")
_HEX_RE: Final = re.compile(r"(?:[0-9a-f]{2})*")
_PROOF_KEYS: Final = ("format", "match_id", "commitment", "server_seed", "client_seeds", "draws")
_SEED_KEYS: Final = ("seat", "seed")
_DRAW_KEYS: Final = ("stream", "index", "kind", "bound", "count", "values")
_SHOWN_VALUES: Final = 16
_T = TypeVar("_T")


class ProofFormatError(FairnessError):
    """A proof is not well-formed: not JSON, wrong structure, wrong types or invalid fields."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- the proof value ---


@dataclass(frozen=True, slots=True)
class ClientSeed:
    """The seed a player contributed for one seat (``seat`` in ``0..2**32-1``, ``seed`` 1-64 bytes)."""

    seat: int
    seed: bytes

    def __post_init__(self) -> None:
        """Validate the seat number and the seed length."""
        validate_seat(self.seat)
        validate_client_seed(self.seed)


@dataclass(frozen=True, slots=True)
class DrawRecord:
    """One draw as the server recorded it: where it comes from, what it is, and the values it produced."""

    stream: str
    index: int
    spec: DrawSpec
    values: tuple[int, ...]

    def __post_init__(self) -> None:
        """Validate the names and the value types (whether the values are *right* is for :func:`verify`)."""
        validate_stream_name(self.stream)
        validate_index(self.index)
        if not isinstance(self.spec, DrawSpec):
            raise ProofFormatError(f"spec must be a DrawSpec, got {type(self.spec).__name__}")
        values = tuple(self.values)
        for value in values:
            if not _is_int(value) or value < 0:
                raise ProofFormatError(f"values must be non-negative integers, got {value!r}")
        object.__setattr__(self, "values", values)


@dataclass(frozen=True, slots=True)
class Proof:
    """The revealed randomness of one match (see ``docs/fairness.md``).

    The fields are validated for *form* on construction (names, seed lengths, hex commitment); whether
    they are *consistent* (commitment, seats, indices, values) is what :func:`verify` checks.
    """

    match_id: str
    commitment: str
    server_seed: bytes
    client_seeds: tuple[ClientSeed, ...]
    draws: tuple[DrawRecord, ...]

    def __post_init__(self) -> None:
        """Validate the form of every field; lists are stored as tuples."""
        validate_match_id(self.match_id)
        if not isinstance(self.commitment, str) or _COMMITMENT_RE.fullmatch(self.commitment) is None:
            raise ProofFormatError(
                f"commitment must be 64 lower-case hex characters, got {_short_repr(self.commitment)}"
            )
        validate_server_seed(self.server_seed)
        client_seeds = tuple(self.client_seeds)
        draws = tuple(self.draws)
        for seed in client_seeds:
            if not isinstance(seed, ClientSeed):
                raise ProofFormatError(f"client_seeds must hold ClientSeed values, got {type(seed).__name__}")
        for draw in draws:
            if not isinstance(draw, DrawRecord):
                raise ProofFormatError(f"draws must hold DrawRecord values, got {type(draw).__name__}")
        object.__setattr__(self, "client_seeds", client_seeds)
        object.__setattr__(self, "draws", draws)

    # --- JSON out ---

    def to_dict(self) -> dict[str, Any]:
        """The proof as JSON-ready plain data (the version-1 format)."""
        return {
            "format": PROOF_FORMAT,
            "match_id": self.match_id,
            "commitment": self.commitment,
            "server_seed": self.server_seed.hex(),
            "client_seeds": [{"seat": seed.seat, "seed": seed.seed.hex()} for seed in self.client_seeds],
            "draws": [_draw_to_dict(draw) for draw in self.draws],
        }

    def to_json(self) -> str:
        """The proof as canonical JSON text: one client seed and one draw per line, ending in a newline.

        ``Proof.from_json(proof.to_json()) == proof`` for every proof.
        """
        data = self.to_dict()
        members = [f"  {json.dumps(key)}: {json.dumps(data[key])}" for key in _PROOF_KEYS[:4]]
        for key in _PROOF_KEYS[4:]:
            items = [f"    {json.dumps(item)}" for item in data[key]]
            body = "[\n" + ",\n".join(items) + "\n  ]" if items else "[]"
            members.append(f"  {json.dumps(key)}: {body}")
        return "{\n" + ",\n".join(members) + "\n}\n"

    # --- JSON in ---

    @classmethod
    def from_json(cls, text: str | bytes) -> Proof:
        """Parse a proof from JSON text (UTF-8 if bytes); raise ProofFormatError if it is malformed."""
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                raise ProofFormatError(f"proof is not valid UTF-8 text: {exc}") from None
        text = text.removeprefix("\ufeff")
        try:
            data = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant)
        except ProofFormatError:
            raise
        except RecursionError:
            raise ProofFormatError("proof is not valid JSON: nested too deeply") from None
        except ValueError as exc:
            raise ProofFormatError(f"proof is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: object) -> Proof:
        """Build a proof from parsed JSON data; raise ProofFormatError naming the field if malformed."""
        if not isinstance(data, dict):
            raise ProofFormatError(f"proof must be a JSON object, got {_json_type(data)}")
        if "format" not in data:
            raise ProofFormatError("proof: missing key 'format'")
        version = data["format"]
        if version != PROOF_FORMAT:
            if isinstance(version, str) and version.startswith(_FORMAT_PREFIX):
                raise ProofFormatError(
                    f"unsupported proof format version {version!r} (this verifier reads {PROOF_FORMAT!r})"
                )
            raise ProofFormatError(f"format must be {PROOF_FORMAT!r}, got {_short_repr(version)}")
        _check_keys(data, _PROOF_KEYS, "proof")
        match_id = _string(data["match_id"], "match_id")
        _wrap("match_id", lambda: validate_match_id(match_id))
        commitment_hex = _string(data["commitment"], "commitment")
        if _COMMITMENT_RE.fullmatch(commitment_hex) is None:
            raise ProofFormatError(
                f"commitment: expected 64 lower-case hex characters, got {_short_repr(commitment_hex)}"
            )
        server_seed = _hex(data["server_seed"], "server_seed")
        _wrap("server_seed", lambda: validate_server_seed(server_seed))
        seeds = _array(data["client_seeds"], "client_seeds")
        draws = _array(data["draws"], "draws")
        client_seeds = tuple(_client_seed(item, f"client_seeds[{n}]") for n, item in enumerate(seeds))
        records = tuple(_draw_record(item, f"draws[{n}]") for n, item in enumerate(draws))
        return _wrap(
            "proof",
            lambda: cls(
                match_id=match_id,
                commitment=commitment_hex,
                server_seed=server_seed,
                client_seeds=client_seeds,
                draws=records,
            ),
        )


def build_proof(
    server_seed: bytes,
    match_id: str,
    client_seeds: Mapping[int, bytes],
    draws: Iterable[tuple[str, int, DrawSpec]],
) -> Proof:
    """Derive the given draws ``(stream, index, spec)`` and record them, ordered by stream then index.

    This is what the server reveals after a match; :func:`verify` accepts it.
    """
    key = stream_key(server_seed, match_id, client_seeds)
    records = [
        DrawRecord(stream, index, spec, draw_values(key, stream, index, spec))
        for stream, index, spec in draws
    ]
    records.sort(key=lambda record: (record.stream, record.index))
    return Proof(
        match_id=match_id,
        commitment=commitment(server_seed),
        server_seed=server_seed,
        client_seeds=tuple(ClientSeed(seat, client_seeds[seat]) for seat in sorted(client_seeds)),
        draws=tuple(records),
    )


# --- verification ---


class FailureKind(StrEnum):
    """Why a proof failed verification."""

    COMMITMENT = "commitment"
    """SHA-256 of the revealed server seed is not the published commitment."""
    DUPLICATE_SEAT = "duplicate-seat"
    """Two client seeds claim the same seat."""
    SEQUENCE = "sequence"
    """Draws are out of order, or a stream's indices have a gap or a duplicate."""
    MISMATCH = "mismatch"
    """A draw's recorded values differ from the values re-derived from the seeds."""
    UNEXPECTED_COMMITMENT = "unexpected-commitment"
    """The proof's commitment is not the one the player recorded before the match."""
    CLIENT_SEED_MISSING = "client-seed-missing"
    """The player's own client seed is not in the proof (for their seat)."""
    DRAW_MISSING = "draw-missing"
    """A draw the match used is not in the proof."""
    DRAW_DIFFERS = "draw-differs"
    """A draw the match used has other values in the proof than the match used."""


@dataclass(frozen=True, slots=True)
class Failure:
    """One problem found in a proof; draw-related fields are set when it concerns a draw."""

    kind: FailureKind
    message: str
    stream: str | None = None
    index: int | None = None
    expected: tuple[int, ...] | None = None
    recorded: tuple[int, ...] | None = None
    seat: int | None = None
    """For a missing client seed: the seat it was expected for (``None``: any seat)."""


@dataclass(frozen=True, slots=True)
class UsedDraw:
    """A draw the match used, as a player knows it: from the match's record or the updates they saw.

    ``values`` are the values the game used when known (the record has them once the match is over);
    ``None`` when only the draw's stream and index are known.
    """

    stream: str
    index: int
    values: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        """Validate the stream name, the index and the values."""
        validate_stream_name(self.stream)
        validate_index(self.index)
        if self.values is not None:
            values = tuple(self.values)
            for value in values:
                if not _is_int(value) or value < 0:
                    raise ProofFormatError(f"values must be non-negative integers, got {value!r}")
            object.__setattr__(self, "values", values)


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """The outcome of :func:`verify`: ``ok`` is true only if everything was reproduced exactly and the
    proof agrees with everything the player recorded."""

    commitment_ok: bool
    draws_total: int
    streams_total: int
    draws_verified: int
    failure: Failure | None
    """The first problem (the one :meth:`summary` names); ``None`` when there is none."""
    failures: tuple[Failure, ...] = ()
    """Every problem found, in order: the commitment against the one recorded, then the proof's own
    first failure (section 10 of the specification), then each missing client seed, then each draw the
    match used that is missing or differs. ``failures[0]`` is :attr:`failure`."""
    expected_commitment: str | None = None
    """The commitment the proof was compared with (``None``: not compared)."""
    client_seeds_checked: int = 0
    """How many of the player's client seeds were looked for in the proof."""
    used_draws_checked: int = 0
    """How many draws the match used were looked for in the proof."""

    @property
    def ok(self) -> bool:
        """True if the commitment matches and every draw was reproduced exactly, and the proof agrees
        with the commitment, client seeds and draws it was compared with."""
        return self.failure is None

    def summary(self) -> str:
        """A one-line human-readable verdict starting with ``OK:`` or ``FAIL:``."""
        if self.failure is None:
            parts = [
                f"OK: commitment matches; {_plural(self.draws_total, 'draw')} in "
                f"{_plural(self.streams_total, 'stream')} reproduced exactly"
            ]
            if self.expected_commitment is not None:
                parts.append("it is the commitment published before the match")
            if self.client_seeds_checked:
                parts.append(
                    "your client seed is in" if self.client_seeds_checked == 1 else "your client seeds are in"
                )
            if self.used_draws_checked:
                parts.append(f"all {_plural(self.used_draws_checked, 'draw')} the match used are in")
            return "; ".join(parts)
        more = len(self.failures) - 1
        tail = f" (and {_plural(more, 'more problem')})" if more > 0 else ""
        return f"FAIL: {self.failure.message}{tail}"

    def lines(self) -> list[str]:
        """The verdict as lines: the ``OK:`` line, or one ``FAIL:`` line per problem found."""
        if self.failure is None:
            return [self.summary()]
        return [f"FAIL: {failure.message}" for failure in self.failures]


def verify(
    proof: Proof,
    *,
    commitment: str | None = None,
    client_seeds: Mapping[int, bytes] | Collection[bytes] | None = None,
    used_draws: Iterable[UsedDraw] = (),
) -> VerificationReport:
    """Check a proof: the commitment, the seats, the order of the draws and every draw's values; and,
    when given, that it agrees with what the player recorded.

    The proof's own checks run in that order (docs/fairness.md, section 10) and stop at the first
    failure: for the order, the first draw out of place; for the values, the first draw (in list order)
    that does not reproduce, with its expected and recorded values. The optional inputs are what a
    player recorded before and during the match, each compared with the proof and each difference
    reported as a failure of its own (:attr:`VerificationReport.failures`):

    - ``commitment``: the commitment announced before the match (lower-case hex; upper case is
      accepted). The proof must commit to exactly it (``UNEXPECTED_COMMITMENT``).
    - ``client_seeds``: the player's own client seeds, by seat (a mapping), or seeds whose seat is not
      known (any other collection: each must be in the proof for some seat). Each must be in the proof
      (``CLIENT_SEED_MISSING``).
    - ``used_draws``: the draws the match used. Each must be in the proof (``DRAW_MISSING``), with the
      same values when they are known (``DRAW_DIFFERS``).
    """
    streams = {draw.stream for draw in proof.draws}
    failures: list[Failure] = []
    expected_commitment = None if commitment is None else _expected_commitment(commitment)
    if expected_commitment is not None and expected_commitment != proof.commitment:
        failures.append(
            Failure(
                FailureKind.UNEXPECTED_COMMITMENT,
                f"the proof commits to {proof.commitment}, not to {expected_commitment}, the commitment "
                "published before the match: this is not the random stream the match was promised",
            )
        )
    own, verified, commitment_ok = _own_failure(proof)
    if own is not None:
        failures.append(own)
    seeds_wanted = _seed_expectations(client_seeds)
    failures += _seed_failures(proof, seeds_wanted)
    used = tuple(used_draws)
    failures += _used_draw_failures(proof, used)
    return VerificationReport(
        commitment_ok=commitment_ok,
        draws_total=len(proof.draws),
        streams_total=len(streams),
        draws_verified=verified,
        failure=failures[0] if failures else None,
        failures=tuple(failures),
        expected_commitment=expected_commitment,
        client_seeds_checked=len(seeds_wanted),
        used_draws_checked=len(used),
    )


def _own_failure(proof: Proof) -> tuple[Failure | None, int, bool]:
    """The proof's own first failure (None if it has none), how many draws were verified, and whether
    its commitment matches its server seed."""
    actual = commitment(proof.server_seed)
    if actual != proof.commitment:
        message = (
            f"commitment does not match the server seed: the proof commits to {proof.commitment} "
            f"but SHA-256(server_seed) is {actual}"
        )
        return Failure(FailureKind.COMMITMENT, message), 0, False

    seeds: dict[int, bytes] = {}
    for client_seed in proof.client_seeds:
        if client_seed.seat in seeds:
            message = f"client seed for seat {client_seed.seat} appears more than once"
            return Failure(FailureKind.DUPLICATE_SEAT, message), 0, True
        seeds[client_seed.seat] = client_seed.seed

    next_index: dict[str, int] = {}
    previous_stream: str | None = None
    for draw in proof.draws:
        problem = _sequence_problem(draw, previous_stream, next_index)
        if problem is not None:
            return Failure(FailureKind.SEQUENCE, problem, draw.stream, draw.index), 0, True
        previous_stream = draw.stream
        next_index[draw.stream] = draw.index + 1

    key = stream_key(proof.server_seed, proof.match_id, seeds)
    for verified, draw in enumerate(proof.draws):
        expected = draw_values(key, draw.stream, draw.index, draw.spec)
        if expected != draw.values:
            failure = Failure(
                FailureKind.MISMATCH,
                _mismatch_message(draw, expected),
                draw.stream,
                draw.index,
                expected,
                draw.values,
            )
            return failure, verified, True
    return None, len(proof.draws), True


def _expected_commitment(value: str) -> str:
    if not isinstance(value, str) or _COMMITMENT_RE.fullmatch(value.lower()) is None:
        raise ProofFormatError(f"the expected commitment must be 64 hex characters, got {_short_repr(value)}")
    return value.lower()


def _seed_expectations(
    seeds: Mapping[int, bytes] | Collection[bytes] | None,
) -> list[tuple[int | None, bytes]]:
    """The client seeds to look for, each with its seat (``None``: any seat), validated."""
    if seeds is None:
        return []
    if isinstance(seeds, Mapping):
        return [(validate_seat(seat), validate_client_seed(seeds[seat])) for seat in sorted(seeds)]
    return [(None, validate_client_seed(seed)) for seed in seeds]


def _seed_failures(proof: Proof, wanted: list[tuple[int | None, bytes]]) -> list[Failure]:
    by_seat: dict[int, list[bytes]] = {}
    for client_seed in proof.client_seeds:
        by_seat.setdefault(client_seed.seat, []).append(client_seed.seed)
    failures = []
    for seat, seed in wanted:
        shown = _short_hex(seed)
        if seat is None:
            if not any(seed in found for found in by_seat.values()):
                message = f"your client seed {shown} is not in the proof (for any seat)"
                failures.append(Failure(FailureKind.CLIENT_SEED_MISSING, message))
            continue
        found = by_seat.get(seat, [])
        if seed in found:
            continue
        if not found:
            message = f"your client seed {shown} is not in the proof: it has no client seed for seat {seat}"
        else:
            others = ", ".join(_short_hex(other) for other in found)
            message = (
                f"your client seed {shown} is not in the proof: "
                f"it has another seed for seat {seat} ({others})"
            )
        failures.append(Failure(FailureKind.CLIENT_SEED_MISSING, message, seat=seat))
    return failures


def _used_draw_failures(proof: Proof, used: tuple[UsedDraw, ...]) -> list[Failure]:
    recorded = {(draw.stream, draw.index): draw for draw in proof.draws}
    failures = []
    for draw in used:
        if not isinstance(draw, UsedDraw):
            raise TypeError(f"used_draws must hold UsedDraw values, got {type(draw).__name__}")
        where = f"stream {draw.stream!r} index {draw.index}"
        found = recorded.get((draw.stream, draw.index))
        if found is None:
            message = f"the match used draw {where}, but the proof does not have it"
            failures.append(Failure(FailureKind.DRAW_MISSING, message, draw.stream, draw.index))
        elif draw.values is not None and draw.values != found.values:
            message = (
                f"the match used draw {where} with values {_show(draw.values)}, "
                f"but the proof records {_show(found.values)}"
            )
            failures.append(
                Failure(FailureKind.DRAW_DIFFERS, message, draw.stream, draw.index, draw.values, found.values)
            )
    return failures


def _short_hex(seed: bytes) -> str:
    text = seed.hex()
    return text if len(text) <= 16 else f"{text[:16]}..."


def _sequence_problem(draw: DrawRecord, previous: str | None, next_index: dict[str, int]) -> str | None:
    """Why ``draw`` cannot come next (None if it can): streams ascending, each stream's indices 0, 1, ..."""
    where = f"stream {draw.stream!r} index {draw.index}"
    if (
        previous is not None
        and draw.stream != previous
        and (draw.stream in next_index or draw.stream < previous)
    ):
        return (
            f"draw {where} is out of order: stream {draw.stream!r} listed after stream {previous!r} "
            "(draws must be ordered by stream, then index)"
        )
    expected = next_index.get(draw.stream, 0)
    if draw.index == expected:
        return None
    if draw.index < expected:
        return f"draw {where} is a duplicate or out of order: the stream's next index should be {expected}"
    return f"draw {where} leaves a gap: the stream's next index should be {expected}"


def _mismatch_message(draw: DrawRecord, expected: tuple[int, ...]) -> str:
    recorded = draw.values
    spec = draw.spec
    head = (
        f"draw stream {draw.stream!r} index {draw.index} ({spec.kind.value}, count {spec.count}, "
        f"bound {spec.bound}) does not match"
    )
    position = next((n for n, (a, b) in enumerate(zip(expected, recorded, strict=False)) if a != b), None)
    if position is not None:
        detail = f"value #{position} expected {expected[position]}, recorded {recorded[position]}"
    else:
        detail = f"expected {len(expected)} values, recorded {len(recorded)}"
    return f"{head}: {detail}; expected {_show(expected)}, recorded {_show(recorded)}"


def _show(values: tuple[int, ...]) -> str:
    if len(values) <= _SHOWN_VALUES:
        return "[" + ", ".join(map(str, values)) + "]"
    shown = ", ".join(map(str, values[:_SHOWN_VALUES]))
    return f"[{shown}, ... ({len(values)} values)]"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


# --- JSON helpers ---


def _draw_to_dict(draw: DrawRecord) -> dict[str, Any]:
    return {
        "stream": draw.stream,
        "index": draw.index,
        "kind": draw.spec.kind.value,
        "bound": draw.spec.bound,
        "count": draw.spec.count,
        "values": list(draw.values),
    }


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ProofFormatError(f"proof is not valid: duplicate key {key!r} in a JSON object")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ProofFormatError(f"proof is not valid JSON: {name} is not a JSON value")


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _short_repr(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_keys(data: dict[str, Any], keys: tuple[str, ...], path: str) -> None:
    for key in keys:
        if key not in data:
            raise ProofFormatError(f"{path}: missing key {key!r}")
    unknown = sorted(set(data) - set(keys))
    if unknown:
        raise ProofFormatError(f"{path}: unknown key {unknown[0]!r} (expected only {', '.join(keys)})")


def _string(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise ProofFormatError(f"{path}: expected a string, got {_json_type(value)}")
    return value


def _integer(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProofFormatError(f"{path}: expected an integer, got {_json_type(value)}")
    return value


def _kind(value: object, path: str) -> DrawKind:
    text = _string(value, path)
    try:
        return DrawKind(text)
    except ValueError:
        names = ", ".join(member.value for member in DrawKind)
        raise ProofFormatError(f"{path}: expected one of {names}, got {_short_repr(text)}") from None


def _array(value: object, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProofFormatError(f"{path}: expected an array, got {_json_type(value)}")
    return value


def _object(value: object, path: str, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProofFormatError(f"{path}: expected an object, got {_json_type(value)}")
    _check_keys(value, keys, path)
    return value


def _hex(value: object, path: str) -> bytes:
    text = _string(value, path)
    if _HEX_RE.fullmatch(text) is None:
        raise ProofFormatError(
            f"{path}: expected lower-case hex with an even number of digits, got {_short_repr(text)}"
        )
    return bytes.fromhex(text)


def _wrap(path: str, build: Callable[[], _T]) -> _T:
    """Run a constructor, re-raising its validation error as a ProofFormatError naming ``path``."""
    try:
        return build()
    except FairnessError as exc:
        raise ProofFormatError(f"{path}: {exc}") from None


def _client_seed(value: object, path: str) -> ClientSeed:
    data = _object(value, path, _SEED_KEYS)
    seat = _integer(data["seat"], f"{path}.seat")
    seed = _hex(data["seed"], f"{path}.seed")
    return _wrap(path, lambda: ClientSeed(seat, seed))


def _draw_record(value: object, path: str) -> DrawRecord:
    data = _object(value, path, _DRAW_KEYS)
    stream = _string(data["stream"], f"{path}.stream")
    index = _integer(data["index"], f"{path}.index")
    kind = _kind(data["kind"], f"{path}.kind")
    bound = _integer(data["bound"], f"{path}.bound")
    count = _integer(data["count"], f"{path}.count")
    raw_values = _array(data["values"], f"{path}.values")
    values = tuple(_integer(item, f"{path}.values[{n}]") for n, item in enumerate(raw_values))
    spec = _wrap(path, lambda: DrawSpec(kind, count, bound))
    return _wrap(path, lambda: DrawRecord(stream, index, spec, values))
