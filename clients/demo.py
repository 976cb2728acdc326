"""``make demo`` (``python -m clients.demo``): two bots play each family through the gateway.

Against a running stack (``make run`` in another terminal), for every family tried (every family the
clients know, :func:`clients.families.family_names`, unless told otherwise): a random bot opens a private
table, a greedy bot joins it, and they play one whole match through the gateway, moving instantly. A
family may have more games than that (:data:`DEMO_GAMES`): chess is also played as Skirmish Chess, a
random bot against a duelist; ``--families skirmish`` plays only that one. Then
the result, and the fairness check: for a family that uses chance the match's proof is fetched through
the gateway with a player's token (``GetFairnessProof``, as any player fetches it) and verified offline
(:func:`libs.fairness.verify`); chess draws nothing, which is said. A family the stack does not have (its
rules service is unavailable or not configured, or matchmaking does not offer it) is skipped, saying why.

Chess games between these bots can run to hundreds of moves, so a game is capped: once it is
``--max-plies`` long (300 by default) the bot to move resigns unless it is ahead (material in chess, the
race in backgammon; then its opponent resigns a move later); the output says when that happened.

Settings (flags, or the environment): ``--gateway`` / ``GATEWAY_ADDRESS`` (``127.0.0.1:50050``),
``--families`` / ``DEMO_FAMILIES`` (every family the clients know), ``--max-plies`` /
``DEMO_MAX_PLIES`` (300), ``--minutes`` / ``DEMO_MINUTES`` (each family's shortest lobby clock). The
bots' tokens are development JWTs signed with the stack's development key
(``DATA_DIR/gateway-token-signing.pem``, ``DATA_DIR`` defaulting to ``./data`` as for ``make run``).

Exit status: 0 when every family tried was played or skipped and at least one was played; 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import grpc
from skillclassics.matchmaking.v1 import matchmaking_pb2 as mm

from clients.bot import GameResult, Stalled, play_match
from clients.families import FamilyClient, UnknownFamily, family, family_names
from clients.player import DEFAULT_GATEWAY, DevKeyMissing, GatewayError, PlayerSession, development_token
from libs.fairness import FairnessError, Proof, verify
from libs.runtime import eventloop

__all__ = [
    "DEMO_GAMES",
    "DemoConfig",
    "DemoGame",
    "demo",
    "demo_family",
    "demo_games",
    "fairness_report",
    "main",
    "main_async",
]

DEFAULT_FAMILIES: Final = family_names()
"""Every family the clients know (a family the stack does not serve is skipped, saying why)."""
DEFAULT_MAX_PLIES: Final = 300
STRATEGIES: Final = ("random", "greedy")
"""The strategy of the table's creator (seat 0) and of the bot that joins it."""


@dataclass(frozen=True, slots=True)
class DemoGame:
    """One match the demo plays: a family, its option settings and the two bots' strategies."""

    family: str
    label: str
    """What the output calls it (the family's name for its usual game)."""
    settings: Mapping[str, str] | None = None
    """The family's option settings; ``None``: its ``demo_settings``."""
    strategies: tuple[str, str] = STRATEGIES
    """The table creator's (seat 0) strategy and the joining bot's."""


DEMO_GAMES: Final[Mapping[str, tuple[DemoGame, ...]]] = {
    "chess": (
        DemoGame("chess", "chess"),
        DemoGame("chess", "skirmish", {"variant": "skirmish", "preset": "random"}, ("random", "duelist")),
    ),
}
"""The games of a family that plays more than its usual one (by default: one game, its label its name)."""


def demo_games(names: Sequence[str]) -> list[DemoGame]:
    """The games ``names`` ask for: each family's games (:data:`DEMO_GAMES`), or a game by its label
    (``skirmish``); a name that is neither is kept as a family (skipped later if unknown)."""
    labelled = {game.label: game for games in DEMO_GAMES.values() for game in games}
    found: list[DemoGame] = []
    for name in names:
        if name in DEMO_GAMES:
            found += DEMO_GAMES[name]
        elif name in labelled:
            found.append(labelled[name])
        else:
            found.append(DemoGame(name, name))
    return found


Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class DemoConfig:
    gateway: str = DEFAULT_GATEWAY
    families: tuple[str, ...] = DEFAULT_FAMILIES
    max_plies: int = DEFAULT_MAX_PLIES
    minutes: float | None = None
    """Main time per player; ``None``: each family's shortest lobby clock (``FamilyClient.quick_minutes``)."""
    env: Mapping[str, str] | None = None
    """Where the development key is found (default: ``os.environ``)."""
    seed: int | None = None
    stall_s: float = 30.0
    """A match that sends no update for this long fails the family's demo (bots answer at once)."""


