"""Saved Game of the Generals formations through the gateway, over real gRPC, on SQLite and PostgreSQL:
a player saves, lists, replaces and deletes their own (the player library and the command line too);
nobody else sees them; a formation that is not a legal setup is refused with the engine's reasons; the
limits hold; only the gateway may call matchmaking's formation methods."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from skillclassics.gateway.v1 import gateway_pb2 as pb
from skillclassics.gateway.v1 import gateway_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm_pb
from skillclassics.matchmaking.v1 import matchmaking_pb2_grpc

from clients.cli.main import main_async
from clients.player import GatewayError, PlayerSession
from libs.engines.generals import check_formation, setup_to_formation
from services.matchmaking.service import MatchmakingService
from services.matchmaking.store import MAX_FORMATIONS
from tests.services.gateway.test_gateway_service import bearer, start_gateway
from tests.support import backend_channel, refused, start_in_process

INVALID, NOT_FOUND = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
FAILED = grpc.StatusCode.FAILED_PRECONDITION
WALL = (
    "a1=FLG b1=SPY c1=SPY d1=PVT e1=PVT f1=PVT g1=PVT h1=PVT i1=PVT "
    "a2=5* b2=4* c2=3* d2=2* e2=1* f2=COL g2=LTC h2=MAJ i2=CPT a3=1LT b3=2LT c3=SGT"
)
"""A legal complete formation, in its canonical text."""
WALL_AS_TYPED = """
  C3=sgt b3=2lt A3=1lt
  i2=cpt h2=maj g2=ltc f2=col e2=1* d2=2* c2=3* b2=4* a2=5*
  I1=pvt h1=pvt g1=pvt f1=pvt e1=pvt d1=pvt c1=spy b1=spy a1=flg
