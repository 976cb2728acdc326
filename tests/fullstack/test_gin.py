"""Gin rummy through the whole stack, every service its own process (SQLite files, or one PostgreSQL):
two players meet at a private table, bots play the match to its end while the gin shard is killed with
SIGKILL and restarted, and each player checks the fairness proof against what they recorded before and
during the match."""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Callable

from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2
from sqlalchemy import select

from clients.bot import play_match
from clients.families import family
from libs.persistence.schema import match_events
from tests.fullstack.helpers import Platform, played_match, session

ACTIONS_BEFORE_THE_CRASH = 6
MAX_PLIES = 400
"""The bots' cap (the one to move resigns past it), so that a long match still ends in the test's time."""


async def test_a_gin_match_survives_a_shard_crash_and_ends_with_a_proof_both_players_verify(
    platform: Platform,
) -> None:
    fam = family("gin")
    ann, ben = platform.player("ann"), platform.player("ben")
    async with session(platform, ann) as host, session(platform, ben) as guest:
        for who in (host, guest):
            await who.whoami()  # the session records fairness per player
        table = await host.create_table(
            "gin", options=fam.options({}), time_control=fam.time_control(5), visibility=mm.VISIBILITY_PRIVATE
        )
        match_id = (await guest.join_table(table.table_id)).match_id
        assert match_id.startswith("gin.0.")

        seen: dict[str, list[int]] = {ann.id: [], ben.id: []}
        actions = 0
        enough = asyncio.Event()

        def watcher(player: str) -> Callable[[rules_pb2.MatchUpdate], None]:
            def on_update(update: rules_pb2.MatchUpdate) -> None:
                nonlocal actions
                seen[player].append(update.sequence)
                if player == ann.id and update.event.kind == "action":
                    actions += 1
                    if actions >= ACTIONS_BEFORE_THE_CRASH:
                        enough.set()

            return on_update

        games = [
            asyncio.create_task(
                play_match(
                    player_session,
                    match_id,
                    fam.strategy(strategy, random.Random(index)),
                    fam,
                    max_plies=MAX_PLIES,
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
        assert await platform.stack.kill("rules-gin") == -signal.SIGKILL  # mid-match
        at_crash = seen[ann.id][-1]
        await platform.stack.restart("rules-gin")
        async with asyncio.timeout(240):
            results = await asyncio.gather(*games)

        # Both players saw the same end, every update once and in order, across the crash.
        ends = {
            (r.result.termination, r.result.winner if r.result.HasField("winner") else None) for r in results
        }
        assert len(ends) == 1, results
        assert results[0].result.termination != rules_pb2.TERMINATION_ABORTED
        for sequences in seen.values():
            assert sequences == list(range(sequences[0], sequences[0] + len(sequences))), sequences

        # The durable log holds each sequence exactly once, up to the last one the players saw.
        rows = await platform.rows(
            "rules-gin", select(match_events.c.sequence).where(match_events.c.match_id == match_id)
        )
        logged = sorted(row["sequence"] for row in rows)
        assert logged == list(range(1, len(logged) + 1))
        assert logged[-1] == seen[ann.id][-1] == seen[ben.id][-1]
        assert logged[-1] > at_crash  # the match went on after the restart

        # Each player checks the proof against the commitment announced before the deal, their own
        # client seed and every draw the match used (the deals after the crash included).
        for player_session in (host, guest):
            check = await player_session.check_fairness(match_id)
            assert check.ok, check.lines()
        record = host.fairness(match_id)
        assert record is not None
        assert record.commitment
        assert record.seed_accepted
        assert ("dealer", 0) in record.draws
        assert ("shuffle", 0) in record.draws

        # Matchmaking recorded the one result for both players.
        for player_session in (host, guest):
            played = await played_match(player_session, "gin", match_id)
            assert (played.result.termination, played.result.winner) == (
                results[0].result.termination,
                results[0].result.winner,
            )
