"""What a player records about a match's randomness, and checking the match's proof against it.

A proof that verifies on its own (``libs.fairness.verify``) shows that every draw follows from the
seeds it reveals. It does not show that those are the seeds *this* match was promised: for that the
player compares it with what they saw themselves (docs/fairness.md, "For people writing their own
client"):

- the commitment and its format version, announced before the first draw (``MatchReady``, the first
  update of every match stream, ``GetMatch``);
- their own client seed, sent before the first draw (``AddClientSeed``) once the commitment was known;
- the draws the match used (the ``chance`` events of the updates, and the record once it is over).

:class:`MatchFairness` is that record for one match, :class:`FairnessBook` keeps records on disk (one
JSON file per player and match), and :func:`check_proof` compares a proof with a record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from skillclassics.rules.v1 import rules_pb2

from libs.fairness import FAIRNESS_VERSION, Proof, UsedDraw, VerificationReport, verify
from libs.runtime.private_files import write_private

__all__ = [
    "FairnessBook",
    "FairnessCheck",
    "MatchFairness",
    "check_proof",
    "used_draws",
]

RECORD_FORMAT: Final = "skillclassics-fairness-record/1"
"""The ``format`` member of a record file."""
_SAFE_NAME: Final = re.compile(r"[A-Za-z0-9._:@-]{1,128}")


@dataclass
class MatchFairness:
    """What one player recorded about one match's fairness stream, as the match went on."""

    match_id: str
    seat: int | None = None
    """The player's seat (from ``MatchReady``, the play stream, ``GetMatch`` or ``AddClientSeed``)."""
    commitment: str = ""
    """The commitment first announced for the match (lower-case hex; empty until one was seen)."""
    version: int = 0
    """The fairness format version announced with it."""
    other_commitments: list[str] = field(default_factory=list)
    """Different commitments announced later for the same match: there must never be any."""
    client_seed: bytes | None = None
    """The player's own client seed, recorded before it is sent (a later session sends the same one
    again: the identical seed is accepted as a repeat, a different one would be refused)."""
    seed_accepted: bool = False
    """Whether the server accepted :attr:`client_seed` for the player's seat."""
    seed_problem: str = ""
    """Why the player's seed is not in the match (sent too late, refused), when it is not."""
    draws: list[tuple[str, int]] = field(default_factory=list)
    """The draws the match used, as the updates showed them (stream, index), in order."""

    def note_commitment(self, commitment: str, version: int) -> bool:
        """An announcement of the match's commitment; whether it told anything new."""
        commitment = commitment.lower()
        if not commitment:
            return False
        if not self.commitment:
            self.commitment, self.version = commitment, version
            return True
        if commitment != self.commitment and commitment not in self.other_commitments:
            self.other_commitments.append(commitment)
            return True
        return False

    def note_seat(self, seat: int) -> bool:
        if self.seat == seat:
            return False
        self.seat = seat
        return True

    def note_draw(self, stream: str, index: int) -> bool:
        """A ``chance`` event the player saw; whether it was new."""
        if (stream, index) in self.draws:
            return False
        self.draws.append((stream, index))
        return True

    def note_update(self, update: rules_pb2.MatchUpdate) -> bool:
        """Everything an update tells about the stream (its commitment, the draw it made); whether
        anything was new."""
        changed = self.note_commitment(update.fairness_commitment, update.fairness_version)
        event = update.event
        if event.kind == "chance" and event.HasField("draw"):
            changed = self.note_draw(event.draw.stream, event.draw.index) or changed
        return changed

    def merge(self, other: MatchFairness) -> None:
        """Take in what ``other`` (an earlier record of the same match) knew and this one does not."""
        if other.commitment:
            mine = [self.commitment, *self.other_commitments] if self.commitment else []
            self.commitment, self.version = other.commitment, other.version
            self.other_commitments = list(other.other_commitments)
            for commitment in mine:
                self.note_commitment(commitment, self.version)
        if self.seat is None:
            self.seat = other.seat
        if other.client_seed is not None and (
            self.client_seed is None or (other.seed_accepted and not self.seed_accepted)
        ):
            self.client_seed, self.seed_accepted = other.client_seed, other.seed_accepted
            self.seed_problem = other.seed_problem
        self.draws = [*other.draws, *(draw for draw in self.draws if draw not in other.draws)]

    def to_json(self) -> str:
        data = {
            "format": RECORD_FORMAT,
            "match_id": self.match_id,
            "seat": self.seat,
            "commitment": self.commitment,
            "version": self.version,
            "other_commitments": self.other_commitments,
            "client_seed": None if self.client_seed is None else self.client_seed.hex(),
            "seed_accepted": self.seed_accepted,
            "seed_problem": self.seed_problem,
            "draws": [{"stream": stream, "index": index} for stream, index in self.draws],
        }
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> MatchFairness:
        """A record read back; ``ValueError`` when it is not one."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
            raise ValueError(f"not a {RECORD_FORMAT} file")
        try:
            seed = data.get("client_seed")
            return cls(
                match_id=str(data["match_id"]),
                seat=None if data.get("seat") is None else int(data["seat"]),
                commitment=str(data.get("commitment", "")),
                version=int(data.get("version", 0)),
                other_commitments=[str(c) for c in data.get("other_commitments", [])],
                client_seed=None if seed is None else bytes.fromhex(str(seed)),
                seed_accepted=bool(data.get("seed_accepted", False)),
                seed_problem=str(data.get("seed_problem", "")),
                draws=[(str(d["stream"]), int(d["index"])) for d in data.get("draws", [])],
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"a malformed fairness record: {error}") from None


class FairnessBook:
    """Fairness records on disk: ``FOLDER/<player>/<match id>.json`` (mode 0600, written atomically)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, player_id: str, match_id: str, suffix: str = ".json") -> Path:
        for name in (player_id, match_id):
            if _SAFE_NAME.fullmatch(name) is None or name in (".", ".."):
                raise ValueError(f"{name!r} cannot name a record file")
        return self.folder / player_id / f"{match_id}{suffix}"

    def load(self, player_id: str, match_id: str) -> MatchFairness | None:
        """The record of ``match_id``, or ``None`` when there is none (or it cannot be read)."""
        try:
            text = self.path(player_id, match_id).read_text(encoding="utf-8")
            return MatchFairness.from_json(text)
        except (OSError, ValueError):
            return None

    def save(self, player_id: str, record: MatchFairness) -> Path:
        path = self.path(player_id, record.match_id)
        write_private(path, record.to_json())
        return path


