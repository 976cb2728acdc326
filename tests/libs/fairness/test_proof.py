"""Proofs: the JSON round trip, strict parsing, and the verifier's verdicts."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from libs.fairness import (
    FAIRNESS_VERSION,
    PROOF_FORMAT,
    ClientSeed,
    DrawKind,
    DrawRecord,
    DrawSpec,
    Failure,
    FailureKind,
    FairnessError,
    Proof,
    ProofFormatError,
    UsedDraw,
    build_proof,
    commitment,
    draw_values,
    stream_key,
    verify,
)
from libs.fairness.derivation import DRAW_DOMAIN, KEY_DOMAIN

SEED = bytes(range(32))
SEEDS = {0: b"alice", 1: b"bob"}
DRAWS = [
    ("dice", 0, DrawSpec.dice(2)),
    ("dice", 1, DrawSpec.dice(2)),
    ("dice", 2, DrawSpec.dice(2)),
    ("deck", 0, DrawSpec.shuffle(52)),
    ("coin", 0, DrawSpec.coin(3)),
    ("coin", 1, DrawSpec.coin(3)),
    ("pick", 0, DrawSpec.integer(10, 4)),
]


@pytest.fixture
def proof() -> Proof:
    return build_proof(SEED, "m-1", SEEDS, DRAWS)


def with_draws(proof: Proof, draws: list[DrawRecord]) -> Proof:
    return replace(proof, draws=tuple(draws))


def tampered(record: DrawRecord, values: tuple[int, ...]) -> DrawRecord:
    return replace(record, values=values)


# --- building and the JSON round trip ---


def test_build_proof_orders_draws_and_seeds(proof: Proof) -> None:
    assert [(d.stream, d.index) for d in proof.draws] == [
        ("coin", 0),
        ("coin", 1),
        ("deck", 0),
        ("dice", 0),
        ("dice", 1),
        ("dice", 2),
        ("pick", 0),
    ]
    assert proof.client_seeds == (ClientSeed(0, b"alice"), ClientSeed(1, b"bob"))
    assert proof.commitment == commitment(SEED)
    key = stream_key(SEED, "m-1", SEEDS)
    for draw in proof.draws:
        assert draw.values == draw_values(key, draw.stream, draw.index, draw.spec)


def test_json_round_trip(proof: Proof) -> None:
    text = proof.to_json()
    assert Proof.from_json(text) == proof
    assert Proof.from_json(text.encode("utf-8")) == proof
    assert Proof.from_json(b"\xef\xbb\xbf" + text.encode("utf-8")) == proof  # a UTF-8 byte-order mark
    assert Proof.from_json(json.dumps(proof.to_dict(), separators=(",", ":"))) == proof  # any layout
    assert Proof.from_dict(proof.to_dict()) == proof
    assert hash(Proof.from_json(text)) == hash(proof)


def test_json_layout(proof: Proof) -> None:
    text = proof.to_json()
    data = json.loads(text)
    assert list(data) == ["format", "match_id", "commitment", "server_seed", "client_seeds", "draws"]
    assert data["format"] == PROOF_FORMAT == "skillclassics-fairness-proof/1"
    assert data["server_seed"] == SEED.hex()
    assert data["client_seeds"] == [{"seat": 0, "seed": "616c696365"}, {"seat": 1, "seed": "626f62"}]
    assert data["draws"][3] == {
        "stream": "dice",
        "index": 0,
        "kind": "dice",
        "bound": 0,
        "count": 2,
        "values": list(proof.draws[3].values),
    }
    assert text.endswith("}\n")
    assert '    {"seat": 1, "seed": "626f62"}\n' in text  # one seed, one draw per line
    assert len(text.splitlines()) == 6 + 2 + 2 + 7 + 2


def test_empty_lists_round_trip() -> None:
    proof = build_proof(SEED, "m-empty", {}, [])
    assert '"client_seeds": [],' in proof.to_json()
    assert '"draws": []\n' in proof.to_json()
    assert Proof.from_json(proof.to_json()) == proof
    assert verify(proof).summary() == "OK: commitment matches; 0 draws in 0 streams reproduced exactly"


hex_seeds = st.binary(min_size=32, max_size=32)
records = st.builds(
    DrawRecord,
    st.from_regex(r"[a-z0-9._-]{1,64}", fullmatch=True),
    st.integers(0, 2**64 - 1),
    st.sampled_from([DrawSpec.dice(3), DrawSpec.integer(2**32, 2), DrawSpec.coin(1), DrawSpec.shuffle(4)]),
    st.lists(st.integers(0, 2**40), max_size=6).map(tuple),
)
proofs = st.builds(
    Proof,
    st.from_regex(r"[A-Za-z0-9._:-]{1,128}", fullmatch=True),
    hex_seeds.map(lambda b: b.hex()),
    hex_seeds,
    st.lists(
        st.builds(ClientSeed, st.integers(0, 2**32 - 1), st.binary(min_size=1, max_size=64)), max_size=4
    ).map(tuple),
    st.lists(records, max_size=5).map(tuple),
)


@settings(max_examples=100, deadline=None)
@given(proofs)
def test_any_proof_round_trips(proof: Proof) -> None:
    assert Proof.from_json(proof.to_json()) == proof


# --- verification ---


def test_a_genuine_proof_verifies(proof: Proof) -> None:
    report = verify(proof)
    assert report.ok
    assert report.commitment_ok
    assert report.failure is None
    assert (report.draws_total, report.streams_total, report.draws_verified) == (7, 4, 7)
    assert report.summary() == "OK: commitment matches; 7 draws in 4 streams reproduced exactly"


def test_singular_summary() -> None:
    report = verify(build_proof(SEED, "m-1", SEEDS, [("dice", 0, DrawSpec.dice())]))
    assert report.summary() == "OK: commitment matches; 1 draw in 1 stream reproduced exactly"


def test_a_tampered_value_names_the_first_bad_draw(proof: Proof) -> None:
    draws = list(proof.draws)
    original = draws[4]  # ("dice", 1)
    changed = (original.values[0], original.values[1] % 6 + 1)
    draws[4] = tampered(original, changed)
    draws[6] = tampered(draws[6], (0, 0, 0, 0) if draws[6].values != (0, 0, 0, 0) else (1, 1, 1, 1))
    report = verify(with_draws(proof, draws))
    assert not report.ok
    assert report.commitment_ok
    failure = report.failure
    assert failure is not None
    assert failure.kind is FailureKind.MISMATCH
    assert (failure.stream, failure.index) == ("dice", 1)
    assert failure.expected == original.values
    assert failure.recorded == changed
    assert report.draws_verified == 4
    assert report.summary() == (
        "FAIL: draw stream 'dice' index 1 (dice, count 2, bound 0) does not match: "
        f"value #1 expected {original.values[1]}, recorded {changed[1]}; "
        f"expected [{original.values[0]}, {original.values[1]}], recorded [{changed[0]}, {changed[1]}]"
    )


def test_a_tampered_proof_file_fails(proof: Proof) -> None:
    data = proof.to_dict()
    data["draws"][2]["values"][0], data["draws"][2]["values"][1] = (
        data["draws"][2]["values"][1],
        data["draws"][2]["values"][0],
    )  # swap two cards of the deck
    report = verify(Proof.from_dict(data))
    assert report.failure is not None
    assert (report.failure.stream, report.failure.index) == ("deck", 0)
    assert "value #0 expected" in report.summary()
    assert "... (52 values)]" in report.summary()


def test_wrong_number_of_values(proof: Proof) -> None:
    draws = list(proof.draws)
    draws[0] = tampered(draws[0], draws[0].values[:2])
    report = verify(with_draws(proof, draws))
    assert report.failure is not None
    assert report.failure.kind is FailureKind.MISMATCH
    assert "expected 3 values, recorded 2" in report.summary()


def test_a_different_spec_does_not_reproduce(proof: Proof) -> None:
    draws = list(proof.draws)
    draws[6] = replace(draws[6], spec=DrawSpec.integer(10, 5))  # the game drew 4 values, the record says 5
    report = verify(with_draws(proof, draws))
    assert report.failure is not None
    assert (report.failure.stream, report.failure.index) == ("pick", 0)
    assert "(integer, count 5, bound 10) does not match: expected 5 values, recorded 4" in report.summary()


def test_a_wrong_server_seed_breaks_the_commitment(proof: Proof) -> None:
    wrong_seed = b"\x01" * 32
    other = replace(proof, server_seed=wrong_seed)
    report = verify(other)
    assert not report.ok
    assert not report.commitment_ok
    assert report.failure is not None
    assert report.failure.kind is FailureKind.COMMITMENT
    assert report.draws_verified == 0
    assert report.summary() == (
        f"FAIL: commitment does not match the server seed: the proof commits to {proof.commitment} "
        f"but SHA-256(server_seed) is {commitment(wrong_seed)}"
    )


def test_the_commitment_is_reported_before_bad_draws(proof: Proof) -> None:
    draws = [tampered(d, tuple(v + 1 for v in d.values)) for d in proof.draws]
    report = verify(replace(proof, commitment="0" * 64, draws=tuple(draws)))
    assert report.failure is not None
    assert report.failure.kind is FailureKind.COMMITMENT
    assert report.summary().startswith("FAIL: commitment does not match the server seed")


def test_a_consistent_but_different_seed_does_not_reproduce_the_draws(proof: Proof) -> None:
    other_seed = b"\x02" * 32
    report = verify(replace(proof, server_seed=other_seed, commitment=commitment(other_seed)))
    assert report.commitment_ok
    assert report.failure is not None
    assert report.failure.kind is FailureKind.MISMATCH
    key = stream_key(other_seed, "m-1", SEEDS)
    first_bad = next(d for d in proof.draws if draw_values(key, d.stream, d.index, d.spec) != d.values)
    assert (report.failure.stream, report.failure.index) == (first_bad.stream, first_bad.index)
    assert report.draws_verified == proof.draws.index(first_bad)


def test_a_changed_client_seed_does_not_reproduce_the_draws(proof: Proof) -> None:
    report = verify(replace(proof, client_seeds=(ClientSeed(0, b"alice"), ClientSeed(1, b"bob!"))))
    assert report.failure is not None
    assert report.failure.kind is FailureKind.MISMATCH


def test_client_seed_order_does_not_matter(proof: Proof) -> None:
    assert verify(replace(proof, client_seeds=tuple(reversed(proof.client_seeds)))).ok


def test_duplicate_seats_fail(proof: Proof) -> None:
    seeds = (*proof.client_seeds, ClientSeed(1, b"mallory"))
    report = verify(replace(proof, client_seeds=seeds))
    assert report.failure is not None
    assert report.failure.kind is FailureKind.DUPLICATE_SEAT
    assert report.summary() == "FAIL: client seed for seat 1 appears more than once"


def test_a_gap_in_a_stream_fails(proof: Proof) -> None:
    draws = [d for d in proof.draws if (d.stream, d.index) != ("dice", 1)]
    report = verify(with_draws(proof, draws))
    assert report.failure is not None
    assert report.failure.kind is FailureKind.SEQUENCE
    assert (report.failure.stream, report.failure.index) == ("dice", 2)
    assert report.draws_verified == 0  # the order is checked before any value
    assert report.summary() == (
        "FAIL: draw stream 'dice' index 2 leaves a gap: the stream's next index should be 1"
    )


def test_a_stream_must_start_at_index_zero(proof: Proof) -> None:
    draws = [d for d in proof.draws if (d.stream, d.index) != ("coin", 0)]
    report = verify(with_draws(proof, draws))
    assert report.failure is not None
    assert (report.failure.kind, report.failure.stream, report.failure.index) == (
        FailureKind.SEQUENCE,
        "coin",
        1,
    )
    assert "next index should be 0" in report.summary()


def test_a_duplicate_index_fails(proof: Proof) -> None:
    draws = list(proof.draws)
    draws.insert(4, draws[3])  # ("dice", 0) twice, with the right values
    report = verify(with_draws(proof, draws))
    assert report.failure is not None
    assert (report.failure.kind, report.failure.stream, report.failure.index) == (
        FailureKind.SEQUENCE,
        "dice",
        0,
    )
    assert "is a duplicate or out of order" in report.summary()


def test_draws_must_be_ordered_by_stream(proof: Proof) -> None:
    draws = list(proof.draws)
    reordered = [draws[2], draws[0], draws[1], *draws[3:]]  # deck before coin
    report = verify(with_draws(proof, reordered))
    assert report.failure is not None
    assert report.failure.kind is FailureKind.SEQUENCE
    assert report.summary() == (
        "FAIL: draw stream 'coin' index 0 is out of order: stream 'coin' listed after stream 'deck' "
        "(draws must be ordered by stream, then index)"
    )


def test_the_order_is_checked_before_the_values(proof: Proof) -> None:
    draws = list(proof.draws)
    draws[0] = tampered(draws[0], (9, 9, 9))  # a bad value in the first draw...
    del draws[4]  # ...and a gap further down, ("dice", 1) missing: the gap is reported
    report = verify(with_draws(proof, draws))
    assert report.failure is not None
    assert report.failure.kind is FailureKind.SEQUENCE
    assert (report.failure.stream, report.failure.index) == ("dice", 2)
    assert verify(with_draws(proof, [*draws[:4], proof.draws[4], *draws[4:]])).failure == Failure(
        FailureKind.MISMATCH,
        f"draw stream 'coin' index 0 (coin, count 3, bound 0) does not match: value #0 expected "
        f"{proof.draws[0].values[0]}, recorded 9; expected {list(proof.draws[0].values)}, recorded [9, 9, 9]",
        "coin",
        0,
        proof.draws[0].values,
        (9, 9, 9),
    )


def test_streams_must_not_interleave() -> None:
    proof = build_proof(
        SEED, "m-1", SEEDS, [("a", 0, DrawSpec.coin()), ("a", 1, DrawSpec.coin()), ("b", 0, DrawSpec.coin())]
    )
    interleaved = with_draws(proof, [proof.draws[0], proof.draws[2], proof.draws[1]])
    report = verify(interleaved)
    assert report.failure is not None
    assert (report.failure.stream, report.failure.index) == ("a", 1)
    assert "listed after stream 'b'" in report.summary()


def test_the_format_version_is_the_one_of_the_proof_format_and_the_derivation() -> None:
    assert FAIRNESS_VERSION == 1
    assert PROOF_FORMAT == "skillclassics-fairness-proof/1"
    assert (KEY_DOMAIN, DRAW_DOMAIN) == (b"skillclassics/fairness/v1/key", b"skillclassics/fairness/v1/draw")


# --- against what the player recorded ---


def test_the_commitment_published_before_the_match_matches(proof: Proof) -> None:
    report = verify(proof, commitment=proof.commitment.upper())  # hex case does not matter
    assert report.ok
    assert report.expected_commitment == proof.commitment
    assert report.summary() == (
        "OK: commitment matches; 7 draws in 4 streams reproduced exactly; "
        "it is the commitment published before the match"
    )


def test_a_proof_of_another_stream_is_not_the_one_published(proof: Proof) -> None:
    published = commitment(b"\x07" * 32)
    report = verify(proof, commitment=published)
    assert not report.ok
    assert report.commitment_ok  # the proof is consistent with itself: it is just not this match's
    assert report.failure == Failure(
        FailureKind.UNEXPECTED_COMMITMENT,
        f"the proof commits to {proof.commitment}, not to {published}, the commitment published before "
        "the match: this is not the random stream the match was promised",
    )
    assert report.failures == (report.failure,)
    with pytest.raises(ProofFormatError, match="expected commitment must be 64 hex characters"):
        verify(proof, commitment="abc")


def test_the_players_client_seed_is_found_for_their_seat(proof: Proof) -> None:
    report = verify(proof, client_seeds={0: b"alice"})
    assert report.ok
    assert report.client_seeds_checked == 1
    assert report.summary().endswith("; your client seed is in")
    assert verify(proof, client_seeds=[b"bob"]).ok  # the seat not known: any seat will do
    assert verify(proof, client_seeds=SEEDS).summary().endswith("; your client seeds are in")


@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        (
            {1: b"alice"},
            "your client seed 616c696365 is not in the proof: it has another seed for seat 1 (626f62)",
        ),
        ({2: b"carol"}, "your client seed 6361726f6c is not in the proof: it has no client seed for seat 2"),
        ([b"carol"], "your client seed 6361726f6c is not in the proof (for any seat)"),
    ],
)
def test_a_client_seed_missing_from_the_proof_fails(
    proof: Proof, seeds: dict[int, bytes] | list[bytes], message: str
) -> None:
    report = verify(proof, client_seeds=seeds)
    assert not report.ok
    assert report.failure is not None
    assert report.failure.kind is FailureKind.CLIENT_SEED_MISSING
    assert report.failure.message == message
    assert report.failure.seat == (None if isinstance(seeds, list) else next(iter(seeds)))
    assert report.summary() == f"FAIL: {message}"


def test_a_proof_without_the_players_seed_fails_even_when_its_draws_reproduce() -> None:
    # The server left the player's seed out and derived everything without it: consistent, but the
    # player's seed never counted.
    proof = build_proof(SEED, "m-1", {1: b"bob"}, DRAWS)
    assert verify(proof).ok
    report = verify(proof, client_seeds={0: b"alice"})
    assert report.failure is not None
    assert (report.failure.kind, report.failure.seat) == (FailureKind.CLIENT_SEED_MISSING, 0)


def test_every_draw_the_match_used_is_in_the_proof(proof: Proof) -> None:
    deck = next(d for d in proof.draws if d.stream == "deck")
    used = [UsedDraw("dice", 0), UsedDraw("dice", 2), UsedDraw("deck", 0, deck.values)]
    report = verify(proof, used_draws=used)
    assert report.ok
    assert report.used_draws_checked == 3
    assert report.summary().endswith("; all 3 draws the match used are in")


def test_a_draw_the_match_used_missing_from_the_proof_fails(proof: Proof) -> None:
    # The proof leaves out the last dice roll (so its own order checks cannot tell: no gap follows).
    shorter = with_draws(proof, [d for d in proof.draws if (d.stream, d.index) != ("dice", 2)])
    assert verify(shorter).ok
    report = verify(shorter, used_draws=[UsedDraw("dice", 1), UsedDraw("dice", 2)])
    assert report.failure == Failure(
        FailureKind.DRAW_MISSING,
        "the match used draw stream 'dice' index 2, but the proof does not have it",
        "dice",
        2,
    )
    assert report.summary() == f"FAIL: {report.failure.message}"


def test_a_draw_the_match_used_with_other_values_fails(proof: Proof) -> None:
    dice = next(d for d in proof.draws if (d.stream, d.index) == ("dice", 1))
    seen = (dice.values[0] % 6 + 1, dice.values[1])
    report = verify(proof, used_draws=[UsedDraw("dice", 1, seen)])
    assert report.failure is not None
    assert report.failure.kind is FailureKind.DRAW_DIFFERS
    assert (report.failure.expected, report.failure.recorded) == (seen, dice.values)
    assert report.failure.message.startswith("the match used draw stream 'dice' index 1 with values [")


def test_each_difference_is_reported_on_its_own(proof: Proof) -> None:
    draws = list(proof.draws)
    draws[4] = tampered(draws[4], (draws[4].values[0] % 6 + 1, draws[4].values[1]))  # ("dice", 1)
    report = verify(
        with_draws(proof, draws),
        commitment="ab" * 32,
        client_seeds={0: b"carol"},
        used_draws=[UsedDraw("dice", 7), UsedDraw("shuffle", 0)],
    )
    kinds = [failure.kind for failure in report.failures]
    assert kinds == [
        FailureKind.UNEXPECTED_COMMITMENT,
        FailureKind.MISMATCH,
        FailureKind.CLIENT_SEED_MISSING,
        FailureKind.DRAW_MISSING,
        FailureKind.DRAW_MISSING,
    ]
    assert report.failure is report.failures[0]
    assert report.summary() == f"FAIL: {report.failures[0].message} (and 4 more problems)"
    assert report.lines() == [f"FAIL: {failure.message}" for failure in report.failures]


def test_what_the_player_recorded_is_checked_for_form(proof: Proof) -> None:
    with pytest.raises(FairnessError):
        verify(proof, client_seeds={0: b""})
    with pytest.raises(FairnessError):
        verify(proof, client_seeds={-1: b"alice"})
    with pytest.raises(FairnessError):
        UsedDraw("Dice", 0)
    with pytest.raises(FairnessError):
        UsedDraw("dice", -1)


# --- malformed proofs ---


def _edit(proof: Proof, change: Any) -> str:
    data = proof.to_dict()
    change(data)
    return json.dumps(data)


def _set(path: tuple[str | int, ...], value: object) -> Any:
    def change(data: Any) -> None:
        for step in path[:-1]:
            data = data[step]
        data[path[-1]] = value

    return change


def _delete(path: tuple[str | int, ...]) -> Any:
    def change(data: Any) -> None:
        for step in path[:-1]:
            data = data[step]
        del data[path[-1]]

    return change


MALFORMED_EDITS = [
    (_delete(("format",)), "proof: missing key 'format'"),
    (_set(("format",), "skillclassics-fairness-proof/2"), "unsupported proof format version"),
    (
        _set(("format",), "something-else"),
        "format must be 'skillclassics-fairness-proof/1', got 'something-else'",
    ),
    (_delete(("draws",)), "proof: missing key 'draws'"),
    (_set(("extra",), 1), "proof: unknown key 'extra'"),
    (_set(("match_id",), 7), "match_id: expected a string, got a number"),
    (_set(("match_id",), "m 1"), "match_id: match id must be 1-128 characters of [A-Za-z0-9._:-], got 'm 1'"),
    (_set(("commitment",), "abc"), "commitment: expected 64 lower-case hex characters"),
    (_set(("commitment",), "A" * 64), "commitment: expected 64 lower-case hex characters"),
    (_set(("server_seed",), SEED.hex().upper()), "server_seed: expected lower-case hex"),
    (
        _set(("server_seed",), SEED.hex()[:-1]),
        "server_seed: expected lower-case hex with an even number of digits",
    ),
    (_set(("server_seed",), SEED.hex()[:-2]), "server_seed: server seed must be exactly 32 bytes, got 31"),
    (_set(("server_seed",), None), "server_seed: expected a string, got null"),
    (_set(("client_seeds",), {}), "client_seeds: expected an array, got an object"),
    (_set(("client_seeds", 0), "616c696365"), "client_seeds[0]: expected an object, got a string"),
    (_set(("client_seeds", 0, "seat"), True), "client_seeds[0].seat: expected an integer, got a boolean"),
    (
        _set(("client_seeds", 1, "seat"), -1),
        "client_seeds[1]: seat must be an integer between 0 and 4294967295",
    ),
    (
        _set(("client_seeds", 0, "seed"), ""),
        "client_seeds[0]: client seed must be between 1 and 64 bytes, got 0",
    ),
    (_delete(("client_seeds", 0, "seed")), "client_seeds[0]: missing key 'seed'"),
    (_set(("draws", 0, "count"), "3"), "draws[0].count: expected an integer, got a string"),
    (_set(("draws", 0, "count"), 3.0), "draws[0].count: expected an integer, got a number"),
    (_set(("draws", 0, "kind"), "poker"), "draws[0].kind: expected one of dice, integer, coin, shuffle"),
    (_set(("draws", 0, "count"), 0), "draws[0]: count must be between 1 and 1024, got 0"),
    (_set(("draws", 0, "bound"), 2), "draws[0]: bound must be 0 for coin, got 2"),
    (_set(("draws", 1, "stream"), "Coin"), "draws[1]: stream name must be 1-64 characters"),
    (_set(("draws", 1, "index"), -1), "draws[1]: draw index must be an integer between 0 and"),
    (_set(("draws", 3, "values", 1), -1), "draws[3]: values must be non-negative integers, got -1"),
    (_set(("draws", 3, "values", 1), None), "draws[3].values[1]: expected an integer, got null"),
    (_set(("draws", 3, "values"), 5), "draws[3].values: expected an array, got a number"),
    (_set(("draws", 3, "colour"), "red"), "draws[3]: unknown key 'colour'"),
    (_delete(("draws", 3, "values")), "draws[3]: missing key 'values'"),
]


@pytest.mark.parametrize(("change", "message"), MALFORMED_EDITS)
def test_malformed_fields_are_named(proof: Proof, change: Any, message: str) -> None:
    with pytest.raises(ProofFormatError) as info:
        Proof.from_json(_edit(proof, change))
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "proof is not valid JSON: Expecting value: line 1 column 1"),
        ("{", "proof is not valid JSON"),
        ("not json", "proof is not valid JSON"),
        ("[]", "proof must be a JSON object, got an array"),
        ("null", "proof must be a JSON object, got null"),
        ('{"format": "skillclassics-fairness-proof/1", "format": "x"}', "duplicate key 'format'"),
        ('{"format": NaN}', "NaN is not a JSON value"),
        ("[" * 100_000 + "]" * 100_000, "proof is not valid JSON"),
        ('{"format": ' + "9" * 5000 + "}", "proof is not valid JSON"),
        (b"\xff\xfe{}", "proof is not valid UTF-8 text"),
    ],
)
def test_malformed_json_is_a_proof_format_error(text: str | bytes, message: str) -> None:
    with pytest.raises(ProofFormatError) as info:
        Proof.from_json(text)
    assert message in str(info.value)


def test_proof_format_error_is_a_narrow_value_error() -> None:
    assert issubclass(ProofFormatError, FairnessError)
    assert issubclass(ProofFormatError, ValueError)


def test_proof_values_validate_their_form(proof: Proof) -> None:
    with pytest.raises(ProofFormatError, match="commitment must be 64 lower-case hex"):
        replace(proof, commitment=proof.commitment.upper())
    with pytest.raises(FairnessError, match="server seed must be exactly 32 bytes"):
        replace(proof, server_seed=b"short")
    with pytest.raises(ProofFormatError, match="values must be non-negative integers"):
        DrawRecord("dice", 0, DrawSpec.dice(1), (True,))
    record = DrawRecord("dice", 0, DrawSpec(DrawKind.DICE, 2, 0), [1, 2])  # type: ignore[arg-type]
    assert record.values == (1, 2)
    assert isinstance(replace(proof, draws=list(proof.draws)).draws, tuple)  # type: ignore[arg-type]
