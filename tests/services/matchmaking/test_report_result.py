"""``ReportResult`` over real gRPC with the chess rules service running, on SQLite and PostgreSQL.

A result is taken only for a match matchmaking made, once (docs/matchmaking.md, "Results"): the first
report records it and moves the ratings; the identical report again (the rules shards' outbox delivers at
least once) is answered and changes nothing; a different report is refused and changes nothing; a match
matchmaking never made is ``NOT_FOUND``; a winner who is not one of the match's seats is refused.

Every report here comes from ``rules-chess-0``, the shard that owns every ``chess.0.*`` match and the one
caller the authorisation table lets report its results: these are the rules that hold even for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.rules.v1 import rules_pb2

from tests.services.matchmaking.test_matchmaking_service import (
    FAILED,
    INVALID,
    Platform,
    fools_mate,
    rated_games,
    result_reported_at,
    running_platform,
    table_request,
)
from tests.support import refused

NOT_FOUND = grpc.StatusCode.NOT_FOUND


@pytest.fixture
async def platform(database_url: str) -> AsyncIterator[Platform]:
    async with running_platform(database_url) as running:
        yield running


def won(
    winner: int, termination: rules_pb2.Termination.ValueType = rules_pb2.TERMINATION_RESIGNATION
) -> rules_pb2.Result:
    score = [1.0, 0.0] if winner == 0 else [0.0, 1.0]
    return rules_pb2.Result(
        termination=termination, winner=winner, detail="a result", score=score, ended_at_ms=1_000
    )


def report(match_id: str, result: rules_pb2.Result) -> pb.ReportResultRequest:
    return pb.ReportResultRequest(match_id=match_id, result=result)


async def live_match(platform: Platform, white: str, black: str) -> str:
    """A match made by matchmaking from a table and under way on its rules shard; its id."""
    table = (await platform.mm.CreateTable(table_request(white))).table
    joined = await platform.mm.JoinTable(pb.JoinTableRequest(player_id=black, table_id=table.table_id))
    assert joined.table.status == pb.TABLE_STATUS_PLAYING
    match_id: str = joined.table.match_id
    return match_id


async def ratings(platform: Platform, *players: str) -> list[tuple[str, list[tuple[str, int, int]], int]]:
    """Each player's ratings (family, rating, games) and the length of their rating history."""
    out = []
    for player in players:
        got = await platform.mm.GetRatings(pb.GetRatingsRequest(player_id=player))
        out.append((player, [(r.family, r.rating, r.games) for r in got.ratings], len(got.history)))
    return out


async def recorded(platform: Platform, player: str, match_id: str) -> pb.PlayedMatch:
    """``match_id`` as ``player``'s match history shows it."""
    history = await platform.mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id=player))
    found: list[pb.PlayedMatch] = [m for m in history.matches if m.match_id == match_id]
    assert len(found) == 1
    return found[0]


async def rating_events(lobby: grpc.aio.UnaryStreamCall, within: float) -> list[pb.RatingChanged]:
    """Every ``rating_changed`` event the lobby stream brings within ``within`` seconds."""
    told: list[pb.RatingChanged] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            while True:
                event: pb.WatchLobbyResponse = await lobby.read()
                if event.WhichOneof("event") == "rating_changed":
                    told.append(event.rating_changed)
    return told


async def test_a_report_for_a_match_matchmaking_never_made_is_not_found(platform: Platform) -> None:
    await refused(
        platform.owner.ReportResult(report("chess.0.forged", won(0))),
        NOT_FOUND,
        "knows no match chess.0.forged",
    )
    match_id = await live_match(platform, "ann", "ben")
    # Nothing of the refused report reached anybody, and the real match still takes its result.
    assert await ratings(platform, "ann", "ben") == [("ann", [], 0), ("ben", [], 0)]
    assert (await platform.owner.ReportResult(report(match_id, won(0)))).recorded


