"""Matchmaking over real gRPC with the chess rules service running, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from skillclassics.chess.v1 import chess_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.runtime import RunningServer
from services.matchmaking.service import MatchmakingService
from services.rules_chess.service import chess_rules_service
from services.rules_gin.service import gin_rules_service
from tests.support import backend_channel, free_port, refused, start_fairness, start_in_process, transport_as

MINUTE = 60_000
FAILED, INVALID = grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT


@dataclass
class Platform:
    rules: RunningServer
    matchmaking: RunningServer
    mm_port: int
    database_url: str
    mm: matchmaking_pb2_grpc.MatchmakingServiceStub
    """Matchmaking, called as the gateway (the lobby's methods)."""
    chess: rules_pb2_grpc.RulesServiceStub
    """The chess rules service, called as the gateway (players' actions, seat views)."""
    owner: matchmaking_pb2_grpc.MatchmakingServiceStub
    """Matchmaking, called as ``rules-chess-0``: the shard that owns every ``chess.0.*`` match, the one
    caller whose ``ReportResult`` for it is allowed."""
    mm_env: dict[str, str]
    """Matchmaking's environment (rules shards, fairness), to restart it as it was."""
    fairness: RunningServer | None = None
    gin: RunningServer | None = None

    async def restart_matchmaking(self) -> None:
        await self.matchmaking.stop(grace=0.5)
        self.matchmaking = await _start_matchmaking(self.database_url, self.mm_port, self.mm_env)


async def _start_matchmaking(database_url: str, port: int, env: dict[str, str]) -> RunningServer:
    return await start_in_process("matchmaking", MatchmakingService, database_url, env, GRPC_PORT=str(port))


@contextlib.asynccontextmanager
async def running_platform(
    database_url: str, data_dir: Path | None = None, *, chance: bool = False
) -> AsyncIterator[Platform]:
    """Matchmaking and the chess rules service; with ``chance``, also fairness (its data in ``data_dir``)
    and the gin rules service, wired as in production (the rules services report to fairness too)."""
    servers: list[RunningServer] = []
    mm_port = free_port()
    reporting = {"MATCHMAKING_ADDRESS": f"127.0.0.1:{mm_port}"}
    mm_env: dict[str, str] = {}
    fairness = gin = None
    if chance:
        assert data_dir is not None
        fairness = await start_fairness(database_url, data_dir)
        servers.append(fairness)
        reporting["FAIRNESS_ADDRESS"] = mm_env["FAIRNESS_ADDRESS"] = fairness.address
    rules = await start_in_process("rules-chess", chess_rules_service, database_url, reporting)
    servers.append(rules)
    mm_env["RULES_CHESS_ADDRESSES"] = rules.address
    if chance:
        gin = await start_in_process("rules-gin", gin_rules_service, database_url, reporting)
        servers.append(gin)
        mm_env["RULES_GIN_ADDRESSES"] = gin.address
    matchmaking = await _start_matchmaking(database_url, mm_port, mm_env)
    async with (  # the lobby's and the players' calls come from the gateway
        backend_channel(matchmaking.address, "gateway") as mm_channel,
        backend_channel(rules.address, "gateway") as rules_channel,
        backend_channel(matchmaking.address, "rules-chess-0") as owner_channel,
    ):
        platform = Platform(
            rules,
            matchmaking,
            mm_port,
            database_url,
            matchmaking_pb2_grpc.MatchmakingServiceStub(mm_channel),
            rules_pb2_grpc.RulesServiceStub(rules_channel),
            matchmaking_pb2_grpc.MatchmakingServiceStub(owner_channel),
            mm_env,
            fairness,
            gin,
        )
        try:
            yield platform
        finally:
            await platform.matchmaking.stop(grace=0.5)  # (a test may have restarted it, or fairness)
            for server in reversed([platform.fairness, *servers]):
                if server is not None:
                    await server.stop(grace=0.5)


@pytest.fixture
async def platform(database_url: str) -> AsyncIterator[Platform]:
    async with running_platform(database_url) as running:
        yield running


def table_request(
    player: str, *, minutes: int = 5, fee: int = 500, **changes: object
) -> pb.CreateTableRequest:
    request = pb.CreateTableRequest(
        player_id=player,
        family="chess",
        options=rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_CONTEST)),
        time_control=rules_pb2.TimeControl(base_ms=minutes * MINUTE),
        entry_fee_minor=fee,
        currency="USD",
        visibility=pb.VISIBILITY_PUBLIC,
        idempotency_key=uuid.uuid4().hex,
    )
    for name, value in changes.items():
        setattr(request, name, value)
    return request