class Skip(Exception):
    """The stack does not have this family; the message says why."""


class Failed(Exception):
    """The family's demo did not complete; the message says why."""


def _print(text: str) -> None:
    print(text, flush=True)


async def _probe(session: PlayerSession, fam: FamilyClient) -> None:
    """Whether the gateway reaches the family's rules service (:class:`Skip` when it does not)."""
    try:
        await session.get_match(f"{fam.name}.0.demo-probe")
    except GatewayError as error:
        if error.code == grpc.StatusCode.UNAVAILABLE:
            raise Skip(f"its rules service is unavailable ({error})") from None
        if error.reason == "FAMILY_NOT_SERVED":
            raise Skip(f"the gateway has no {fam.name} rules service ({error})") from None
        # NOT_FOUND for the probe's match id itself: the rules service answered.


async def fairness_report(session: PlayerSession, match_id: str, wait_s: float = 10.0) -> str:
    """The match's fairness proof, fetched through the gateway with ``session``'s token
    (``GetFairnessProof``, asked again while the match's stream is not finished yet) and verified
    offline: the verdict line."""
    try:
        reply = await session.fairness_proof(match_id, wait_s=wait_s)
    except GatewayError as error:
        raise Failed(
            f"GetFairnessProof at {session.address} refused: {error.code.name}: {error.details}"
        ) from None
    try:
        proof = Proof.from_json(reply.proof_json)
    except FairnessError as error:
        raise Failed(f"the fairness proof of {match_id} is malformed: {error}") from None
    return f"{verify(proof).summary()} (commitment {proof.commitment[:16]}...)"