@pytest.mark.parametrize("winner", [2, 7, 2**32 - 1])
async def test_a_winner_who_is_not_seated_is_refused_and_changes_nothing(
    platform: Platform, winner: int
) -> None:
    match_id = await live_match(platform, "ann", "ben")
    forged = rules_pb2.Result(termination=rules_pb2.TERMINATION_RESIGNATION, winner=winner, ended_at_ms=1)
    await refused(
        platform.owner.ReportResult(report(match_id, forged)),
        INVALID,
        f"winner {winner} is not a seat of match {match_id}",
    )
    assert await ratings(platform, "ann", "ben") == [("ann", [], 0), ("ben", [], 0)]
    assert not (await recorded(platform, "ann", match_id)).HasField("result")
    # The match is still on: its real result is recorded first.
    assert (await platform.owner.ReportResult(report(match_id, won(1)))).recorded
    assert (await recorded(platform, "ann", match_id)).result == won(1)


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        (rules_pb2.Result(winner=0), "termination"),
        (rules_pb2.Result(), "termination"),
        (
            rules_pb2.Result(termination=rules_pb2.TERMINATION_ABORTED, winner=1),
            "aborted match has no winner",
        ),
    ],
    ids=["no-termination", "empty", "aborted-with-a-winner"],
)
async def test_a_result_that_cannot_be_is_refused_and_changes_nothing(
    platform: Platform, result: rules_pb2.Result, reason: str
) -> None:
    match_id = await live_match(platform, "ann", "ben")
    await refused(platform.owner.ReportResult(report(match_id, result)), INVALID, reason)
    assert await ratings(platform, "ann", "ben") == [("ann", [], 0), ("ben", [], 0)]
    assert not (await recorded(platform, "ben", match_id)).HasField("result")
    await refused(platform.mm.CreateTable(table_request("ann")), FAILED, "already playing match")


async def test_a_different_second_report_is_refused_and_the_ratings_stay(platform: Platform) -> None:
    """The attack of the security review: a report on a live match records a winner; the result the
    rules shard reports afterwards must not be silently dropped (nor overwrite the first): it is
    refused, so the conflict is loud, and nothing changes."""
    match_id = await live_match(platform, "ann", "ben")
    first = won(1)
    assert (await platform.owner.ReportResult(report(match_id, first))).recorded
    after_first = await ratings(platform, "ann", "ben")
    assert after_first == [("ann", [("chess", 1480, 1)], 1), ("ben", [("chess", 1520, 1)], 1)]

    for different in (
        won(0, rules_pb2.TERMINATION_CHECKMATE),  # another winner
        won(1, rules_pb2.TERMINATION_TIMEOUT),  # the same winner, another reason
        rules_pb2.Result(termination=rules_pb2.TERMINATION_DRAW_AGREED, score=[0.5, 0.5], ended_at_ms=1_000),
        rules_pb2.Result(termination=rules_pb2.TERMINATION_ABORTED, ended_at_ms=1_000),
        rules_pb2.Result(  # only the score differs
            termination=rules_pb2.TERMINATION_RESIGNATION,
            winner=1,
            detail="a result",
            score=[0.5, 1.0],
            ended_at_ms=1_000,
        ),
    ):
        await refused(
            platform.owner.ReportResult(report(match_id, different)),
            FAILED,
            f"match {match_id}'s result is already recorded",
        )
    assert await ratings(platform, "ann", "ben") == after_first
    assert (await recorded(platform, "ann", match_id)).result == first
    # Still answered as before for the identical result.
    assert not (await platform.owner.ReportResult(report(match_id, first))).recorded