def queue_request(player: str, minutes: int = 5) -> pb.EnterQueueRequest:
    return pb.EnterQueueRequest(
        player_id=player,
        family="chess",
        time_control=rules_pb2.TimeControl(base_ms=minutes * MINUTE),
        entry_fee_minor=100,
        currency="USD",
    )


async def next_event(
    stream: grpc.aio.UnaryStreamCall, kind: str, within: float = 5.0
) -> pb.WatchLobbyResponse:
    async with asyncio.timeout(within):
        while True:
            event: pb.WatchLobbyResponse = await stream.read()
            if event.WhichOneof("event") == kind:
                return event


async def act(platform: Platform, match_id: str, ply: int, seat: int, action: chess_pb2.ChessAction) -> None:
    await platform.chess.SubmitAction(
        rules_pb2.SubmitActionRequest(
            match_id=match_id,
            seat=seat,
            idempotency_key=f"a{ply}",
            action=rules_pb2.Action(chess=action),
        )
    )


async def fools_mate(platform: Platform, white: str, black: str) -> str:
    """A table of ``white``, joined by ``black``, who mates in two moves; the match id."""
    table = (await platform.mm.CreateTable(table_request(white))).table
    joined = await platform.mm.JoinTable(pb.JoinTableRequest(player_id=black, table_id=table.table_id))
    for ply, move in enumerate(["f3", "e5", "g4", "Qh4#"]):
        await act(platform, joined.table.match_id, ply, ply % 2, chess_pb2.ChessAction(move=move))
    match_id: str = joined.table.match_id
    return match_id


async def rated_games(
    mm: matchmaking_pb2_grpc.MatchmakingServiceStub, player: str, games: int
) -> pb.GetRatingsResponse:
    """``player``'s ratings once their chess rating counts ``games`` games (results arrive from the rules
    service's outbox, a moment after the game ends)."""
    async with asyncio.timeout(10):
        while True:
            ratings: pb.GetRatingsResponse = await mm.GetRatings(pb.GetRatingsRequest(player_id=player))
            if any(r.family == "chess" and r.games == games for r in ratings.ratings):
                return ratings
            await asyncio.sleep(0.05)


def elo_change(k: int, rating: int, opponent: int, score: float) -> int:
    """The Elo formula, written out here independently of libs.ratings (no exact halves in these tests)."""
    expected = 1 / (1 + 10 ** ((opponent - rating) / 400))
    return round(k * (score - expected))


