"""The library against an independent second implementation and against docs/fairness.md.

``Reference`` below is written from the specification alone, plainly, with ``hmac``/``hashlib``/
``struct`` and nothing from ``libs.fairness``. The test vectors quoted in ``docs/fairness.md`` are
parsed out of the document and recomputed with both implementations, so the document cannot drift
from the code; every long hex string in the document must be one of the values checked here.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libs.fairness import (
    ByteSource,
    DrawKind,
    DrawSpec,
    Proof,
    UsedDraw,
    build_proof,
    commitment,
    draw_values,
    stream_key,
    verify,
)
from libs.fairness.derivation import draw_message_prefix, stream_key_message

DOC = Path(__file__).resolve().parents[3] / "docs" / "fairness.md"


# --- the independent implementation ---


class Reference:
    """A second, deliberately plain implementation of docs/fairness.md (no code shared with the library)."""

    @staticmethod
    def commitment(server_seed: bytes) -> str:
        assert len(server_seed) == 32
        return hashlib.sha256(server_seed).hexdigest()

    @staticmethod
    def key_message(match_id: str, client_seeds: dict[int, bytes]) -> bytes:
        name = match_id.encode("ascii")
        message = b"skillclassics/fairness/v1/key" + struct.pack(">I", len(name)) + name
        message += struct.pack(">I", len(client_seeds))
        for seat in sorted(client_seeds):
            seed = client_seeds[seat]
            message += struct.pack(">II", seat, len(seed)) + seed
        return message

    @staticmethod
    def stream_key(server_seed: bytes, match_id: str, client_seeds: dict[int, bytes]) -> bytes:
        return hmac.digest(server_seed, Reference.key_message(match_id, client_seeds), "sha256")

    @staticmethod
    def block_message(stream: str, index: int, j: int) -> bytes:
        name = stream.encode("ascii")
        return (
            b"skillclassics/fairness/v1/draw"
            + struct.pack(">I", len(name))
            + name
            + struct.pack(">QI", index, j)
        )

    @staticmethod
    def block(key: bytes, stream: str, index: int, j: int) -> bytes:
        return hmac.digest(key, Reference.block_message(stream, index, j), "sha256")

    @staticmethod
    def byte_stream(key: bytes, stream: str, index: int) -> Iterator[int]:
        j = 0
        while True:
            yield from Reference.block(key, stream, index, j)
            j += 1

    @staticmethod
    def uniform(source: Iterator[int], n: int) -> int:
        if n == 1:
            return 0
        bits = len(bin(n - 1)) - 2
        width = -(-bits // 8)
        modulus: int = 2**bits
        while True:
            x = 0
            for _ in range(width):
                x = x * 256 + next(source)
            x %= modulus
            if x < n:
                return x

    @staticmethod
    def draw(key: bytes, stream: str, index: int, kind: str, count: int, bound: int) -> list[int]:
        source = Reference.byte_stream(key, stream, index)
        if kind == "dice":
            return [Reference.uniform(source, 6) + 1 for _ in range(count)]
        if kind == "integer":
            return [Reference.uniform(source, bound) for _ in range(count)]
        if kind == "coin":
            return [Reference.uniform(source, 2) for _ in range(count)]
        assert kind == "shuffle"
        deck = list(range(bound))
        i = bound - 1
        while i >= 1:
            j = Reference.uniform(source, i + 1)
            deck[i], deck[j] = deck[j], deck[i]
            i -= 1
        return deck


# --- strategies ---

server_seeds = st.binary(min_size=32, max_size=32)
match_ids = st.from_regex(r"[A-Za-z0-9._:-]{1,128}", fullmatch=True)
stream_names = st.from_regex(r"[a-z0-9._-]{1,64}", fullmatch=True)
client_seed_maps = st.dictionaries(st.integers(0, 2**32 - 1), st.binary(min_size=1, max_size=64), max_size=6)
indices = st.one_of(st.integers(0, 20), st.integers(0, 2**64 - 1))
bounds = st.one_of(
    st.integers(1, 300),
    st.sampled_from([2**8, 2**8 + 1, 2**16 - 1, 2**16, 2**16 + 1, 2**24 + 1, 2**31 + 1, 2**32 - 1, 2**32]),
    st.integers(1, 2**32),
)
specs = st.one_of(
    st.builds(DrawSpec.dice, st.integers(1, 64)),
    st.builds(DrawSpec.coin, st.integers(1, 64)),
    st.builds(lambda bound, count: DrawSpec.integer(bound, count), bounds, st.integers(1, 32)),
    st.builds(DrawSpec.shuffle, st.integers(1, 200)),
)


@settings(max_examples=300, deadline=None)
@given(server_seeds, match_ids, client_seed_maps, stream_names, indices, specs)
def test_library_matches_the_independent_implementation(
    server_seed: bytes,
    match_id: str,
    client_seeds: dict[int, bytes],
    stream: str,
    index: int,
    spec: DrawSpec,
) -> None:
    assert commitment(server_seed) == Reference.commitment(server_seed)
    assert stream_key_message(match_id, client_seeds) == Reference.key_message(match_id, client_seeds)
    key = stream_key(server_seed, match_id, client_seeds)
    assert key == Reference.stream_key(server_seed, match_id, client_seeds)
    expected = Reference.draw(key, stream, index, spec.kind.value, spec.count, spec.bound)
    assert list(draw_values(key, stream, index, spec)) == expected


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=32, max_size=32), stream_names, indices, st.lists(st.integers(0, 70), max_size=8))
def test_byte_source_reads_the_blocks_in_order(key: bytes, stream: str, index: int, sizes: list[int]) -> None:
    source = ByteSource(key, stream, index)
    reference = Reference.byte_stream(key, stream, index)
    for size in sizes:
        assert source.read(size) == bytes(next(reference) for _ in range(size))
    assert source.consumed == sum(sizes)
    assert source.blocks == -(-sum(sizes) // 32)


# --- the test vectors of docs/fairness.md ---


@dataclass
class Vector:
    name: str = ""
    server_seed: bytes = b""
    commitment: str = ""
    match_id: str = ""
    client_seeds: dict[int, bytes] = field(default_factory=dict)
    no_client_seeds: bool = False
    key_message: str = ""
    stream_key: str = ""
    block_messages: list[tuple[str, int, int, str]] = field(default_factory=list)
    blocks: list[tuple[str, int, int, str]] = field(default_factory=list)
    draws: list[tuple[str, int, DrawSpec, list[int]]] = field(default_factory=list)


def _pairs(text: str) -> dict[str, str]:
    pairs = dict(token.split("=", 1) for token in text.split())
    assert all(pairs.values()), text
    return pairs


def _parse_vector(block: str) -> Vector:
    vector = Vector()
    for line in block.strip().splitlines():
        name, _, value = line.partition(":")
        value = value.strip()
        if name == "name":
            vector.name = value
        elif name == "server_seed":
            vector.server_seed = bytes.fromhex(value)
        elif name == "commitment":
            vector.commitment = value
        elif name == "match_id":
            vector.match_id = value
        elif name == "client_seeds":
            assert value == "none"
            vector.no_client_seeds = True
        elif name == "client_seed":
            pairs = _pairs(value)
            seat = int(pairs["seat"])
            assert seat not in vector.client_seeds
            vector.client_seeds[seat] = bytes.fromhex(pairs["seed"])
        elif name == "key_message":
            vector.key_message = value
        elif name == "stream_key":
            vector.stream_key = value
        elif name in ("block", "block_message"):
            pairs = _pairs(value)
            entry = (pairs["stream"], int(pairs["index"]), int(pairs["j"]), pairs["hex"])
            (vector.blocks if name == "block" else vector.block_messages).append(entry)
        elif name == "draw":
            pairs = _pairs(value)
            spec = DrawSpec(DrawKind(pairs["kind"]), int(pairs["count"]), int(pairs["bound"]))
            values = [int(v) for v in pairs["values"].split(",")]
            vector.draws.append((pairs["stream"], int(pairs["index"]), spec, values))
        else:
            raise AssertionError(f"unknown vector field {name!r} in docs/fairness.md")
    assert vector.no_client_seeds != bool(vector.client_seeds), vector.name
    assert vector.server_seed
    assert vector.commitment
    assert vector.key_message
    assert vector.stream_key
    return vector


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _vectors() -> list[Vector]:
    blocks = re.findall(r"^```fairness-vector\n(.*?)^```$", _doc(), flags=re.M | re.S)
    return [_parse_vector(block) for block in blocks]


def _example_proof_text() -> str:
    blocks = re.findall(r"^```json\n(.*?)^```$", _doc(), flags=re.M | re.S)
    assert len(blocks) == 1, "docs/fairness.md should hold exactly one example proof"
    return str(blocks[0])


VECTORS = _vectors()


def test_the_document_has_the_expected_vectors() -> None:
    assert [v.name for v in VECTORS] == ["basic", "no-client-seeds", "seat-order"]
    assert sum(len(v.draws) for v in VECTORS) >= 15
    kinds = {spec.kind for v in VECTORS for _, _, spec, _ in v.draws}
    assert kinds == set(DrawKind)


@pytest.mark.parametrize("vector", VECTORS, ids=[v.name for v in VECTORS])
def test_document_vector(vector: Vector) -> None:
    assert commitment(vector.server_seed) == vector.commitment
    assert Reference.commitment(vector.server_seed) == vector.commitment
    assert stream_key_message(vector.match_id, vector.client_seeds).hex() == vector.key_message
    assert Reference.key_message(vector.match_id, vector.client_seeds).hex() == vector.key_message
    key = stream_key(vector.server_seed, vector.match_id, vector.client_seeds)
    assert key.hex() == vector.stream_key
    assert (
        Reference.stream_key(vector.server_seed, vector.match_id, vector.client_seeds).hex()
        == vector.stream_key
    )
    for stream, index, j, message in vector.block_messages:
        assert (draw_message_prefix(stream, index) + struct.pack(">I", j)).hex() == message
        assert Reference.block_message(stream, index, j).hex() == message
    for stream, index, j, block in vector.blocks:
        assert Reference.block(key, stream, index, j).hex() == block
        source = ByteSource(key, stream, index)
        source.read(32 * j)
        assert source.read(32).hex() == block
    for stream, index, spec, values in vector.draws:
        assert list(draw_values(key, stream, index, spec)) == values
        assert Reference.draw(key, stream, index, spec.kind.value, spec.count, spec.bound) == values


def test_worked_example_table_in_the_document() -> None:
    """Section 7's byte-by-byte table: each row is recomputed from the byte source of draw ("dice", 0)."""
    rows = re.findall(
        r"^\| `([0-9a-f]{2})` +\| (\d) +\| (accept|reject)[^|]*\| (\d?) *\|$", _doc(), flags=re.M
    )
    assert len(rows) == 11
    basic = VECTORS[0]
    key = stream_key(basic.server_seed, basic.match_id, basic.client_seeds)
    source = ByteSource(key, "dice", 0)
    dice = []
    for byte_hex, masked, verdict, die in rows:
        byte = source.read(1)[0]
        assert f"{byte:02x}" == byte_hex
        assert byte & 7 == int(masked)
        assert verdict == ("accept" if byte & 7 < 6 else "reject")
        assert die == (str((byte & 7) + 1) if byte & 7 < 6 else "")
        if die:
            dice.append(int(die))
    assert dice == basic.draws[0][3][:10]


