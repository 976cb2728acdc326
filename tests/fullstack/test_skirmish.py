"""Skirmish Chess through the whole stack, every service its own process (SQLite files, or one PostgreSQL):
two players meet at a lobby table with random duel setups, the clients' bots (a duelist and a random bot)
play it over the gateway while rules-chess is killed with SIGKILL in the middle of a duel and restarted,
the game ends with a result that reaches matchmaking, the PGN record reads in python-chess, and every duel
setup is recomputed from the fairness proof."""

from __future__ import annotations

import asyncio
import io
import random
import signal
from collections.abc import Callable

import chess.pgn
from skillclassics.chess.v1 import chess_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2
from sqlalchemy import select

from clients.bot import play_match
from clients.families import family
from libs.persistence.schema import match_events
from tests.fullstack.helpers import Platform, played_match, session


async def test_skirmish_chess_survives_a_shard_crash_in_a_duel_and_its_setups_are_proved(
    platform: Platform,
) -> None:
    fam = family("chess")
    ann, ben = platform.player("ann"), platform.player("ben")
    options = fam.options({"variant": "skirmish", "preset": "random", "duel_clock": "60"})
    async with session(platform, ann) as host, session(platform, ben) as guest:
        await host.whoami()
        table = await host.create_table(
            "chess",
            options=options,
            time_control=rules_pb2.TimeControl(base_ms=5 * 60_000),
            visibility=mm.VISIBILITY_PRIVATE,
        )
        match_id = (await guest.join_table(table.table_id)).match_id
        seen: dict[str, list[int]] = {ann.id: [], ben.id: []}
        last: dict[str, rules_pb2.MatchUpdate] = {}
        in_a_duel = asyncio.Event()

        def watcher(player: str) -> Callable[[rules_pb2.MatchUpdate], None]:
            def on_update(update: rules_pb2.MatchUpdate) -> None:
                seen[player].append(update.sequence)
                last[player] = update
                duel = update.view.chess.duel
                if player == ann.id and update.view.chess.HasField("duel") and len(duel.moves_uci) >= 2:
                    in_a_duel.set()

            return on_update

        games = [
            asyncio.create_task(
                play_match(
                    player_session,
                    match_id,
                    fam.strategy(strategy, random.Random(index)),
                    fam,
                    max_plies=300,
                    stall_s=60,
                    on_update=watcher(player.id),
                )
            )
            for index, (player_session, player, strategy) in enumerate(
                ((host, ann, "duelist"), (guest, ben, "random"))
            )
        ]
        async with asyncio.timeout(90):
            await in_a_duel.wait()
        assert await platform.stack.kill("rules-chess") == -signal.SIGKILL  # two moves into a duel
        at_crash = seen[ann.id][-1]
        await platform.stack.restart("rules-chess")
        async with asyncio.timeout(300):
            results = await asyncio.gather(*games)

        # Both players saw the same end, and every update once and in order, across the crash.
        assert results[0].result == results[1].result
        result = results[0].result
        for sequences in seen.values():
            assert sequences == list(range(sequences[0], sequences[0] + len(sequences))), sequences
        final = last[ann.id].view.chess
        assert final.variant == chess_pb2.VARIANT_SKIRMISH
        assert final.duels, "no duel was played"
        assert all(d.capture_san[-1] in "+-=" for d in final.duels)

        # The durable log holds each sequence once, past the crash.
        rows = await platform.rows(
            "rules-chess", select(match_events.c.sequence).where(match_events.c.match_id == match_id)
        )
        logged = sorted(row["sequence"] for row in rows)
        assert logged == list(range(1, len(logged) + 1))
        assert logged[-1] > at_crash

        # The PGN record reads, part after part, in python-chess, and the last part ends where the game did.
        record = await guest.get_record(match_id)
        stream = io.StringIO(record.record)
        parts = []
        while (part := chess.pgn.read_game(stream)) is not None:
            parts.append(part)
        assert parts
        assert all(part.errors == [] for part in parts)
        if result.termination != rules_pb2.TERMINATION_KING_CAPTURED:
            assert parts[-1].end().board().fen() == final.fen
        assert record.record.count("[%duel ") == len(final.duels)

        # Every random setup came from the fairness stream: the proof reproduces each draw.
        for player_session in (host, guest):
            check = await player_session.check_fairness(match_id)
            assert check.ok, check.lines()
            # One draw per duel, more where a setup let White take the king on move one.
            assert check.report.used_draws_checked >= len(final.duels)
            assert check.report.draws_verified >= len(final.duels)

        # Matchmaking recorded the one result for both players.
        for player_session in (host, guest):
            played = await played_match(player_session, "chess", match_id)
            assert (played.result.termination, played.result.winner) == (result.termination, result.winner)
