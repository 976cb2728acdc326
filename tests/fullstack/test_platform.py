"""A whole game through the real stack: sign in, meet at a lobby table, play, get rated, read the record."""

from __future__ import annotations

import io
import time

import chess.pgn
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.rules.v1 import rules_pb2

from libs.ratings import LOSS, PlayerRating, rate
from tests.fullstack.helpers import (
    MINUTE,
    Platform,
    assert_every_update_once,
    is_final,
    live_lobby,
    move,
    moves,
    next_lobby,
    table_request,
    watch,
)

FOOLS_MATE = ["f3", "e5", "g4", "Qh4#"]


async def test_two_players_meet_at_a_table_play_a_whole_game_and_are_rated(platform: Platform) -> None:
    gw = platform.gateway
    alice, bob = platform.player("alice"), platform.player("bob")
    for player in (alice, bob):
        who = await gw.WhoAmI(pb.WhoAmIRequest(), metadata=player.metadata)
        assert who.player_id == player.id
        assert who.expires_at > time.time() + 3000
        assert not (await gw.GetRatings(pb.GetRatingsRequest(), metadata=player.metadata)).ratings
    alice_lobby, bob_lobby = await live_lobby(platform, alice), await live_lobby(platform, bob)

    # The lobby: Alice opens a 5-minute table, Bob finds it and sits down; both are told.
    table = (await gw.CreateTable(table_request(minutes=5, fee=500), metadata=alice.metadata)).table
    assert (table.creator_id, table.status) == (alice.id, mm_pb.TABLE_STATUS_OPEN)
    listed = await gw.ListTables(
        pb.ListTablesRequest(family="chess", base_ms=5 * MINUTE), metadata=bob.metadata
    )
    assert table.table_id in [t.table_id for t in listed.tables]
    joined = (await gw.JoinTable(pb.JoinTableRequest(table_id=table.table_id), metadata=bob.metadata)).table
    match_id = joined.match_id
    assert match_id.startswith("chess.0.")
    assert [(s.seat, s.player_id) for s in joined.seats] == [(0, alice.id), (1, bob.id)]
    for lobby, seat, opponent in ((alice_lobby, 0, bob), (bob_lobby, 1, alice)):
        ready = (await next_lobby(lobby, "match_ready")).match_ready
        assert (ready.match_id, ready.family, ready.seat) == (match_id, "chess", seat)
        assert (ready.opponent_id, ready.table_id) == (opponent.id, table.table_id)

    # The game: each player watches as their seat and moves when their own stream says it is their turn.
    players = [alice, bob]
    streams = [watch(platform, alice, match_id), watch(platform, bob, match_id)]
    seen: list[list[rules_pb2.MatchUpdate]] = [[], []]
    for ply, san in enumerate(FOOLS_MATE):
        seat = ply % 2
        seen[seat] += await streams[seat].until(lambda u, ply=ply: len(moves(u)) == ply)  # type: ignore[misc]
        assert seen[seat][-1].to_move == seat
        assert seen[seat][-1].legal_actions  # her own legal moves, in her own view
        reply = await gw.SubmitAction(move(match_id, san), metadata=players[seat].metadata)
        assert (reply.seat, moves(reply.update)) == (seat, FOOLS_MATE[: ply + 1])
    for seat in (0, 1):
        seen[seat] += await streams[seat].to_the_end()  # the stream ends after the final update

    # Each stream saw every update exactly once, in order, and the same ones.
    for seat, updates in enumerate(seen):
        assert_every_update_once(updates)
        actions = [u for u in updates if u.event.kind == "action"]
        assert [u.event.description for u in actions] == FOOLS_MATE
        assert [moves(u) for u in actions] == [FOOLS_MATE[: i + 1] for i in range(len(FOOLS_MATE))]
        assert [u.event.seat for u in actions] == [0, 1, 0, 1]
        assert all(u.to_move == seat for u in updates if u.legal_actions)  # nobody sees the other's moves
        assert [is_final(u) for u in updates].index(True) == len(updates) - 1
    assert [(u.sequence, u.event.kind, u.view.chess.fen) for u in seen[0]] == [
        (u.sequence, u.event.kind, u.view.chess.fen) for u in seen[1]
    ]
    final = seen[1][-1]
    assert final.status == rules_pb2.MATCH_STATUS_FINISHED
    assert (final.result.termination, final.result.winner) == (rules_pb2.TERMINATION_CHECKMATE, 1)

    # Ratings: both change by Elo (new players, 1500, K = 40), told on the lobby streams and recorded.
    alice_after, bob_after = rate(PlayerRating(), PlayerRating(), LOSS)
    assert (alice_after.rating, bob_after.rating) == (1480, 1520)
    for player, lobby, after in ((alice, alice_lobby, alice_after), (bob, bob_lobby, bob_after)):
        changed = (await next_lobby(lobby, "rating_changed")).rating_changed
        assert (changed.family, changed.match_id) == ("chess", match_id)
        assert (changed.before, changed.after) == (1500, after.rating)
        while (await next_lobby(lobby, "table_updated")).table_updated.status != mm_pb.TABLE_STATUS_FINISHED:
            pass
        ratings = await gw.GetRatings(pb.GetRatingsRequest(), metadata=player.metadata)
        assert [(r.family, r.rating, r.games) for r in ratings.ratings] == [("chess", after.rating, 1)]
        assert [(c.match_id, c.before, c.after) for c in ratings.history] == [(match_id, 1500, after.rating)]

    # Both histories have the match with its result.
    for seat, (player, opponent, after) in enumerate(((alice, bob, alice_after), (bob, alice, bob_after))):
        history = await gw.GetMatchHistory(
            pb.GetMatchHistoryRequest(family="chess"), metadata=player.metadata
        )
        [played] = history.matches
        assert (played.match_id, played.table_id, played.family) == (match_id, table.table_id, "chess")
        assert (played.seat, played.opponent_id) == (seat, opponent.id)
        assert (played.entry_fee_minor, played.currency) == (500, "USD")
        assert (played.result.termination, played.result.winner) == (rules_pb2.TERMINATION_CHECKMATE, 1)
        assert (played.rating_before, played.rating_after) == (1500, after.rating)

    # The record: PGN with the players, the moves and the result.
    record = await gw.GetRecord(pb.GetRecordRequest(match_id=match_id), metadata=alice.metadata)
    assert (record.match_id, record.record_format) == (match_id, "pgn")
    assert (record.result.termination, record.result.winner) == (rules_pb2.TERMINATION_CHECKMATE, 1)
    game = chess.pgn.read_game(io.StringIO(record.record))
    assert game is not None
    assert (game.headers["White"], game.headers["Black"]) == (alice.id, bob.id)
    assert (game.headers["Result"], game.headers["GameId"]) == ("0-1", match_id)
    board = game.board()
    sans = []
    for played_move in game.mainline_moves():
        sans.append(board.san(played_move))
        board.push(played_move)
    assert sans == FOOLS_MATE
    assert board.is_checkmate()
    got = await gw.GetMatch(pb.GetMatchRequest(match_id=match_id), metadata=bob.metadata)
    assert (got.seat, got.update.status) == (1, rules_pb2.MATCH_STATUS_FINISHED)
    for lobby in (alice_lobby, bob_lobby):
        await lobby.cancel()