def _checked_hex() -> set[str]:
    values: set[str] = set()
    for v in VECTORS:
        values |= {v.server_seed.hex(), v.commitment, v.key_message, v.stream_key}
        values |= {seed.hex() for seed in v.client_seeds.values()}
        values |= {entry[3] for entry in v.blocks + v.block_messages}
    proof = Proof.from_json(_example_proof_text())
    values |= {proof.server_seed.hex(), proof.commitment}
    values |= {seed.seed.hex() for seed in proof.client_seeds}
    return values


def test_every_hex_value_quoted_in_the_document_is_checked() -> None:
    doc = _doc()
    checked = _checked_hex()
    words = re.findall(r"(?<![0-9a-zA-Z])[0-9a-f]{16,}(?![0-9a-zA-Z])", doc)
    long_hex = {word for word in words if not word.isdigit()}  # all-digit words are decimals like 2^64 - 1
    assert long_hex, "expected hex test vectors in docs/fairness.md"
    assert long_hex <= checked, f"unchecked hex in docs/fairness.md: {sorted(long_hex - checked)}"
    # Abbreviations like `79dcf489...04d04b197` must abbreviate a checked value.
    for head, tail in re.findall(r"([0-9a-f]{6,})\.\.\.([0-9a-f]{6,})", doc):
        assert any(v.startswith(head) and v.endswith(tail) for v in checked), f"{head}...{tail}"
    # Byte prefixes like `B_0 = 0c ea b4 ...` or `starts ff 0d ...` must start a checked block.
    prefixes = re.findall(r"((?:[0-9a-f]{2} )+)\.\.\.", doc)
    assert len(prefixes) >= 2
    blocks = {entry[3] for v in VECTORS for entry in v.blocks}
    for prefix in prefixes:
        assert any(block.startswith(prefix.replace(" ", "")) for block in blocks), prefix


