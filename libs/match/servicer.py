"""The generic RulesService over gRPC: decode and validate, call the runtime, encode per viewer."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import TypeVar

import grpc
from skillclassics.rules.v1 import rules_pb2, rules_pb2_grpc

from libs.clocks import InvalidTimeControlError, TimeControl
from libs.engines.base import ChanceRequest, InvalidOptionsError, MalformedActionError
from libs.fairness import FAIRNESS_VERSION
from libs.match.actor import MatchActor, MatchClosed
from libs.match.exchange import SHUTTING_DOWN, ExchangeSession
from libs.match.family import PlaysForAbsentSeats, draws_chance
from libs.match.model import (
    DEFAULT_DISCONNECT_FORFEIT_MS,
    DEFAULT_FIRST_MOVE_TIMEOUT_MS,
    EventKind,
    MatchRecord,
    MatchSetup,
)
from libs.match.paging import PageScope, decode_token, encode_token, page_size
from libs.match.results import result_proto
from libs.match.runtime import MatchRuntime
from libs.runtime.errors import (
    ErrorReason,
    FailedPrecondition,
    InvalidArgument,
    Unavailable,
    Violation,
    invalid_field,
)

VIEW_CACHE_SIZE = 256
"""Views are asked for within moments of each other (the answer, then each watcher): a few hundred do."""
_STATUS = {
    "waiting": rules_pb2.MATCH_STATUS_WAITING,
    "live": rules_pb2.MATCH_STATUS_LIVE,
    "finished": rules_pb2.MATCH_STATUS_FINISHED,
    "aborted": rules_pb2.MATCH_STATUS_ABORTED,
}
_STATUS_NAMES = {number: name for name, number in _STATUS.items()}


class RulesServicer(rules_pb2_grpc.RulesServiceServicer):
    """Implements ``skillclassics.rules.v1.RulesService`` for one family over a :class:`MatchRuntime`."""

    def __init__(self, runtime: MatchRuntime) -> None:
        self._runtime = runtime
        self._family = runtime.family
        self._views: OrderedDict[tuple[str, int, int | None], rules_pb2.View] = OrderedDict()
        self._updates: OrderedDict[tuple[str, int, int | None], rules_pb2.MatchUpdate] = OrderedDict()
        self._sessions: set[ExchangeSession] = set()
        self._restarting: str | None = None
        """Set by :meth:`drain`: why streams end and new ones are refused."""

    def drain(self) -> None:
        """The service is shutting down: end every watch of every ``Exchange`` stream at once with
        ``UNAVAILABLE`` ("rules-chess shard 0 is restarting; reconnect from your last sequence"), and
        each stream once the submits it already carried are answered; refuse new streams and watches the
        same way. The gateway then ends its players' Play streams at once, and they reconnect, rather
        than every stream being held for the drain grace and then cut."""
        self._restarting = (
            f"rules-{self._family.name} shard {self._runtime.shard} is restarting; "
            "reconnect from your last sequence"
        )
        for session in list(self._sessions):
            session.drain(self._restarting)

    def serve(self, runtime: MatchRuntime) -> None:
        """Serve ``runtime`` from now on: the shard's matches rebuilt from the log after the shard was lost
        and taken again (libs/match/service.py). Calls in progress on the old one end as it closed them."""
        self._runtime = runtime
        self._views.clear()
        self._updates.clear()

    async def CreateMatch(
        self, request: rules_pb2.CreateMatchRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.CreateMatchResponse:
        # The contract's rules (the interceptor checked them) cover the fields one by one: the idempotency
        # key, player ids, timeouts and the seed window. What they cannot say is checked here.
        self._runtime.check_id(request.match_id)
        key = request.idempotency_key
        seats = sorted(request.seats, key=lambda s: s.seat)
        if [s.seat for s in seats] != [0, 1]:
            raise invalid_field("seats", "must be exactly seats 0 and 1")
        players = tuple(s.player_id for s in seats)
        if players[0] == players[1]:
            raise InvalidArgument(
                "one player cannot take both seats", reason=ErrorReason.ERROR_REASON_INVALID_REQUEST
            )
        which = request.options.WhichOneof("family")
        if which not in (None, self._family.name):
            raise InvalidArgument(
                f"{which} options cannot configure a {self._family.name} match",
                reason=ErrorReason.ERROR_REASON_WRONG_FAMILY,
                violations=[Violation(f"options.{which}", f"is not {self._family.name}'s options")],
            )
        try:
            options = self._family.options_from_proto(request.options)
        except InvalidOptionsError as error:
            raise InvalidArgument(
                str(error),
                reason=ErrorReason.ERROR_REASON_OPTIONS_NOT_OFFERED,
                violations=[Violation("options", str(error))],
            ) from None
        control = _time_control(request.time_control)
        chance = draws_chance(self._family, options)
        if chance and not self._runtime.has_chance:
            raise Unavailable(
                f"these {self._family.name} options draw from the fairness service, and this rules service "
                "has none configured (FAIRNESS_ADDRESS)",
                reason=ErrorReason.ERROR_REASON_NOT_CONFIGURED,
            )
        if chance and not request.fairness_commitment:
            raise invalid_field(
                "fairness_commitment",
                f"is required: {self._family.name} matches draw from the fairness service (fairness Commit)",
            )
        fairness_version = 0
        if request.fairness_commitment:
            fairness_version = request.fairness_version or FAIRNESS_VERSION
            if fairness_version != FAIRNESS_VERSION:
                raise invalid_field(
                    "fairness_version",
                    f"{fairness_version} is not the version this service draws with ({FAIRNESS_VERSION})",
                )
        if request.stand_in_after_ms and not isinstance(self._family, PlaysForAbsentSeats):
            raise invalid_field("stand_in_after_ms", f"must be 0: {self._family.name} has no stand-in")
        setup = MatchSetup(
            match_id=request.match_id,
            family=self._family.name,
            players=players,
            options=self._family.options_to_json(options),
            time_control=control,
            fairness_commitment=request.fairness_commitment,
            first_move_timeout_ms=request.first_move_timeout_ms or DEFAULT_FIRST_MOVE_TIMEOUT_MS,
            disconnect_forfeit_ms=request.disconnect_forfeit_ms or DEFAULT_DISCONNECT_FORFEIT_MS,
            created_at_ms=self._runtime_now(),
            client_seed_window_ms=request.client_seed_window_ms,
            fairness_version=fairness_version,
            stand_in_after_ms=request.stand_in_after_ms,
        )
        actor = await self._runtime.create(setup, key)
        # The match as created (sequence 1), so that a retry gets exactly the original answer even after
        # play has moved on (or a first draw was made at once).
        return rules_pb2.CreateMatchResponse(update=self._update(await actor.record_at(1), None))

    async def SubmitAction(
        self, request: rules_pb2.SubmitActionRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.SubmitActionResponse:
        record = await self._submit(request)
        return rules_pb2.SubmitActionResponse(
            sequence=record.sequence, update=self._update(record, request.seat)
        )

    async def Watch(
        self, request: rules_pb2.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[rules_pb2.WatchResponse]:
        async for update in self._watch(request):
            yield rules_pb2.WatchResponse(update=update)

    async def Exchange(
        self,
        request_iterator: AsyncIterator[rules_pb2.ExchangeRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[rules_pb2.ExchangeResponse]:
        if self._restarting is not None:
            raise Unavailable(self._restarting, reason=ErrorReason.ERROR_REASON_SHARD_NOT_SERVING)
        session = ExchangeSession(self._submit_sequence, self._watch)
        self._sessions.add(session)
        try:
            async for response in session.serve(request_iterator):
                yield response
        finally:
            self._sessions.discard(session)

    async def _submit(self, request: rules_pb2.SubmitActionRequest) -> MatchRecord:
        """Apply one action (SubmitAction's and Exchange's submit): the record it made, durable."""
        actor = await self._runtime.get(request.match_id)
        # The key and the action's kind are checked by the contract's rules (the interceptor, or the
        # Exchange stream for each of its calls).
        key = request.idempotency_key
        which = request.action.WhichOneof("kind")
        if which == "resign":
            record = await actor.submit(request.seat, key, EventKind.RESIGN, {})
        else:
            if which != self._family.name:
                raise InvalidArgument(
                    f"a {which} action cannot be played in a {self._family.name} match",
                    reason=ErrorReason.ERROR_REASON_WRONG_FAMILY,
                    violations=[Violation(f"action.{which}", f"is not a {self._family.name} action")],
                )
            try:
                action = self._family.action_from_proto(request.action)
            except MalformedActionError as error:
                raise InvalidArgument(str(error), reason=ErrorReason.ERROR_REASON_MALFORMED_ACTION) from None
            payload = {"action": dict(self._family.action_to_json(action))}
            record = await actor.submit(request.seat, key, EventKind.ACTION, payload)
        self._runtime.note_progress(actor)
        return record

    async def _submit_sequence(self, request: rules_pb2.SubmitActionRequest) -> int:
        return (await self._submit(request)).sequence

    async def _watch(self, request: rules_pb2.WatchRequest) -> AsyncIterator[rules_pb2.MatchUpdate]:
        """The match as the request's viewer sees it after each event from ``from_sequence`` on (Watch's
        and Exchange's watch); ends after the final update. Refused once the service drains (a watch
        opened then would only be held until the end of the grace)."""
        if self._restarting is not None:
            raise Unavailable(self._restarting, reason=ErrorReason.ERROR_REASON_SHARD_NOT_SERVING)
        actor = await self._runtime.get(request.match_id)
        if self._restarting is not None:
            raise Unavailable(self._restarting, reason=ErrorReason.ERROR_REASON_SHARD_NOT_SERVING)
        viewer = _viewer(request, actor)
        first = True
        try:
            async for record in actor.watch(request.from_sequence):
                update = self._update(record, viewer)
                if first:
                    # Whatever sequence a stream starts from, its first update names the commitment, so
                    # that a viewer who (re)connects late still learns which stream the match draws from.
                    update = _with_commitment(update, record.setup)
                    first = False
                yield update
        except MatchClosed:
            raise Unavailable(
                self._restarting or SHUTTING_DOWN, reason=ErrorReason.ERROR_REASON_SHUTTING_DOWN
            ) from None

    async def GetMatch(
        self, request: rules_pb2.GetMatchRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.GetMatchResponse:
        actor = await self._runtime.get(request.match_id)
        record = actor.record
        setup = record.setup
        return rules_pb2.GetMatchResponse(
            update=self._update(record, _viewer(request, actor), at_ms=actor.now_ms()),
            seats=_seats(setup),
            options=self._family_options_proto(record),
            time_control=_time_control_proto(setup.time_control),
            stand_in_after_ms=setup.stand_in_after_ms,
        )

    async def SetPresence(
        self, request: rules_pb2.SetPresenceRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.SetPresenceResponse:
        actor = await self._runtime.get(request.match_id)
        sequence = await actor.set_presence(request.seat, request.connected)
        self._runtime.note_progress(actor)
        return rules_pb2.SetPresenceResponse(sequence=sequence)

    async def RenewPresence(
        self, request: rules_pb2.RenewPresenceRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.RenewPresenceResponse:
        # Presence leases (libs/match/presence.py): a gateway instance vouches for the seats it streams.
        granted, ignored = await self._runtime.renew_presence(
            request.gateway_instance,
            [(s.match_id, s.seat) for s in request.held],
            [(s.match_id, s.seat) for s in request.released],
            request.lease_ms,
        )
        return rules_pb2.RenewPresenceResponse(
            lease_ms=granted, ignored=[rules_pb2.PresenceSeat(match_id=m, seat=s) for m, s in ignored]
        )

    async def ListMatches(
        self, request: rules_pb2.ListMatchesRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.ListMatchesResponse:
        wanted = sorted({_STATUS_NAMES[s] for s in request.statuses})
        size = page_size(request.page_size)
        scope = PageScope.of(self._family.name, self._runtime.shard, wanted)
        after = decode_token(request.page_token, scope) if request.page_token else None
        # From the database: what was committed (every acknowledged event), finished and aborted matches
        # included, whether or not they are still in memory. One more than the page: whether there is a
        # next page at all, so that the last page has no token.
        rows = await self._runtime.summaries(wanted, after=after, limit=size + 1)
        page = rows[:size]
        more = len(rows) > size
        return rules_pb2.ListMatchesResponse(
            matches=[
                rules_pb2.MatchSummary(
                    match_id=row.match_id,
                    family=self._family.name,
                    status=_STATUS[row.status],
                    seats=[rules_pb2.SeatAssignment(seat=i, player_id=p) for i, p in enumerate(row.players)],
                    sequence=row.sequence,
                )
                for row in page
            ],
            next_page_token=encode_token(scope, page[-1].match_id) if more else "",
        )

    async def GetLoad(
        self, request: rules_pb2.GetLoadRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.GetLoadResponse:
        return rules_pb2.GetLoadResponse(
            family=self._family.name, shard=self._runtime.shard, live_matches=self._runtime.live_count()
        )

    async def GetRecord(
        self, request: rules_pb2.GetRecordRequest, context: grpc.aio.ServicerContext
    ) -> rules_pb2.GetRecordResponse:
        actor = await self._runtime.get(request.match_id)
        record = actor.record
        if record.outcome is None:
            raise FailedPrecondition(
                f"match {record.match_id} is not over yet", reason=ErrorReason.ERROR_REASON_MATCH_NOT_OVER
            )
        setup = record.setup
        return rules_pb2.GetRecordResponse(
            match_id=record.match_id,
            result=result_proto(record.outcome, record.ended_at_ms or 0, _stood_in(record)),
            record=self._family.export_record(record),
            record_format=self._family.record_format,
            fairness_commitment=setup.fairness_commitment,
            fairness_version=setup.fairness_version if setup.fairness_commitment else 0,
            fairness_draws=[_draw_proto(draw.request, draw.values) for draw in record.draws],
        )

    # -- encoding ----------------------------------------------------------------------------------------

    def _view(self, record: MatchRecord, viewer: int | None) -> rules_pb2.View:
        """The engine's view for ``viewer`` after ``record``'s event, computed once and shared by the
        response and every watcher of that viewer (views are the costliest part of an update)."""
        # A family whose views hide nothing (chess) computes one view per event for everybody.
        key = (record.match_id, record.sequence, viewer if self._family.hides_information else None)
        view = self._views.get(key)
        if view is None:
            view = self._family.view_to_proto(self._family.engine.view(record.game, key[2]))
            _remember(self._views, key, view)
        return view

    def _runtime_now(self) -> int:
        return self._runtime.now_ms()

    def _family_options_proto(self, record: MatchRecord) -> rules_pb2.MatchOptions:
        return self._family.options_to_proto(record.options)

    def _update(
        self, record: MatchRecord, viewer: int | None, at_ms: int | None = None
    ) -> rules_pb2.MatchUpdate:
        """The match as ``viewer`` (a seat, or ``None`` for a spectator) sees it after ``record``'s event.

        Built once per (match, sequence, viewer) as of the event's instant and shared: the mover's
        answer and the mover's own stream carry the same update, as do all spectators' streams. An
        update as of a later instant (``at_ms``, for ``GetMatch``) is built afresh."""
        if at_ms is not None:
            return self._build_update(record, viewer, at_ms)
        key = (record.match_id, record.sequence, viewer)
        update = self._updates.get(key)
        if update is None:
            update = self._build_update(record, viewer, None)
            _remember(self._updates, key, update)
        return update

    def _build_update(
        self, record: MatchRecord, viewer: int | None, at_ms: int | None
    ) -> rules_pb2.MatchUpdate:
        engine = self._family.engine
        at = max(record.last_at_ms, at_ms or 0)
        event = record.last_event
        to_move = record.to_move(self._family)
        update = rules_pb2.MatchUpdate(
            match_id=record.match_id,
            sequence=record.sequence,
            status=_STATUS[record.status.value],
            event=rules_pb2.Event(
                kind=event.kind.value,
                seat=event.seat,
                description=str(event.payload.get("description", "")),
                at_ms=event.at_ms,
            ),
            view=self._view(record, viewer),
            server_time_ms=at,
            connected_seats=record.connected_seats(),
        )
        if to_move is not None:
            update.to_move = to_move
        phase_due = record.phase_due_ms(self._family)
        if phase_due is not None:
            update.phase_deadline_ms = phase_due
        running = None if record.clock.paused else record.clock.to_move
        for seat in range(len(record.setup.players)):
            status = record.clock.status(seat, at)
            update.clocks.append(
                rules_pb2.SeatClock(
                    seat=seat,
                    remaining_ms=status.remaining_ms,
                    running=running == seat and record.clock.is_started,
                    periods_left=status.periods_left,
                )
            )
        if viewer is not None and (viewer == to_move or record.phase_since_ms is not None):
            # In a phase with its own deadline (a count, a continue step, a setup) every seat may act, in
            # either order: each sees what it may do, not only the seat named to move.
            update.legal_actions.extend(engine.legal_actions(record.game, viewer))
        if record.outcome is not None:
            update.result.CopyFrom(result_proto(record.outcome, record.ended_at_ms or at, _stood_in(record)))
        if event.kind is EventKind.CHANCE:
            # Which draw it was, never its values: a shuffle's order is secret while the match is on.
            update.event.draw.CopyFrom(_draw_proto(ChanceRequest.from_json(event.payload["request"]), ()))
        if at_ms is not None or not record.draws:
            # GetMatch, and every update before the first draw, name the commitment (the players record it
            # and send their seeds meanwhile); the first update of each stream does too (_watch).
            _set_commitment(update, record.setup)
        return update


_K = TypeVar("_K")
_V = TypeVar("_V")


def _remember(cache: OrderedDict[_K, _V], key: _K, value: _V) -> None:
    """Keep ``value`` under ``key``, forgetting the oldest entry past :data:`VIEW_CACHE_SIZE`."""
    cache[key] = value
    if len(cache) > VIEW_CACHE_SIZE:
        cache.popitem(last=False)


def _set_commitment(update: rules_pb2.MatchUpdate, setup: MatchSetup) -> None:
    """Name the match's fairness commitment and its version in ``update`` (nothing without chance)."""
    if setup.fairness_commitment:
        update.fairness_commitment = setup.fairness_commitment
        update.fairness_version = setup.fairness_version


