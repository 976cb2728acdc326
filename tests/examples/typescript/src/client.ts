// A SkillClassics client in TypeScript: two players meet at a lobby table, play fool's mate over the
// gateway's Play streams, read the match back, then make one deliberately bad request and decode its
// status details. It proves the gRPC contract from a second language (docs/clients.md, "A TypeScript
// client"); tests/examples/test_typescript_client.py builds it and runs it against a real stack.
//
// Configuration, from the environment or from `--name=value` arguments (which win):
//   SC_GATEWAY   / --gateway    the gateway: host:port (plaintext HTTP/2, as the gateway's port speaks)
//                               or a URL, http://... or https://... (default 127.0.0.1:50050)
//   SC_TOKEN_A   / --token-a    player A's bearer token (A opens the table and plays White)
//   SC_TOKEN_B   / --token-b    player B's bearer token (B joins it and plays Black)
//   SC_CA_FILE   / --ca-file    https only: a PEM file of the CA to trust (default: Node's)
//   SC_CERT_FILE / --cert-file  https only: a client certificate (PEM), with SC_KEY_FILE / --key-file
//   SC_TIMEOUT_MS / --timeout-ms  how long any one wait may take (default 15000)
//
// Output: one JSON object per line on stdout, each with "step"; 64-bit integers are JSON numbers. The
// last line is {"step": "done"}; on a failure it is {"step": "failed", ...} and the exit status is 1.

import { readFileSync } from "node:fs";
import { randomUUID } from "node:crypto";

import { create, createRegistry, fromBinary, toJson, type DescEnum, type JsonValue } from "@bufbuild/protobuf";
import { anyUnpack, type Any } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { file_google_rpc_error_details } from "./gen/google/rpc/error_details_pb";
import { ErrorReason } from "./gen/skillclassics/errors/v1/errors_pb";
import { StatusSchema } from "./gen/google/rpc/status_pb";
import { Ruleset } from "./gen/skillclassics/chess/v1/chess_pb";
import {
  GatewayService,
  PlayRequestSchema,
  type PlayRequest,
  type WatchLobbyResponse,
} from "./gen/skillclassics/gateway/v1/gateway_pb";
import {
  TableStatusSchema,
  Visibility,
} from "./gen/skillclassics/matchmaking/v1/matchmaking_pb";
import {
  MatchStatus,
  MatchStatusSchema,
  TerminationSchema,
  type MatchUpdate,
} from "./gen/skillclassics/rules/v1/rules_pb";

const FOOLS_MATE = ["f3", "e5", "g4", "Qh4#"];
const FIVE_MINUTES_MS = 5n * 60_000n;

// -- configuration ---------------------------------------------------------------------------------------

function optionalSetting(name: string, env: string): string | undefined {
  const prefix = `--${name}=`;
  const arg = process.argv.slice(2).find((a) => a.startsWith(prefix));
  return (arg !== undefined ? arg.slice(prefix.length) : process.env[env]) || undefined;
}

function setting(name: string, env: string, fallback?: string): string {
  const value = optionalSetting(name, env) ?? fallback;
  if (value === undefined) throw new Error(`missing setting: pass --${name}=... or set ${env}`);
  return value;
}

const gatewayAddress = setting("gateway", "SC_GATEWAY", "127.0.0.1:50050");
const baseUrl = /^https?:\/\//.test(gatewayAddress) ? gatewayAddress : `http://${gatewayAddress}`;
const timeoutMs = Number(setting("timeout-ms", "SC_TIMEOUT_MS", "15000"));
const caFile = optionalSetting("ca-file", "SC_CA_FILE");
const certFile = optionalSetting("cert-file", "SC_CERT_FILE");
const keyFile = optionalSetting("key-file", "SC_KEY_FILE");

// -- output ----------------------------------------------------------------------------------------------

function emit(step: string, fields: Record<string, unknown> = {}): void {
  const line = JSON.stringify({ step, ...fields }, (_key, value: unknown) =>
    typeof value === "bigint" ? (Number.isSafeInteger(Number(value)) ? Number(value) : value.toString()) : value,
  );
  process.stdout.write(line + "\n");
}

/** An enum value's name as the proto spells it (MATCH_STATUS_FINISHED), or its number when unknown. */
function enumName(schema: DescEnum, value: number): string {
  return schema.values.find((v) => v.number === value)?.name ?? String(value);
}

/** A Connect code as gRPC spells it: Code.InvalidArgument is "INVALID_ARGUMENT". */
function codeName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

// -- helpers ---------------------------------------------------------------------------------------------

