"""The 15 ranks of Game of the Generals, the 21 pieces of a side, and the challenge table.

A rank is kept as a small integer, its *id* (:data:`FLG` = 1 ... :data:`SPY` = 15), so that a board is a
tuple of integers; its text is its *code* (``5*``, ``COL``, ``PVT``, ...), read case-insensitively and
written in upper case. A piece on a board is ``seat << 4 | rank id`` (:func:`piece`), 0 being no piece.
"""

from __future__ import annotations

from enum import IntEnum

FLG = 1
PVT = 2
SGT = 3
LT2 = 4
LT1 = 5
CPT = 6
MAJ = 7
LTC = 8
COL = 9
BG1 = 10
MG2 = 11
LG3 = 12
GEN4 = 13
GOA5 = 14
SPY = 15

RANK_IDS = tuple(range(FLG, SPY + 1))
"""Every rank id, weakest (the Flag) first, the Spy last."""

CODES: dict[int, str] = {
    GOA5: "5*",
    GEN4: "4*",
    LG3: "3*",
    MG2: "2*",
    BG1: "1*",
    COL: "COL",
    LTC: "LTC",
    MAJ: "MAJ",
    CPT: "CPT",
    LT1: "1LT",
    LT2: "2LT",
    SGT: "SGT",
    PVT: "PVT",
    SPY: "SPY",
    FLG: "FLG",
}
"""The code of every rank, in *rank order*: the order of the rules' list, General of the Army first and the
Flag last (the order in which missing pieces are placed at the setup deadline)."""

RANK_ORDER: tuple[int, ...] = tuple(CODES)
"""Rank ids in rank order (``5*`` ... ``SGT``, ``PVT``, ``SPY``, ``FLG``)."""

NAMES: dict[int, str] = {
    GOA5: "General of the Army",
    GEN4: "General",
    LG3: "Lieutenant General",
    MG2: "Major General",
    BG1: "Brigadier General",
    COL: "Colonel",
    LTC: "Lieutenant Colonel",
    MAJ: "Major",
    CPT: "Captain",
    LT1: "First Lieutenant",
    LT2: "Second Lieutenant",
    SGT: "Sergeant",
    PVT: "Private",
    SPY: "Spy",
    FLG: "Flag",
}

BY_CODE: dict[str, int] = {code: rank for rank, code in CODES.items()}
"""Rank ids by upper-case code."""

COUNTS: dict[int, int] = {rank: 1 for rank in RANK_ORDER} | {PVT: 6, SPY: 2}
"""How many pieces of each rank a side has (21 in all)."""

PIECES_PER_SIDE = sum(COUNTS.values())
assert PIECES_PER_SIDE == 21

ARMY: tuple[int, ...] = tuple(rank for rank in RANK_ORDER for _ in range(COUNTS[rank]))
"""The 21 rank ids of a side in rank order (six Privates, two Spies)."""


class Challenge(IntEnum):
    """How a challenge ends."""

    ATTACKER = 1
    """The attacker wins: the defender is removed and the attacker takes its square."""
    DEFENDER = 2
    """The defender wins: the attacker is removed."""
    BOTH = 3
    """Equal ranks: both are removed."""


CHALLENGE_MARKS = {Challenge.ATTACKER: ">", Challenge.DEFENDER: "<", Challenge.BOTH: "="}
"""How the record writes a challenge between two ranks: ``SGT>PVT``, ``SGT<COL``, ``SGT=SGT``."""


def challenge(attacker: int | str, defender: int | str) -> Challenge:
    """The result of ``attacker`` moving onto ``defender`` (rank ids or codes).

    Higher rank wins; equal ranks are both removed; a Spy beats every rank from Sergeant up but loses to
    a Private (whichever attacks); the Flag loses to everything, and is captured by anything that attacks
    it, except that a Flag attacking the enemy Flag wins.
    """
    a = rank_id(attacker)
    d = rank_id(defender)
    if d == FLG:
        return Challenge.ATTACKER
    if a == FLG:
        return Challenge.DEFENDER
    if a == d:
        return Challenge.BOTH
    if a == SPY:
        return Challenge.DEFENDER if d == PVT else Challenge.ATTACKER
    if d == SPY:
        return Challenge.ATTACKER if a == PVT else Challenge.DEFENDER
    return Challenge.ATTACKER if a > d else Challenge.DEFENDER


def rank_id(rank: int | str) -> int:
    """The rank id of ``rank`` (an id, or a code in any case such as ``pvt`` or ``5*``).

    :raises ValueError: no such rank.
    """
    if isinstance(rank, int) and not isinstance(rank, bool):
        if FLG <= rank <= SPY:
            return rank
        raise ValueError(f"no rank has id {rank!r}")
    if isinstance(rank, str):
        found = BY_CODE.get(rank.strip().upper())
        if found is not None:
            return found
    raise ValueError(f"unknown rank {rank!r}: the ranks are {', '.join(CODES.values())}")


def code(rank: int) -> str:
    """The code of rank id ``rank`` (``PVT``)."""
    return CODES[rank]


def piece(seat: int, rank: int) -> int:
    """A piece of ``seat`` with rank id ``rank`` as a board holds it."""
    return seat << 4 | rank


def owner(value: int) -> int:
    """The seat of a piece (not of 0)."""
    return value >> 4


def rank_of(value: int) -> int:
    """The rank id of a piece."""
    return value & 15


CHALLENGE_TABLE: tuple[tuple[Challenge, ...], ...] = tuple(
    tuple(challenge(a, d) for d in range(SPY + 1) if d) for a in range(SPY + 1) if a
)
"""``CHALLENGE_TABLE[a - 1][d - 1]``: :func:`challenge` of rank ids ``a`` and ``d``, precomputed."""
