"""Matchmaking's state in the database: tables, who is busy, the queue, matches, ratings and formations.

Every rule that matters under concurrency is enforced by the database, not by a check-then-act in
memory: a player is busy at most once (``mm_activity``'s primary key), the last seat of a table is taken
by a conditional update (exactly one joiner wins), and a pairing deletes both queue rows or neither.

Writes go through a :class:`GroupCommitter`: the writes of concurrent calls share one transaction and one
durable commit, and each call returns only once the commit holding its write has. Each write is one unit
of work that only reads and writes the database (so the committer may run it again, alone, after a
rollback: a refusal raised by one unit fails that unit only); whatever else a call does (events, memory)
happens after its unit is committed. The units of one transaction run one after another, each seeing the
writes of those before it, exactly as if each had a transaction of its own in that order. Units and
reads are synchronous statements: on SQLite a batch is one trip to the committer's writer thread, and
reads join the batches there (:meth:`GroupCommitter.read`) instead of making several trips each through
the async driver; on PostgreSQL reads run on a pooled connection of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from libs.persistence import Database
from libs.persistence.group_commit import GroupCommitter
from libs.persistence.schema import (
    mm_activity,
    mm_formations,
    mm_leases,
    mm_matches,
    mm_queue,
    mm_rating_changes,
    mm_ratings,
    mm_tables,
)
from libs.ratings import INITIAL_RATING, PlayerRating, rate
from libs.runtime.errors import (
    AlreadyExists,
    ErrorReason,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unavailable,
)

T = TypeVar("T")
MAX_FORMATIONS = 50
"""The most formations one player may keep (a new name past it is refused; replacing one is not)."""
SHUTTING_DOWN = "matchmaking is shutting down and takes no more changes; try again"
"""Why a write is refused (``UNAVAILABLE``) once the store is closed."""
FORFEIT = "forfeit"
"""``mm_tables.disconnect_policy`` and ``mm_matches.disconnect_policy`` for the platform's forfeit rule (the
column's server default: every row written before the column existed, migration 0010)."""
STAND_IN = "stand_in"
"""The same columns for seed 002's stand-in policy."""
DISCONNECT_POLICIES = frozenset({FORFEIT, STAND_IN})
"""Every value those columns hold (``services.matchmaking.families`` maps them to ``DisconnectPolicy``)."""


def _check_policy(row: dict[str, Any]) -> None:
    """A table or match row must say its disconnect policy, one of :data:`DISCONNECT_POLICIES` (a caller's
    bug otherwise: never left to the column's default, which is for the rows of before)."""
    policy = row.get("disconnect_policy")
    if policy not in DISCONNECT_POLICIES:
        raise ValueError(
            f"row {row.get('table_id') or row.get('match_id')} has disconnect_policy {policy!r}, "
            f"not one of {sorted(DISCONNECT_POLICIES)}"
        )


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease as one replica holds it: the fencing token of the writes it makes as the lease's holder."""

    name: str
    holder: str
    epoch: int


class LeaseLost(Unavailable):
    """A write made under a lease whose epoch is no longer the lease's (another replica took it over):
    refused, nothing of it committed. (Not the committer's ``Fenced``: only this unit fails, not the other
    calls' units sharing its transaction.)"""

    def __init__(self, lease: Lease) -> None:
        super().__init__(
            f"matchmaking lease {lease.name} epoch {lease.epoch} was taken over by another replica; "
            "nothing was changed",
            reason=ErrorReason.ERROR_REASON_SHARD_NOT_SERVING,
        )


@dataclass(frozen=True, slots=True)
class RatingChange:
    player_id: str
    family: str
    match_id: str
    before: int
    after: int


