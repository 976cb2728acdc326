"""The checks of a chaos run: what the players were told, what the controller did and what the database
holds, held against each other. Each check is a pure function of the :class:`Evidence`."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skillclassics.rules.v1 import rules_pb2

from libs.match.actor import rebuild
from libs.match.family import Family
from libs.match.model import MatchRecord
from libs.match.store import event_from_row
from libs.ratings import DRAW, LOSS, WIN, PlayerRating, rate
from services.families import rules_families
from tools.chaos.config import (
    DOWNTIME_CHARGE_BOUND_MS,
    FAMILIES,
    RECOVERY_GRACE_S,
    STREAM_SILENCE_BOUND_S,
)
from tools.chaos.controller import Outage
from tools.chaos.players import Ack, MatchLog, StreamLog
from tools.chaos.schedule import POSTGRES

SHOWN = 8
"""Details shown per failed check (the rest are counted)."""


@dataclass(slots=True)
class Evidence:
    """Everything the checks look at."""

    acks: list[Ack]
    streams: list[StreamLog]
    played: dict[str, MatchLog]
    """The matches the players played, by id."""
    outages: list[Outage]
    events: dict[str, list[dict[str, Any]]]
    """``match_events`` rows by match id, in sequence order."""
    matches: dict[str, dict[str, Any]]
    """``matches`` rows by match id."""
    results: dict[str, dict[str, Any]]
    """``match_results`` rows by match id."""
    mm_matches: dict[str, dict[str, Any]]
    rating_changes: list[dict[str, Any]]
    stored_ratings: dict[tuple[str, str], dict[str, Any]]
    """``mm_ratings`` by (player, family)."""
    served_ratings: dict[tuple[str, str], tuple[int, int]]
    """(rating, games) the gateway serves each player, by (player, family)."""
    proofs: dict[tuple[str, str], tuple[bool, list[str]]]
    """Each player's verdict on each finished match's fairness proof, by (match, player)."""
    finished_ms: int
    """When the run ended (an outage still open then is counted up to it)."""


@dataclass(slots=True)
class CheckResult:
    name: str
    ok: bool
    summary: str
    details: list[str] = field(default_factory=list)


def _result(name: str, problems: list[str], summary: str) -> CheckResult:
    shown = problems[:SHOWN]
    if len(problems) > SHOWN:
        shown.append(f"... and {len(problems) - SHOWN} more")
    return CheckResult(name, not problems, summary, shown)


def run_checks(evidence: Evidence) -> list[CheckResult]:
    return [
        acks_logged_once(evidence),
        one_result_each(evidence),
        settled_once(evidence),
        no_stream_hung(evidence),
        downtime_not_charged(evidence),
        proofs_verify(evidence),
        ratings_replay(evidence),
        services_recovered(evidence),
    ]


# -- the log ---------------------------------------------------------------------------------------------


def acks_logged_once(ev: Evidence) -> CheckResult:
    """Every acknowledged action is in its match's log exactly once, at the sequence it was given."""
    problems = []
    keys: dict[str, Counter[str]] = {
        match_id: Counter(row["idempotency_key"] for row in rows if row["idempotency_key"])
        for match_id, rows in ev.events.items()
    }
    for ack in ev.acks:
        rows = ev.events.get(ack.match_id, [])
        at = next((row for row in rows if row["sequence"] == ack.sequence), None)
        times = keys.get(ack.match_id, Counter())[ack.key]
        if at is None:
            problems.append(
                f"{ack.match_id} #{ack.sequence} ({ack.player}, {ack.door}): acknowledged but not in the log"
            )
        elif at["idempotency_key"] != ack.key:
            problems.append(
                f"{ack.match_id} #{ack.sequence} ({ack.player}, {ack.door}): the log has another action "
                f"there (key {at['idempotency_key']}, kind {at['kind']})"
            )
        if times != 1 and at is not None:
            problems.append(
                f"{ack.match_id} ({ack.player}, {ack.door}): key {ack.key} is in the log {times} times"
            )
    for match_id, counted in keys.items():
        for key, times in counted.items():
            if times > 1:
                problems.append(f"{match_id}: idempotency key {key} logged {times} times")
    by_door = Counter(ack.door for ack in ev.acks)
    return _result(
        "acknowledged actions logged once",
        problems,
        f"{len(ev.acks)} acknowledged actions ("
        + ", ".join(f"{n} {door}" for door, n in sorted(by_door.items()))
        + ")",
    )


def _family(name: str) -> Family:
    """The family's rules, to replay its logs (its own declaration: ``services.families``)."""
    return rules_families()[name]


def replay(family_name: str, rows: list[dict[str, Any]]) -> MatchRecord:
    """The match its log makes (raises when the log does not replay)."""
    return rebuild(_family(family_name), [event_from_row(row) for row in rows])