async def test_an_identical_retry_is_answered_and_counted_once(platform: Platform) -> None:
    match_id = await live_match(platform, "ann", "ben")
    lobby = platform.mm.WatchLobby(pb.WatchLobbyRequest(player_id="ben"))
    assert (await lobby.read()).WhichOneof("event") == "subscribed"
    result = won(1)
    assert (await platform.owner.ReportResult(report(match_id, result))).recorded
    after_first = await ratings(platform, "ann", "ben")
    for _ in range(3):  # the outbox may deliver again (an answer lost, a restart)
        assert not (await platform.owner.ReportResult(report(match_id, result))).recorded
    assert await ratings(platform, "ann", "ben") == after_first
    # Ben was told of one rating change, not four.
    told = await rating_events(lobby, within=0.5)
    assert [(c.before, c.after) for c in told] == [(1500, 1520)]
    lobby.cancel()


async def test_a_result_with_its_stakes_refunded_closes_the_match_and_changes_no_rating(
    platform: Platform,
) -> None:
    match_id = await live_match(platform, "ada", "bea")
    before = await ratings(platform, "ada", "bea")
    result = won(1)  # Bea's stand-in won while she was away (docs/match-runtime.md, "Stand-ins")
    result.stood_in.append(1)
    result.settlement = rules_pb2.SETTLEMENT_REFUNDED
    assert (await platform.owner.ReportResult(report(match_id, result))).recorded
    assert await ratings(platform, "ada", "bea") == before
    played = await recorded(platform, "bea", match_id)
    assert played.result.settlement == rules_pb2.SETTLEMENT_REFUNDED
    assert list(played.result.stood_in) == [1]
    await platform.mm.CreateTable(table_request("ada"))  # free again


async def test_concurrent_different_reports_record_exactly_one(platform: Platform) -> None:
    match_id = await live_match(platform, "ann", "ben")
    results = [won(0), won(1)] * 4
    replies = await asyncio.gather(
        *(platform.owner.ReportResult(report(match_id, r)) for r in results), return_exceptions=True
    )
    answered = [
        (r, reply) for r, reply in zip(results, replies, strict=True) if not isinstance(reply, BaseException)
    ]
    errors = [reply for reply in replies if isinstance(reply, BaseException)]
    assert all(isinstance(e, grpc.aio.AioRpcError) and e.code() == FAILED for e in errors)
    assert [reply.recorded for _, reply in answered].count(True) == 1
    [first] = [r for r, reply in answered if reply.recorded]
    assert all(r == first for r, _ in answered)  # only the recorded result was answered, four times
    assert len(errors) == 4
    winner = "ann" if first.winner == 0 else "ben"
    [(_, winner_ratings, winner_history)] = await ratings(platform, winner)
    assert (winner_ratings, winner_history) == ([("chess", 1520, 1)], 1)
    assert (await recorded(platform, "ann", match_id)).result == first


async def test_the_rules_shards_outbox_delivers_once_and_a_forgery_after_it_is_refused(
    platform: Platform,
) -> None:
    """A real game on the rules shard: its outbox reports the result (and may again: an identical retry
    is answered); a different report afterwards is refused and changes nothing."""
    match_id = await fools_mate(platform, "loser", "winner")
    await rated_games(platform.mm, "winner", 1)
    # the outbox got its answer: the row is marked reported
    assert await result_reported_at(platform.database_url, match_id, within_s=10) is not None
    before = await ratings(platform, "loser", "winner")
    assert before == [("loser", [("chess", 1480, 1)], 1), ("winner", [("chess", 1520, 1)], 1)]

    real = (await recorded(platform, "winner", match_id)).result
    assert (real.termination, real.winner) == (rules_pb2.TERMINATION_CHECKMATE, 1)
    assert not (await platform.owner.ReportResult(report(match_id, real))).recorded  # the outbox again
    forged = rules_pb2.Result()
    forged.CopyFrom(real)
    forged.winner = 0
    await refused(
        platform.owner.ReportResult(report(match_id, forged)), FAILED, f"match {match_id}'s result is already"
    )
    assert await ratings(platform, "loser", "winner") == before
    assert (await recorded(platform, "loser", match_id)).result == real
