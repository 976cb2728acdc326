"""The player library, the bots, the command line and the demo against a real stack in this process:
fairness, clock, rules-chess, matchmaking and the gateway (SQLite), started once for the module."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import random
import re
import stat
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from skillclassics.fairness.v1 import fairness_pb2, fairness_pb2_grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm
from skillclassics.rules.v1 import rules_pb2

from clients.bot import BotSettings, find_match, play_match, run_bot
from clients.cli.main import main_async
from clients.demo import DemoConfig, demo, fairness_report
from clients.fairness import FairnessBook
from clients.families import family
from clients.player import GatewayError, MatchStream, PlayerSession, RetryPolicy, development_token
from libs.fairness import Proof
from libs.runtime import RunningServer
from libs.runtime.config import sqlite_url
from services.gateway.service import GatewayService
from tests.support import ROOT, backend_channel, free_port, start_backends, start_in_process

ENV: dict[str, str] = {}
"""The clients' environment: tokens are signed with the development key the gateway generated under its
(default) ``DATA_DIR``, which :func:`development_token` reads too."""
FAST = {
    "GATEWAY_CALL_RATE": "1000",
    "GATEWAY_CALL_BURST": "1000",
    "GATEWAY_STREAM_RATE": "100",
    "GATEWAY_STREAM_BURST": "100",
}


@dataclass
class Stack:
    gateway: str
    fairness: str
    matchmaking: str
    rules: str
    tmp: Path
    gin: str = ""

    def gateway_env(self, **extra: str) -> dict[str, str]:
        return {
            **ENV,
            "MATCHMAKING_ADDRESS": self.matchmaking,
            "RULES_CHESS_ADDRESSES": self.rules,
            **({"RULES_GIN_ADDRESSES": self.gin} if self.gin else {}),
            "FAIRNESS_ADDRESS": self.fairness,
            **extra,
        }


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    tmp = tmp_path_factory.mktemp("clients-stack")
    backends = await start_backends(tmp)
    try:
        addresses = (backends.fairness.address, backends.matchmaking.address, backends.chess.address, tmp)
        partial = Stack("", *addresses, backends.gin.address)
        gateway = await start_in_process(
            "gateway", GatewayService, sqlite_url(tmp / "gateway.db"), partial.gateway_env(**FAST)
        )
        try:
            yield Stack(gateway.address, *addresses, backends.gin.address)
        finally:
            await gateway.stop(grace=0.5)
    finally:
        await backends.stop()


_LOG_LINE = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[|\{")')


def captured(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """What the command line printed (the in-process services' log lines, which land there too, left out)."""
    result = capsys.readouterr()
    return tuple(  # type: ignore[return-value]
        "".join(line for line in text.splitlines(keepends=True) if not _LOG_LINE.match(line))
        for text in (result.out, result.err)
    )


async def private_match(host: PlayerSession, guest: PlayerSession, name: str, *, minutes: int) -> str:
    """A private table of ``name`` opened by ``host`` and joined by ``guest``: its match id."""
    fam = family(name)
    table = await host.create_table(
        name,
        options=fam.options({}),
        time_control=fam.time_control(minutes),
        visibility=mm.VISIBILITY_PRIVATE,
    )
    return (await guest.join_table(table.table_id)).match_id


def player(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def session(stack: Stack, name: str, address: str | None = None) -> PlayerSession:
    return PlayerSession(address or stack.gateway, development_token(name, ENV))


@pytest.fixture
def cli_env(stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The command line pointed at the stack, with its own config folder, signing with the gateway's
    development key (under the default ``DATA_DIR``)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("DATA_DIR", raising=False)
    monkeypatch.setenv("GATEWAY_ADDRESS", stack.gateway)
    monkeypatch.delenv("SKILLCLASSICS_TOKEN", raising=False)
    return tmp_path / "config" / "skillclassics" / "token"


async def open_table_of(stack: Stack, creator: str, within: float = 10, family: str = "chess") -> mm.Table:
    async with session(stack, player("lister")) as lister:
        deadline = time.monotonic() + within
        while True:
            for table in await lister.list_tables(family):
                if table.creator_id == creator:
                    return table
            assert time.monotonic() < deadline, f"{creator} opened no table"
            await asyncio.sleep(0.05)


# -- bots through the library ---------------------------------------------------------------------------


async def test_two_bots_play_a_whole_chess_game_through_the_gateway(stack: Stack) -> None:
    white, black = player("random"), player("greedy")
    async with session(stack, white) as first, session(stack, black) as second:
        await first.whoami()
        await second.whoami()
        hosting = asyncio.create_task(
            run_bot(first, BotSettings(strategy="random", minutes=10, seed=11, max_plies=600))
        )
        await open_table_of(stack, white)
        joined = await run_bot(second, BotSettings(strategy="greedy", minutes=10, seed=12, max_plies=600))
        hosted = await hosting
    assert joined.match_id == hosted.match_id
    assert (hosted.seat, joined.seat) == (0, 1)
    assert hosted.result == joined.result
    assert hosted.result.termination != rules_pb2.TERMINATION_UNSPECIFIED
    assert hosted.plies == joined.plies > 0
    assert hosted.names == {0: white, 1: black}
    assert joined.won is not None or hosted.won is None
    assert "wins by" in hosted.line() or "draw by" in hosted.line()
    async with session(stack, white) as first:
        record = await first.get_record(hosted.match_id)
    assert record.record_format == "pgn"
    assert f'[White "{white}"]' in record.record


async def test_a_capped_game_ends_with_a_resignation_and_says_so(stack: Stack) -> None:
    fam = family("chess")
    host, guest = player("host"), player("guest")
    async with session(stack, host) as first, session(stack, guest) as second:
        table = await first.create_table(
            "chess",
            options=fam.options({}),
            time_control=fam.time_control(3),
            visibility=mm.VISIBILITY_PRIVATE,
        )
        joined = await second.join_table(table.table_id)
        assert joined.status == mm.TABLE_STATUS_PLAYING
        results = await asyncio.gather(
            play_match(first, joined.match_id, fam.strategy("random", random.Random(1)), fam, max_plies=12),
            play_match(second, joined.match_id, fam.strategy("random", random.Random(2)), fam, max_plies=12),
        )
    for result in results:
        assert result.result.termination == rules_pb2.TERMINATION_RESIGNATION
        assert result.plies in (12, 13)
        assert result.capped_at == 12
        assert "[the 12-ply cap: the bot to move resigned]" in result.line()


async def test_bots_wait_out_the_gateway_rate_limit(stack: Stack) -> None:
    limited = await start_in_process(
        "gateway",
        GatewayService,
        sqlite_url(stack.tmp / "limited.db"),
        stack.gateway_env(GATEWAY_CALL_RATE="20", GATEWAY_CALL_BURST="3"),
    )
    try:
        a, b = player("slow"), player("slower")
        async with session(stack, a, limited.address) as first, session(stack, b, limited.address) as second:
            await first.whoami()
            await second.whoami()
            settings = BotSettings(strategy="greedy", minutes=20, max_plies=16, seed=3)
            hosting = asyncio.create_task(run_bot(first, settings))
            await open_table_of(stack, a)
            joined = await run_bot(second, settings)
            hosted = await hosting
        assert hosted.match_id == joined.match_id
        assert hosted.result.termination != rules_pb2.TERMINATION_UNSPECIFIED
    finally:
        await limited.stop(grace=0.2)


async def test_a_match_stream_resumes_across_a_gateway_restart_without_gaps(stack: Stack) -> None:
    port = free_port()

    async def start() -> RunningServer:
        return await start_in_process(
            "gateway",
            GatewayService,
            sqlite_url(stack.tmp / "restart.db"),
            stack.gateway_env(**FAST),
            GRPC_PORT=str(port),
        )

    restarting = await start()
    fam = family("chess")
    white, black = player("w"), player("b")
    async with session(stack, white) as first, session(stack, black) as second:
        match_id = await private_match(first, second, "chess", minutes=5)
        watcher = PlayerSession(
            f"127.0.0.1:{port}",
            development_token(black, ENV),
            retry=RetryPolicy(first_delay_s=0.05, stream_attempts=30),
        )
        stream = watcher.watch_match(match_id)
        seen: list[rules_pb2.MatchUpdate] = []

        async def follow() -> None:
            async for update in stream:
                seen.append(update)

        following = asyncio.create_task(follow())
        moves = ["e4", "e5", "Nf3", "Nc6", "Bc4", "Nf6", "Ng5", "d5", "exd5", "Na5"]
        players = [first, second]

        async def play(plies: range) -> None:
            for ply in plies:
                await players[ply % 2].submit(match_id, fam.parse(moves[ply]))

        async def wait_for(plies: int) -> None:
            deadline = time.monotonic() + 10
            while not seen or seen[-1].view.chess.ply < plies:
                assert time.monotonic() < deadline, f"the stream did not reach ply {plies}"
                await asyncio.sleep(0.02)

        await play(range(4))
        await wait_for(4)
        await restarting.stop(grace=0.5)  # the stream breaks with UNAVAILABLE
        await play(range(4, 8))
        restarting = await start()  # same port: the stream reconnects from its last sequence
        await play(range(8, 10))
        await wait_for(10)
        await second.resign(match_id)
        async with asyncio.timeout(10):
            await following
        await watcher.close()
    await restarting.stop(grace=0.2)
    sequences = [update.sequence for update in seen]
    assert sequences == list(range(1, sequences[-1] + 1))  # every update exactly once, in order
    assert stream.reconnects >= 1
    assert seen[-1].result.termination == rules_pb2.TERMINATION_RESIGNATION
    assert list(seen[-1].view.chess.moves_san) == [
        "e4",
        "e5",
        "Nf3",
        "Nc6",
        "Bc4",
        "Nf6",
        "Ng5",
        "d5",
        "exd5",
        "Na5",
    ]


async def test_the_lobby_finds_a_match_it_missed_in_the_history(stack: Stack) -> None:
    fam = family("chess")
    host, guest = player("host"), player("guest")
    async with session(stack, host) as first, session(stack, guest) as second:
        table = await first.create_table("chess", options=fam.options({}), time_control=fam.time_control(3))
        joined = await second.join_table(table.table_id)
        lobby = first.lobby()
        lobby.poll_s = 0.1
        async with lobby:  # opened after the MatchReady went out: only the history knows
            async with asyncio.timeout(5):
                ready = await lobby.match_ready(table_id=table.table_id)
        assert (ready.match_id, ready.seat, ready.opponent_id) == (joined.match_id, 0, guest)
        await second.resign(joined.match_id)


async def test_refusals_are_gateway_errors_with_the_code_and_reason(stack: Stack) -> None:
    async with session(stack, player("eve")) as eve:
        with pytest.raises(GatewayError) as caught:
            await eve.join_table("t-nope")
        assert caught.value.code == grpc.StatusCode.NOT_FOUND
        assert str(caught.value).startswith("NOT_FOUND: ")
    async with PlayerSession(stack.gateway, "v1.bad.token") as forged:
        with pytest.raises(GatewayError, match="UNAUTHENTICATED"):
            await forged.whoami()
    nowhere = f"127.0.0.1:{free_port()}"
    async with PlayerSession(nowhere, "t", retry=RetryPolicy(unavailable_attempts=1)) as lost:
        with pytest.raises(GatewayError, match=f"cannot reach the gateway at {nowhere}"):
            await lost.whoami()


async def test_a_bot_that_waits_too_long_cancels_its_table(stack: Stack) -> None:
    lonely = player("lonely")
    async with session(stack, lonely) as bot:
        with pytest.raises(TimeoutError):
            await find_match(bot, BotSettings(minutes=5, entry_fee_minor=7, wait_timeout_s=0.3))
    async with session(stack, player("looker")) as looker:
        assert all(t.creator_id != lonely for t in await looker.list_tables("chess"))


async def test_bots_that_ask_for_the_stand_in_meet_only_each_other(stack: Stack) -> None:
    """A bot asking for seed 002's stand-in opens (and joins) only tables with it: a bot keeping the
    forfeit rule, with the same clock, options and fee, does not take its table."""
    wanting = BotSettings(family="gin", minutes=10, increment_s=5, entry_fee_minor=23, stand_in=True)
    host, other, guest = player("stand-in-host"), player("forfeit-bot"), player("stand-in-guest")
    async with (
        session(stack, host) as hosting,
        session(stack, other) as plain,
        session(stack, guest) as joining,
    ):
        waiting = asyncio.create_task(find_match(hosting, wanting))
        table = await open_table_of(stack, host, family="gin")
        assert table.disconnect_policy == mm.DISCONNECT_POLICY_STAND_IN
        with pytest.raises(TimeoutError):
            await find_match(plain, replace(wanting, stand_in=False, wait_timeout_s=0.5))
        assert not waiting.done()
        joined = await find_match(joining, wanting)
        hosted = await asyncio.wait_for(waiting, 10)
        assert (hosted.match_id, hosted.opponent_id) == (joined.match_id, guest)
        match = await joining.get_match(joined.match_id)
        assert match.stand_in_after_ms == 120_000
        await joining.resign(joined.match_id)


# -- the command line -----------------------------------------------------------------------------------


async def test_login_whoami_tables_create_and_join(
    stack: Stack, cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    alice, bob = player("alice"), player("bob")
    assert await main_async(["login", alice]) == 0
    assert f"signed in as {alice} until " in captured(capsys)[0]
    assert stat.S_IMODE(os.stat(cli_env).st_mode) == 0o600
    assert await main_async(["whoami"]) == 0
    assert captured(capsys)[0].startswith(f"{alice} (token valid until ")

    assert await main_async(["create", "--family", "chess", "--minutes", "3", "--fee", "150"]) == 0
    table_id = captured(capsys)[0].splitlines()[0]
    assert table_id.startswith("t-")
    monkeypatch.setenv("SKILLCLASSICS_TOKEN", development_token(bob, ENV))  # bob, by the environment
    assert await main_async(["tables", "--family", "chess", "--minutes", "3"]) == 0
    listed = captured(capsys)[0]
    assert f"{table_id}  chess, 3+0, contest rules, 1.50 USD  by {alice}" in listed

    # Alice plays her side as a bot; Bob joins and plays a script from standard input: his move is
    # typed before White has moved (it waits for his turn), then a bad line, then he resigns.
    async def alice_plays() -> None:
        async with session(stack, alice) as host:
            async with host.lobby() as lobby:
                ready = await lobby.match_ready(table_id=table_id)
            fam = family("chess")
            await play_match(host, ready.match_id, fam.strategy("greedy", random.Random(5)), fam)

    hosting = asyncio.create_task(alice_plays())
    monkeypatch.setattr(sys, "stdin", io.StringIO("e5\n?\nnonsense!\nresign\n"))
    assert await main_async(["join", table_id, "--ascii"]) == 0
    await asyncio.wait_for(hosting, 10)
    out = captured(capsys)[0]
    assert f"joined table {table_id} of {alice}: match chess." in out
    assert "you play Black" in out
    assert f"White ({alice}) played " in out
    assert "you played e5" in out
    assert "'nonsense!' is not a move" in out
    assert "you resigned" in out
    assert out.rstrip().endswith(f"White ({alice}) wins by resignation: Black resigned")


async def test_create_wait_plays_once_someone_joins(
    stack: Stack, cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    host, guest = player("host"), player("guest")
    monkeypatch.setenv("SKILLCLASSICS_TOKEN", development_token(host, ENV))
    monkeypatch.setattr(sys, "stdin", io.StringIO("e4\nresign\n"))
    hosting = asyncio.create_task(main_async(["create", "--wait", "--private", "--minutes", "10"]))
    printed = ""
    deadline = time.monotonic() + 10
    while "waiting for an opponent" not in printed:
        assert time.monotonic() < deadline, printed
        await asyncio.sleep(0.05)
        printed += captured(capsys)[0]
    table_id = printed.splitlines()[0]
    async with session(stack, guest) as joiner:
        joined = await joiner.join_table(table_id)
    assert await asyncio.wait_for(hosting, 10) == 0
    out = printed + captured(capsys)[0]
    assert f"table {table_id} (chess, 10+0, contest rules, free): waiting for an opponent" in out
    assert f"{guest} joined: match {joined.match_id}" in out
    assert "you played e4" in out
    assert out.rstrip().endswith(f"Black ({guest}) wins by resignation: White resigned")


async def test_a_refused_move_is_one_readable_line(
    stack: Stack, cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    white, black = player("white"), player("black")
    async with session(stack, white) as first, session(stack, black) as second:
        match_id = await private_match(first, second, "chess", minutes=5)
        monkeypatch.setenv("SKILLCLASSICS_TOKEN", development_token(white, ENV))
        monkeypatch.setattr(sys, "stdin", io.StringIO("Ke2\nresign\n"))
        assert await main_async(["play", match_id]) == 0
    out = captured(capsys)[0]
    assert "error: FAILED_PRECONDITION (ILLEGAL_ACTION): " in out
    assert f"Black ({black}) wins by resignation" in out


async def test_usage_and_gateway_errors_exit_2_and_1(
    stack: Stack, cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await main_async(["whoami"]) == 2
    assert (
        "skillclassics whoami: error: not signed in: run `skillclassics login PLAYER`" in captured(capsys)[1]
    )
    assert await main_async(["login", "not a player"]) == 2
    assert "player_id must be" in captured(capsys)[1]
    monkeypatch.setenv("SKILLCLASSICS_TOKEN", development_token(player("carol"), ENV))
    assert await main_async(["join", "t-missing"]) == 1
    assert (
        captured(capsys)[1] == "skillclassics join: error: NOT_FOUND (TABLE_NOT_FOUND): no table t-missing\n"
    )
    assert await main_async(["create", "--minutes", "7"]) == 1
    assert "error: INVALID_ARGUMENT (TIME_CONTROL_NOT_OFFERED): chess lobby clocks are" in captured(capsys)[1]
    assert await main_async(["create", "--family", "shogi"]) == 2
    assert "unknown game family 'shogi'" in captured(capsys)[1]
    assert await main_async(["play", "chess.0.nosuchmatch"]) == 1
    assert "error: NOT_FOUND" in captured(capsys)[1]
    assert await main_async(["bot", "--strategy", "clever"]) == 2
    assert await main_async(["frobnicate"]) == 2
    monkeypatch.setenv("DATA_DIR", str(cli_env.parent / "empty"))
    assert await main_async(["login", "dave"]) == 2
    assert "no development key" in captured(capsys)[1]


async def test_cli_bots_find_each_other_and_play_to_the_end(
    stack: Stack, cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = player("bot-a"), player("bot-b")
    common = ["bot", "--family", "chess", "--minutes", "30", "--max-plies", "40"]
    hosting = asyncio.create_task(main_async([*common, "--player", first, "--seed", "1"]))
    await open_table_of(stack, first)
    assert await main_async([*common, "--player", second, "--strategy", "greedy", "--games", "1"]) == 0
    assert await asyncio.wait_for(hosting, 10) == 0
    out = captured(capsys)[0]
    assert f"{first}: created table t-" in out
    assert f"{second}: joined table t-" in out
    assert out.count(" plies, ") == 2
    assert f"{first}: chess.0." in out
    assert f"{second}: chess.0." in out


async def test_watch_prints_each_update_of_a_match(
    stack: Stack, cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fam = family("chess")
    white, black = player("white"), player("black")
    async with session(stack, white) as first, session(stack, black) as second:
        match_id = await private_match(first, second, "chess", minutes=5)
        for ply, san in enumerate(["f3", "e5", "g4", "Qh4#"]):
            await (first, second)[ply % 2].submit(match_id, fam.parse(san))
    monkeypatch.setenv("SKILLCLASSICS_TOKEN", development_token(player("fan"), ENV))
    assert await main_async(["watch", match_id, "--from-start", "--brief"]) == 0
    out = captured(capsys)[0].splitlines()
    assert out[0] == f"match {match_id}: White {white} vs Black {black}; 5+0 contest rules"
    assert f"#2 action: White ({white}) f3" in out
    assert f"#5 action: Black ({black}) Qh4#" in out
    assert out[-1] == f"Black ({black}) wins by checkmate: checkmate; Black wins"
    assert await main_async(["record", match_id]) == 0
    record = captured(capsys)[0]
    assert "2. g4 { [%clk" in record
    assert "2... Qh4#" in record


async def test_the_console_script_runs_login_and_tables(stack: Stack, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "GATEWAY_ADDRESS": stack.gateway,
    }
    env.pop("SKILLCLASSICS_TOKEN", None)
    env.pop("DATA_DIR", None)  # the gateway's development key is under the default one
    name = player("script")
    for argv, expected in ((["login", name], f"signed in as {name}"), (["tables", "--family", "chess"], "")):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "clients.cli",
            *argv,
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 30)
        assert process.returncode == 0, err.decode()
        assert expected in out.decode()
    token = (tmp_path / "config" / "skillclassics" / "token").read_text().strip()
    parts = token.split(".")
    assert len(parts) == 3, token  # a JWT: header, payload and signature, each base64url
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", part) for part in parts), token
    header = json.loads(base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
    assert header["alg"] == "EdDSA"


# -- the demo -------------------------------------------------------------------------------------------


async def test_the_demo_plays_chess_and_gin_and_skips_what_the_stack_lacks(stack: Stack) -> None:
    lines: list[str] = []
    config = DemoConfig(
        gateway=stack.gateway,
        families=("chess", "gin", "shogi"),
        max_plies=30,
        env=ENV,
        seed=4,
    )
    assert await demo(config, lines.append) == 0
    text = "\n".join(lines)
    assert "(random, White) vs greedy-" in text
    assert "chess: result: " in text
    assert "chess: fairness: no chance used" in text
    assert "gin: result: " in text
    assert "gin: fairness: OK: commitment matches" in text  # the dealer and every shuffle reproduced
    assert "shogi: skipped: unknown game family 'shogi'" in text
    # Chess is played twice: standard, and Skirmish Chess between a random bot and a duelist.
    assert "(random, White) vs duelist-" in text
    assert "Skirmish Chess, random, odds, draw: both stay, duel 60+0 s" in text
    assert "skirmish: result: " in text
    # Its duels' setups came from the fairness stream: every one is recomputed from the proof.
    assert "skirmish: fairness: OK: commitment matches" in text
    assert lines[-1] == "demo: 3 played, 1 skipped, 0 failed"


async def test_the_demo_says_when_the_stack_is_not_running() -> None:
    lines: list[str] = []
    nowhere = f"127.0.0.1:{free_port()}"
    assert await demo(DemoConfig(gateway=nowhere, families=("chess",), env=ENV), lines.append) == 1
    assert lines[-1] == f"demo: cannot reach the gateway at {nowhere} (is the stack running? `make run`)"


async def test_a_fairness_proof_is_fetched_and_verified(stack: Stack) -> None:
    match_id = f"gin.0.{uuid.uuid4().hex}"
    async with backend_channel(stack.fairness, "matchmaking") as channel:  # matchmaking commits
        stub = fairness_pb2_grpc.FairnessServiceStub(channel)
        await stub.Commit(fairness_pb2.CommitRequest(match_id=match_id, idempotency_key=match_id))
    async with backend_channel(stack.fairness, "rules-gin-0") as channel:  # the shard that owns the match
        stub = fairness_pb2_grpc.FairnessServiceStub(channel)
        await stub.Draw(
            fairness_pb2.DrawRequest(
                match_id=match_id, stream="deck", kind=fairness_pb2.DRAW_KIND_SHUFFLE, bound=52
            )
        )
        await stub.Finish(fairness_pb2.FinishRequest(match_id=match_id))
    async with session(stack, player("prover")) as prover:  # through the gateway, as any player
        report = await fairness_report(prover, match_id)
    assert report.startswith("OK: commitment matches; 1 draw in 1 stream reproduced exactly")


async def test_play_and_watch_a_gin_match_from_the_command_line(
    stack: Stack, cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fam = family("gin")
    ann, ben = player("ann"), player("ben")
    async with session(stack, ann) as first, session(stack, ben) as second:
        match_id = await private_match(first, second, "gin", minutes=5)
        await first.seed_match(match_id)  # both seeds in: the first deal need not wait for its window
        await second.seed_match(match_id)
        update = (await second.get_match(match_id)).update
        for _ in range(100):  # the deal comes from the fairness service: wait for it
            if update.HasField("to_move"):
                break
            await asyncio.sleep(0.05)
            update = (await second.get_match(match_id)).update
        if update.to_move == 1:  # Ben is the non-dealer: he passes on the upcard, then it is Ann's turn
            await second.submit(match_id, fam.parse("pass"))
        ben_hand = set((await second.get_match(match_id)).update.view.gin.hand)
        monkeypatch.setenv("SKILLCLASSICS_TOKEN", development_token(ann, ENV))
        monkeypatch.setattr(sys, "stdin", io.StringIO("?\nresign\n"))
        assert await main_async(["play", match_id, "--ascii"]) == 0
    out = captured(capsys)[0]
    assert "gin rummy, hand 1 (standard, knock at 10 or less); first to 3 hands" in out
    assert "your hand: " in out
    assert "10 cards" in out  # Ben's hand is a count on Ann's screen...
    shown = {line for line in out.splitlines() if line.startswith("your hand: ")}
    assert not any(card in line for line in shown for card in ben_hand)  # ...never his cards
    assert "you resigned" in out

    monkeypatch.setenv("SKILLCLASSICS_TOKEN", development_token(player("fan"), ENV))
    assert await main_async(["watch", match_id, "--from-start", "--brief"]) == 0
    watched = captured(capsys)[0]
    assert f"match {match_id}" in watched
    assert "your hand" not in watched  # a spectator sees no hand at all


async def test_players_watching_a_gin_match_add_their_seeds_before_the_deal(stack: Stack) -> None:
    ann, ben = player("ann"), player("ben")
    async with session(stack, ann) as first, session(stack, ben) as second:
        match_id = await private_match(first, second, "gin", minutes=5)
        loop = asyncio.get_running_loop()
        began = loop.time()

        async def until_dealt(stream: MatchStream) -> int:
            try:
                async for update in stream:
                    if update.HasField("to_move"):  # the first deal is out
                        return update.sequence
                raise AssertionError("the match ended before it was dealt")
            finally:
                stream.close()

        async with asyncio.timeout(10):
            dealt = await asyncio.gather(*(until_dealt(s.watch_match(match_id)) for s in (first, second)))
        assert loop.time() - began < 3  # dealt as soon as both seeds were in, not at the 5 s window
    async with backend_channel(stack.fairness, "operator") as channel:
        public = await fairness_pb2_grpc.FairnessServiceStub(channel).GetCommitment(
            fairness_pb2.GetCommitmentRequest(match_id=match_id)
        )
    assert sorted(seed.seat for seed in public.client_seeds) == [0, 1]  # both, before any draw
    assert all(len(seed.seed) == 32 for seed in public.client_seeds)
    assert len(dealt) == 2


async def test_play_records_the_commitment_and_proof_checks_the_proof_against_it(
    stack: Stack,
    cli_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fam = family("gin")
    ann, ben = player("ann"), player("ben")
    async with session(stack, ann) as first, session(stack, ben) as second:
        match_id = await private_match(first, second, "gin", minutes=5)

        async def ben_passes() -> None:  # on the upcard, when offered; Ann resigns soon after
            async for update in second.watch_match(match_id):
                if "pass" in update.legal_actions:
                    with contextlib.suppress(GatewayError):
                        await second.submit(match_id, fam.parse("pass"))

        ben_plays = asyncio.create_task(ben_passes())
        monkeypatch.setenv("SKILLCLASSICS_TOKEN", development_token(ann, ENV))
        monkeypatch.setattr(sys, "stdin", io.StringIO("pass\nresign\n"))
        assert await main_async(["play", match_id, "--ascii"]) == 0
        async with asyncio.timeout(10):
            await ben_plays
        commitment = (await first.match_history("gin"))[0].fairness_commitment
    out = captured(capsys)[0]
    record_file = cli_env.parent / "fairness" / ann / f"{match_id}.json"
    # `play` says what the server committed to before the deal, and where it keeps it...
    assert (
        f"fairness: the server committed to {commitment} (format version 1) before the first draw; "
        f"recorded in {record_file}"
    ) in out
    # ...and checks the proof against it when the match is over.
    verdict = (
        "OK: commitment matches; 2 draws in 2 streams reproduced exactly; it is the commitment published "
        "before the match; your client seed is in; all 2 draws the match used are in"
    )
    assert f"fairness: {verdict}" in out
    assert f"fairness: proof saved to {record_file.with_name(f'{match_id}.proof.json')}" in out
    recorded = json.loads(record_file.read_text())
    assert (recorded["commitment"], recorded["version"], recorded["seed_accepted"]) == (commitment, 1, True)
    assert len(bytes.fromhex(recorded["client_seed"])) == 32
    assert recorded["draws"] == [{"stream": "dealer", "index": 0}, {"stream": "shuffle", "index": 0}]
    assert stat.S_IMODE(record_file.stat().st_mode) == 0o600

    # `proof` fetches the proof, saves it and checks it against the record in one step.
    saved = tmp_path / "proof.json"
    assert await main_async(["proof", match_id, "--out", str(saved)]) == 0
    assert captured(capsys)[0] == f"{verdict}\nproof saved to {saved}\n"
    proof = Proof.from_json(saved.read_bytes())
    assert proof.commitment == commitment
    seat = recorded["seat"]
    assert {(s.seat, s.seed.hex()) for s in proof.client_seeds} >= {(seat, recorded["client_seed"])}

    async def check(**changes: object) -> tuple[int, str]:
        record_file.write_text(json.dumps({**recorded, **changes}))
        status = await main_async(["proof", match_id, "--out", str(saved)])
        return status, captured(capsys)[0]

    # A record that says otherwise than the proof fails, naming what differs.
    status, said = await check(commitment="ab" * 32)
    assert status == 1
    assert said.startswith(
        f"FAIL: the proof commits to {commitment}, not to {'ab' * 32}, the commitment published before the "
        "match: this is not the random stream the match was promised\n"
    )
    status, said = await check(client_seed="cd" * 32)
    assert status == 1
    assert said.startswith(
        f"FAIL: your client seed {'cd' * 8}... is not in the proof: it has another seed for seat {seat}"
    )
    status, said = await check(draws=[*recorded["draws"], {"stream": "shuffle", "index": 1}])
    assert status == 1
    assert said.startswith(
        "FAIL: the match used draw stream 'shuffle' index 1, but the proof does not have it\n"
    )

    # Someone who recorded nothing is told so; the proof is checked on its own and against the record.
    monkeypatch.setenv("SKILLCLASSICS_TOKEN", development_token(player("fan"), ENV))
    assert await main_async(["proof", match_id]) == 0
    said = captured(capsys)[0]
    assert said.startswith(
        "OK: commitment matches; 2 draws in 2 streams reproduced exactly; all 2 draws the match used are in\n"
        f"note: no commitment of match {match_id} was recorded here before the match"
    )


async def test_the_library_records_the_commitment_its_own_seed_and_the_draws(
    stack: Stack, tmp_path: Path
) -> None:
    fam = family("gin")
    ann, ben = player("ann"), player("ben")
    book = FairnessBook(tmp_path / "fairness")
    async with (
        PlayerSession(stack.gateway, development_token(ann, ENV), fairness_book=book) as first,
        session(stack, ben) as second,
    ):
        await first.whoami()
        async with first.lobby() as lobby:
            table = await first.create_table(
                "gin",
                options=fam.options({}),
                time_control=fam.time_control(5),
                visibility=mm.VISIBILITY_PRIVATE,
            )
            await second.join_table(table.table_id)
            ready = await lobby.match_ready(table_id=table.table_id)
        match_id = ready.match_id
        # Recorded from MatchReady, before any stream is open or any seed sent.
        announced = first.fairness(match_id)
        assert announced is not None
        assert len(ready.fairness_commitment) == 64
        assert (announced.commitment, announced.version, announced.seat) == (ready.fairness_commitment, 1, 0)
        assert (announced.client_seed, announced.draws) == (None, [])

        async def until_dealt(updates: AsyncIterator[rules_pb2.MatchUpdate]) -> None:
            async for update in updates:
                if update.HasField("to_move"):
                    return

        async with first.play(match_id) as stream, asyncio.timeout(10):
            watched = second.watch_match(match_id)
            await asyncio.gather(until_dealt(stream.updates()), until_dealt(aiter(watched)))
            watched.close()
        record = first.fairness(match_id)
        assert record is not None
        assert record.commitment == ready.fairness_commitment
        assert record.client_seed is not None
        assert len(record.client_seed) == 32
        assert (record.seed_accepted, record.seed_problem, record.seat) == (True, "", 0)
        assert record.draws == [("dealer", 0), ("shuffle", 0)]
        assert book.load(ann, match_id) == record  # kept for later sessions (`skillclassics proof`)
    async with backend_channel(stack.fairness, "operator") as channel:
        public = await fairness_pb2_grpc.FairnessServiceStub(channel).GetCommitment(
            fairness_pb2.GetCommitmentRequest(match_id=match_id)
        )
    assert public.commitment == record.commitment
    assert {seed.seat: seed.seed for seed in public.client_seeds}[0] == record.client_seed

    # A later session of the same player finds the record and does not send a second seed.
    async with PlayerSession(stack.gateway, development_token(ann, ENV), fairness_book=book) as again:
        await again.whoami()
        await again.seed_match(match_id)
        assert again.fairness(match_id) == record
