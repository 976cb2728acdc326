"""Behaviour of the pure derivation: validation, properties, rejection sampling and uniformity."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libs.fairness import (
    MAX_BOUND,
    MAX_COUNT,
    MAX_SHUFFLE_ITEMS,
    ByteSource,
    DrawKind,
    DrawSpec,
    DrawSpecError,
    FairnessError,
    InvalidNameError,
    InvalidSeedError,
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

SEED = bytes(range(32))
SEEDS = {0: b"alice", 1: b"bob"}
KEY = stream_key(SEED, "m-1", SEEDS)  # the key of the "basic" vector of docs/fairness.md

# Chi-squared critical values at p = 0.001, by degrees of freedom.
CRITICAL_P001 = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515, 9: 27.877}

keys = st.binary(min_size=32, max_size=32)
stream_names = st.from_regex(r"[a-z0-9._-]{1,64}", fullmatch=True)
indices = st.integers(0, 2**64 - 1)


# --- validation ---


@pytest.mark.parametrize(
    ("kind", "count", "bound", "message"),
    [
        (DrawKind.DICE, 0, 0, "count must be between 1 and 1024, got 0"),
        (DrawKind.DICE, 1025, 0, "count must be between 1 and 1024, got 1025"),
        (DrawKind.DICE, 1, 6, "bound must be 0 for dice, got 6"),
        (DrawKind.COIN, 1, 2, "bound must be 0 for coin, got 2"),
        (DrawKind.COIN, -1, 0, "count must be between 1 and 1024, got -1"),
        (DrawKind.INTEGER, 1, 0, "bound must be between 1 and 4294967296, got 0"),
        (DrawKind.INTEGER, 1, 2**32 + 1, "bound must be between 1 and 4294967296, got 4294967297"),
        (DrawKind.INTEGER, 0, 10, "count must be between 1 and 1024, got 0"),
        (DrawKind.SHUFFLE, 2, 52, "count must be 1 for a shuffle, got 2"),
        (DrawKind.SHUFFLE, 1, 0, "bound (items to shuffle) must be between 1 and 1024, got 0"),
        (DrawKind.SHUFFLE, 1, 1025, "bound (items to shuffle) must be between 1 and 1024, got 1025"),
        (DrawKind.DICE, True, 0, "count must be an integer, got True"),
        (DrawKind.INTEGER, 1, 2.0, "bound must be an integer, got 2.0"),
        ("poker", 1, 0, "kind must be one of dice, integer, coin, shuffle, got 'poker'"),
    ],
)
def test_invalid_draw_specs_are_rejected_with_a_readable_message(
    kind: DrawKind, count: int, bound: int, message: str
) -> None:
    with pytest.raises(DrawSpecError) as info:
        DrawSpec(kind, count, bound)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_limits_are_inclusive() -> None:
    assert DrawSpec.dice(MAX_COUNT).count == 1024
    assert DrawSpec.coin(MAX_COUNT).count == 1024
    assert DrawSpec.integer(MAX_BOUND, MAX_COUNT).bound == 2**32
    assert DrawSpec.integer(1).bound == 1
    assert DrawSpec.shuffle(MAX_SHUFFLE_ITEMS).bound == 1024
    assert DrawSpec.shuffle(1) == DrawSpec(DrawKind.SHUFFLE, 1, 1)


def test_kind_may_be_given_as_its_string() -> None:
    spec = DrawSpec("coin", 3, 0)  # type: ignore[arg-type]
    assert spec.kind is DrawKind.COIN
    assert spec == DrawSpec.coin(3)


@pytest.mark.parametrize("match_id", ["m", "m-1", "A-z.0_:9", "x" * 128])
def test_valid_match_ids(match_id: str) -> None:
    assert validate_match_id(match_id) == match_id


@pytest.mark.parametrize("match_id", ["", "x" * 129, "a b", "m/1", "é", "m-1\n", "١"])
def test_invalid_match_ids(match_id: str) -> None:
    with pytest.raises(InvalidNameError, match="match id must be 1-128 characters"):
        validate_match_id(match_id)
    with pytest.raises(InvalidNameError):
        stream_key(SEED, match_id, SEEDS)


@pytest.mark.parametrize("stream", ["dice", "a", "deck.2", "p_1-x", "z" * 64])
def test_valid_stream_names(stream: str) -> None:
    assert validate_stream_name(stream) == stream


@pytest.mark.parametrize("stream", ["", "Dice", "a:b", "a b", "z" * 65, "dice\n"])
def test_invalid_stream_names(stream: str) -> None:
    with pytest.raises(InvalidNameError, match="stream name must be 1-64 characters"):
        validate_stream_name(stream)
    with pytest.raises(InvalidNameError):
        draw_values(KEY, stream, 0, DrawSpec.dice())


def test_seed_seat_and_index_validation() -> None:
    assert validate_server_seed(SEED) == SEED
    assert validate_client_seed(b"x") == b"x"
    assert validate_client_seed(b"x" * 64) == b"x" * 64
    assert validate_seat(0) == 0
    assert validate_seat(2**32 - 1) == 2**32 - 1
    assert validate_index(2**64 - 1) == 2**64 - 1
    with pytest.raises(InvalidSeedError, match="exactly 32 bytes, got 31"):
        commitment(SEED[:31])
    with pytest.raises(InvalidSeedError, match="exactly 32 bytes, got 33"):
        stream_key(SEED + b"x", "m-1", SEEDS)
    with pytest.raises(InvalidSeedError, match="server seed must be bytes"):
        validate_server_seed(SEED.hex())  # type: ignore[arg-type]
    with pytest.raises(InvalidSeedError, match="between 1 and 64 bytes, got 0"):
        stream_key(SEED, "m-1", {0: b""})
    with pytest.raises(InvalidSeedError, match="between 1 and 64 bytes, got 65"):
        stream_key(SEED, "m-1", {0: b"x" * 65})
    for seat in (-1, 2**32, True):
        with pytest.raises(InvalidSeedError, match="seat must be an integer"):
            stream_key(SEED, "m-1", {seat: b"x"})
    for index in (-1, 2**64):
        with pytest.raises(InvalidSeedError, match="draw index must be an integer"):
            draw_values(KEY, "dice", index, DrawSpec.dice())
    with pytest.raises(InvalidSeedError, match="stream key must be exactly 32 bytes"):
        draw_values(KEY[:16], "dice", 0, DrawSpec.dice())
    source = ByteSource(KEY, "dice", 0)
    for n in (0, 2**32 + 1):
        with pytest.raises(DrawSpecError, match="uniform bound must be between 1 and 4294967296"):
            source.uniform(n)
    with pytest.raises(ValueError, match="negative"):
        source.read(-1)
    assert issubclass(InvalidSeedError, FairnessError)
    assert issubclass(InvalidNameError, FairnessError)


def test_commitment_is_lower_case_hex_sha256() -> None:
    assert commitment(SEED) == hashlib.sha256(SEED).hexdigest()
    assert commitment(SEED) == "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd"


# --- rejection sampling, by hand ---


def test_a_rejected_first_byte_is_skipped_and_the_next_byte_used() -> None:
    # Draw ("dice", 3) of the "basic" vector: its byte source starts ff 0d.
    assert ByteSource(KEY, "dice", 3).read(2) == bytes.fromhex("ff0d")
    # uniform(6): b = 3 bits, k = 1 byte. 0xff & 7 = 7 >= 6: rejected. 0x0d & 7 = 5 < 6: accepted.
    source = ByteSource(KEY, "dice", 3)
    assert source.uniform(6) == 5
    assert source.consumed == 2
    assert draw_values(KEY, "dice", 3, DrawSpec.dice(1)) == (6,)


def test_a_rejection_in_the_middle_of_a_draw() -> None:
    # Draw ("dice", 0): bytes 0c ea b4 0e d3 ...; 0x0e & 7 = 6 is rejected, so the 4th die comes from 0xd3.
    assert ByteSource(KEY, "dice", 0).read(5) == bytes.fromhex("0ceab40ed3")
    assert draw_values(KEY, "dice", 0, DrawSpec.dice(4)) == (5, 3, 5, 4)
    source = ByteSource(KEY, "dice", 0)
    assert [source.uniform(6) for _ in range(4)] == [4, 2, 4, 3]
    assert source.consumed == 5


def test_uniform_one_consumes_nothing() -> None:
    source = ByteSource(KEY, "one", 0)
    assert [source.uniform(1) for _ in range(10)] == [0] * 10
    assert source.consumed == 0
    assert source.blocks == 0
    assert draw_values(KEY, "one", 0, DrawSpec.integer(1, 5)) == (0,) * 5
    assert draw_values(KEY, "one", 0, DrawSpec.shuffle(1)) == (0,)


def test_a_full_range_value_takes_exactly_four_bytes() -> None:
    source = ByteSource(KEY, "big", 0)
    raw = ByteSource(KEY, "big", 0).read(4 * 20)
    values = [source.uniform(2**32) for _ in range(20)]
    assert values == [int.from_bytes(raw[4 * n : 4 * n + 4], "big") for n in range(20)]
    assert source.consumed == 80
    assert source.blocks == 3


@settings(max_examples=200, deadline=None)
@given(keys, stream_names, st.lists(st.integers(1, 2**32), min_size=1, max_size=10))
def test_uniform_is_masked_rejection_over_the_raw_bytes(key: bytes, stream: str, bounds: list[int]) -> None:
    """Walk the raw bytes by hand next to uniform(): same results, same number of bytes consumed."""
    source = ByteSource(key, stream, 7)
    raw = ByteSource(key, stream, 7)
    for n in bounds:
        value = source.uniform(n)
        if n == 1:
            expected = 0
        else:
            bits = (n - 1).bit_length()
            while True:
                candidate = int.from_bytes(raw.read((bits + 7) // 8), "big") % (1 << bits)
                if candidate < n:
                    expected = candidate
                    break
        assert value == expected
        assert source.consumed == raw.consumed


def test_each_draw_starts_afresh() -> None:
    first = draw_values(KEY, "dice", 5, DrawSpec.dice(3))
    assert draw_values(KEY, "dice", 5, DrawSpec.dice(10))[:3] == first
    assert draw_values(KEY, "dice", 5, DrawSpec.integer(6, 3)) == tuple(v - 1 for v in first)


# --- properties ---

specs = st.one_of(
    st.builds(DrawSpec.dice, st.integers(1, 100)),
    st.builds(DrawSpec.coin, st.integers(1, 100)),
    st.builds(lambda bound, count: DrawSpec.integer(bound, count), st.integers(1, 2**32), st.integers(1, 50)),
    st.builds(DrawSpec.shuffle, st.integers(1, 150)),
)


@settings(max_examples=300, deadline=None)
@given(keys, stream_names, indices, specs)
def test_values_are_in_range_and_deterministic(key: bytes, stream: str, index: int, spec: DrawSpec) -> None:
    values = draw_values(key, stream, index, spec)
    assert all(type(v) is int for v in values)
    if spec.kind is DrawKind.DICE:
        assert len(values) == spec.count
        assert all(1 <= v <= 6 for v in values)
    elif spec.kind is DrawKind.COIN:
        assert len(values) == spec.count
        assert all(v in (0, 1) for v in values)
    elif spec.kind is DrawKind.INTEGER:
        assert len(values) == spec.count
        assert all(0 <= v < spec.bound for v in values)
    else:
        assert sorted(values) == list(range(spec.bound))
    assert draw_values(key, stream, index, spec) == values
    assert (
        draw_values(bytes(key), str(stream), int(index), DrawSpec(spec.kind, spec.count, spec.bound))
        == values
    )


WIDE = DrawSpec.integer(2**32, 8)  # 256 bits of output: a collision by chance is impossible in practice


@settings(max_examples=100, deadline=None)
@given(
    st.binary(min_size=32, max_size=32),
    st.from_regex(r"[A-Za-z0-9._:-]{1,128}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9._:-]{1,128}", fullmatch=True),
    st.dictionaries(st.integers(0, 2**32 - 1), st.binary(min_size=1, max_size=64), max_size=4),
    st.dictionaries(st.integers(0, 2**32 - 1), st.binary(min_size=1, max_size=64), max_size=4),
)
def test_every_input_of_the_key_matters(
    server_seed: bytes, match_a: str, match_b: str, seeds_a: dict[int, bytes], seeds_b: dict[int, bytes]
) -> None:
    key = stream_key(server_seed, match_a, seeds_a)
    assert (
        stream_key(server_seed, match_a, dict(reversed(list(seeds_a.items())))) == key
    )  # order is irrelevant
    assert (stream_key(server_seed, match_b, seeds_a) == key) == (match_a == match_b)
    assert (stream_key(server_seed, match_a, seeds_b) == key) == (seeds_a == seeds_b)
    other_seed = bytes([server_seed[0] ^ 1]) + server_seed[1:]
    assert stream_key(other_seed, match_a, seeds_a) != key
    assert draw_values(stream_key(server_seed, match_b, seeds_b), "s", 0, WIDE) != draw_values(
        key, "s", 0, WIDE
    ) or (match_a == match_b and seeds_a == seeds_b)


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=1, max_size=64), st.binary(min_size=1, max_size=64))
def test_which_seat_holds_which_seed_matters(first: bytes, second: bytes) -> None:
    swapped = stream_key(SEED, "m-1", {0: second, 1: first})
    assert (stream_key(SEED, "m-1", {0: first, 1: second}) == swapped) == (first == second)


def test_the_key_encoding_is_unambiguous() -> None:
    """Length prefixes keep moved bytes from producing the same message."""
    assert stream_key(SEED, "m-1", {0: b"ab", 1: b"c"}) != stream_key(SEED, "m-1", {0: b"a", 1: b"bc"})
    assert stream_key(SEED, "m-1", {0: b"x"}) != stream_key(SEED, "m-1", {1: b"x"})
    assert stream_key(SEED, "m-1", {}) != stream_key(SEED, "m-1", {0: b"\x00"})
    assert draw_values(KEY, "a", 1, WIDE) != draw_values(KEY, "a.", 1, WIDE)


@settings(max_examples=100, deadline=None)
@given(keys, stream_names, stream_names, indices, indices)
def test_stream_and_index_select_independent_draws(
    key: bytes, stream_a: str, stream_b: str, index_a: int, index_b: int
) -> None:
    same = (stream_a, index_a) == (stream_b, index_b)
    assert (draw_values(key, stream_a, index_a, WIDE) == draw_values(key, stream_b, index_b, WIDE)) == same
    assert draw_values(key, stream_a, index_a, WIDE) != draw_values(key, stream_a, index_a ^ 1, WIDE)
    other_key = bytes([key[0] ^ 0x80]) + key[1:]
    assert draw_values(other_key, stream_a, index_a, WIDE) != draw_values(key, stream_a, index_a, WIDE)


# --- uniformity (deterministic: fixed key, fixed streams, so these cannot flake) ---


def chi_squared(counts: Sequence[int]) -> float:
    """Pearson's statistic of ``counts`` against the uniform distribution over its cells."""
    expected = sum(counts) / len(counts)
    return sum((observed - expected) ** 2 / expected for observed in counts)


