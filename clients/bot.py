"""Bots: sign in, find a game (an open table of the family, else a new one), play it to the end.

:func:`run_bot` is one game for a signed-in :class:`~clients.player.PlayerSession`; :func:`play_match`
plays a match the player is seated in with a strategy of the family's client module
(:mod:`clients.families`). Both return a :class:`GameResult`.

A game can be capped (``max_plies``): once it is that long, the bot to move resigns, unless it is ahead
(the family's :meth:`~clients.families.FamilyClient.advantage`), in which case it plays one more move
and leaves the resignation to its opponent. Bots move as fast as the gateway lets them; its rate limit
is waited out by the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field

import grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2

from clients.families import (
    FamilyClient,
    Strategy,
    family,
    plies_played,
    resign_action,
    result_line,
    seat_names,
    with_capped_bonus,
)
from clients.player import GatewayError, PlayerSession, is_over

__all__ = ["BotSettings", "GameResult", "Stalled", "find_match", "play_match", "run_bot"]

Say = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class BotSettings:
    """What game a bot looks for and how it plays."""

    family: str = "chess"
    strategy: str = "random"
    minutes: float | None = None
    """Main time per player; ``None``: the family's shortest lobby clock."""
    increment_s: float = 0
    bonus_within_s: float = 0
    """A capped-bonus clock (seed 002's backgammon): the increment only for a move within this (0: every
    move)."""
    cap_s: float = 0
    """With a capped bonus: the clock never rises above this (0: no cap)."""
    stand_in: bool = False
    """Tables with seed 002's stand-in instead of the forfeit rule (backgammon, gin)."""
    options: Mapping[str, str] = field(default_factory=dict)
    """The family's option settings (``{"ruleset": "fide"}``)."""
    entry_fee_minor: int = 0
    currency: str = "USD"
    max_plies: int | None = None
    """Resign once the game is this long (see the module docstring); ``None``: play to the end."""
    move_delay_s: float = 0.0
    seed: int | None = None
    """Seeds the strategy's random choices (``None``: unpredictable)."""
    wait_timeout_s: float | None = None
    """How long to wait for an opponent at a new table (``None``: forever); the table is then cancelled."""

    def time_control(self, fam: FamilyClient) -> rules_pb2.TimeControl:
        """The clock the bot's tables have."""
        control = fam.time_control(self.minutes or fam.quick_minutes, self.increment_s)
        return with_capped_bonus(control, self.bonus_within_s, self.cap_s)

    @property
    def disconnect_policy(self) -> mm.DisconnectPolicy.ValueType:
        """The policy of the bot's tables (as a table shows it: never unspecified)."""
        return mm.DISCONNECT_POLICY_STAND_IN if self.stand_in else mm.DISCONNECT_POLICY_FORFEIT


@dataclass(frozen=True, slots=True)
class GameResult:
    """How a bot's (or a player's) match ended."""

    match_id: str
    family: str
    seat: int
    names: Mapping[int, str]
    result: rules_pb2.Result
    plies: int
    """The game's length in moves."""
    capped_at: int | None
    """The ply cap, when a bot resigned because of it (by this bot or its opponent)."""
    seconds: float

    @property
    def won(self) -> bool | None:
        """``True`` won, ``False`` lost, ``None`` drawn or aborted."""
        if not self.result.HasField("winner"):
            return None
        return self.result.winner == self.seat

    def line(self, *, with_id: bool = True) -> str:
        """One line: the result, its reason, the length, and the cap when it ended the game."""
        fam = family(self.family)
        ended = result_line(self.result, fam, self.names)
        text = f"{ended} ({self.plies} plies, {self.seconds:.1f} s)"
        if with_id:
            text = f"{self.match_id}: {text}"
        if self.capped_at is not None:
            text += f" [the {self.capped_at}-ply cap: the bot to move resigned]"
        return text


async def _match_info(session: PlayerSession, match_id: str) -> tuple[dict[int, str], int]:
    """The seats' players and the caller's seat, waiting a little for a match still being created."""
    info = await session.get_match(match_id, wait_s=session.retry.creation_wait_s)
    if not info.HasField("seat"):
        raise GatewayError(grpc.StatusCode.PERMISSION_DENIED, f"you are not seated in match {match_id}")
    return seat_names(info.seats), info.seat


async def play_match(
    session: PlayerSession,
    match_id: str,
    strategy: Strategy,
    fam: FamilyClient,
    *,
    max_plies: int | None = None,
    move_delay_s: float = 0.0,
    stall_s: float | None = None,
    on_update: Callable[[rules_pb2.MatchUpdate], None] | None = None,
) -> GameResult:
    """Play ``match_id`` with ``strategy`` until it ends; return the result.

    ``stall_s``: give up (:class:`Stalled`) when no update comes for that long (bots playing bots
    expect one at once; ``None`` waits for ever, as a human opponent may think)."""
    started = time.monotonic()
    names, seat = await _match_info(session, match_id)
    counted = 0
    acted_at = 0
    capped_at: int | None = None
    final: rules_pb2.MatchUpdate | None = None
    async for update in _paced(session.watch_match(match_id), stall_s):
        if update.event.kind == "action":
            counted += 1
        if on_update is not None:
            on_update(update)
        if is_over(update):
            final = update
            break
        if update.sequence < acted_at or not fam.should_act(update, seat):
            continue  # an update from before our last action, or nothing for us to do
        plies = plies_played(update, fam, counted)
        action: rules_pb2.Action | None
        if (
            max_plies is not None
            and plies >= max_plies
            and _should_resign(fam, update, seat, plies, max_plies)
        ):
            action = resign_action()
        else:
            action = strategy(update, seat)
        if action is None:
            continue
        if move_delay_s > 0:
            await asyncio.sleep(move_delay_s)
        try:
            reply = await session.submit(match_id, action)
        except GatewayError as error:
            if error.code == grpc.StatusCode.FAILED_PRECONDITION:
                continue  # the match moved on meanwhile (it ended, or the update was stale)
            raise
        acted_at = reply.sequence
    if final is None:  # the stream ended without the last update: ask for it
        final = (await session.get_match(match_id)).update
    plies = plies_played(final, fam, counted)
    if (
        max_plies is not None
        and final.result.termination == rules_pb2.TERMINATION_RESIGNATION
        and plies >= max_plies
    ):
        capped_at = max_plies
    return GameResult(
        match_id=match_id,
        family=fam.name,
        seat=seat,
        names=names,
        result=final.result,
        plies=plies,
        capped_at=capped_at,
        seconds=time.monotonic() - started,
    )