async def test_create_list_join_makes_the_match_and_tells_both(platform: Platform) -> None:
    mm = platform.mm
    alice_events = mm.WatchLobby(pb.WatchLobbyRequest(player_id="alice"))
    bob_events = mm.WatchLobby(pb.WatchLobbyRequest(player_id="bob"))
    # Every stream opens with "subscribed": from then on nothing for the player is missed.
    assert (await alice_events.read()).WhichOneof("event") == "subscribed"
    assert (await bob_events.read()).WhichOneof("event") == "subscribed"
    table = (await mm.CreateTable(table_request("alice"))).table
    assert table.status == pb.TABLE_STATUS_OPEN
    assert [s.player_id for s in table.seats] == ["alice"]
    listed = await mm.ListTables(pb.ListTablesRequest(family="chess"))
    assert [t.table_id for t in listed.tables] == [table.table_id]
    assert (await mm.ListTables(pb.ListTablesRequest(family="chess", base_ms=3 * MINUTE))).tables == []
    assert (await mm.ListTables(pb.ListTablesRequest(family="chess", max_entry_fee_minor=100))).tables == []
    joined = (await mm.JoinTable(pb.JoinTableRequest(player_id="bob", table_id=table.table_id))).table
    assert joined.status == pb.TABLE_STATUS_PLAYING
    assert joined.match_id.startswith("chess.0.")
    alice_ready = (await next_event(alice_events, "match_ready")).match_ready
    bob_ready = (await next_event(bob_events, "match_ready")).match_ready
    assert (alice_ready.seat, alice_ready.opponent_id) == (0, "bob")  # the creator hosts: White
    assert (bob_ready.seat, bob_ready.opponent_id) == (1, "alice")
    assert alice_ready.match_id == bob_ready.match_id == joined.match_id
    match = await platform.chess.GetMatch(rules_pb2.GetMatchRequest(match_id=joined.match_id, spectator=True))
    assert [s.player_id for s in match.seats] == ["alice", "bob"]
    assert match.time_control.base_ms == 5 * MINUTE
    assert (await mm.ListTables(pb.ListTablesRequest(family="chess"))).tables == []
    alice_events.cancel()
    bob_events.cancel()
    # Reconnecting (after a restart, say), Bob finds the match he is playing in the first event.
    again = mm.WatchLobby(pb.WatchLobbyRequest(player_id="bob"))
    first = await again.read()
    assert first.WhichOneof("event") == "subscribed"
    assert list(first.subscribed.playing) == [bob_ready]
    again.cancel()


async def test_the_creator_of_a_table_hears_of_it_and_no_one_else_of_a_private_one(
    platform: Platform,
) -> None:
    mm = platform.mm
    alice = mm.WatchLobby(pb.WatchLobbyRequest(player_id="alice"))
    carol = mm.WatchLobby(pb.WatchLobbyRequest(player_id="carol"))
    await next_event(alice, "subscribed")
    await next_event(carol, "subscribed")
    # A public table: its creator, waiting on her lobby stream, is told of it as it was answered.
    public = (await mm.CreateTable(table_request("alice", visibility=pb.VISIBILITY_PUBLIC))).table
    assert (await next_event(alice, "table_updated")).table_updated == public
    await mm.LeaveTable(pb.LeaveTableRequest(player_id="alice", table_id=public.table_id))
    left = (await next_event(alice, "table_updated")).table_updated
    assert (left.table_id, left.status) == (public.table_id, pb.TABLE_STATUS_CANCELLED)
    # A private table: told to its creator too, and again when a retry (the same key) is answered,
    # so a client whose answer was lost still hears of its table.
    request = table_request("alice", visibility=pb.VISIBILITY_PRIVATE)
    private = (await mm.CreateTable(request)).table
    assert private.visibility == pb.VISIBILITY_PRIVATE
    assert (await next_event(alice, "table_updated")).table_updated == private
    assert (await mm.CreateTable(request)).table == private
    assert (await next_event(alice, "table_updated")).table_updated == private
    # Carol's stream heard nothing of Alice's tables: the first table it is told of is Carol's own
    # (a stream keeps the order of what it is told, and Alice's were told before Carol created hers).
    own = (await mm.CreateTable(table_request("carol"))).table
    assert (await next_event(carol, "table_updated")).table_updated == own
    alice.cancel()
    carol.cancel()