/** Rejects after the configured timeout, naming what was awaited. */
function within<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** An async queue: what a bidirectional stream's request side reads from (an async generator, so that
 *  Connect can end it with return() or throw()). */
class Outbox<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private wakeUp: (() => void) | undefined;
  private closed = false;

  push(item: T): void {
    this.items.push(item);
    this.wakeUp?.();
  }

  close(): void {
    this.closed = true;
    this.wakeUp?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) {
        yield item;
      } else if (this.closed) {
        return;
      } else {
        await new Promise<void>((resolve) => (this.wakeUp = resolve));
        this.wakeUp = undefined;
      }
    }
  }
}

/** A server stream read in the background, so that a wait for one event keeps the others. */
class Inbox<T> {
  private seen: T[] = [];
  private wakeUp: (() => void) | undefined;
  private ended: { error?: unknown } | undefined;

  constructor(stream: AsyncIterable<T>) {
    void (async () => {
      try {
        for await (const item of stream) {
          this.seen.push(item);
          this.wakeUp?.();
        }
        this.ended = {};
      } catch (error) {
        this.ended = { error };
      }
      this.wakeUp?.();
    })();
  }

  /** The first message (not taken yet) that `match` accepts; the ones before it are dropped. */
  async take(what: string, match: (item: T) => boolean): Promise<T> {
    return within(
      what,
      (async () => {
        for (;;) {
          const index = this.seen.findIndex(match);
          if (index >= 0) {
            const [item] = this.seen.splice(0, index + 1).slice(-1);
            return item;
          }
          this.seen = [];
          if (this.ended) {
            throw this.ended.error ?? new Error(`the stream ended before ${what}`);
          }
          await new Promise<void>((resolve) => (this.wakeUp = resolve));
        }
      })(),
    );
  }
}

type Gateway = Client<typeof GatewayService>;

interface Player {
  name: "a" | "b";
  headers: Record<string, string>;
  id: string;
}

function event<K extends NonNullable<WatchLobbyResponse["event"]["case"]>>(kind: K) {
  return (response: WatchLobbyResponse): boolean => response.event.case === kind;
}

function summary(update: MatchUpdate): Record<string, unknown> {
  return {
    sequence: update.sequence,
    status: enumName(MatchStatusSchema, update.status),
    moves: update.view?.family.case === "chess" ? update.view.family.value.movesSan : [],
    termination: enumName(TerminationSchema, update.result?.termination ?? 0),
    winner: update.result?.winner ?? null,
  };
}

// -- the game over one Play stream per player ------------------------------------------------------------

/** One player's whole game: opens Play, moves their plies of `line` as their turns come, and returns the
 *  final update (the server ends the stream after it). */
async function play(gateway: Gateway, player: Player, matchId: string, line: string[]): Promise<MatchUpdate> {
  const outbox = new Outbox<PlayRequest>();
  outbox.push(create(PlayRequestSchema, { kind: { case: "open", value: { matchId, fromSequence: 0n } } }));
  const responses = gateway.play(outbox, { headers: player.headers });
  let seat: number | undefined;
  const sent = new Set<number>();
  let last: MatchUpdate | undefined;
  // One unreadable action first: refused in its answer (the stream goes on), with the catalogue's reason.
  const garbled = randomUUID();
  outbox.push(
    create(PlayRequestSchema, {
      kind: {
        case: "action",
        value: {
          idempotencyKey: garbled,
          action: { kind: { case: "chess", value: { kind: { case: "move", value: "zz9" } } } },
        },
      },
    }),
  );
  try {
    for await (const response of responses) {
      switch (response.kind.case) {
        case "opened":
          seat = response.kind.value.seat;
          emit("play_opened", { player: player.name, match_id: response.kind.value.matchId, seat });
          break;
        case "answer": {
          const answer = response.kind.value;
          if (answer.idempotencyKey === garbled) {
            const details = answer.details;
            emit("answer_refused", {
              player: player.name,
              code: answer.code,
              reason: details === undefined ? null : ErrorReason[details.reason],
              violations: details?.fieldViolations.map((v) => v.field) ?? [],
            });
            break;
          }
          emit("answer", {
            player: player.name,
            idempotency_key: answer.idempotencyKey,
            sequence: answer.sequence,
            code: answer.code,
            message: answer.message,
          });
          if (answer.code !== 0) throw new Error(`move refused: ${answer.code} ${answer.message}`);
          break;
        }
        case "update": {
          const update = response.kind.value;
          last = update;
          const moves = update.view?.family.case === "chess" ? update.view.family.value.movesSan : [];
          const ply = moves.length;
          emit("update", { player: player.name, ...summary(update), to_move: update.toMove ?? null });
          const mine =
            seat !== undefined &&
            (update.status === MatchStatus.WAITING || update.status === MatchStatus.LIVE) &&
            update.toMove === seat &&
            ply < line.length &&
            ply % 2 === seat &&
            !sent.has(ply);
          if (mine) {
            sent.add(ply);
            const key = randomUUID();
            emit("move", {
              player: player.name,
              seat,
              ply,
              san: line[ply],
              legal_actions: update.legalActions.length,
              idempotency_key: key,
            });
            outbox.push(
              create(PlayRequestSchema, {
                kind: {
                  case: "action",
                  value: {
                    idempotencyKey: key,
                    action: { kind: { case: "chess", value: { kind: { case: "move", value: line[ply] } } } },
                  },
                },
              }),
            );
          }
          if (update.result !== undefined && update.result.termination !== 0) {
            emit("final_update", { player: player.name, seat, ...summary(update) });
            outbox.close(); // our side is done; the server ends the stream after the final update
          }
          break;
        }
        default:
          break; // a kind newer than this client: skip it
      }
    }
  } finally {
    outbox.close();
  }
  if (last === undefined || last.result === undefined || last.result.termination === 0) {
    throw new Error(`${player.name}'s Play stream ended before the match was over`);
  }
  emit("play_closed", { player: player.name, code: "OK" });
  return last;
}

