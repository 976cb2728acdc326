"""The challenge table, every pair of the 15 ranks in both directions, against a table written out by
hand from the rules (not computed)."""

from __future__ import annotations

import pytest

from libs.engines.generals import CHALLENGE_TABLE, CODES, COUNTS, Challenge, challenge, rank_id

ORDER = ("5*", "4*", "3*", "2*", "1*", "COL", "LTC", "MAJ", "CPT", "1LT", "2LT", "SGT", "PVT", "SPY", "FLG")
# Row: the attacker; column: the defender, in ORDER. A: the attacker wins, D: the defender wins, B: both
# are removed.
TABLE = {
    "5*": "BAAAAAAAAAAAADA",
    "4*": "DBAAAAAAAAAAADA",
    "3*": "DDBAAAAAAAAAADA",
    "2*": "DDDBAAAAAAAAADA",
    "1*": "DDDDBAAAAAAAADA",
    "COL": "DDDDDBAAAAAAADA",
    "LTC": "DDDDDDBAAAAAADA",
    "MAJ": "DDDDDDDBAAAAADA",
    "CPT": "DDDDDDDDBAAAADA",
    "1LT": "DDDDDDDDDBAAADA",
    "2LT": "DDDDDDDDDDBAADA",
    "SGT": "DDDDDDDDDDDBADA",
    "PVT": "DDDDDDDDDDDDBAA",
    "SPY": "AAAAAAAAAAAADBA",
    "FLG": "DDDDDDDDDDDDDDA",
}
LETTERS = {"A": Challenge.ATTACKER, "D": Challenge.DEFENDER, "B": Challenge.BOTH}


def test_the_table_covers_every_rank() -> None:
    assert set(ORDER) == set(CODES.values()) == set(TABLE)
    assert all(len(row) == 15 for row in TABLE.values())
    assert sum(COUNTS.values()) == 21
    assert COUNTS[rank_id("PVT")] == 6
    assert COUNTS[rank_id("SPY")] == 2
    assert COUNTS[rank_id("FLG")] == 1


@pytest.mark.parametrize("attacker", ORDER)
def test_every_pair_both_directions(attacker: str) -> None:
    for column, defender in enumerate(ORDER):
        expected = LETTERS[TABLE[attacker][column]]
        assert challenge(attacker, defender) is expected, (attacker, defender)
        assert challenge(attacker.lower(), defender.lower()) is expected
        assert CHALLENGE_TABLE[rank_id(attacker) - 1][rank_id(defender) - 1] is expected
        # The reverse direction is the same fight, except that a Flag attacked by a Flag loses.
        reverse = challenge(defender, attacker)
        if attacker == defender:
            assert reverse is expected
        elif expected is Challenge.ATTACKER:
            assert reverse is Challenge.DEFENDER
        elif expected is Challenge.DEFENDER:
            assert reverse is Challenge.ATTACKER


def test_the_exceptions_named_in_the_rules() -> None:
    assert challenge("SPY", "5*") is Challenge.ATTACKER
    assert challenge("5*", "SPY") is Challenge.DEFENDER
    assert challenge("SPY", "SGT") is Challenge.ATTACKER
    assert challenge("PVT", "SPY") is Challenge.ATTACKER
    assert challenge("SPY", "PVT") is Challenge.DEFENDER
    assert challenge("SPY", "SPY") is Challenge.BOTH
    assert challenge("PVT", "PVT") is Challenge.BOTH
    assert challenge("FLG", "FLG") is Challenge.ATTACKER
    assert challenge("FLG", "PVT") is Challenge.DEFENDER
    assert challenge("PVT", "FLG") is Challenge.ATTACKER


def test_unknown_ranks() -> None:
    with pytest.raises(ValueError, match="unknown rank"):
        challenge("XYZ", "PVT")
    with pytest.raises(ValueError, match="no rank has id 0"):
        rank_id(0)