def test_600000_dice_are_uniform() -> None:
    faces = Counter(
        itertools.chain.from_iterable(
            draw_values(KEY, "chi.dice", i, DrawSpec.dice(1000)) for i in range(600)
        )
    )
    assert sum(faces.values()) == 600_000
    assert sorted(faces) == [1, 2, 3, 4, 5, 6]
    assert chi_squared([faces[face] for face in range(1, 7)]) < CRITICAL_P001[5]


def test_the_uniformity_test_detects_modulo_bias() -> None:
    """The same bytes reduced with ``% 6`` (biased towards 0-3) fail the test that the real dice pass."""
    faces = Counter(byte % 6 for i in range(600) for byte in ByteSource(KEY, "chi.biased", i).read(1000))
    assert chi_squared([faces[face] for face in range(6)]) > 3 * CRITICAL_P001[5]


def test_integers_below_ten_are_uniform() -> None:
    counts = Counter(
        itertools.chain.from_iterable(
            draw_values(KEY, "chi.int", i, DrawSpec.integer(10, 1000)) for i in range(200)
        )
    )
    assert chi_squared([counts[value] for value in range(10)]) < CRITICAL_P001[9]


def test_large_bound_integers_are_uniform() -> None:
    """bound = 3 * 2^30 rejects a quarter of all 4-byte words; the thirds of the range stay equally likely."""
    bound = 3 * 2**30
    thirds = Counter(
        value // 2**30
        for i in range(30)
        for value in draw_values(KEY, "chi.large", i, DrawSpec.integer(bound, 1000))
    )
    assert chi_squared([thirds[third] for third in range(3)]) < CRITICAL_P001[2]