async def test_bad_requests_are_refused_with_reasons(platform: Platform) -> None:
    mm = platform.mm
    checkers = table_request("a", family="checkers")
    await refused(
        mm.CreateTable(checkers), INVALID, "unknown or unavailable", why="UNKNOWN_FAMILY", fields=("family",)
    )
    late = table_request("a", minutes=7)
    await refused(mm.CreateTable(late), INVALID, "3, 5, 10, 20, 30 minutes", why="TIME_CONTROL_NOT_OFFERED")
    fen = table_request("a")
    fen.options.chess.initial_fen = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
    await refused(
        mm.CreateTable(fen), INVALID, "initial position", why="OPTIONS_NOT_OFFERED", fields=("options",)
    )
    bare = table_request("a")
    bare.options.chess.initial_fen = "8/8/8/8/8/8/8/K6k w - - 0 1"  # not even a game: the engine says why
    await refused(mm.CreateTable(bare), INVALID, "insufficient material", why="OPTIONS_NOT_OFFERED")
    await refused(
        mm.CreateTable(table_request("a", fee=-1)), INVALID, why="INVALID_FIELDS", fields=("entry_fee_minor",)
    )
    await refused(
        mm.CreateTable(table_request("a", currency="usd")), INVALID, "ISO 4217", why="CURRENCY_NOT_ACCEPTED"
    )
    await refused(
        mm.CreateTable(table_request("bad player!")), INVALID, why="INVALID_FIELDS", fields=("player_id",)
    )
    table = (await mm.CreateTable(table_request("a"))).table
    await refused(
        mm.JoinTable(pb.JoinTableRequest(player_id="a", table_id=table.table_id)), FAILED, "own table"
    )
    await refused(mm.CreateTable(table_request("a")), FAILED, "already waiting at table")
    await refused(mm.EnterQueue(queue_request("a")), FAILED, "already waiting at table")
    other = (await mm.CreateTable(table_request("c"))).table
    await refused(
        mm.JoinTable(pb.JoinTableRequest(player_id="a", table_id=other.table_id)), FAILED, "already"
    )
    await mm.JoinTable(pb.JoinTableRequest(player_id="b", table_id=table.table_id))
    await refused(
        mm.JoinTable(pb.JoinTableRequest(player_id="d", table_id=table.table_id)), FAILED, "not open"
    )
    await refused(
        mm.JoinTable(pb.JoinTableRequest(player_id="d", table_id="t-nope")),
        grpc.StatusCode.NOT_FOUND,
        "no table",
    )
    await refused(
        mm.LeaveTable(pb.LeaveTableRequest(player_id="a", table_id=table.table_id)), FAILED, "filled"
    )


async def test_leaving_a_table_frees_the_player(platform: Platform) -> None:
    mm = platform.mm
    table = (await mm.CreateTable(table_request("solo"))).table
    left = (await mm.LeaveTable(pb.LeaveTableRequest(player_id="solo", table_id=table.table_id))).table
    assert left.status == pb.TABLE_STATUS_CANCELLED
    await mm.CreateTable(table_request("solo"))  # free again


async def test_two_queued_players_are_paired_once(platform: Platform) -> None:
    mm = platform.mm
    p1 = mm.WatchLobby(pb.WatchLobbyRequest(player_id="q1"))
    p2 = mm.WatchLobby(pb.WatchLobbyRequest(player_id="q2"))
    await next_event(p1, "subscribed")
    await next_event(p2, "subscribed")
    entered = await mm.EnterQueue(queue_request("q1"))
    assert entered.rating == 1500
    await refused(mm.EnterQueue(queue_request("q1")), FAILED, "already in the queue")
    await mm.EnterQueue(queue_request("q2"))
    ready1 = (await next_event(p1, "match_ready")).match_ready
    ready2 = (await next_event(p2, "match_ready")).match_ready
    assert ready1.match_id == ready2.match_id
    assert (ready1.seat, ready2.seat) == (0, 1)  # the longer-waiting player takes seat 0
    assert not (await mm.LeaveQueue(pb.LeaveQueueRequest(player_id="q1"))).left  # already paired
    p1.cancel()
    p2.cancel()


async def test_leaving_the_queue_is_immediate(platform: Platform) -> None:
    mm = platform.mm
    await mm.EnterQueue(queue_request("lone", minutes=10))
    assert (await mm.LeaveQueue(pb.LeaveQueueRequest(player_id="lone"))).left
    await mm.EnterQueue(queue_request("other", minutes=10))
    await asyncio.sleep(0.6)
    history = await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="other"))
    assert history.matches == []  # "lone" left, so nobody was there to pair with
    await mm.EnterQueue(queue_request("lone", minutes=10))  # free to queue again