class MatchmakingStore:
    """The durable side of matchmaking."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.committer = GroupCommitter(db, closed_reason=SHUTTING_DOWN)
        """Runs every write and read (its ``batches`` and ``units`` count commits and the units they
        held: writes, and on SQLite reads too); once closed it refuses writes with ``Unavailable``
        (``CommitterClosed``) and :data:`SHUTTING_DOWN`."""

    async def close(self) -> None:
        """Commit the writes queued, then stop the writer: later writes are refused with ``Unavailable``."""
        await self.committer.close()

    async def _write(self, work: Callable[[Connection], T]) -> T:
        """``work(connection)`` in the next group transaction; its result once that is committed."""
        return await self.committer.run_sync(work)

    async def _alone(self, work: Callable[[Connection], T]) -> T:
        """``work(connection)`` in a transaction of its own, outside the group commit: the lease's
        statements, so that they never wait behind, nor hold locks within, a batch of other calls'
        writes."""
        async with self._db.begin() as conn:
            result: T = await conn.run_sync(work)
        return result

    async def _read(self, work: Callable[[Connection], T]) -> T:
        """``work(connection)``, reads only (:meth:`GroupCommitter.read`)."""
        return await self.committer.read(work)

    # -- tables --------------------------------------------------------------------------------------

    async def create_table(self, row: dict[str, Any]) -> dict[str, Any]:
        """Open a table (the creator becomes busy with it); the same creator and key return the original.
        ``row`` has every column of ``mm_tables``, its ``disconnect_policy`` included."""
        _check_policy(row)
        found = await self._read(
            lambda conn: conn.execute(
                select(mm_tables).where(
                    mm_tables.c.creator_id == row["creator_id"],
                    mm_tables.c.idempotency_key == row["idempotency_key"],
                )
            ).first()
        )
        if found is not None:
            return dict(found._mapping)

        def work(conn: Connection) -> None:
            self._busy(conn, row["creator_id"], "table", row["table_id"], row["created_at_ms"])
            conn.execute(insert(mm_tables).values(row))

        try:
            await self._write(work)
        except IntegrityError:
            raise AlreadyExists(
                "a table with this idempotency key exists already",
                reason=ErrorReason.ERROR_REASON_IDEMPOTENCY_KEY_REUSED,
            ) from None
        return row

    async def table(self, table_id: str) -> dict[str, Any]:
        found = await self._read(
            lambda conn: conn.execute(select(mm_tables).where(mm_tables.c.table_id == table_id)).first()
        )
        if found is None:
            raise NotFound(f"no table {table_id}", reason=ErrorReason.ERROR_REASON_TABLE_NOT_FOUND)
        return dict(found._mapping)

    async def open_tables(
        self,
        family: str,
        max_fee: int,
        currency: str,
        *,
        free_only: bool = False,
        disconnect_policy: str = "",
    ) -> list[dict[str, Any]]:
        """The public open tables of a family, oldest first; ``max_fee`` 0, ``currency`` "" and
        ``disconnect_policy`` "" mean any."""
        query = select(mm_tables).where(
            mm_tables.c.family == family, mm_tables.c.status == "open", mm_tables.c.visibility == "public"
        )
        if disconnect_policy:
            query = query.where(mm_tables.c.disconnect_policy == disconnect_policy)
        if free_only:
            query = query.where(mm_tables.c.entry_fee_minor == 0)
        elif max_fee:
            query = query.where(mm_tables.c.entry_fee_minor <= max_fee)
        if currency:
            query = query.where(mm_tables.c.currency == currency)
        query = query.order_by(mm_tables.c.created_at_ms)
        return await self._read(lambda conn: [dict(r._mapping) for r in conn.execute(query)])

    async def check_join(self, table_id: str, player_id: str) -> dict[str, Any]:
        """The table ``player_id`` may join, or the reason they may not (``NotFound`` or
        ``FailedPrecondition``): run before a match id is minted or fairness is asked for a commitment, so
        a refused join leaves nothing behind. :meth:`join_table` checks again in its transaction."""

        def read(conn: Connection) -> dict[str, Any]:
            table = self._joinable(conn, table_id, player_id)
            self._check_free(conn, player_id)
            return dict(table._mapping)

        return await self._read(read)

    async def join_table(self, table_id: str, player_id: str, match: dict[str, Any]) -> dict[str, Any]:
        """Take the free seat: exactly one of several concurrent joiners wins; the match row is written
        (``match`` carries the table's disconnect policy, as :meth:`Matchmaker.new_match_row` copies it).
        The table as the join left it."""
        _check_policy(match)

        def work(conn: Connection) -> dict[str, Any]:
            table = self._joinable(conn, table_id, player_id)
            self._busy(conn, player_id, "match", match["match_id"], match["created_at_ms"])
            taken = conn.execute(
                update(mm_tables)
                .where(mm_tables.c.table_id == table_id, mm_tables.c.status == "open")
                .values(
                    status="starting",
                    joiner_id=player_id,
                    match_id=match["match_id"],
                    updated_at_ms=match["created_at_ms"],
                )
            )
            if taken.rowcount != 1:
                raise FailedPrecondition(
                    f"table {table_id} was just taken by someone else",
                    reason=ErrorReason.ERROR_REASON_TABLE_NOT_OPEN,
                )
            conn.execute(
                update(mm_activity)
                .where(mm_activity.c.player_id == table.creator_id)
                .values(kind="match", ref=match["match_id"])
            )
            conn.execute(insert(mm_matches).values(match))
            return {
                **table._mapping,
                "status": "starting",
                "joiner_id": player_id,
                "match_id": match["match_id"],
                "updated_at_ms": match["created_at_ms"],
            }

        try:
            return await self._write(work)
        except IntegrityError:
            raise FailedPrecondition(
                f"table {table_id} was just taken by someone else",
                reason=ErrorReason.ERROR_REASON_TABLE_NOT_OPEN,
            ) from None

    @staticmethod
    def _joinable(conn: Connection, table_id: str, player_id: str) -> Any:
        table = (conn.execute(select(mm_tables).where(mm_tables.c.table_id == table_id))).first()
        if table is None:
            raise NotFound(f"no table {table_id}", reason=ErrorReason.ERROR_REASON_TABLE_NOT_FOUND)
        if table.creator_id == player_id:
            raise FailedPrecondition(
                "you cannot join your own table", reason=ErrorReason.ERROR_REASON_PLAYER_BUSY
            )
        if table.status != "open":
            raise FailedPrecondition(
                f"table {table_id} is not open (it is {table.status})",
                reason=ErrorReason.ERROR_REASON_TABLE_NOT_OPEN,
            )
        return table

    async def cancel_table(self, table_id: str, player_id: str, now_ms: int) -> dict[str, Any]:
        """The creator leaves their open table (at ``now_ms``); the table as that left it."""

        def work(conn: Connection) -> dict[str, Any]:
            table = (conn.execute(select(mm_tables).where(mm_tables.c.table_id == table_id))).first()
            if table is None:
                raise NotFound(f"no table {table_id}", reason=ErrorReason.ERROR_REASON_TABLE_NOT_FOUND)
            if table.creator_id != player_id:
                raise FailedPrecondition(
                    "only the player at an open table can leave it",
                    reason=ErrorReason.ERROR_REASON_NOT_TABLE_OWNER,
                )
            cancelled = conn.execute(
                update(mm_tables)
                .where(mm_tables.c.table_id == table_id, mm_tables.c.status == "open")
                .values(status="cancelled", updated_at_ms=now_ms)
            )
            if cancelled.rowcount != 1:
                raise FailedPrecondition(
                    f"table {table_id} has filled already; its match is on",
                    reason=ErrorReason.ERROR_REASON_TABLE_NOT_OPEN,
                )
            conn.execute(
                delete(mm_activity).where(mm_activity.c.player_id == player_id, mm_activity.c.ref == table_id)
            )
            return {**table._mapping, "status": "cancelled", "updated_at_ms": now_ms}

        return await self._write(work)

    # -- the queue -----------------------------------------------------------------------------------

    async def enter_queue(self, row: dict[str, Any]) -> None:
        def work(conn: Connection) -> None:
            self._busy(conn, row["player_id"], "queue", row["pool"], row["entered_at_ms"])
            conn.execute(insert(mm_queue).values(row))

        await self._write(work)

    async def leave_queue(self, player_id: str) -> bool:
        def work(conn: Connection) -> bool:
            left = conn.execute(delete(mm_queue).where(mm_queue.c.player_id == player_id))
            conn.execute(
                delete(mm_activity).where(mm_activity.c.player_id == player_id, mm_activity.c.kind == "queue")
            )
            return bool(left.rowcount)

        return await self._write(work)

    async def queued(self) -> list[dict[str, Any]]:
        return await self._read(lambda conn: [dict(r._mapping) for r in conn.execute(select(mm_queue))])

    async def still_queued(self, player_ids: list[str]) -> set[str]:
        """Which of ``player_ids`` still have their queue entry."""
        query = select(mm_queue.c.player_id).where(mm_queue.c.player_id.in_(player_ids))
        return await self._read(lambda conn: {row.player_id for row in conn.execute(query)})

    async def pair(self, first: str, second: str, match: dict[str, Any]) -> bool:
        """Take both players out of the queue into a new match, or neither (one left meanwhile)."""
        return (await self.pair_many([(first, second, match)]))[0]

    async def pair_many(
        self, pairs: list[tuple[str, str, dict[str, Any]]], *, lease: Lease | None = None
    ) -> list[bool]:
        """Take each pair of players out of the queue into its new match, all in one transaction: a pair
        whose two queue rows are both there is made; one where either player left meanwhile is not, and
        loses nothing. Whether each pair was made, in order. (The queue rows are locked first, so a
        concurrent ``leave_queue`` either comes before, and its pair is not made, or after, and finds
        nothing to leave.) Each match row says its disconnect policy (the pair's queue entries')."""
        for _, _, match in pairs:
            _check_policy(match)
        players = [player for first, second, _ in pairs for player in (first, second)]

        def work(conn: Connection) -> list[bool]:
            if lease is not None:
                self._fence(conn, lease)
            rows = conn.execute(
                select(mm_queue.c.player_id).where(mm_queue.c.player_id.in_(players)).with_for_update()
            )
            present = {row.player_id for row in rows}
            made = [first in present and second in present for first, second, _ in pairs]
            chosen = [item for item, ok in zip(pairs, made, strict=True) if ok]
            if not chosen:
                return made
            taking = [player for first, second, _ in chosen for player in (first, second)]
            taken = conn.execute(delete(mm_queue).where(mm_queue.c.player_id.in_(taking)))
            if taken.rowcount != len(taking):  # impossible under the lock; never make half a pairing
                raise RuntimeError(f"took {taken.rowcount} queue rows for {len(taking)} players")
            conn.execute(
                update(mm_activity)
                .where(mm_activity.c.player_id == bindparam("who"))
                .values(kind="match", ref=bindparam("match_id")),
                [
                    {"who": p, "match_id": match["match_id"]}
                    for first, second, match in chosen
                    for p in (first, second)
                ],
            )
            conn.execute(insert(mm_matches), [match for _, _, match in chosen])
            return made

        return await self._write(work)

    # -- leases (several replicas, PostgreSQL) -------------------------------------------------------

    @staticmethod
    def _fence(conn: Connection, lease: Lease) -> None:
        """The first statement of a write made as ``lease``'s holder: lock the lease row on the condition
        that its epoch is still ``lease.epoch`` (a takeover, which updates that row, then waits for this
        transaction, or came before and this one is refused), or raise :class:`LeaseLost`."""
        held = conn.execute(
            update(mm_leases)
            .where(
                mm_leases.c.name == lease.name,
                mm_leases.c.epoch == lease.epoch,
                mm_leases.c.holder == lease.holder,
            )
            .values(epoch=mm_leases.c.epoch)
        )
        if held.rowcount != 1:
            raise LeaseLost(lease)

    async def claim_lease(self, name: str, holder: str, now_ms: int, lease_ms: int) -> Lease | None:
        """Take lease ``name`` for ``holder`` if nobody holds it or its holder let it expire (its epoch is
        then incremented: the previous holder's writes are refused from now on); ``None`` while another
        holder's lease still runs."""

        def work(conn: Connection) -> Lease | None:
            row = conn.execute(select(mm_leases).where(mm_leases.c.name == name).with_for_update()).first()
            values = {"holder": holder, "expires_at_ms": now_ms + lease_ms}
            if row is None:
                conn.execute(insert(mm_leases).values(name=name, epoch=1, **values))
                return Lease(name, holder, 1)
            if row.holder != holder and row.expires_at_ms >= now_ms:
                return None
            epoch = int(row.epoch) + 1
            conn.execute(
                update(mm_leases)
                .where(mm_leases.c.name == name, mm_leases.c.epoch == row.epoch)
                .values(epoch=epoch, **values)
            )
            return Lease(name, holder, epoch)

        try:
            return await self._alone(work)
        except IntegrityError:  # another replica inserted the first row meanwhile: it holds the lease
            return None

    def _held(self, lease: Lease) -> Any:
        return update(mm_leases).where(
            mm_leases.c.name == lease.name,
            mm_leases.c.epoch == lease.epoch,
            mm_leases.c.holder == lease.holder,
        )

    async def renew_lease(self, lease: Lease, now_ms: int, lease_ms: int) -> bool:
        """Extend ``lease`` on the condition that its epoch is still the lease's; whether it was."""
        renew = self._held(lease).values(expires_at_ms=now_ms + lease_ms)
        return bool(await self._alone(lambda conn: conn.execute(renew).rowcount == 1))

    async def release_lease(self, lease: Lease, now_ms: int) -> None:
        """Let ``lease`` go at once (a clean shutdown): another replica may take it without waiting."""
        release = self._held(lease).values(expires_at_ms=now_ms - 1)
        await self._alone(lambda conn: conn.execute(release))

    # -- matches -------------------------------------------------------------------------------------

    async def matches_starting(self, created_before_ms: int | None = None) -> list[dict[str, Any]]:
        query = select(mm_matches).where(mm_matches.c.status == "starting")
        if created_before_ms is not None:
            query = query.where(mm_matches.c.created_at_ms < created_before_ms)
        return await self._read(lambda conn: [dict(r._mapping) for r in conn.execute(query)])

    async def mark_playing(self, match: dict[str, Any], now_ms: int) -> None:
        await self.mark_playing_many([match], now_ms)

    async def mark_playing_many(self, matches: list[dict[str, Any]], now_ms: int) -> None:
        """The matches exist on their rules shards now (``now_ms``): they (and their tables) are
        ``playing``."""
        tables = [match["table_id"] for match in matches if match["table_id"]]

        def work(conn: Connection) -> None:
            conn.execute(
                update(mm_matches)
                .where(
                    mm_matches.c.match_id.in_([m["match_id"] for m in matches]),
                    mm_matches.c.status == "starting",
                )
                .values(status="playing")
            )
            if tables:
                conn.execute(
                    update(mm_tables)
                    .where(mm_tables.c.table_id.in_(tables), mm_tables.c.status == "starting")
                    .values(status="playing", updated_at_ms=now_ms)
                )

        await self._write(work)

    async def record_result(
        self,
        match_id: str,
        result: bytes,
        winner: int | None,
        aborted: bool,
        now_ms: int,
        *,
        rated: bool = True,
    ) -> tuple[dict[str, Any], list[RatingChange]] | None:
        """Record the result of a match matchmaking made: close it, free both players and update both
        ratings, once (not for an abort, nor when ``rated`` is false: a result whose stakes are refunded,
        docs/matchmaking.md "Results"). ``None`` when this very result was recorded before (a retry:
        nothing changes).

        :raises NotFound: matchmaking made no match ``match_id`` (it holds no record of it).
        :raises InvalidArgument: ``winner`` is not a seat of the match.
        :raises FailedPrecondition: a different result was recorded before; nothing changes. (Results are
            serialized deterministically, and a result has no map field: the same result is the same
            bytes.)
        """

        def work(conn: Connection) -> tuple[dict[str, Any], list[RatingChange]] | None:
            found = (
                conn.execute(select(mm_matches).where(mm_matches.c.match_id == match_id).with_for_update())
            ).first()
            if found is None:
                raise NotFound(
                    f"matchmaking knows no match {match_id}", reason=ErrorReason.ERROR_REASON_MATCH_NOT_FOUND
                )
            match = dict(found._mapping)
            players = [match["player0"], match["player1"]]
            if winner is not None and not 0 <= winner < len(players):
                raise InvalidArgument(
                    f"winner {winner} is not a seat of match {match_id} "
                    f"(seat 0: {players[0]}, seat 1: {players[1]})",
                    reason=ErrorReason.ERROR_REASON_INVALID_REQUEST,
                )
            if match["result"] is not None:
                if bytes(match["result"]) == result:
                    return None  # a retry of the result recorded: answered, nothing changes
                raise FailedPrecondition(
                    f"match {match_id}'s result is already recorded; a different result is refused "
                    "and nothing was changed",
                    reason=ErrorReason.ERROR_REASON_WRONG_STATE,
                )
            status = "aborted" if aborted else "finished"
            conn.execute(
                update(mm_matches)
                .where(mm_matches.c.match_id == match_id)
                .values(result=result, status=status, ended_at_ms=now_ms)
            )
            if match["table_id"]:
                conn.execute(
                    update(mm_tables)
                    .where(mm_tables.c.table_id == match["table_id"])
                    .values(status=status, updated_at_ms=now_ms)
                )
            conn.execute(
                delete(mm_activity).where(mm_activity.c.player_id.in_(players), mm_activity.c.ref == match_id)
            )
            changes: list[RatingChange] = []
            if rated and not aborted:
                changes = self._rate(conn, match, winner, now_ms)
            return match, changes

        return await self._write(work)

    def _rate(
        self, conn: Connection, match: dict[str, Any], winner: int | None, now_ms: int
    ) -> list[RatingChange]:
        family = match["family"]
        players = (match["player0"], match["player1"])
        before = [self._rating(conn, p, family, lock=True) for p in players]
        score0 = 0.5 if winner is None else (1.0 if winner == 0 else 0.0)
        after = rate(before[0], before[1], score0)
        changes = []
        for player, old, new in zip(players, before, after, strict=True):
            exists = conn.scalar(
                select(func.count())
                .select_from(mm_ratings)
                .where(mm_ratings.c.player_id == player, mm_ratings.c.family == family)
            )
            values = {"rating": new.rating, "games": new.games, "peak": new.peak}
            if exists:
                conn.execute(
                    update(mm_ratings)
                    .where(mm_ratings.c.player_id == player, mm_ratings.c.family == family)
                    .values(values)
                )
            else:
                conn.execute(insert(mm_ratings).values(player_id=player, family=family, **values))
            conn.execute(
                insert(mm_rating_changes).values(
                    match_id=match["match_id"],
                    player_id=player,
                    family=family,
                    before=old.rating,
                    after=new.rating,
                    at_ms=now_ms,
                )
            )
            changes.append(RatingChange(player, family, match["match_id"], old.rating, new.rating))
        return changes

    # -- ratings and history -------------------------------------------------------------------------

    async def rating(self, player_id: str, family: str) -> PlayerRating:
        return await self._read(lambda conn: self._rating(conn, player_id, family))

    def _rating(self, conn: Connection, player_id: str, family: str, lock: bool = False) -> PlayerRating:
        query = select(mm_ratings).where(mm_ratings.c.player_id == player_id, mm_ratings.c.family == family)
        if lock:
            query = query.with_for_update()
        found = (conn.execute(query)).first()
        if found is None:
            return PlayerRating(INITIAL_RATING, 0)
        return PlayerRating(found.rating, found.games, found.peak)

    async def ratings(self, player_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:

        def read(conn: Connection) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            current = conn.execute(
                select(mm_ratings).where(mm_ratings.c.player_id == player_id).order_by(mm_ratings.c.family)
            )
            history = conn.execute(
                select(mm_rating_changes)
                .where(mm_rating_changes.c.player_id == player_id)
                .order_by(mm_rating_changes.c.at_ms, mm_rating_changes.c.match_id)
            )
            return [dict(r._mapping) for r in current], [dict(r._mapping) for r in history]

        return await self._read(read)

    async def matches_of(self, player_id: str, family: str) -> list[dict[str, Any]]:
        query = select(mm_matches).where(
            (mm_matches.c.player0 == player_id) | (mm_matches.c.player1 == player_id)
        )
        if family:
            query = query.where(mm_matches.c.family == family)

        def read(conn: Connection) -> tuple[list[dict[str, Any]], dict[str, tuple[int, int]]]:
            matches = [
                dict(r._mapping) for r in conn.execute(query.order_by(mm_matches.c.created_at_ms.desc()))
            ]
            changes = conn.execute(
                select(mm_rating_changes).where(mm_rating_changes.c.player_id == player_id)
            )
            return matches, {c.match_id: (c.before, c.after) for c in changes}

        matches, by_match = await self._read(read)
        for match in matches:
            match["rating_change"] = by_match.get(match["match_id"])
        return matches

    async def recent_of(
        self, player_id: str, since_ms: int
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """What a replica that stopped hearing the others at ``since_ms`` tells ``player_id``'s streams
        (:meth:`Matchmaker.catch_up`): their tables still open or in play, or created or changed since,
        their matches in play made since, and their rating changes since (oldest first)."""
        seated = (mm_tables.c.creator_id == player_id) | (mm_tables.c.joiner_id == player_id)
        ended = select(mm_matches.c.match_id).where(mm_matches.c.ended_at_ms >= since_ms)
        tables = (
            select(mm_tables)
            .where(
                seated,
                mm_tables.c.status.in_(["open", "starting", "playing"])
                | (mm_tables.c.created_at_ms >= since_ms)
                | (mm_tables.c.updated_at_ms >= since_ms)
                | mm_tables.c.match_id.in_(ended),
            )
            .order_by(mm_tables.c.created_at_ms)
        )
        matches = select(mm_matches).where(
            (mm_matches.c.player0 == player_id) | (mm_matches.c.player1 == player_id),
            mm_matches.c.status == "playing",
            mm_matches.c.created_at_ms >= since_ms,
        )

        ratings = (
            select(mm_rating_changes)
            .where(mm_rating_changes.c.player_id == player_id, mm_rating_changes.c.at_ms >= since_ms)
            .order_by(mm_rating_changes.c.at_ms)
        )

        def read(conn: Connection) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
            return (
                [dict(r._mapping) for r in conn.execute(tables)],
                [dict(r._mapping) for r in conn.execute(matches)],
                [dict(r._mapping) for r in conn.execute(ratings)],
            )

        return await self._read(read)

    # -- formations ----------------------------------------------------------------------------------

    async def save_formation(
        self, player_id: str, name: str, text: str, now_ms: int
    ) -> tuple[dict[str, Any], bool]:
        """Store ``text`` (a checked formation, in its canonical text) as ``player_id``'s formation
        ``name``, replacing the one of that name; the row stored and whether it replaced one.

        :raises FailedPrecondition: the name is new and the player has :data:`MAX_FORMATIONS` already.
            (The count and the insert are one unit: the committer runs units one after another, so two
            saves at once cannot both take the last place.)
        """
        key = (mm_formations.c.player_id == player_id, mm_formations.c.name == name)

        def work(conn: Connection) -> tuple[dict[str, Any], bool]:
            found = conn.execute(select(mm_formations).where(*key).with_for_update()).first()
            if found is not None:
                conn.execute(update(mm_formations).where(*key).values(text=text, updated_at_ms=now_ms))
                return {**found._mapping, "text": text, "updated_at_ms": now_ms}, True
            kept = conn.scalar(
                select(func.count()).select_from(mm_formations).where(mm_formations.c.player_id == player_id)
            )
            if (kept or 0) >= MAX_FORMATIONS:
                raise FailedPrecondition(
                    f"you have {kept} saved formations, the most a player may keep: delete one, or save "
                    "under the name of one you have, to save this one",
                    reason=ErrorReason.ERROR_REASON_FORMATION_LIMIT_REACHED,
                    metadata={"limit": str(MAX_FORMATIONS)},
                )
            row = {
                "player_id": player_id,
                "name": name,
                "text": text,
                "created_at_ms": now_ms,
                "updated_at_ms": now_ms,
            }
            conn.execute(insert(mm_formations).values(row))
            return row, False

        try:
            return await self._write(work)
        except IntegrityError:  # another process inserted the same name meanwhile: replace it now
            return await self._write(work)

    async def formations(self, player_id: str) -> list[dict[str, Any]]:
        """``player_id``'s formations by name: ignoring case first, then in code point order (the same
        order on every database, whatever its collation)."""
        query = select(mm_formations).where(mm_formations.c.player_id == player_id)
        rows = await self._read(lambda conn: [dict(r._mapping) for r in conn.execute(query)])
        return sorted(rows, key=lambda row: (row["name"].casefold(), row["name"]))

    async def delete_formation(self, player_id: str, name: str) -> dict[str, Any]:
        """Remove ``player_id``'s formation ``name``; the row as it was.

        :raises NotFound: the player has no formation of that name.
        """
        key = (mm_formations.c.player_id == player_id, mm_formations.c.name == name)

        def work(conn: Connection) -> dict[str, Any]:
            found = conn.execute(select(mm_formations).where(*key).with_for_update()).first()
            if found is None or conn.execute(delete(mm_formations).where(*key)).rowcount != 1:
                raise NotFound(
                    f"you have no formation named {name!r}",
                    reason=ErrorReason.ERROR_REASON_FORMATION_NOT_FOUND,
                    metadata={"name": name},
                )
            return dict(found._mapping)

        return await self._write(work)

    # -- helpers -------------------------------------------------------------------------------------

    def _busy(self, conn: Connection, player_id: str, kind: str, ref: str, now_ms: int) -> None:
        self._check_free(conn, player_id)
        conn.execute(insert(mm_activity).values(player_id=player_id, kind=kind, ref=ref, since_ms=now_ms))

    @staticmethod
    def _check_free(conn: Connection, player_id: str) -> None:
        current = (conn.execute(select(mm_activity).where(mm_activity.c.player_id == player_id))).first()
        if current is not None:
            doing = {"table": "waiting at table", "queue": "in the queue", "match": "playing match"}[
                current.kind
            ]
            raise FailedPrecondition(
                f"player {player_id} is already {doing} {current.ref}",
                reason=ErrorReason.ERROR_REASON_PLAYER_BUSY,
            )
