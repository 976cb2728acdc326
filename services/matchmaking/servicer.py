"""The gRPC face of matchmaking: validate, call the matchmaker and store, encode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc
from skillclassics.rules.v1 import rules_pb2

from libs.engines.generals import check_formation, parse_formation, placements_text
from libs.pairing import Seeker
from libs.runtime.errors import ErrorReason, InvalidArgument, Violation
from services.matchmaking.currencies import currency_problem
from services.matchmaking.families import (
    FamilyRules,
    family_rules,
    policy_column,
    policy_of_column,
    queue_pool_key,
)
from services.matchmaking.matchmaker import Matchmaker, fairness_fields

_VISIBILITY = {
    pb.VISIBILITY_UNSPECIFIED: "public",
    pb.VISIBILITY_PUBLIC: "public",
    pb.VISIBILITY_PRIVATE: "private",
}
_VISIBILITY_TO_PROTO = {"public": pb.VISIBILITY_PUBLIC, "private": pb.VISIBILITY_PRIVATE}
_STATUS = {
    "open": pb.TABLE_STATUS_OPEN,
    "starting": pb.TABLE_STATUS_STARTING,
    "playing": pb.TABLE_STATUS_PLAYING,
    "finished": pb.TABLE_STATUS_FINISHED,
    "aborted": pb.TABLE_STATUS_FINISHED,
    "cancelled": pb.TABLE_STATUS_CANCELLED,
}


def _fee(fee: int, currency: str) -> None:
    # The fee's range (0 to 10^12) is the contract's rule; which currencies are accepted is not.
    _currency(currency)


def _currency(code: str) -> None:
    problem = currency_problem(code)
    if problem is not None:
        raise InvalidArgument(problem, reason=ErrorReason.ERROR_REASON_CURRENCY_NOT_ACCEPTED)


def queue_pool(request: pb.EnterQueueRequest) -> tuple[FamilyRules, str]:
    """The family of a valid queue request and its pool (:func:`queue_pool_key`). ``InvalidArgument`` with
    the reason for a request that is not valid."""
    family = family_rules(request.family)
    pool = queue_pool_key(request)
    _fee(request.entry_fee_minor, request.currency)
    return family, pool


def table_proto(row: dict[str, Any]) -> pb.Table:
    seats = [pb.TableSeat(seat=0, player_id=row["creator_id"])]
    if row["joiner_id"]:
        seats.append(pb.TableSeat(seat=1, player_id=row["joiner_id"]))
    return pb.Table(
        table_id=row["table_id"],
        family=row["family"],
        options=rules_pb2.MatchOptions.FromString(row["options"]),
        time_control=rules_pb2.TimeControl.FromString(row["time_control"]),
        entry_fee_minor=row["entry_fee_minor"],
        currency=row["currency"],
        visibility=_VISIBILITY_TO_PROTO[row["visibility"]],
        creator_id=row["creator_id"],
        seats=seats,
        status=_STATUS[row["status"]],
        match_id=row["match_id"] or "",
        created_at_ms=row["created_at_ms"],
        disconnect_policy=policy_of_column(row["disconnect_policy"]),
    )


def canonical_formation(text: str) -> str:
    """``text`` as a formation is stored: its canonical text (square order, lower-case squares, upper-case
    ranks). ``InvalidArgument`` (``INVALID_FORMATION``), each of the engine's reasons a violation of
    ``formation``, unless it is a legal complete setup (docs/generals.md, "Formations")."""
    reasons = check_formation(text, complete=True)
    if reasons:
        raise InvalidArgument(
            f"not a legal formation: {'; '.join(reasons)}",
            reason=ErrorReason.ERROR_REASON_INVALID_FORMATION,
            violations=[Violation("formation", reason) for reason in reasons],
        )
    return placements_text(parse_formation(text))


def formation_proto(row: dict[str, Any]) -> pb.Formation:
    return pb.Formation(
        name=row["name"],
        formation=row["text"],
        created_at_ms=row["created_at_ms"],
        updated_at_ms=row["updated_at_ms"],
    )


class MatchmakingServicer(matchmaking_pb2_grpc.MatchmakingServiceServicer):
    """Implements ``skillclassics.matchmaking.v1.MatchmakingService``."""

    def __init__(self, matchmaker: Matchmaker) -> None:
        self._mm = matchmaker
        self._store = matchmaker.store

    async def CreateTable(
        self, request: pb.CreateTableRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateTableResponse:
        player = request.player_id
        family = family_rules(request.family)
        family.check_options(request.options)
        family.check_lobby_clock(request.time_control)
        family.stand_in_after_ms(request.disconnect_policy)
        _fee(request.entry_fee_minor, request.currency)
        self._mm.shards.require(family.name)  # no table or queue for a family nobody can host
        self._mm.require_fairness(family.name, request.options)
        visibility = _VISIBILITY[request.visibility]  # a defined value (the contract's rules)
        row = await self._store.create_table(
            {
                "table_id": self._mm.new_table_id(),
                "family": family.name,
                "options": request.options.SerializeToString(),
                "time_control": request.time_control.SerializeToString(),
                "entry_fee_minor": request.entry_fee_minor,
                "currency": request.currency,
                "visibility": visibility,
                "creator_id": player,
                "joiner_id": None,
                "status": "open",
                "match_id": None,
                "idempotency_key": request.idempotency_key,
                "created_at_ms": self._mm.time.now_ms(),
                "disconnect_policy": policy_column(request.disconnect_policy),
            }
        )
        table = table_proto(row)
        # Its creator's lobby streams hear of it too, a retry (the same key) included: one waiting there
        # for the table is not left waiting when the answer is lost.
        self._mm.tell_table(table)
        return pb.CreateTableResponse(table=table)

    async def ListTables(
        self, request: pb.ListTablesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTablesResponse:
        family = family_rules(request.family)
        if request.currency:
            _currency(request.currency)
        policy = request.disconnect_policy
        rows = await self._store.open_tables(
            family.name,
            request.max_entry_fee_minor,
            request.currency,
            free_only=request.free_only,
            disconnect_policy="" if policy == pb.DISCONNECT_POLICY_UNSPECIFIED else policy_column(policy),
        )
        tables = [table_proto(r) for r in rows]
        if request.base_ms:
            tables = [t for t in tables if t.time_control.base_ms == request.base_ms]
        return pb.ListTablesResponse(tables=tables[: request.limit or 100])

    async def JoinTable(
        self, request: pb.JoinTableRequest, context: grpc.aio.ServicerContext
    ) -> pb.JoinTableResponse:
        player = request.player_id
        # Own, closed or full table, or a busy player: refused before a match id is minted or fairness is
        # asked for a commitment, so a refused join leaves nothing behind (the transaction checks again).
        table = await self._store.check_join(request.table_id, player)
        match = await self._mm.new_match_row(
            table["family"],
            (table["creator_id"], player),  # the creator hosts: seat 0, White in chess
            table["options"],
            table["time_control"],
            table["entry_fee_minor"],
            table["currency"],
            table["table_id"],
            disconnect_policy=table["disconnect_policy"],
        )
        await self._store.join_table(request.table_id, player, match)
        await self._mm.launch(match)
        return pb.JoinTableResponse(table=table_proto(await self._store.table(request.table_id)))

    async def LeaveTable(
        self, request: pb.LeaveTableRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaveTableResponse:
        row = await self._store.cancel_table(request.table_id, request.player_id, self._mm.time.now_ms())
        await self._mm.announce_table(request.table_id)
        return pb.LeaveTableResponse(table=table_proto(row))

    async def EnterQueue(
        self, request: pb.EnterQueueRequest, context: grpc.aio.ServicerContext
    ) -> pb.EnterQueueResponse:
        player = request.player_id
        family, pool = queue_pool(request)
        self._mm.shards.require(family.name)  # no table or queue for a family nobody can host
        self._mm.require_fairness(family.name, request.options)
        rating = (await self._store.rating(player, family.name)).rating
        now = self._mm.time.now_ms()
        await self._store.enter_queue(
            {
                "player_id": player,
                "pool": pool,
                "family": family.name,
                "request": request.SerializeToString(),
                "rating": rating,
                "entered_at_ms": now,
            }
        )
        self._mm.queue(Seeker(player, rating, now, pool), request)
        return pb.EnterQueueResponse(pool=pool, rating=rating, entered_at_ms=now)

    async def LeaveQueue(
        self, request: pb.LeaveQueueRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaveQueueResponse:
        player = request.player_id
        self._mm.dequeue(player)
        left = await self._store.leave_queue(player)
        self._mm.dequeue(
            player
        )  # again: a read of the queue that began before the delete may have put them back
        return pb.LeaveQueueResponse(left=left)

    async def WatchLobby(
        self, request: pb.WatchLobbyRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchLobbyResponse]:
        player = request.player_id

        async def playing() -> list[pb.MatchReady]:
            return [
                pb.MatchReady(
                    match_id=match["match_id"],
                    family=match["family"],
                    seat=0 if match["player0"] == player else 1,
                    opponent_id=match["player1"] if match["player0"] == player else match["player0"],
                    table_id=match["table_id"] or "",
                    **fairness_fields(match),
                )
                for match in await self._store.matches_of(player, "")
                if match["status"] == "playing"
            ]

        async for event in self._mm.hub.watch(player, playing):
            yield event

    async def ReportResult(
        self, request: pb.ReportResultRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReportResultResponse:
        """Record a match's result once (docs/matchmaking.md, "Results"): only for a match matchmaking
        made (``NOT_FOUND`` otherwise), with a winner who is one of its seats; the identical result again
        is answered without changing anything (``recorded`` false), a different one is refused."""
        result = request.result  # with a termination (the contract's rules)
        aborted = result.termination == rules_pb2.TERMINATION_ABORTED
        winner = result.winner if result.HasField("winner") else None
        if aborted and winner is not None:
            raise InvalidArgument(
                "an aborted match has no winner", reason=ErrorReason.ERROR_REASON_INVALID_REQUEST
            )
        recorded = await self._store.record_result(
            request.match_id,
            result.SerializeToString(deterministic=True),
            winner,
            aborted,
            self._mm.time.now_ms(),
            # Stakes refunded (a stand-in, or its late returner, won; docs/match-runtime.md "Stand-ins"):
            # the game does not count for ratings either.
            rated=result.settlement != rules_pb2.SETTLEMENT_REFUNDED,
        )
        if recorded is None:
            return pb.ReportResultResponse(recorded=False)
        match, changes = recorded
        now = self._mm.time.now_ms()
        for change in changes:
            event = pb.RatingChanged(
                family=change.family, match_id=change.match_id, before=change.before, after=change.after
            )
            self._mm.hub.tell(change.player_id, pb.WatchLobbyResponse(rating_changed=event, at_ms=now))
        if match["table_id"]:
            await self._mm.announce_table(match["table_id"])
        return pb.ReportResultResponse(recorded=True)

    async def GetRatings(
        self, request: pb.GetRatingsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetRatingsResponse:
        current, history = await self._store.ratings(request.player_id)
        return pb.GetRatingsResponse(
            ratings=[
                pb.Rating(family=r["family"], rating=r["rating"], games=r["games"], peak=r["peak"])
                for r in current
            ],
            history=[
                pb.RatingChange(
                    family=c["family"],
                    match_id=c["match_id"],
                    before=c["before"],
                    after=c["after"],
                    at_ms=c["at_ms"],
                )
                for c in history
            ],
        )

    async def GetMatchHistory(
        self, request: pb.GetMatchHistoryRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetMatchHistoryResponse:
        player = request.player_id
        played = []
        for match in await self._store.matches_of(player, request.family):
            seat = 0 if match["player0"] == player else 1
            entry = pb.PlayedMatch(
                match_id=match["match_id"],
                family=match["family"],
                table_id=match["table_id"] or "",
                seat=seat,
                opponent_id=match["player1"] if seat == 0 else match["player0"],
                entry_fee_minor=match["entry_fee_minor"],
                currency=match["currency"],
                created_at_ms=match["created_at_ms"],
                **fairness_fields(match),
            )
            if match["result"] is not None:
                entry.result.CopyFrom(rules_pb2.Result.FromString(match["result"]))
            if match["rating_change"] is not None:
                entry.rating_before, entry.rating_after = match["rating_change"]
            played.append(entry)
        return pb.GetMatchHistoryResponse(matches=played)

    async def SaveFormation(
        self, request: pb.SaveFormationRequest, context: grpc.aio.ServicerContext
    ) -> pb.SaveFormationResponse:
        text = canonical_formation(request.formation)  # the name's rules are the contract's
        row, replaced = await self._store.save_formation(
            request.player_id, request.name, text, self._mm.time.now_ms()
        )
        return pb.SaveFormationResponse(formation=formation_proto(row), replaced=replaced)

    async def ListFormations(
        self, request: pb.ListFormationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListFormationsResponse:
        rows = await self._store.formations(request.player_id)
        return pb.ListFormationsResponse(formations=[formation_proto(row) for row in rows])

    async def DeleteFormation(
        self, request: pb.DeleteFormationRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteFormationResponse:
        row = await self._store.delete_formation(request.player_id, request.name)
        return pb.DeleteFormationResponse(formation=formation_proto(row))