async def test_a_whole_game_updates_both_ratings_by_elo(platform: Platform) -> None:
    mm = platform.mm
    events = mm.WatchLobby(pb.WatchLobbyRequest(player_id="winner"))
    await next_event(events, "subscribed")
    match_id = await fools_mate(platform, "loser", "winner")
    changed = (await next_event(events, "rating_changed")).rating_changed
    assert (changed.before, changed.after) == (1500, 1520)  # K = 40 for a new player: 1500 + 40 * 0.5
    ratings = await mm.GetRatings(pb.GetRatingsRequest(player_id="loser"))
    assert [(r.family, r.rating, r.games) for r in ratings.ratings] == [("chess", 1480, 1)]
    assert [(c.before, c.after) for c in ratings.history] == [(1500, 1480)]
    history = await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="winner"))
    [played] = history.matches
    assert played.match_id == match_id
    assert played.result.termination == rules_pb2.TERMINATION_CHECKMATE
    assert played.result.winner == 1
    assert (played.rating_before, played.rating_after) == (1500, 1520)
    assert (await mm.ListTables(pb.ListTablesRequest(family="chess"))).tables == []  # the table closed
    await mm.CreateTable(table_request("winner"))  # free to play again
    events.cancel()


async def test_an_aborted_match_changes_no_rating(platform: Platform) -> None:
    mm = platform.mm
    table = (await mm.CreateTable(table_request("x1"))).table
    match_id = (
        await mm.JoinTable(pb.JoinTableRequest(player_id="x2", table_id=table.table_id))
    ).table.match_id
    result = rules_pb2.Result(termination=rules_pb2.TERMINATION_ABORTED, detail="no show")
    owner = platform.owner  # the rules shard that owns the match
    assert (await owner.ReportResult(pb.ReportResultRequest(match_id=match_id, result=result))).recorded
    assert not (await owner.ReportResult(pb.ReportResultRequest(match_id=match_id, result=result))).recorded
    assert (await mm.GetRatings(pb.GetRatingsRequest(player_id="x1"))).ratings == []


async def test_concurrent_joins_of_the_last_seat_have_one_winner(platform: Platform) -> None:
    mm = platform.mm
    table = (await mm.CreateTable(table_request("host"))).table
    joins = [mm.JoinTable(pb.JoinTableRequest(player_id=f"j{i}", table_id=table.table_id)) for i in range(8)]
    outcomes = await asyncio.gather(*joins, return_exceptions=True)
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    losers = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    assert len(winners) == 1
    assert len(losers) == 7
    assert all(e.code() == FAILED for e in losers)
    # the losers are free: nothing of their failed join remained
    await mm.EnterQueue(
        queue_request(next(f"j{i}" for i in range(8) if f"j{i}" != winners[0].table.seats[1].player_id))
    )


async def test_a_restart_keeps_tables_queue_and_ratings(platform: Platform) -> None:
    mm = platform.mm
    match_id = await fools_mate(platform, "kept-loser", "kept-winner")
    before = {p: await rated_games(mm, p, 1) for p in ("kept-loser", "kept-winner")}
    assert [(r.rating, r.games) for r in before["kept-winner"].ratings] == [(1520, 1)]
    played = await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="kept-winner"))
    table = (await mm.CreateTable(table_request("keeper", minutes=20))).table
    await mm.EnterQueue(queue_request("waiting", minutes=30))

    await platform.restart_matchmaking()
    async with backend_channel(platform.matchmaking.address, "gateway") as channel:
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        for player, ratings in before.items():
            assert await stub.GetRatings(pb.GetRatingsRequest(player_id=player)) == ratings
        loser = await stub.GetRatings(pb.GetRatingsRequest(player_id="kept-loser"))
        assert [(r.family, r.rating, r.games) for r in loser.ratings] == [("chess", 1480, 1)]
        assert [(c.match_id, c.before, c.after) for c in loser.history] == [(match_id, 1500, 1480)]
        assert await stub.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="kept-winner")) == played
        assert played.matches[0].rating_after == 1520
        listed = await stub.ListTables(pb.ListTablesRequest(family="chess"))
        assert table.table_id in [t.table_id for t in listed.tables]
        events = stub.WatchLobby(pb.WatchLobbyRequest(player_id="waiting"))
        await next_event(events, "subscribed")
        await stub.EnterQueue(queue_request("newcomer", minutes=30))
        ready = (await next_event(events, "match_ready")).match_ready
        assert ready.opponent_id == "newcomer"
        events.cancel()
        # Ratings keep counting from where they were: the next game is rated from 1520 / 1480.
        await fools_mate(platform, "kept-winner", "kept-loser")
        after = await rated_games(stub, "kept-loser", 2)
        assert [(c.before, c.after) for c in after.history][-1] == (
            1480,
            1480 + elo_change(40, 1480, 1520, 1.0),
        )