def test_coins_are_fair() -> None:
    flips = Counter(
        itertools.chain.from_iterable(
            draw_values(KEY, "chi.coin", i, DrawSpec.coin(1000)) for i in range(100)
        )
    )
    assert chi_squared([flips[0], flips[1]]) < CRITICAL_P001[1]


def test_every_permutation_of_three_is_equally_likely() -> None:
    permutations = Counter(draw_values(KEY, "chi.shuffle3", i, DrawSpec.shuffle(3)) for i in range(30_000))
    assert len(permutations) == 6
    assert chi_squared(list(permutations.values())) < CRITICAL_P001[5]


def test_shuffle_positions_are_uniform() -> None:
    positions = [Counter[int]() for _ in range(5)]
    for i in range(20_000):
        for position, item in enumerate(draw_values(KEY, "chi.shuffle5", i, DrawSpec.shuffle(5))):
            positions[position][item] += 1
    for counts in positions:
        assert chi_squared([counts[item] for item in range(5)]) < CRITICAL_P001[4]
    # A 52-card deck: where the ace of spades (item 0) lands is uniform over 4 quarters of the deck.
    quarters = Counter(
        draw_values(KEY, "chi.deck", i, DrawSpec.shuffle(52)).index(0) // 13 for i in range(4000)
    )
    assert chi_squared([quarters[q] for q in range(4)]) < CRITICAL_P001[3]