async def demo_family(name: str | DemoGame, config: DemoConfig, tag: str, say: Say) -> GameResult:
    """One match of family ``name`` between a random and a greedy bot (or the game ``name`` describes);
    :class:`Skip` or :class:`Failed`."""
    game = name if isinstance(name, DemoGame) else DemoGame(name, name)
    strategies = game.strategies
    try:
        fam = family(game.family)
    except UnknownFamily as error:
        raise Skip(str(error)) from None
    env = os.environ if config.env is None else config.env
    players = [f"{strategy}-{tag}" for strategy in strategies]
    tokens = [development_token(player, env) for player in players]
    rng = random.Random(config.seed)
    async with (
        PlayerSession(config.gateway, tokens[0]) as host,
        PlayerSession(config.gateway, tokens[1]) as guest,
    ):
        await host.whoami()
        await _probe(host, fam)
        control = fam.time_control(config.minutes or fam.quick_minutes)
        try:
            table = await host.create_table(
                fam.name,
                options=fam.options(fam.demo_settings if game.settings is None else game.settings),
                time_control=control,
                visibility=mm.VISIBILITY_PRIVATE,
            )
        except GatewayError as error:
            if error.reason == "UNKNOWN_FAMILY":
                raise Skip(f"matchmaking does not offer it ({error})") from None
            raise
        labels = [f"{players[seat]} ({strategies[seat]}, {fam.seat_label(seat)})" for seat in (0, 1)]
        clock = (
            f"{control.period_ms / 1000:g} s a move"
            if control.periods and not control.base_ms
            else f"{control.base_ms / 60_000:g} min"
        )
        setup = f"{clock}, {fam.describe_options(table.options)}".rstrip(", ")
        say(f"{labels[0]} vs {labels[1]}; {setup}; table {table.table_id}")
        async with guest.lobby() as lobby:
            joined = await guest.join_table(table.table_id)
            match_id = joined.match_id
            if joined.status != mm.TABLE_STATUS_PLAYING:
                try:
                    async with asyncio.timeout(10):
                        match_id = (await lobby.match_ready(table_id=table.table_id)).match_id
                except TimeoutError:
                    raise Failed(
                        f"matchmaking has not created match {match_id} on the {fam.name} rules service "
                        "(is matchmaking configured with its address?)"
                    ) from None
        cap = f"a game still on after {config.max_plies} plies is resigned"
        say(f"match {match_id}: bots move instantly; {cap}")
        minds = [fam.strategy(strategy, random.Random(rng.random())) for strategy in strategies]
        tasks = [
            asyncio.create_task(
                play_match(session, match_id, mind, fam, max_plies=config.max_plies, stall_s=config.stall_s)
            )
            for session, mind in zip((host, guest), minds, strict=True)
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in tasks:
            failure = None if task.cancelled() else task.exception()
            if failure is not None:
                raise failure
        return tasks[0].result()


async def demo(config: DemoConfig, say: Say = _print) -> int:
    """Run the demo for every family of ``config``; returns the exit status."""
    tag = uuid.uuid4().hex[:6]
    say(f"SkillClassics demo: bots play through the gateway at {config.gateway}")
    played = skipped = failed = 0
    for game in demo_games(config.families):
        name = game.label

        def tell(text: str, name: str = name) -> None:
            say(f"{name}: {text}")

        try:
            result = await demo_family(game, config, tag, tell)
        except Skip as reason:
            tell(f"skipped: {reason}")
            skipped += 1
            continue
        except (DevKeyMissing, ValueError) as error:  # no key, or a malformed one: nothing can be signed
            say(f"demo: {error}")
            return 1
        except GatewayError as error:
            if error.code == grpc.StatusCode.UNAVAILABLE and not error.reached:
                say(f"demo: {error.details}")
                return 1
            tell(f"failed: {error}")
            failed += 1
            continue
        except (Failed, Stalled) as error:
            tell(f"failed: {error}")
            failed += 1
            continue
        tell(f"result: {result.line(with_id=False)}")
        fam = family(game.family)
        if fam.draws_chance(fam.options(fam.demo_settings if game.settings is None else game.settings)):
            try:  # as the table's host, a player of the match (any signed-in player may ask)
                host = development_token(
                    f"{game.strategies[0]}-{tag}", os.environ if config.env is None else config.env
                )
                async with PlayerSession(config.gateway, host) as session:
                    tell(f"fairness: {await fairness_report(session, result.match_id)}")
            except Failed as error:
                tell(f"fairness: {error}")
                failed += 1
                continue
        else:
            tell(f"fairness: no chance used ({game.family} draws nothing from the fairness service)")
        played += 1
    say(f"demo: {played} played, {skipped} skipped, {failed} failed")
    return 0 if played and not failed else 1


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m clients.demo",
        description="Bots play one match of each family through the gateway of a running stack.",
    )
    parser.add_argument("--gateway", default=env.get("GATEWAY_ADDRESS") or DEFAULT_GATEWAY)
    parser.add_argument(
        "--families",
        default=env.get("DEMO_FAMILIES") or ",".join(DEFAULT_FAMILIES),
        help=f"comma-separated families, or games such as skirmish (default: {','.join(DEFAULT_FAMILIES)})",
    )
    parser.add_argument(
        "--max-plies",
        type=int,
        default=int(env.get("DEMO_MAX_PLIES") or DEFAULT_MAX_PLIES),
        help="resign once a game is this long (default: 300)",
    )
    minutes = env.get("DEMO_MINUTES")
    parser.add_argument(
        "--minutes",
        type=float,
        default=float(minutes) if minutes else None,
        help="main time per player (default: the family's shortest lobby clock: "
        + ", ".join(f"{name} {family(name).quick_minutes:g}" for name in DEFAULT_FAMILIES)
        + ")",
    )
    parser.add_argument("--seed", type=int, help="seed the bots' choices")
    return parser


def _config(argv: Sequence[str] | None, env: Mapping[str, str]) -> DemoConfig:
    args = build_parser(env).parse_args(argv)
    families = tuple(name.strip() for name in args.families.split(",") if name.strip())
    return DemoConfig(
        gateway=args.gateway,
        families=families,
        max_plies=args.max_plies,
        minutes=args.minutes,
        env=env,
        seed=args.seed,
    )


async def main_async(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    return await demo(_config(argv, os.environ if env is None else env))


def main(argv: Sequence[str] | None = None) -> int:
    config = _config(argv, os.environ)
    try:
        return eventloop.run(demo(config))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