async def test_a_draw_by_agreement_moves_both_ratings_by_elo_with_half_a_point(platform: Platform) -> None:
    mm = platform.mm
    await fools_mate(platform, "draw-b", "draw-a")  # first a decisive game, so that the ratings differ
    a = (await rated_games(mm, "draw-a", 1)).ratings[0].rating
    b = (await rated_games(mm, "draw-b", 1)).ratings[0].rating
    assert (a, b) == (1520, 1480)
    request = table_request("draw-a")
    request.options.chess.ruleset = chess_pb2.RULESET_FIDE  # the ruleset with draw offers
    table = (await mm.CreateTable(request)).table
    match_id = (
        await mm.JoinTable(pb.JoinTableRequest(player_id="draw-b", table_id=table.table_id))
    ).table.match_id
    await act(platform, match_id, 0, 0, chess_pb2.ChessAction(move="e4"))
    await act(platform, match_id, 1, 1, chess_pb2.ChessAction(move="e5"))
    await act(platform, match_id, 2, 0, chess_pb2.ChessAction(draw=chess_pb2.DRAW_ACTION_OFFER))
    await act(platform, match_id, 3, 1, chess_pb2.ChessAction(draw=chess_pb2.DRAW_ACTION_ACCEPT))

    a_after = await rated_games(mm, "draw-a", 2)
    b_after = await rated_games(mm, "draw-b", 2)
    # Both still provisional (K = 40); each scored 0.5: the higher-rated one loses what was expected.
    change_a, change_b = elo_change(40, a, b, 0.5), elo_change(40, b, a, 0.5)
    assert (change_a, change_b) == (-2, 2)
    assert [(r.rating, r.games) for r in a_after.ratings] == [(a + change_a, 2)]
    assert [(r.rating, r.games) for r in b_after.ratings] == [(b + change_b, 2)]
    assert (a_after.history[-1].match_id, a_after.history[-1].before) == (match_id, a)
    drawn = (await mm.GetMatchHistory(pb.GetMatchHistoryRequest(player_id="draw-a"))).matches[0]
    assert drawn.match_id == match_id
    assert drawn.result.termination == rules_pb2.TERMINATION_DRAW_AGREED
    assert not drawn.result.HasField("winner")


async def test_a_player_who_reached_2400_keeps_k_10_below_it(platform: Platform) -> None:
    from sqlalchemy import insert

    from libs.persistence import Database
    from libs.persistence.schema import mm_ratings

    db = Database(platform.database_url)
    try:
        async with db.begin() as conn:  # two veterans at 2390; one of them once held 2450
            await conn.execute(
                insert(mm_ratings),
                [
                    {"player_id": "former-im", "family": "chess", "rating": 2390, "games": 60, "peak": 2450},
                    {"player_id": "club", "family": "chess", "rating": 2390, "games": 60, "peak": 2390},
                ],
            )
    finally:
        await db.dispose()
    await fools_mate(platform, "former-im", "club")  # the club player wins
    former = await rated_games(platform.mm, "former-im", 61)
    club = await rated_games(platform.mm, "club", 61)
    assert [(r.rating, r.peak) for r in former.ratings] == [(2390 - 5, 2450)]  # K = 10: 10 * 0.5
    assert [(r.rating, r.peak) for r in club.ratings] == [(2390 + 10, 2400)]  # K = 20: 20 * 0.5


