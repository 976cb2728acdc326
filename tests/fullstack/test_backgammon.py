"""Backgammon through the whole stack, every service its own process (SQLite files, or one PostgreSQL):
two players meet at a lobby table, each plays over its own ``Play`` stream (picking from the view's legal
plays) to the end of the game, the result reaches matchmaking, and each player checks the fairness proof
of the dice."""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest
from skillclassics.backgammon.v1 import backgammon_pb2 as bg
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2

from clients.player import GatewayError, PlayerSession, is_over
from tests.fullstack.helpers import Platform, played_match, session


def choose(update: rules_pb2.MatchUpdate, rng: random.Random) -> str:
    """A random legal play from the view's list (by notation or by number); roll; continue."""
    view = update.view.backgammon
    if view.phase == bg.PHASE_MOVE:
        index = rng.randrange(len(view.legal_plays))
        return view.legal_plays[index] if rng.random() < 0.5 else str(index + 1)
    if view.phase == bg.PHASE_BETWEEN_GAMES:
        return "continue"
    assert view.phase == bg.PHASE_ROLL_OR_DOUBLE, view.phase
    return "roll"


async def play(
    who: PlayerSession, match_id: str, seed: int, seen: list[rules_pb2.MatchUpdate]
) -> rules_pb2.MatchUpdate:
    """One player's whole game over one Play stream."""
    rng = random.Random(seed)
    async with who.play(match_id) as stream:
        seat = await stream.opened()
        acted = 0
        async for update in stream:
            seen.append(update)
            if is_over(update):
                return update
            if update.sequence < acted or not update.legal_actions:
                continue  # not this seat's turn, or an update from before its last action
            assert update.to_move == seat or update.view.backgammon.phase == bg.PHASE_BETWEEN_GAMES
            action = rules_pb2.Action(backgammon=bg.BackgammonAction(action=choose(update, rng)))
            try:
                acted = await stream.submit(action)
            except GatewayError as error:
                if error.code != grpc.StatusCode.FAILED_PRECONDITION:
                    raise  # (a stale update: the match moved on meanwhile)
    raise AssertionError("the Play stream ended before the match")


async def test_a_lobby_backgammon_game_is_played_over_play_streams_to_a_result(platform: Platform) -> None:
    assert "rules-backgammon" in {spec.name for spec in platform.stack.services}
    ann, ben = platform.player("ann"), platform.player("ben")
    async with session(platform, ann) as host, session(platform, ben) as guest:
        for who in (host, guest):
            await who.whoami()  # the session records fairness per player
        options = rules_pb2.MatchOptions(backgammon=bg.BackgammonOptions(variant=bg.VARIANT_STANDARD))
        # Lobby tables never use the doubling cube (RULES.md; docs/matchmaking.md).
        with pytest.raises(GatewayError, match="never use the doubling cube") as refused:
            await host.create_table(
                "backgammon",
                options=rules_pb2.MatchOptions(backgammon=bg.BackgammonOptions(cube=True)),
                time_control=rules_pb2.TimeControl(base_ms=5 * 60_000),
            )
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
        table = await host.create_table(
            "backgammon",
            options=options,
            time_control=rules_pb2.TimeControl(base_ms=5 * 60_000),
            visibility=mm.VISIBILITY_PRIVATE,
        )
        match_id = (await guest.join_table(table.table_id)).match_id
        assert match_id.startswith("backgammon.0.")

        seen: dict[str, list[rules_pb2.MatchUpdate]] = {ann.id: [], ben.id: []}
        async with asyncio.timeout(240):
            finals = await asyncio.gather(
                play(host, match_id, 1, seen[ann.id]), play(guest, match_id, 2, seen[ben.id])
            )

        # Both players saw the same end, every update once and in order.
        assert finals[0].sequence == finals[1].sequence
        assert finals[0].result == finals[1].result
        result = finals[0].result
        assert result.termination == rules_pb2.TERMINATION_BEAR_OFF
        view = finals[0].view.backgammon
        assert view.board.off[result.winner] == 15
        assert view.phase == bg.PHASE_OVER
        for updates in seen.values():
            sequences = [u.sequence for u in updates]
            assert sequences == list(range(sequences[0], sequences[0] + len(sequences)))
            assert sequences[-1] == finals[0].sequence

        # The record is the MAT file; each player verifies the dice against the proof.
        record = await host.get_record(match_id)
        assert record.record_format == "mat"
        assert " 0 point match" in record.record
        for player_session in (host, guest):
            check = await player_session.check_fairness(match_id)
            assert check.ok, check.lines()
        fairness = host.fairness(match_id)
        assert fairness is not None
        assert fairness.commitment
        assert fairness.seed_accepted
        assert ("dice", 0) in fairness.draws

        # Matchmaking recorded the one result for both players.
        for player_session in (host, guest):
            played = await played_match(player_session, "backgammon", match_id)
            assert (played.result.termination, played.result.winner) == (result.termination, result.winner)
