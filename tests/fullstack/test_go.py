"""Go through the whole stack, every service its own process (SQLite files, or one PostgreSQL): two players
meet at a 9x9 lobby table with a byo-yomi clock, the clients' bots play it over the gateway to the count
while rules-go is killed with SIGKILL and restarted mid-game, both accept the count, the result reaches
matchmaking, and the SGF record replays (in sgfmill, an independent reader) to the board both saw."""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Callable

import grpc
import pytest
from sgfmill import sgf, sgf_moves  # type: ignore[import-untyped]
from skillclassics.go.v1 import go_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2
from sqlalchemy import select

from clients.bot import play_match
from clients.families import family
from clients.player import GatewayError
from libs.persistence.schema import match_events
from tests.fullstack.helpers import Platform, played_match, session

MOVES_BEFORE_THE_CRASH = 12


async def test_a_9x9_go_game_survives_a_shard_crash_and_ends_by_the_agreed_count(platform: Platform) -> None:
    assert "rules-go" in {spec.name for spec in platform.stack.services}
    fam = family("go")
    ann, ben = platform.player("ann"), platform.player("ben")
    byo_yomi = rules_pb2.TimeControl(base_ms=5 * 60_000, periods=5, period_ms=30_000)
    async with session(platform, ann) as host, session(platform, ben) as guest:
        # A clock the lobby does not offer is refused with the offer in words.
        with pytest.raises(GatewayError, match="byo-yomi of 5 x 30 s, 3 x 60 s") as refused:
            await host.create_table(
                "go",
                options=fam.options({"size": "9"}),
                time_control=rules_pb2.TimeControl(base_ms=7 * 60_000),
            )
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
        table = await host.create_table(
            "go", options=fam.options({"size": "9"}), time_control=byo_yomi, visibility=mm.VISIBILITY_PRIVATE
        )
        match_id = (await guest.join_table(table.table_id)).match_id
        assert match_id.startswith("go.0.")

        seen: dict[str, list[int]] = {ann.id: [], ben.id: []}
        last: dict[str, rules_pb2.MatchUpdate] = {}
        moves = 0
        enough = asyncio.Event()

        def watcher(player: str) -> Callable[[rules_pb2.MatchUpdate], None]:
            def on_update(update: rules_pb2.MatchUpdate) -> None:
                nonlocal moves
                seen[player].append(update.sequence)
                last[player] = update
                if player == ann.id and update.event.kind == "action":
                    moves += 1
                    if moves >= MOVES_BEFORE_THE_CRASH:
                        enough.set()

            return on_update

        games = [
            asyncio.create_task(
                play_match(
                    player_session,
                    match_id,
                    fam.strategy(strategy, random.Random(index)),
                    fam,
                    max_plies=400,
                    stall_s=60,
                    on_update=watcher(player.id),
                )
            )
            for index, (player_session, player, strategy) in enumerate(
                ((host, ann, "greedy"), (guest, ben, "random"))
            )
        ]
        async with asyncio.timeout(60):
            await enough.wait()
        assert await platform.stack.kill("rules-go") == -signal.SIGKILL  # mid-game
        at_crash = seen[ann.id][-1]
        await platform.stack.restart("rules-go")
        async with asyncio.timeout(240):
            results = await asyncio.gather(*games)

        # Both players saw the same end, every update once and in order, across the crash.
        assert results[0].result == results[1].result
        result = results[0].result
        assert result.termination == rules_pb2.TERMINATION_SCORED, result
        final = last[ann.id].view.go
        assert final.phase == go_pb2.PHASE_OVER
        assert final.score.result
        for sequences in seen.values():
            assert sequences == list(range(sequences[0], sequences[0] + len(sequences))), sequences

        # The durable log holds each sequence once, up to the last one the players saw, past the crash.
        rows = await platform.rows(
            "rules-go", select(match_events.c.sequence).where(match_events.c.match_id == match_id)
        )
        logged = sorted(row["sequence"] for row in rows)
        assert logged == list(range(1, len(logged) + 1))
        assert logged[-1] == seen[ann.id][-1] == seen[ben.id][-1]
        assert logged[-1] > at_crash

        # The SGF record replays, in an independent reader, to the board both players saw.
        record = await guest.get_record(match_id)
        assert record.record_format == "sgf"
        game = sgf.Sgf_game.from_string(record.record)
        assert game.get_root().get("RE") == final.score.result
        board, plays = sgf_moves.get_setup_and_moves(game)
        for colour, move in plays:
            if move is not None:
                board.play(move[0], move[1], colour)
        marks = {"b": "X", "w": "O", None: "."}
        rows_seen = ["".join(marks[board.get(row, col)] for col in range(9)) for row in range(8, -1, -1)]
        assert rows_seen == list(final.rows)

        # Matchmaking recorded the one result for both players.
        for player_session in (host, guest):
            played = await played_match(player_session, "go", match_id)
            assert (played.result.termination, played.result.winner) == (result.termination, result.winner)
