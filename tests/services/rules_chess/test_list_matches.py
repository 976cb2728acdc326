"""``RulesService.ListMatches`` pages (AIP-158) over real gRPC on localhost, on SQLite and PostgreSQL:
page sizes, page tokens bound to their filter and shard, and keyset pages that stay consistent while
matches are created."""

from __future__ import annotations

import asyncio
import base64
import json

import grpc
import pytest
from skillclassics.rules.v1 import rules_pb2 as pb

from libs.clocks import TimeControl
from libs.match.model import EventKind, MatchEvent, MatchSetup
from libs.match.paging import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, PageScope, encode_token
from libs.match.store import MatchStore
from libs.persistence import Database
from tests.services.rules_chess.test_rules_chess_service import Stub, create, list_all, play
from tests.support import refused

INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT
LIVE, WAITING, FINISHED = pb.MATCH_STATUS_LIVE, pb.MATCH_STATUS_WAITING, pb.MATCH_STATUS_FINISHED


def request(
    *statuses: pb.MatchStatus.ValueType, page_size: int = 0, page_token: str = ""
) -> pb.ListMatchesRequest:
    return pb.ListMatchesRequest(statuses=statuses, page_size=page_size, page_token=page_token)


async def pages(stub: Stub, *statuses: pb.MatchStatus.ValueType, page_size: int) -> list[list[str]]:
    """The match ids of each page, from the first to the one without a next_page_token."""
    found: list[list[str]] = []
    token = ""
    while True:
        reply = await stub.ListMatches(request(*statuses, page_size=page_size, page_token=token))
        found.append([m.match_id for m in reply.matches])
        token = reply.next_page_token
        if not token:
            return found
        assert len(found) < 1_000, "the pages never end"


async def seed(url: str, match_ids: list[str]) -> None:
    """Matches written straight into the shard's tables (as CreateMatch commits them), many at once: for
    listings too long to create call by call."""
    db = Database(url)
    store = MatchStore(db, "chess", "0")
    try:
        await asyncio.gather(*(store.create(_created(match_id)) for match_id in match_ids))
    finally:
        await store.close()
        await db.dispose()


def _created(match_id: str) -> MatchEvent:
    setup = MatchSetup(
        match_id=match_id,
        family="chess",
        players=("alice", "bob"),
        options={},
        time_control=TimeControl(base_ms=60_000),
        fairness_commitment="",
        first_move_timeout_ms=60_000,
        disconnect_forfeit_ms=60_000,
        created_at_ms=1,
    )
    return MatchEvent(1, EventKind.CREATED, 1, setup.to_json(), None, f"create-{match_id}")


async def test_pages_cover_every_match_exactly_once_in_order(stub: Stub) -> None:
    made = sorted([await create(stub) for _ in range(7)])
    by_three = await pages(stub, page_size=3)
    assert by_three == [made[0:3], made[3:6], made[6:7]]
    assert await pages(stub, page_size=1) == [[match_id] for match_id in made]
    # A last page that is exactly full has no token: no empty page after it.
    assert await pages(stub, page_size=7) == [made]
    assert await pages(stub, page_size=0) == [made]  # the default (100) holds them all
    # page_size may change from page to page.
    first = await stub.ListMatches(request(page_size=2))
    rest = await stub.ListMatches(request(page_size=10, page_token=first.next_page_token))
    assert [m.match_id for m in (*first.matches, *rest.matches)] == made
    assert not rest.next_page_token


async def test_page_size_zero_is_the_default_and_larger_ones_are_capped(
    stub: Stub, database_url: str
) -> None:
    made = sorted(f"chess.0.bulk{i:05d}" for i in range(MAX_PAGE_SIZE + 1))
    await seed(database_url, made)
    default = await stub.ListMatches(request())  # what a caller that knows nothing of pages gets
    assert [m.match_id for m in default.matches] == made[:DEFAULT_PAGE_SIZE]
    assert default.next_page_token
    capped = await stub.ListMatches(request(page_size=MAX_PAGE_SIZE * 5))
    assert [m.match_id for m in capped.matches] == made[:MAX_PAGE_SIZE]
    last = await stub.ListMatches(request(page_size=2**31 - 1, page_token=capped.next_page_token))
    assert [m.match_id for m in last.matches] == made[MAX_PAGE_SIZE:]
    assert not last.next_page_token
    assert [m.match_id for m in await list_all(stub)] == made
    for summary in default.matches[:3]:
        assert (summary.status, summary.sequence) == (WAITING, 1)
        assert [(s.seat, s.player_id) for s in summary.seats] == [(0, "alice"), (1, "bob")]


@pytest.mark.parametrize("page_size", [-1, -(2**31)])
async def test_a_negative_page_size_is_refused(stub: Stub, page_size: int) -> None:
    await create(stub)
    await refused(
        stub.ListMatches(request(page_size=page_size)),
        INVALID_ARGUMENT,
        why="INVALID_FIELDS",
        fields=("page_size",),
    )


