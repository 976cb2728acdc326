"""Game of the Generals through the whole stack, every service its own process (SQLite files, or one
PostgreSQL): two players meet at a private table with a per-move clock, load a saved formation, the
clients' bots set up (at once) and play over the gateway to the end, and neither player ever receives an
opposing rank through the gateway while the game is on; the result reaches matchmaking, and each player
checks the fairness proof (the first mover) against what they recorded."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import grpc
import pytest
from skillclassics.generals.v1 import generals_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2

from clients.bot import play_match
from clients.families import family
from clients.player import GatewayError
from libs.engines.generals import ARMY, HOME, placements_text, setup_to_formation
from tests.fullstack.helpers import Platform, played_match, session


def opposing_ranks(update: rules_pb2.MatchUpdate, seat: int) -> list[str]:
    if update.status == rules_pb2.MATCH_STATUS_FINISHED:
        return []  # over: every rank is shown
    view = update.view.generals
    ranks = [piece.rank for piece in view.pieces if piece.seat != seat and piece.rank]
    if len(view.lost) == 2:
        ranks += list(view.lost[1 - seat].ranks)
    return ranks


async def test_a_generals_game_through_the_gateway_never_shows_a_player_an_opposing_rank(
    platform: Platform,
) -> None:
    assert "rules-generals" in {spec.name for spec in platform.stack.services}
    fam = family("generals")
    ann, ben = platform.player("ann"), platform.player("ben")
    per_move = rules_pb2.TimeControl(periods=3, period_ms=60_000)
    async with session(platform, ann) as host, session(platform, ben) as guest:
        for who in (host, guest):
            await who.whoami()  # the session records fairness per player
        # A saved formation: any legal complete arrangement, in its owner's orientation.
        formation = setup_to_formation(placements_text(zip(HOME[0], ARMY, strict=False)), 0)
        await host.save_formation("wall", formation)
        assert [f.name for f in await host.list_formations()] == ["wall"]
        with pytest.raises(GatewayError) as refused:
            await host.save_formation("half", "a1=FLG")
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(GatewayError, match="per move") as bad_clock:
            await host.create_table("generals", time_control=rules_pb2.TimeControl(base_ms=5 * 60_000))
        assert bad_clock.value.code == grpc.StatusCode.INVALID_ARGUMENT
        table = await host.create_table("generals", time_control=per_move, visibility=mm.VISIBILITY_PRIVATE)
        match_id = (await guest.join_table(table.table_id)).match_id
        assert match_id.startswith("generals.0.")

        seen: dict[int, list[rules_pb2.MatchUpdate]] = {0: [], 1: []}

        def watcher(seat: int) -> Callable[[rules_pb2.MatchUpdate], None]:
            def on_update(update: rules_pb2.MatchUpdate) -> None:
                seen[seat].append(update)

            return on_update

        async with asyncio.timeout(240):
            results = await asyncio.gather(
                *(
                    play_match(
                        player_session,
                        match_id,
                        fam.strategy(strategy, random.Random(index)),
                        fam,
                        max_plies=400,
                        stall_s=60,
                        on_update=watcher(index),
                    )
                    for index, (player_session, strategy) in enumerate(((host, "greedy"), (guest, "random")))
                )
            )

        assert results[0].result == results[1].result
        assert results[0].result.termination != rules_pb2.TERMINATION_ABORTED
        for seat, updates in seen.items():
            assert updates, seat
            sequences = [u.sequence for u in updates]
            assert sequences == sorted(set(sequences))
            leaks = [(u.sequence, opposing_ranks(u, seat)) for u in updates if opposing_ranks(u, seat)]
            assert leaks == [], f"seat {seat} was shown opposing ranks through the gateway"
            assert any(u.view.generals.phase == generals_pb2.PHASE_PLAY for u in updates)

        # The record (every rank, after the game) and each player's check of the first mover's draw.
        record = await guest.get_record(match_id)
        assert record.record_format == "txt"
        assert "generals 1" in record.record
        for player_session in (host, guest):
            check = await player_session.check_fairness(match_id)
            assert check.ok, check.lines()
        fairness = host.fairness(match_id)
        assert fairness is not None
        assert ("first", 0) in fairness.draws
        for player_session in (host, guest):
            played = await played_match(player_session, "generals", match_id)
            assert played.result.termination == results[0].result.termination