// -- a refusal and its status details --------------------------------------------------------------------

const detailTypes = createRegistry(file_google_rpc_error_details);

/** The google.rpc.Status in the error's grpc-status-details-bin trailer, details decoded, or null. */
function statusDetails(error: ConnectError): Record<string, unknown> | null {
  const raw = error.metadata.get("grpc-status-details-bin");
  if (raw === null) return null;
  const status = fromBinary(StatusSchema, Buffer.from(raw, "base64"));
  const details = status.details.map((any: Any) => {
    const type = any.typeUrl.slice(any.typeUrl.lastIndexOf("/") + 1);
    const message = anyUnpack(any, detailTypes);
    if (message === undefined) {
      return { type, known: false, bytes: Buffer.from(any.value).toString("base64") };
    }
    const schema = detailTypes.getMessage(message.$typeName);
    const value: JsonValue = schema ? toJson(schema, message, { registry: detailTypes }) : null;
    return { type, known: true, value };
  });
  return { code: status.code, message: status.message, details };
}

async function badRequest(step: string, call: () => Promise<unknown>): Promise<void> {
  try {
    await call();
  } catch (error) {
    if (!(error instanceof ConnectError)) throw error;
    const status = statusDetails(error);
    emit(step, {
      code: codeName(error.code),
      code_number: error.code,
      message: error.rawMessage,
      details_trailer: status !== null,
      status,
      // What Connect itself parsed from the same trailer: the same details, as type names.
      connect_detail_types: error.details.map((d) => ("desc" in d ? d.desc.typeName : d.type)),
    });
    return;
  }
  throw new Error(`${step}: the bad request was accepted`);
}