def used_draws(
    record: MatchFairness | None, record_draws: Iterable[rules_pb2.FairnessDraw] = ()
) -> list[UsedDraw]:
    """The draws the match used: those of its record (``GetRecord``'s ``fairness_draws``, with the values
    the game used), then those the player saw in the updates that the record does not list."""
    found: dict[tuple[str, int], UsedDraw] = {}
    for draw in record_draws:
        found[(draw.stream, draw.index)] = UsedDraw(
            draw.stream, draw.index, tuple(int(v) for v in draw.values)
        )
    if record is not None:
        for stream, index in record.draws:
            found.setdefault((stream, index), UsedDraw(stream, index))
    return list(found.values())


@dataclass(frozen=True)
class FairnessCheck:
    """A proof compared with what the player recorded: the verifier's report, and what the record
    itself says (two commitments announced, a version this client cannot read, a seed not taken)."""

    report: VerificationReport
    problems: tuple[str, ...] = ()
    """Failures found in the record itself."""
    notes: tuple[str, ...] = ()
    """What the player should know but is not a failure (no record here, a seed sent too late)."""
    proof_json: str = ""

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.problems

    def lines(self) -> list[str]:
        """The verdict, one line per problem (``FAIL: ...``) or the ``OK:`` line, then the notes."""
        lines = self.report.lines() if not self.report.ok else []
        lines += [f"FAIL: {problem}" for problem in self.problems]
        if not lines:
            lines = self.report.lines()
        return lines + [f"note: {note}" for note in self.notes]


def check_proof(
    proof: Proof,
    record: MatchFairness | None,
    record_draws: Iterable[rules_pb2.FairnessDraw] | None = None,
    *,
    proof_json: str = "",
    record_problem: str = "",
) -> FairnessCheck:
    """Verify ``proof`` against what the player recorded (``record``) and the draws of the match's
    record (``record_draws``: ``GetRecord``'s ``fairness_draws``; ``None`` when it could not be had,
    ``record_problem`` saying why)."""
    problems: list[str] = []
    notes: list[str] = []
    if record_draws is None:
        why = f" ({record_problem})" if record_problem else ""
        notes.append(
            f"the match's record could not be fetched{why}: only the draws seen in its updates are "
            "looked for in the proof"
        )
    seeds: dict[int, bytes] | list[bytes] | None = None
    if record is None or not record.commitment:
        notes.append(
            f"no commitment of match {proof.match_id} was recorded here before the match: the proof is "
            "checked on its own, not against what the server announced"
        )
    if record is not None:
        if record.other_commitments:
            problems.append(
                f"the server announced more than one commitment for match {record.match_id}: "
                f"{', '.join([record.commitment, *record.other_commitments])}"
            )
        if record.version and record.version != FAIRNESS_VERSION:
            problems.append(
                f"the match announced fairness format version {record.version}; this client verifies "
                f"version {FAIRNESS_VERSION}"
            )
        if record.client_seed is not None and record.seed_accepted:
            seeds = {record.seat: record.client_seed} if record.seat is not None else [record.client_seed]
        elif record.client_seed is not None or record.seed_problem:
            why = record.seed_problem or "the server never confirmed it"
            notes.append(
                f"your client seed is not known to be in this match ({why}): "
                "the match is protected by the commitment alone"
            )
    report = verify(
        proof,
        commitment=record.commitment if record is not None and record.commitment else None,
        client_seeds=seeds,
        used_draws=used_draws(record, record_draws or ()),
    )
    return FairnessCheck(report, tuple(problems), tuple(notes), proof_json)