async def test_currencies_are_active_iso_4217_codes_and_free_tables_can_be_listed(platform: Platform) -> None:
    mm = platform.mm
    await refused(mm.CreateTable(table_request("cur", currency="XYZ")), INVALID, "active ISO 4217 code")
    await refused(mm.CreateTable(table_request("cur", currency="XAU")), INVALID, "not money")
    withdrawn = queue_request("cur")
    withdrawn.currency = "HRK"  # the kuna, withdrawn when Croatia adopted the euro
    await refused(mm.EnterQueue(withdrawn), INVALID, "ISO 4217")
    await refused(mm.ListTables(pb.ListTablesRequest(family="chess", currency="usd")), INVALID, "ISO 4217")
    free = (await mm.CreateTable(table_request("free-host", fee=0, currency="EUR"))).table
    paid = (await mm.CreateTable(table_request("paid-host", fee=250, currency="EUR"))).table

    async def listed(**filters: object) -> list[str]:
        reply = await mm.ListTables(pb.ListTablesRequest(family="chess", **filters))  # type: ignore[arg-type]
        return [t.table_id for t in reply.tables]

    assert await listed() == [free.table_id, paid.table_id]
    assert await listed(max_entry_fee_minor=0) == [free.table_id, paid.table_id]  # 0 there means any
    assert await listed(free_only=True) == [free.table_id]
    assert await listed(free_only=True, currency="USD") == []
    assert await listed(max_entry_fee_minor=300, currency="EUR") == [free.table_id, paid.table_id]


async def test_shorter_match_windows_reach_the_rules_service_and_production_refuses_them(
    database_url: str,
) -> None:
    from libs.runtime import ConfigError, ServiceConfig

    files = transport_as("matchmaking").files()  # production needs the certificate files set
    production = ServiceConfig.from_env(
        "matchmaking",
        {
            "SKILLCLASSICS_ENV": "production",
            "DATABASE_URL": database_url,
            "TLS_CA_FILE": str(files.ca),
            "TLS_CERT_FILE": str(files.certificate),
            "TLS_KEY_FILE": str(files.key),
        },
    )
    with pytest.raises(ConfigError, match="published 60 s"):
        MatchmakingService(production, {"MATCH_DISCONNECT_FORFEIT_MS": "2000"})

    mm_port = free_port()
    rules = await start_in_process(
        "rules-chess", chess_rules_service, database_url, {"MATCHMAKING_ADDRESS": f"127.0.0.1:{mm_port}"}
    )
    env = {
        "RULES_CHESS_ADDRESSES": rules.address,
        "MATCH_FIRST_MOVE_TIMEOUT_MS": "1500",
        "MATCH_DISCONNECT_FORFEIT_MS": "2000",
    }
    matchmaking = await start_in_process(
        "matchmaking", MatchmakingService, database_url, env, GRPC_PORT=str(mm_port)
    )
    try:
        async with backend_channel(matchmaking.address, "gateway") as channel:
            mm = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
            table = (await mm.CreateTable(table_request("quick-a"))).table
            joined = await mm.JoinTable(pb.JoinTableRequest(player_id="quick-b", table_id=table.table_id))
        async with backend_channel(rules.address, "gateway") as channel:
            stub = rules_pb2_grpc.RulesServiceStub(channel)
            # Nobody moves: the match aborts after 1.5 s (the rules service's default would be 60 s).
            call = stub.Watch(rules_pb2.WatchRequest(match_id=joined.table.match_id, spectator=True))
            async with asyncio.timeout(10):
                last = [response.update async for response in call][-1]
        assert last.result.termination == rules_pb2.TERMINATION_ABORTED
        assert "1.5 s" in last.result.detail
    finally:
        await matchmaking.stop(grace=0.5)
        await rules.stop(grace=0.5)