class Stalled(Exception):
    """A match sent no update for longer than the bot was willing to wait."""


async def _paced(
    updates: AsyncIterable[rules_pb2.MatchUpdate], stall_s: float | None
) -> AsyncIterator[rules_pb2.MatchUpdate]:
    """``updates``, raising :class:`Stalled` when the next one takes more than ``stall_s`` seconds."""
    iterator = aiter(updates)
    seen = rules_pb2.MatchUpdate()
    while True:
        try:
            update = await asyncio.wait_for(anext(iterator), stall_s)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise Stalled(
                f"no update for {stall_s:g} s; the match is stuck at sequence {seen.sequence} "
                f"(last event: {seen.event.kind or 'none'}, status "
                f"{rules_pb2.MatchStatus.Name(seen.status).removeprefix('MATCH_STATUS_').lower()})"
            ) from None
        seen = update
        yield update


def _should_resign(fam: FamilyClient, update: rules_pb2.MatchUpdate, seat: int, plies: int, cap: int) -> bool:
    """At the cap the bot to move resigns unless it is ahead; one move later it resigns regardless."""
    advantage = fam.advantage(update, seat)
    return advantage is None or advantage <= 0 or plies > cap


def _fits(table: mm.Table, settings: BotSettings, fam: FamilyClient, me: str) -> bool:
    """Whether ``table`` is the game the bot looks for (same clock, options and fee), not its own."""
    return (
        table.creator_id != me
        and table.time_control == settings.time_control(fam)
        and table.disconnect_policy == settings.disconnect_policy
        and table.options == fam.options(settings.options)
        and table.entry_fee_minor == settings.entry_fee_minor
        and (not table.entry_fee_minor or table.currency == settings.currency)
    )


async def find_match(session: PlayerSession, settings: BotSettings, *, say: Say = _quiet) -> mm.MatchReady:
    """Join an open table that fits ``settings``; when there is none, open one (or reuse the player's
    own open table) and wait for an opponent. Returns the match once it exists."""
    fam = family(settings.family)
    me = session.player_id or (await session.whoami()).player_id
    control = settings.time_control(fam)
    options = fam.options(settings.options)
    async with session.lobby() as lobby:
        tables = await session.list_tables(fam.name, base_ms=control.base_ms)
        for table in tables:
            if not _fits(table, settings, fam, me):
                continue
            try:
                joined = await session.join_table(table.table_id)
            except GatewayError as error:
                if error.code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
                    continue  # taken by someone else meanwhile
                raise
            say(f"joined table {joined.table_id} of {table.creator_id}")
            if joined.status == mm.TABLE_STATUS_PLAYING and joined.match_id:
                return mm.MatchReady(
                    match_id=joined.match_id,
                    family=joined.family,
                    seat=1,
                    opponent_id=table.creator_id,
                    table_id=joined.table_id,
                )
            return await lobby.match_ready(table_id=joined.table_id)
        own = next((t for t in tables if t.creator_id == me and t.status == mm.TABLE_STATUS_OPEN), None)
        if own is not None:
            table = own
            say(f"waiting at my open table {table.table_id}")
        else:
            table = await session.create_table(
                fam.name,
                options=options,
                time_control=control,
                entry_fee_minor=settings.entry_fee_minor,
                currency=settings.currency,
                disconnect_policy=settings.disconnect_policy,
            )
            say(f"created table {table.table_id}; waiting for an opponent")
        try:
            async with asyncio.timeout(settings.wait_timeout_s):
                return await lobby.match_ready(table_id=table.table_id)
        except (TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(GatewayError):
                await session.leave_table(table.table_id)
            raise


async def run_bot(session: PlayerSession, settings: BotSettings, *, say: Say = _quiet) -> GameResult:
    """One game: find a match (:func:`find_match`) and play it (:func:`play_match`)."""
    fam = family(settings.family)
    strategy = fam.strategy(settings.strategy, random.Random(settings.seed))
    ready = await find_match(session, settings, say=say)
    say(
        f"match {ready.match_id}: {session.player_id} plays {fam.seat_label(ready.seat)} "
        f"({settings.strategy}) against {ready.opponent_id}"
    )
    return await play_match(
        session,
        ready.match_id,
        strategy,
        fam,
        max_plies=settings.max_plies,
        move_delay_s=settings.move_delay_s,
    )