def _termination_name(result: rules_pb2.Result) -> str:
    return rules_pb2.Termination.Name(result.termination).removeprefix("TERMINATION_").lower()


def one_result_each(ev: Evidence) -> CheckResult:
    """Every match's log replays; a finished one has exactly the result its log gives, and its players saw
    that result; an unfinished one (live or waiting) is consistent with its log."""
    problems = []
    states: Counter[str] = Counter()
    for match_id, row in sorted(ev.matches.items()):
        rows = ev.events.get(match_id, [])
        sequences = [r["sequence"] for r in rows]
        if sequences != list(range(1, len(sequences) + 1)):
            problems.append(f"{match_id}: the log's sequences are not 1..n: {sequences[:5]}...")
            continue
        try:
            record = replay(row["family"], rows)
        except Exception as error:
            problems.append(f"{match_id}: the log does not replay: {type(error).__name__}: {error}")
            continue
        states[row["status"]] += 1
        result = ev.results.get(match_id)
        if record.outcome is None:
            if row["status"] in ("finished", "aborted") or result is not None:
                problems.append(f"{match_id}: status {row['status']} but its log does not end the match")
            if match_id in ev.played and ev.played[match_id].finals:
                problems.append(f"{match_id}: a player saw it end, but its log does not")
            continue
        if result is None:
            problems.append(f"{match_id}: its log ends it ({record.outcome.termination.value}) but no result")
            continue
        if (result["termination"], result["winner"]) != (
            record.outcome.termination.value,
            record.outcome.winner,
        ):
            problems.append(
                f"{match_id}: result {result['termination']}/{result['winner']} but the log gives "
                f"{record.outcome.termination.value}/{record.outcome.winner}"
            )
        marks = [[m.seat, m.remaining_ms, m.at_ms] for m in record.clock_marks]
        if [list(m) for m in result["clock_history"]] != marks:
            problems.append(f"{match_id}: the stored clock history is not the log's")
        played = ev.played.get(match_id)
        for seat, final in (played.finals if played else {}).items():
            winner = final.result.winner if final.result.HasField("winner") else None
            if (_termination_name(final.result), winner) != (result["termination"], result["winner"]):
                problems.append(
                    f"{match_id}: seat {seat} saw {_termination_name(final.result)}/{winner}, "
                    f"the result is {result['termination']}/{result['winner']}"
                )
    for match_id, played in ev.played.items():
        if match_id not in ev.matches:
            problems.append(f"{match_id}: played by {played.players} but not in the database")
        elif len(played.finals) < 2 and ev.matches[match_id]["status"] in ("finished", "aborted"):
            problems.append(
                f"{match_id}: ended, but {2 - len(played.finals)} of its players never saw the end"
            )
    summary = ", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "no matches"
    return _result("one result per match, logs replay", problems, summary)


def settled_once(ev: Evidence) -> CheckResult:
    """Each finished match reached matchmaking once (one result, the rules' one), was rated once, and its
    outbox row is marked delivered."""
    problems = []
    changes: Counter[str] = Counter(row["match_id"] for row in ev.rating_changes)
    settled = 0
    for match_id, result in sorted(ev.results.items()):
        if result["reported_at_ms"] is None:
            problems.append(f"{match_id}: its result is still in the outbox (not reported)")
        mm = ev.mm_matches.get(match_id)
        if mm is None:
            problems.append(f"{match_id}: matchmaking has no record of it")
            continue
        if mm["result"] is None:
            problems.append(f"{match_id}: matchmaking has no result for it (status {mm['status']})")
            continue
        stored = rules_pb2.Result.FromString(bytes(mm["result"]))
        winner = stored.winner if stored.HasField("winner") else None
        if (_termination_name(stored), winner) != (result["termination"], result["winner"]):
            problems.append(
                f"{match_id}: matchmaking recorded {_termination_name(stored)}/{winner}, "
                f"the rules service {result['termination']}/{result['winner']}"
            )
        aborted = result["termination"] == "aborted"
        expected = 0 if aborted else 2
        if changes[match_id] != expected:
            problems.append(f"{match_id}: rated {changes[match_id]} times (rating rows), expected {expected}")
        settled += 1
    for match_id, mm in ev.mm_matches.items():
        if mm["result"] is not None and match_id not in ev.results:
            problems.append(f"{match_id}: matchmaking has a result the rules service does not")
    return _result("results reported and settled once", problems, f"{settled} results settled")


# -- streams and clocks ----------------------------------------------------------------------------------


def overlap(a: tuple[int, int], windows: Iterable[tuple[int, int]]) -> int:
    """How much of ``a`` the union of ``windows`` covers, in ms."""
    start, end = a
    covered = 0
    cursor = start
    for lo, hi in sorted(windows):
        lo, hi = max(lo, cursor), min(hi, end)
        if hi > lo:
            covered += hi - lo
            cursor = hi
    return covered