// -- the script ------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const tls =
    baseUrl.startsWith("https://") && (caFile || certFile)
      ? {
          ca: caFile ? readFileSync(caFile) : undefined,
          cert: certFile ? readFileSync(certFile) : undefined,
          key: keyFile ? readFileSync(keyFile) : undefined,
        }
      : undefined;
  const transport = createGrpcTransport({ baseUrl, nodeOptions: tls }) // gRPC over HTTP/2;
  const gateway: Gateway = createClient(GatewayService, transport);
  emit("config", { base_url: baseUrl, tls: baseUrl.startsWith("https://") });

  const players: Player[] = [];
  for (const name of ["a", "b"] as const) {
    const headers = { authorization: `Bearer ${setting(`token-${name}`, `SC_TOKEN_${name.toUpperCase()}`)}` };
    const me = await gateway.whoAmI({}, { headers, timeoutMs });
    emit("whoami", { player: name, player_id: me.playerId, expires_at_ms: me.expiresAtMs });
    players.push({ name, headers, id: me.playerId });
  }
  const [a, b] = players;

  // Both lobbies first: from `subscribed` on no event of the player's is missed.
  const stop = new AbortController();
  const lobbies = new Map<Player, Inbox<WatchLobbyResponse>>();
  for (const player of players) {
    const lobby = new Inbox(gateway.watchLobby({}, { headers: player.headers, signal: stop.signal }));
    const subscribed = await lobby.take(`${player.name}'s subscribed`, event("subscribed"));
    emit("lobby_subscribed", {
      player: player.name,
      playing: subscribed.event.case === "subscribed" ? subscribed.event.value.playing.length : null,
    });
    lobbies.set(player, lobby);
  }

  // A opens a free five-minute chess table and is told about it on their lobby stream.
  const created = await gateway.createTable(
    {
      family: "chess",
      options: { family: { case: "chess", value: { ruleset: Ruleset.CONTEST } } },
      timeControl: { baseMs: FIVE_MINUTES_MS },
      entryFeeMinor: 0n,
      currency: "USD",
      visibility: Visibility.PUBLIC,
      idempotencyKey: randomUUID(),
    },
    { headers: a.headers, timeoutMs },
  );
  const table = created.table;
  if (table === undefined) throw new Error("CreateTable returned no table");
  emit("create_table", {
    table_id: table.tableId,
    creator_id: table.creatorId,
    status: enumName(TableStatusSchema, table.status),
    family: table.family,
  });
  const updated = await lobbies
    .get(a)!
    .take(
      "A's table_updated",
      (e) => e.event.case === "tableUpdated" && e.event.value.tableId === table.tableId,
    );
  if (updated.event.case !== "tableUpdated") throw new Error("unreachable");
  emit("table_updated", {
    player: "a",
    table_id: updated.event.value.tableId,
    status: enumName(TableStatusSchema, updated.event.value.status),
  });

  // B finds it among the free chess tables and sits down.
  const listed = await gateway.listTables(
    { family: "chess", freeOnly: true, baseMs: FIVE_MINUTES_MS },
    { headers: b.headers, timeoutMs },
  );
  const found = listed.tables.find((t) => t.tableId === table.tableId);
  emit("list_tables", { player: "b", count: listed.tables.length, found: found !== undefined, table_id: found?.tableId ?? null });
  if (found === undefined) throw new Error(`table ${table.tableId} is not listed`);
  const joined = await gateway.joinTable({ tableId: table.tableId }, { headers: b.headers, timeoutMs });
  const matchId = joined.table?.matchId ?? "";
  emit("join_table", {
    player: "b",
    table_id: joined.table?.tableId,
    match_id: matchId,
    status: enumName(TableStatusSchema, joined.table?.status ?? 0),
    seats: joined.table?.seats.map((s) => ({ seat: s.seat, player_id: s.playerId })),
  });

  for (const player of players) {
    const ready = await lobbies.get(player)!.take(`${player.name}'s match_ready`, event("matchReady"));
    if (ready.event.case !== "matchReady") throw new Error("unreachable");
    const value = ready.event.value;
    emit("match_ready", {
      player: player.name,
      match_id: value.matchId,
      family: value.family,
      seat: value.seat,
      opponent_id: value.opponentId,
      table_id: value.tableId,
    });
  }
  stop.abort(); // done with the lobbies

  // The game: each player on their own Play stream, moving when their stream says it is their turn.
  const finals = await within(
    "the game",
    Promise.all([play(gateway, a, matchId, FOOLS_MATE), play(gateway, b, matchId, FOOLS_MATE)]),
  );
  const winnerSeat = finals[0].result?.winner;
  emit("game_over", {
    match_id: matchId,
    ...summary(finals[0]),
    winner_player_id: winnerSeat === undefined ? null : players[winnerSeat]?.id,
    same_final_for_both: finals[0].sequence === finals[1].sequence,
  });

  const got = await gateway.getMatch({ matchId }, { headers: a.headers, timeoutMs });
  emit("get_match", {
    player: "a",
    match_id: got.update?.matchId,
    seat: got.seat ?? null,
    seats: got.seats.map((s) => ({ seat: s.seat, player_id: s.playerId })),
    ...(got.update ? summary(got.update) : {}),
  });

  // Deliberately bad requests: the status code, the reason and the status details (when sent).
  await badRequest("bad_list_tables", () => gateway.listTables({ family: "" }, { headers: a.headers, timeoutMs }));
  await badRequest("bad_submit_action", () =>
    gateway.submitAction(
      {
        matchId: "not-a-match-id",
        idempotencyKey: randomUUID(),
        action: { kind: { case: "chess", value: { kind: { case: "move", value: "e4" } } } },
      },
      { headers: a.headers, timeoutMs },
    ),
  );
  emit("done");
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    const fields: Record<string, unknown> = { error: String(error) };
    if (error instanceof ConnectError) {
      fields.code = codeName(error.code);
      fields.message = error.rawMessage;
    }
    emit("failed", fields);
    process.exit(1);
  },
);