async def test_a_result_matchmaking_never_made_is_delivered_once_and_not_retried(platform: Platform) -> None:
    match_id = f"chess.0.{uuid.uuid4().hex[:12]}"  # created directly on the rules service: unknown here
    async with backend_channel(platform.rules.address, "matchmaking") as channel:  # who creates matches
        await rules_pb2_grpc.RulesServiceStub(channel).CreateMatch(
            rules_pb2.CreateMatchRequest(
                match_id=match_id,
                seats=[
                    rules_pb2.SeatAssignment(seat=0, player_id="t1"),
                    rules_pb2.SeatAssignment(seat=1, player_id="t2"),
                ],
                options=rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions()),
                time_control=rules_pb2.TimeControl(base_ms=5 * MINUTE),
                idempotency_key=match_id,
            )
        )
    await platform.chess.SubmitAction(
        rules_pb2.SubmitActionRequest(
            match_id=match_id, seat=0, idempotency_key="r", action=rules_pb2.Action(resign=rules_pb2.Resign())
        )
    )
    reported = await result_reported_at(platform.database_url, match_id, within_s=5)
    assert reported is not None, "the outbox kept retrying a result matchmaking can never take"


async def result_reported_at(database_url: str, match_id: str, *, within_s: float) -> int | None:
    """When the rules shard's outbox had its result of ``match_id`` answered (its row marked reported),
    waiting up to ``within_s``; ``None`` if it was not by then."""
    from sqlalchemy import select

    from libs.persistence import Database
    from libs.persistence.schema import match_results

    db = Database(database_url)
    try:
        deadline = asyncio.get_running_loop().time() + within_s
        while True:
            async with db.connect() as conn:
                reported: int | None = await conn.scalar(
                    select(match_results.c.reported_at_ms).where(match_results.c.match_id == match_id)
                )
            if reported is not None or asyncio.get_running_loop().time() > deadline:
                return reported
            await asyncio.sleep(0.05)
    finally:
        await db.dispose()


async def test_entries_queued_before_a_pool_key_change_pair_with_those_made_after(platform: Platform) -> None:
    """A deploy that changes how pools are keyed (a clock field added to the key) must not strand the
    players queued before it: on loading the queue matchmaking keys each stored entry again from its
    request. An entry the lobby no longer offers keeps its stored pool, and nothing fails."""
    from sqlalchemy import update
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    from libs.persistence.schema import mm_queue

    mm = platform.mm
    entered = await mm.EnterQueue(queue_request("rekeyed-early", minutes=20))
    await mm.EnterQueue(queue_request("rekeyed-odd", minutes=10))  # a pool of its own, for now
    await platform.matchmaking.stop(grace=0.5)
    # As an older version stored them: another key, and (for the second) a request not offered now, which
    # would be the first entry's pool but for its position.
    offered_no_more = queue_request("rekeyed-odd", minutes=20)
    offered_no_more.options.chess.initial_fen = "4k3/8/8/8/8/8/8/R3K3 w Q - 0 1"
    engine = create_async_engine(platform.database_url, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(mm_queue).where(mm_queue.c.player_id == "rekeyed-early").values(pool="chess|old-key")
            )
            await conn.execute(
                update(mm_queue)
                .where(mm_queue.c.player_id == "rekeyed-odd")
                .values(pool="chess|odd-key", request=offered_no_more.SerializeToString())
            )
    finally:
        await engine.dispose()
    await platform.restart_matchmaking()

    async with backend_channel(platform.matchmaking.address, "gateway") as channel:
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        events = stub.WatchLobby(pb.WatchLobbyRequest(player_id="rekeyed-early"))
        await next_event(events, "subscribed")
        late = await stub.EnterQueue(queue_request("rekeyed-late", minutes=20))
        assert late.pool == entered.pool
        ready = (await next_event(events, "match_ready", within=10.0)).match_ready
        assert ready.opponent_id == "rekeyed-late"  # not the entry whose request is no longer offered
        events.cancel()
        assert (await stub.LeaveQueue(pb.LeaveQueueRequest(player_id="rekeyed-odd"))).left