def no_stream_hung(ev: Evidence) -> CheckResult:
    """No match stream stayed silent, while its match was live, for longer than the bound beyond what the
    outages its family waits for (:func:`blocking_targets`, widened by the recovery grace) explain."""
    grace = int(RECOVERY_GRACE_S * 1000)
    windows = {
        name: [
            (lo, hi + grace)
            for lo, hi in (o.window(ev.finished_ms) for o in ev.outages if o.target in targets)
        ]
        for name in FAMILIES
        for targets in [blocking_targets(name)]
    }
    bound = int(STREAM_SILENCE_BOUND_S * 1000)
    problems = []
    ends: Counter[str] = Counter()
    longest = 0
    where = ""
    for stream in ev.streams:
        ends[stream.end or "open"] += 1
        match = ev.matches.get(stream.match_id)
        ended = match["ended_at_ms"] if match and match["ended_at_ms"] is not None else None
        for lo, hi in stream.silences:
            if ended is not None and lo >= ended:
                continue  # the match was over
            hi = min(hi, ended) if ended is not None else hi
            unexplained = (hi - lo) - overlap((lo, hi), windows.get(stream.match_id.split(".")[0], []))
            if unexplained > longest:
                longest, where = unexplained, f"{stream.match_id} ({stream.player}, {stream.door}, {lo}-{hi})"
            if unexplained > bound:
                problems.append(
                    f"{stream.match_id} ({stream.player}, {stream.door}): silent {(hi - lo) / 1000:.1f} s "
                    f"({unexplained / 1000:.1f} s unexplained by outages), stream ended {stream.end}"
                )
        if stream.end is None:
            problems.append(
                f"{stream.match_id} ({stream.player}, {stream.door}): a stream still open at the end"
            )
    by_door = Counter(stream.door for stream in ev.streams)
    summary = (
        f"{len(ev.streams)} streams ("
        + ", ".join(f"{n} {door}" for door, n in sorted(by_door.items()))
        + "; "
        + ", ".join(f"{n} {end}" for end, n in sorted(ends.items()))
        + "), "
        f"longest unexplained silence {longest / 1000:.1f} s"
    ) + (f" ({where})" if where else "")
    return _result("no stream hung", problems, summary)


def blocking_targets(family_name: str) -> set[str]:
    """The outages that stop a family's match from being played: its rules shard, the gateway, the
    database, and the fairness service when the family draws."""
    plan = FAMILIES[family_name]
    return {plan.service, "gateway", POSTGRES} | ({"fairness"} if plan.draws else set())


def credited_targets(family_name: str) -> set[str]:
    """The outages docs/match-runtime.md ("Server downtime is not a player's time") credits: the family's
    rules shard down; the database stopped (the shard's lock session ends with it: the shard loses its
    ownership, takes it again and resumes every match as after a crash); and for a family that draws, the
    fairness service down (a draw awaited is charged to nobody). A gateway outage is its players'
    disconnection, not downtime: the check notes what it cost them without failing on it."""
    plan = FAMILIES[family_name]
    return {plan.service, POSTGRES} | ({"fairness"} if plan.draws else set())


def _charges(
    ev: Evidence, result: Mapping[str, Any], outages: list[Outage]
) -> Iterable[tuple[int, int, int, int, int]]:
    """For each judged move of a result: (seat, at, turn start, charge, downtime within ``outages``)."""
    windows = [o.window(ev.finished_ms) for o in outages]
    last_of: dict[int, tuple[int, int]] = {}
    latest: int | None = None
    for seat, remaining, at in (tuple(int(x) for x in m) for m in result["clock_history"]):
        previous = last_of.get(seat)
        if latest is not None and previous is not None:
            start = max(latest, previous[1])
            yield seat, at, start, previous[0] - remaining, overlap((start, at), windows)
        last_of[seat] = (remaining, at)
        latest = at