def _with_commitment(update: rules_pb2.MatchUpdate, setup: MatchSetup) -> rules_pb2.MatchUpdate:
    """``update`` naming the commitment: itself when it does (or there is none), else a copy (updates
    are shared between watchers and answers, so the cached one is left alone)."""
    if update.fairness_commitment or not setup.fairness_commitment:
        return update
    named = rules_pb2.MatchUpdate()
    named.CopyFrom(update)
    _set_commitment(named, setup)
    return named


def _draw_proto(request: ChanceRequest, values: tuple[int, ...]) -> rules_pb2.FairnessDraw:
    return rules_pb2.FairnessDraw(
        stream=request.stream,
        index=request.index,
        kind=request.kind,
        count=request.count,
        bound=request.bound,
        values=values,
    )


def _viewer(request: rules_pb2.WatchRequest | rules_pb2.GetMatchRequest, actor: MatchActor) -> int | None:
    if request.WhichOneof("viewer") == "spectator":  # one of the two is set: the contract's rules
        return None
    if request.seat >= len(actor.record.setup.players):
        raise invalid_field("seat", f"must be 0-{len(actor.record.setup.players) - 1}, got {request.seat}")
    return request.seat


def _seats(setup: MatchSetup) -> list[rules_pb2.SeatAssignment]:
    return [rules_pb2.SeatAssignment(seat=i, player_id=p) for i, p in enumerate(setup.players)]


def _time_control(proto: rules_pb2.TimeControl) -> TimeControl:
    try:
        return TimeControl(
            base_ms=proto.base_ms,
            increment_ms=proto.increment_ms,
            increment_within_ms=proto.increment_within_ms or None,
            cap_ms=proto.cap_ms or None,
            periods=proto.periods,
            period_ms=proto.period_ms,
        )
    except InvalidTimeControlError as error:
        raise InvalidArgument(
            f"time_control: {error}", reason=ErrorReason.ERROR_REASON_TIME_CONTROL_NOT_OFFERED
        ) from None


def _time_control_proto(control: TimeControl) -> rules_pb2.TimeControl:
    return rules_pb2.TimeControl(
        base_ms=control.base_ms,
        increment_ms=control.increment_ms,
        increment_within_ms=control.increment_within_ms or 0,
        cap_ms=control.cap_ms or 0,
        periods=control.periods,
        period_ms=control.period_ms,
    )


def _stood_in(record: MatchRecord) -> list[int]:
    return [seat for seat, stood in enumerate(record.stood_in) if stood]