async def test_the_statuses_filter_pages_too(stub: Stub) -> None:
    live = [await create(stub) for _ in range(3)]
    for match_id in live:
        await play(stub, match_id, "e4")
    waiting = [await create(stub) for _ in range(3)]
    finished = [await create(stub) for _ in range(2)]
    for match_id in finished:
        await play(stub, match_id, "f3", "e5", "g4", "Qh4#")
    unfinished = sorted(live + waiting)
    found = await pages(stub, LIVE, WAITING, page_size=2)
    assert found == [unfinished[0:2], unfinished[2:4], unfinished[4:6]]
    assert await pages(stub, FINISHED, page_size=1) == [[m] for m in sorted(finished)]
    assert await pages(stub, LIVE, page_size=2) == [sorted(live)[0:2], sorted(live)[2:3]]
    everything = [m.match_id for m in await list_all(stub, page_size=3)]
    assert everything == sorted(live + waiting + finished)
    # The same filter in another order, or with a status repeated, is the same filter: its token holds.
    first = await stub.ListMatches(request(LIVE, WAITING, page_size=2))
    token = first.next_page_token
    again = await stub.ListMatches(request(WAITING, LIVE, LIVE, page_size=2, page_token=token))
    assert [m.match_id for m in again.matches] == unfinished[2:4]


async def test_a_token_of_another_filter_is_refused(stub: Stub) -> None:
    for _ in range(2):
        await play(stub, await create(stub), "e4")
    await create(stub)
    of_live = (await stub.ListMatches(request(LIVE, page_size=1))).next_page_token
    of_all = (await stub.ListMatches(request(page_size=1))).next_page_token
    assert of_live
    assert of_all
    refusals = [
        (request(page_token=of_live), "issued for statuses MATCH_STATUS_LIVE, but this request has no"),
        (request(LIVE, WAITING, page_token=of_live), "but this request has statuses MATCH_STATUS_LIVE, "),
        (request(WAITING, page_token=of_all), "issued for no statuses filter, but this request has"),
    ]
    for other, reason in refusals:
        await refused(stub.ListMatches(other), INVALID_ARGUMENT, reason)
    # Each token still works with its own filter.
    assert len((await stub.ListMatches(request(LIVE, page_token=of_live))).matches) == 1
    assert len((await stub.ListMatches(request(page_token=of_all))).matches) == 2


async def test_a_malformed_or_foreign_token_is_refused(stub: Stub) -> None:
    await create(stub)
    await create(stub)
    token = (await stub.ListMatches(request(page_size=1))).next_page_token
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    body = raw[:-8]
    forged_position = json.loads(body) | {"a": "chess.0.zzzz"}
    malformed = [
        "garbage",
        "!!!not base64!!!",
        token[:-2],  # cut short
        token[:10] + ("A" if token[10] != "A" else "B") + token[11:],  # one character changed
        base64.urlsafe_b64encode(body).decode(),  # without its checksum
        base64.urlsafe_b64encode(json.dumps(forged_position).encode() + raw[-8:]).decode(),
        token * 100,  # far too long
    ]
    for bad in malformed:
        await refused(
            stub.ListMatches(request(page_token=bad)), INVALID_ARGUMENT, "page_token is not a page token"
        )
    for family, shard in [("chess", 1), ("gin", 0)]:
        foreign = encode_token(PageScope.of(family, shard, []), "chess.0.a")
        await refused(
            stub.ListMatches(request(page_token=foreign)),
            INVALID_ARGUMENT,
            f"page_token was issued by {family} shard {shard}, not by this service (chess shard 0)",
        )


async def test_matches_created_between_pages_cause_no_duplicate_and_no_skip(stub: Stub) -> None:
    before = [f"chess.0.m{n:03d}" for n in range(0, 100, 10)]  # m000, m010, ..., m090
    for match_id in before:
        await create(stub, match_id)
    first = await stub.ListMatches(request(page_size=4))
    assert [m.match_id for m in first.matches] == before[:4]  # up to m030
    # Created between the pages: one before the position reached, two after it.
    for match_id in ("chess.0.m005", "chess.0.m045", "chess.0.m999"):
        await create(stub, match_id)
    seen = [m.match_id for m in first.matches]
    token = first.next_page_token
    while token:
        reply = await stub.ListMatches(request(page_size=4, page_token=token))
        seen.extend(m.match_id for m in reply.matches)
        token = reply.next_page_token
    assert len(seen) == len(set(seen)), "a match listed twice"
    assert set(before) <= set(seen), "a match that existed before the first page was skipped"
    assert seen == sorted(seen)
    # The one created behind the position is for the next listing; those ahead of it are on later pages.
    assert seen == sorted([*before, "chess.0.m045", "chess.0.m999"])
    assert "chess.0.m005" in [m.match_id for m in await list_all(stub)]