def test_example_proof_in_the_document_verifies() -> None:
    text = _example_proof_text()
    proof = Proof.from_json(text)
    report = verify(proof)
    assert report.ok, report.summary()
    assert proof.to_json() == text  # the example is in the canonical layout
    quoted = set(re.findall(r"^OK: .*$", _doc(), flags=re.M))
    # Section 11 runs it on its own, and against what the player of seat 0 recorded.
    recorded = verify(
        proof,
        commitment=proof.commitment,
        client_seeds={0: bytes.fromhex("616c696365")},
        used_draws=[UsedDraw("dice", 0), UsedDraw("dice", 1)],
    )
    assert quoted == {report.summary(), recorded.summary()}
    failed = verify(proof, client_seeds={0: bytes.fromhex("626f62")}, used_draws=[UsedDraw("dice", 7)])
    assert set(re.findall(r"^FAIL: .*$", _doc(), flags=re.M)) == set(failed.lines())
    for draw in proof.draws:
        expected = Reference.draw(
            Reference.stream_key(
                proof.server_seed, proof.match_id, {s.seat: s.seed for s in proof.client_seeds}
            ),
            draw.stream,
            draw.index,
            draw.spec.kind.value,
            draw.spec.count,
            draw.spec.bound,
        )
        assert list(draw.values) == expected


def test_build_proof_agrees_with_the_reference() -> None:
    seeds = {3: b"carol", 0: b"alice"}
    proof = build_proof(
        b"\x42" * 32, "m-ref", seeds, [("dice", 1, DrawSpec.dice(5)), ("dice", 0, DrawSpec.dice(5))]
    )
    key = Reference.stream_key(b"\x42" * 32, "m-ref", seeds)
    assert [(d.stream, d.index) for d in proof.draws] == [("dice", 0), ("dice", 1)]
    for draw in proof.draws:
        assert list(draw.values) == Reference.draw(key, "dice", draw.index, "dice", 5, 0)
