"""Every family's lobby through the players' door, the gateway, on the whole stack (SQLite and PostgreSQL):
FAMILY.md's "lobby tables with the family's options, quick match, Elo per family; the gateway routes it".

For each family (and Skirmish Chess, a chess variant with a lobby of its own) with options and a clock its
lobby offers that are not the defaults:

- a table: created through the gateway, listed to another player by ``ListTables`` with those options,
  joined; both players hear ``match_ready`` on their lobby streams, and the match the gateway routes to (on
  the family's rules shard) carries exactly those options, that clock and that disconnect policy;
- what the family's lobby does not offer is refused through the gateway with the family's own reason;
- a result (the guest resigns through the gateway) moves both players' Elo in that family and no other:
  told on their lobby streams, shown by ``GetRatings`` and ``GetMatchHistory``;
- quick match: two players asking through the gateway for the same options, clock and policy are paired,
  and their match carries them.

The per-family details (every offered option, every refusal, pools that must not meet) are tested against
matchmaking and the family's shard directly in ``tests/services/matchmaking/test_<family>_tables.py``.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest
from skillclassics.backgammon.v1 import backgammon_pb2 as bg
from skillclassics.chess.v1 import chess_pb2
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gin.v1 import gin_pb2
from skillclassics.go.v1 import go_pb2
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.rules.v1 import rules_pb2

from services.matchmaking.families import STAND_IN_AFTER_MS, family_rules
from tests.fullstack.helpers import (
    MINUTE,
    Platform,
    Player,
    Stream,
    live_lobby,
    next_lobby,
    played_match,
    session,
)
from tests.support import refused

_fees = itertools.count(7_001)
"""Entry fees no other full-stack test uses: the fee is part of the quick-match pool, so the pairs made
here are made of this test's players only."""


@dataclass(frozen=True)
class Lobby:
    """What one family's table asks for, and one thing its lobby refuses."""

    family: str
    options: rules_pb2.MatchOptions
    clock: rules_pb2.TimeControl
    policy: mm_pb.DisconnectPolicy.ValueType
    not_offered: rules_pb2.MatchOptions
    refusal: str
    reason: str = "OPTIONS_NOT_OFFERED"


LOBBIES = [
    Lobby(
        "chess",
        rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(ruleset=chess_pb2.RULESET_FIDE)),
        rules_pb2.TimeControl(base_ms=3 * MINUTE),
        mm_pb.DISCONNECT_POLICY_FORFEIT,
        rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions(initial_fen="4k3/8/8/8/8/8/8/4K2R w K - 0 1")),
        "start from the initial position",
    ),
    Lobby(
        "chess",  # Skirmish Chess
        rules_pb2.MatchOptions(
            chess=chess_pb2.ChessOptions(
                ruleset=chess_pb2.RULESET_FIDE,
                variant=chess_pb2.VARIANT_SKIRMISH,
                skirmish=chess_pb2.SkirmishOptions(
                    preset=chess_pb2.SKIRMISH_PRESET_CLASSIC,
                    clock_base_ms=30_000,
                    clock_increment_ms=2_000,
                    countdown_ms=3_000,
                    draw_rule=chess_pb2.SKIRMISH_DRAW_RULE_BOTH_STAY,
                ),
            )
        ),
        rules_pb2.TimeControl(base_ms=10 * MINUTE),
        mm_pb.DISCONNECT_POLICY_FORFEIT,
        rules_pb2.MatchOptions(
            chess=chess_pb2.ChessOptions(
                ruleset=chess_pb2.RULESET_FIDE,
                variant=chess_pb2.VARIANT_SKIRMISH,
                skirmish=chess_pb2.SkirmishOptions(
                    preset=chess_pb2.SKIRMISH_PRESET_CLASSIC, clock_base_ms=45_000
                ),
            )
        ),
        "duel clocks of 30/60/120 s",
    ),
    Lobby(
        "backgammon",
        rules_pb2.MatchOptions(
            backgammon=bg.BackgammonOptions(
                variant=bg.VARIANT_NACKGAMMON, match_to=3, gammons=True, auto_roll=True
            )
        ),
        rules_pb2.TimeControl(base_ms=30_000, increment_ms=10_000, increment_within_ms=10_000, cap_ms=30_000),
        mm_pb.DISCONNECT_POLICY_STAND_IN,
        rules_pb2.MatchOptions(backgammon=bg.BackgammonOptions(cube=True)),
        "never use the doubling cube",
    ),
    Lobby(
        "gin",
        rules_pb2.MatchOptions(gin=gin_pb2.GinOptions(variant=gin_pb2.VARIANT_OKLAHOMA, hands_to_win=3)),
        rules_pb2.TimeControl(base_ms=10 * MINUTE, increment_ms=5_000),
        mm_pb.DISCONNECT_POLICY_STAND_IN,
        rules_pb2.MatchOptions(gin=gin_pb2.GinOptions(hands_to_win=5)),
        "best of five",
    ),
    Lobby(
        "go",
        rules_pb2.MatchOptions(go=go_pb2.GoOptions(size=13, komi=6.5, scoring=go_pb2.SCORING_TERRITORY)),
        rules_pb2.TimeControl(base_ms=10 * MINUTE, periods=5, period_ms=30_000),
        mm_pb.DISCONNECT_POLICY_FORFEIT,
        rules_pb2.MatchOptions(go=go_pb2.GoOptions(size=11)),
        "the board is 9, 13 or 19 lines",
    ),
    Lobby(
        "generals",
        rules_pb2.MatchOptions(),  # its one ruleset (004 has no table options)
        rules_pb2.TimeControl(base_ms=0, periods=3, period_ms=30_000),
        mm_pb.DISCONNECT_POLICY_FORFEIT,
        rules_pb2.MatchOptions(chess=chess_pb2.ChessOptions()),
        "cannot configure a generals table",
        "WRONG_FAMILY",
    ),
]
IDS = ["chess", "skirmish", "backgammon", "gin", "go", "generals"]