"""
""":data:`WALL` as a person might type it: any order, any case, any white space."""
LOG_LINE = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[|\{")')
"""A log line of the services in this process (they print where the command line does)."""
FLAG_FORWARD = (
    "a1=SPY b1=SPY c1=PVT d1=PVT e1=PVT f1=PVT g1=PVT h1=PVT i1=5* "
    "a2=4* b2=3* c2=2* d2=1* e2=COL f2=LTC g2=MAJ h2=CPT i2=1LT a3=2LT b3=SGT e3=FLG"
)
"""Another legal complete formation (the Flag in the front row)."""


def player(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def token(player_id: str) -> str:
    return bearer(player_id)[0][1].removeprefix("Bearer ")


@dataclass
class Platform:
    gateway_address: str
    gateway: gateway_pb2_grpc.GatewayServiceStub
    mm_address: str
    mm: matchmaking_pb2_grpc.MatchmakingServiceStub
    """Matchmaking, called as the gateway (to fill a player's formations without the gateway's rate
    limit)."""


@pytest.fixture
async def platform(database_url: str, tmp_path: Path) -> AsyncIterator[Platform]:
    matchmaking = await start_in_process("matchmaking", MatchmakingService, database_url)
    gateway = await start_gateway(tmp_path, {"MATCHMAKING_ADDRESS": matchmaking.address})
    try:
        async with (
            grpc.aio.insecure_channel(gateway.address) as gateway_channel,
            backend_channel(matchmaking.address, "gateway") as mm_channel,
        ):
            yield Platform(
                gateway.address,
                gateway_pb2_grpc.GatewayServiceStub(gateway_channel),
                matchmaking.address,
                matchmaking_pb2_grpc.MatchmakingServiceStub(mm_channel),
            )
    finally:
        await gateway.stop(grace=0.5)
        await matchmaking.stop(grace=0.5)


async def test_a_player_saves_lists_replaces_and_deletes_formations(platform: Platform) -> None:
    async with PlayerSession(platform.gateway_address, token(player("alice"))) as alice:
        assert await alice.list_formations() == []

        wall, replaced = await alice.save_formation("Wall", WALL_AS_TYPED)
        assert not replaced
        assert (wall.name, wall.formation) == ("Wall", WALL)  # stored in its canonical text
        assert wall.created_at_ms == wall.updated_at_ms > 0
        alpha, _ = await alice.save_formation("alpha 2", FLAG_FORWARD)
        beta, _ = await alice.save_formation("beta", WALL)
        # By name, ignoring case first: "alpha 2", "beta", "Wall" (code point order would put "Wall" first).
        assert [f.name for f in await alice.list_formations()] == ["alpha 2", "beta", "Wall"]

        edited, replaced = await alice.save_formation("Wall", FLAG_FORWARD)
        assert replaced
        assert edited.formation == FLAG_FORWARD
        assert edited.created_at_ms == wall.created_at_ms <= edited.updated_at_ms
        listed = {f.name: f for f in await alice.list_formations()}
        assert listed["Wall"] == edited
        assert listed["alpha 2"] == alpha
        assert listed["beta"] == beta

        # Loaded into a setup for either colour: the same shape as its owner sees it.
        white = await alice.formation_setup("Wall", 0)
        black = await alice.formation_setup("Wall", 1)
        assert white == FLAG_FORWARD  # White's board is the formation itself
        assert "e6=FLG" in black  # Black's is turned half a turn: e3 is e6
        assert setup_to_formation(black, 1) == FLAG_FORWARD
        with pytest.raises(KeyError):
            await alice.formation_setup("wall", 0)  # names are matched exactly

        gone = await alice.delete_formation("Wall")
        assert gone == edited
        assert [f.name for f in await alice.list_formations()] == ["alpha 2", "beta"]
        with pytest.raises(GatewayError) as caught:
            await alice.delete_formation("Wall")
        assert (caught.value.code, caught.value.reason) == (NOT_FOUND, "FORMATION_NOT_FOUND")


async def test_another_player_never_sees_a_players_formations(platform: Platform) -> None:
    alice, bob = player("alice"), player("bob")
    saved = await platform.gateway.SaveFormation(
        pb.SaveFormationRequest(name="Wall", formation=WALL), metadata=bearer(alice)
    )
    assert not saved.replaced
    listed = await platform.gateway.ListFormations(pb.ListFormationsRequest(), metadata=bearer(bob))
    assert list(listed.formations) == []
    await refused(
        platform.gateway.DeleteFormation(pb.DeleteFormationRequest(name="Wall"), metadata=bearer(bob)),
        NOT_FOUND,
        "no formation named 'Wall'",
        why="FORMATION_NOT_FOUND",
    )
    # Bob's formation of the same name is his own: it is new, and Alice's stays as it was.
    his = await platform.gateway.SaveFormation(
        pb.SaveFormationRequest(name="Wall", formation=FLAG_FORWARD), metadata=bearer(bob)
    )
    assert not his.replaced
    hers = await platform.gateway.ListFormations(pb.ListFormationsRequest(), metadata=bearer(alice))
    assert [(f.name, f.formation) for f in hers.formations] == [("Wall", WALL)]
    # Without a token nothing is read or written.
    await refused(
        platform.gateway.ListFormations(pb.ListFormationsRequest()),
        grpc.StatusCode.UNAUTHENTICATED,
        why="TOKEN_MISSING",
    )


@pytest.mark.parametrize(
    "formation",
    [
        "a4=PVT a1=FLG b1=FLG",  # outside rows 1-3, two Flags, and too few
        WALL.replace("c3=SGT", "a1=SGT"),  # a square twice, and 20 pieces placed
        WALL.replace(" c3=SGT", ""),  # 20 pieces: complete formations only
        WALL.replace("c3=SGT", "c3=SGT d3=PVT"),  # a seventh Private
        WALL + " zz",  # unreadable
        "a1=KING",  # not a rank
    ],
)
async def test_an_illegal_formation_is_refused_with_the_engines_reasons(
    platform: Platform, formation: str
) -> None:
    alice = player("alice")
    reasons = check_formation(formation)
    assert reasons
    problem = await refused(
        platform.gateway.SaveFormation(
            pb.SaveFormationRequest(name="Bad", formation=formation), metadata=bearer(alice)
        ),
        INVALID,
        "not a legal formation: ",
        why="INVALID_FORMATION",
        fields=("formation",) * len(reasons),
    )
    assert [v.description for v in problem.violations] == reasons
    listed = await platform.gateway.ListFormations(pb.ListFormationsRequest(), metadata=bearer(alice))
    assert list(listed.formations) == []


@pytest.mark.parametrize(
    ("name", "formation", "fields"),
    [
        ("", WALL, ("name",)),
        (" Wall", WALL, ("name",)),
        ("Wall ", WALL, ("name",)),
        ("my  wall", WALL, ("name",)),
        ("wall/2", WALL, ("name",)),
        ("Mur élevé", WALL, ("name",)),
        ("w" * 65, WALL, ("name",)),
        ("Wall", "", ("formation",)),
        ("Wall", WALL + " " * 1024, ("formation",)),
        ("", "", ("name", "formation")),
    ],
)
async def test_names_and_texts_out_of_the_contract_are_invalid_fields(
    platform: Platform, name: str, formation: str, fields: tuple[str, ...]
) -> None:
    request = pb.SaveFormationRequest(name=name, formation=formation)
    await refused(
        platform.gateway.SaveFormation(request, metadata=bearer(player("alice"))),
        INVALID,
        why="INVALID_FIELDS",
        fields=fields,
    )


async def test_the_longest_name_and_its_punctuation_are_fine(platform: Platform) -> None:
    alice = player("alice")
    for name in ("w" * 64, "Blitz left-flank v2.1_b", "7"):
        saved = await platform.gateway.SaveFormation(
            pb.SaveFormationRequest(name=name, formation=WALL), metadata=bearer(alice)
        )
        assert saved.formation.name == name
    await refused(
        platform.gateway.DeleteFormation(pb.DeleteFormationRequest(name="w" * 65), metadata=bearer(alice)),
        INVALID,
        why="INVALID_FIELDS",
        fields=("name",),
    )


async def test_a_player_keeps_at_most_50_formations(platform: Platform) -> None:
    alice = player("alice")
    for number in range(MAX_FORMATIONS):
        await platform.mm.SaveFormation(
            mm_pb.SaveFormationRequest(player_id=alice, name=f"f{number:02}", formation=WALL)
        )
    save = pb.SaveFormationRequest(name="one more", formation=WALL)
    problem = await refused(
        platform.gateway.SaveFormation(save, metadata=bearer(alice)),
        FAILED,
        "you have 50 saved formations",
        why="FORMATION_LIMIT_REACHED",
    )
    assert problem.metadata["limit"] == "50"
    # Replacing one is still allowed; deleting one makes room for a new name.
    replaced = await platform.gateway.SaveFormation(
        pb.SaveFormationRequest(name="f07", formation=FLAG_FORWARD), metadata=bearer(alice)
    )
    assert replaced.replaced
    await platform.gateway.DeleteFormation(pb.DeleteFormationRequest(name="f00"), metadata=bearer(alice))
    assert not (await platform.gateway.SaveFormation(save, metadata=bearer(alice))).replaced
    listed = await platform.gateway.ListFormations(pb.ListFormationsRequest(), metadata=bearer(alice))
    assert len(listed.formations) == MAX_FORMATIONS
    assert [f.name for f in listed.formations] == sorted(f.name for f in listed.formations)
    # Another player's count is their own.
    await platform.gateway.SaveFormation(save, metadata=bearer(player("bob")))


@pytest.mark.parametrize("caller", ["operator", "rules-chess-0", "fairness", "clock"])
async def test_only_the_gateway_may_call_matchmakings_formation_methods(
    platform: Platform, caller: str
) -> None:
    alice = player("alice")
    await platform.mm.SaveFormation(mm_pb.SaveFormationRequest(player_id=alice, name="Wall", formation=WALL))
    async with backend_channel(platform.mm_address, caller) as channel:
        stub = matchmaking_pb2_grpc.MatchmakingServiceStub(channel)
        for call in (
            stub.ListFormations(mm_pb.ListFormationsRequest(player_id=alice)),
            stub.SaveFormation(mm_pb.SaveFormationRequest(player_id=alice, name="Wall", formation=WALL)),
            stub.DeleteFormation(mm_pb.DeleteFormationRequest(player_id=alice, name="Wall")),
        ):
            await refused(call, grpc.StatusCode.PERMISSION_DENIED, why="CALLER_NOT_ALLOWED")
    listed = await platform.mm.ListFormations(mm_pb.ListFormationsRequest(player_id=alice))
    assert [(f.name, f.formation) for f in listed.formations] == [("Wall", WALL)]


async def test_the_formations_command(
    platform: Platform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("GATEWAY_ADDRESS", platform.gateway_address)
    monkeypatch.setenv("SKILLCLASSICS_TOKEN", token(player("carol")))
    typed, bad = tmp_path / "wall.txt", tmp_path / "bad.txt"
    typed.write_text(WALL_AS_TYPED)
    bad.write_text("a4=PVT a1=FLG b1=FLG")

    def out() -> tuple[str, str]:  # what the command printed (the services' log lines left out)
        captured = capsys.readouterr()
        keep = [
            "".join(line for line in text.splitlines(keepends=True) if not LOG_LINE.match(line))
            for text in (captured.out, captured.err)
        ]
        return keep[0], keep[1]

    assert await main_async(["formations"]) == 0
    assert out()[0] == "no saved formations\n"
    assert await main_async(["formations", "save", "Wall", str(typed)]) == 0
    assert out()[0] == f"saved Wall: {WALL}\n"
    assert await main_async(["formations", "save", "Wall", str(typed)]) == 0
    assert out()[0] == f"replaced Wall: {WALL}\n"
    assert await main_async(["formations", "list"]) == 0
    assert out()[0] == f"Wall: {WALL}\n"
    assert await main_async(["formations", "save", "Bad", str(bad)]) == 1
    err = out()[1]
    assert (
        "skillclassics formations: error: INVALID_ARGUMENT (INVALID_FORMATION): not a legal formation: "
        in err
    )
    assert "a4 is outside a formation's rows 1-3" in err
    assert await main_async(["formations", "save", "Gone", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read" in out()[1]
    assert await main_async(["formations", "delete", "Wall"]) == 0
    assert out()[0] == f"deleted Wall: {WALL}\n"
    assert await main_async(["formations", "delete", "Wall"]) == 1
    assert "NOT_FOUND (FORMATION_NOT_FOUND): you have no formation named 'Wall'" in out()[1]