def downtime_not_charged(ev: Evidence) -> CheckResult:
    """No move was charged more than :data:`DOWNTIME_CHARGE_BOUND_MS` for its shard's downtime.

    For each clock mark (a seat's clock right after its move) the charge is what the seat's clock lost
    since its previous mark (no increment); the turn ran from the latest mark of either seat before it.
    Whatever the charge exceeds the part of the turn outside the shard's outages by is downtime charged.
    The same sum over every outage that stops the family's matches (:func:`blocking_targets`) is noted in
    the summary: what the outages the rule does not credit cost the players.
    """
    problems = []
    worst = 0
    moves = 0
    noted: Counter[str] = Counter()
    for match_id, result in ev.results.items():
        family_name = result["family"]
        if family_name not in FAMILIES:
            continue
        credited = [o for o in ev.outages if o.target in credited_targets(family_name)]
        blocking = [o for o in ev.outages if o.target in blocking_targets(family_name)]
        for seat, at, start, charge, down in _charges(ev, result, credited):
            moves += 1
            excess = charge - ((at - start) - down)
            worst = max(worst, excess)
            if excess > DOWNTIME_CHARGE_BOUND_MS:
                problems.append(
                    f"{match_id}: seat {seat}'s move at {at} was charged {charge} ms for a {at - start} ms "
                    f"turn ({start} to {at}), {down} ms of it down "
                    f"({_down_during(ev, credited, start, at)}): "
                    f"{excess} ms more than its time outside the outages"
                )
        for _seat, at, start, charge, down in _charges(ev, result, blocking):
            if charge - ((at - start) - down) > DOWNTIME_CHARGE_BOUND_MS:
                noted[_down_during(ev, blocking, start, at)] += 1
    return _result(
        f"shard downtime charged at most {DOWNTIME_CHARGE_BOUND_MS} ms",
        problems,
        f"{moves} moves judged, most shard downtime charged {max(worst, 0)} ms"
        + "".join(
            f"; noted: {n} moves charged over {DOWNTIME_CHARGE_BOUND_MS} ms more than their turn's time "
            f"outside the outages (down during the turn: {during})"
            for during, n in sorted(noted.items())
        ),
    )


def _down_during(ev: Evidence, outages: list[Outage], start: int, at: int) -> str:
    """Which of ``outages`` overlapped the turn from ``start`` to ``at`` ("postgres stop-fast"), or "no
    outage": a charge no outage explains."""
    during = sorted(
        {f"{o.target} {o.how}" for o in outages if overlap((start, at), [o.window(ev.finished_ms)])}
    )
    return ", ".join(during) or "no outage"


# -- fairness and ratings --------------------------------------------------------------------------------


def proofs_verify(ev: Evidence) -> CheckResult:
    """Both players of every finished match with a fairness commitment verify its proof."""
    problems = []
    for (match_id, player), (ok, lines) in sorted(ev.proofs.items()):
        if not ok:
            problems.append(f"{match_id} ({player}): " + "; ".join(lines[:3]))
    committed = [m for m, r in ev.results.items() if r["fairness_commitment"]]
    for match_id in committed:
        played = ev.played.get(match_id)
        for player in played.players if played else ():
            if (match_id, player) not in ev.proofs:
                problems.append(f"{match_id} ({player}): its proof was not checked")
    return _result("fairness proofs verify", problems, f"{len(ev.proofs)} proofs checked")


def ratings_replay(ev: Evidence) -> CheckResult:
    """The ratings matchmaking serves (and stores) are a replay of its stored results, in the order it
    recorded them, with libs.ratings."""
    problems = []
    replayed: dict[tuple[str, str], PlayerRating] = defaultdict(PlayerRating)
    rated = [m for m in ev.mm_matches.values() if m["result"] is not None and m["status"] == "finished"]
    for match in sorted(rated, key=lambda m: (m["ended_at_ms"], m["match_id"])):
        result = rules_pb2.Result.FromString(bytes(match["result"]))
        winner = result.winner if result.HasField("winner") else None
        score = DRAW if winner is None else (WIN if winner == 0 else LOSS)
        family_name = match["family"]
        a, b = (match["player0"], family_name), (match["player1"], family_name)
        replayed[a], replayed[b] = rate(replayed[a], replayed[b], score)
    for key, expected in sorted(replayed.items()):
        stored = ev.stored_ratings.get(key)
        if stored is None or (stored["rating"], stored["games"]) != (expected.rating, expected.games):
            shown = None if stored is None else (stored["rating"], stored["games"])
            problems.append(
                f"{key[0]} ({key[1]}): stored {shown}, replay gives {(expected.rating, expected.games)}"
            )
        served = ev.served_ratings.get(key)
        if served != (expected.rating, expected.games):
            problems.append(
                f"{key[0]} ({key[1]}): served {served}, replay gives {(expected.rating, expected.games)}"
            )
    for key in ev.stored_ratings:
        if key not in replayed:
            problems.append(f"{key[0]} ({key[1]}): a stored rating no result explains")
    return _result(
        "ratings are a replay of the results",
        problems,
        f"{len(rated)} rated results, {len(replayed)} ratings, {len(ev.served_ratings)} served ones compared",
    )


def services_recovered(ev: Evidence) -> CheckResult:
    """Every target came back after its fault, and no service ended without being asked."""
    problems = []
    for outage in ev.outages:
        if outage.end_ms is None:
            problems.append(f"{outage.target} never came back after {outage.how}: {outage.problem}")
        if outage.unasked:
            problems.append(f"{outage.target} exited by itself: {outage.problem}")
    asked = sum(1 for o in ev.outages if not o.unasked)
    return _result("services came back", problems, f"{asked} faults, {len(ev.outages) - asked} unasked exits")