def as_created(lobby: Lobby) -> rules_pb2.MatchOptions:
    """The table's options as the family's shard reports them (read by the family's own codec, its defaults
    filled in)."""
    declared = family_rules(lobby.family).family
    reported: rules_pb2.MatchOptions = declared.options_to_proto(declared.options_from_proto(lobby.options))
    return reported


def table_request(lobby: Lobby, options: rules_pb2.MatchOptions | None = None) -> pb.CreateTableRequest:
    return pb.CreateTableRequest(
        family=lobby.family,
        options=lobby.options if options is None else options,
        time_control=lobby.clock,
        entry_fee_minor=500,
        currency="USD",
        visibility=mm_pb.VISIBILITY_PUBLIC,
        idempotency_key=uuid.uuid4().hex,
        disconnect_policy=lobby.policy,
    )


def queue_request(lobby: Lobby, fee: int) -> pb.EnterQueueRequest:
    return pb.EnterQueueRequest(
        family=lobby.family,
        options=lobby.options,
        time_control=lobby.clock,
        entry_fee_minor=fee,
        currency="USD",
        disconnect_policy=lobby.policy,
    )


async def the_match_carries_the_lobbys_choice(
    platform: Platform, lobby: Lobby, match_id: str, players: tuple[Player, Player]
) -> None:
    """The match the gateway routes ``match_id`` to is on the family's rules shard, seats ``players`` in
    order, and carries exactly the lobby's options, clock and disconnect policy (as each seat sees it)."""
    assert match_id.startswith(f"{lobby.family}.")
    for seat, player in enumerate(players):
        match = await platform.gateway.GetMatch(
            pb.GetMatchRequest(match_id=match_id), metadata=player.metadata
        )
        assert match.seat == seat
        assert [s.player_id for s in match.seats] == [p.id for p in players]
        assert match.options == as_created(lobby)
        assert match.time_control == lobby.clock
        stand_in = STAND_IN_AFTER_MS if lobby.policy == mm_pb.DISCONNECT_POLICY_STAND_IN else 0
        assert match.stand_in_after_ms == stand_in


@contextlib.asynccontextmanager
async def two_players(
    platform: Platform, lobby: Lobby, first: str, second: str
) -> AsyncIterator[tuple[Player, Player, dict[str, Stream]]]:
    """Two new players of ``lobby``'s family, each with a lobby stream already subscribed (by player id);
    the streams are closed afterwards."""
    players = platform.player(f"{lobby.family}-{first}"), platform.player(f"{lobby.family}-{second}")
    lobbies = {player.id: await live_lobby(platform, player) for player in players}
    try:
        yield players[0], players[1], lobbies
    finally:
        for stream in lobbies.values():
            await stream.cancel()


async def resign(platform: Platform, player: Player, match_id: str) -> None:
    await platform.gateway.SubmitAction(
        pb.SubmitActionRequest(
            match_id=match_id,
            idempotency_key=uuid.uuid4().hex,
            action=rules_pb2.Action(resign=rules_pb2.Resign()),
        ),
        metadata=player.metadata,
    )


@pytest.mark.parametrize("lobby", LOBBIES, ids=IDS)
async def test_a_table_through_the_gateway_makes_the_familys_match_and_its_result_moves_that_elo(
    platform: Platform, lobby: Lobby
) -> None:
    gw = platform.gateway
    async with two_players(platform, lobby, "host", "guest") as (host, guest, lobbies):
        await refused(
            gw.CreateTable(table_request(lobby, lobby.not_offered), metadata=host.metadata),
            grpc.StatusCode.INVALID_ARGUMENT,
            lobby.refusal,
            why=lobby.reason,
        )
        table = (await gw.CreateTable(table_request(lobby), metadata=host.metadata)).table
        assert (table.family, table.options, table.time_control) == (lobby.family, lobby.options, lobby.clock)
        assert table.disconnect_policy == lobby.policy
        listed = await gw.ListTables(
            pb.ListTablesRequest(family=lobby.family, limit=500), metadata=guest.metadata
        )
        assert [t for t in listed.tables if t.table_id == table.table_id] == [table]

        joined = await gw.JoinTable(pb.JoinTableRequest(table_id=table.table_id), metadata=guest.metadata)
        match_id = joined.table.match_id
        for player in (host, guest):
            ready = (await next_lobby(lobbies[player.id], "match_ready")).match_ready
            assert (ready.match_id, ready.family) == (match_id, lobby.family)
        await the_match_carries_the_lobbys_choice(platform, lobby, match_id, (host, guest))

        await resign(platform, guest, match_id)  # the host wins: 1500 -> 1520 and 1480 (new players, K 40)
        for player, rating in ((host, 1520), (guest, 1480)):
            changed = (await next_lobby(lobbies[player.id], "rating_changed")).rating_changed
            assert (changed.family, changed.match_id, changed.after) == (lobby.family, match_id, rating)
            ratings = await gw.GetRatings(pb.GetRatingsRequest(), metadata=player.metadata)
            assert [(r.family, r.rating, r.games) for r in ratings.ratings] == [(lobby.family, rating, 1)]
            async with session(platform, player) as player_session:
                played = await played_match(player_session, lobby.family, match_id)
            assert played.result.termination == rules_pb2.TERMINATION_RESIGNATION
            assert (played.rating_before, played.rating_after) == (1500, rating)


@pytest.mark.parametrize("lobby", LOBBIES, ids=IDS)
async def test_quick_match_through_the_gateway_pairs_the_same_choice_into_the_familys_match(
    platform: Platform, lobby: Lobby
) -> None:
    gw = platform.gateway
    async with two_players(platform, lobby, "qa", "qb") as (first, second, lobbies):
        fee = next(_fees)
        entered = [
            await gw.EnterQueue(queue_request(lobby, fee), metadata=player.metadata)
            for player in (first, second)
        ]
        assert entered[0].pool == entered[1].pool
        assert entered[0].pool.startswith(f"{lobby.family}|")
        ready = [(await next_lobby(lobbies[p.id], "match_ready")).match_ready for p in (first, second)]
        assert ready[0].match_id == ready[1].match_id
        match = await gw.GetMatch(pb.GetMatchRequest(match_id=ready[0].match_id), metadata=first.metadata)
        by_id = {first.id: first, second.id: second}
        white, black = (by_id[seat.player_id] for seat in match.seats)
        await the_match_carries_the_lobbys_choice(platform, lobby, ready[0].match_id, (white, black))
        await resign(platform, black, ready[0].match_id)
