/**
 * `monitor`: follows the gateway's transparency log. Each round it reads the
 * checkpoint of every replica given, checks each is consistent with the last
 * one seen (state kept in a local file) and with each other (split view),
 * that new entries are digests only and hash into the tiles, and that the
 * signature is by a checkpoint key of a keyset the log itself holds (whose
 * archived report hashes to the logged digest and verifies). It prints what
 * it verified. With `--witness-listen` it is also a C2SP tlog-witness: it
 * cosigns (tlog-cosignature/v1) checkpoints consistent with what it saw.
 * All I/O comes in through `deps`.
 */
import { Buffer } from "node:buffer";
import { parseOptions, UsageError } from "./args.ts";
import {
  type Fetch,
  followLog,
  LogReader,
  type MonitorState,
  type QuoteCheck,
} from "../verify/mod.ts";
import {
  bytesEqual,
  bytesToHex,
  createNoteSigner,
  emptyRoot,
  type NoteSigner,
  parseCheckpointBody,
  parseHex,
  parseNote,
  parseVerifierKey,
  unb64,
  verifyConsistency,
  verifyNote,
} from "../aci/mod.ts";

export interface MonitorDeps {
  fetch: Fetch;
  readTextFile: (path: string) => Promise<string | null>;
  /** `secret`: readable by the owner only (0600), as the witness's key. */
  writeTextFile: (path: string, text: string, opts?: { secret?: boolean }) => Promise<void>;
  print: (line: string) => void;
  randomBytes: (n: number) => Uint8Array;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  quoteCheck?: QuoteCheck;
  /** Serves the witness; returns the address it listens on. */
  serve: (hostname: string, port: number, handler: (req: Request) => Promise<Response>) => {
    url: string;
    finished: Promise<void>;
  };
}

const MONITOR_USAGE = [
  "usage: monitor --gateway <URL> [--gateway <URL of another replica> …] [--state <file>]",
  "               [--once] [--interval <seconds>] [--allow-dev]",
  "       monitor … --witness-listen <host:port> --witness-key <file> --witness-name <name>",
  "  --state           where the last verified checkpoint and the log's keysets are kept",
  "                    (default tlog-monitor.json)",
  "  --once            one round, then exit (0: all verified, 1: a check failed or a gateway",
  "                    was unreachable); without it a gateway unreachable is a WARN, retried",
  "  --allow-dev       accept keysets whose report carries development (non-hardware) evidence",
  "  --witness-listen  also serve C2SP tlog-witness add-checkpoint and cosign consistent checkpoints",
  "  --witness-key     hex Ed25519 seed of the witness (created when the file does not exist)",
].join("\n");

type Args = ReturnType<typeof parse>;

function parse(args: string[]) {
  return parseOptions(args, {
    strings: ["state", "interval", "witness-listen", "witness-key", "witness-name"],
    booleans: ["once", "allow-dev", "help"],
    multiple: ["gateway"],
  });
}

/** Runs the monitor; resolves with the exit code (never, in follow mode without failures). */
export async function runMonitor(args: string[], deps: MonitorDeps): Promise<number> {
  let p: Args;
  try {
    p = parse(args);
    if (p.flags.has("help")) {
      deps.print(MONITOR_USAGE);
      return 0;
    }
    if (p.lists.gateway.length === 0) throw new UsageError("--gateway is required");
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    deps.print(`error: ${e.message}\n${MONITOR_USAGE}`);
    return 2;
  }
  // A gateway that cannot be reached (restarting, the network) is not a failed check.
  deps = { ...deps, fetch: reaching(deps.fetch) };
  const statePath = p.values.state ?? "tlog-monitor.json";
  const gateways = p.lists.gateway.map((g) => g.replace(/\/+$/, ""));
  const opts = { allowDevEvidence: p.flags.has("allow-dev"), quoteCheck: deps.quoteCheck };
  const interval = Number(p.values.interval ?? "10");
  if (!(interval > 0)) {
    deps.print("error: --interval must be a positive number of seconds");
    return 2;
  }
  let state = await loadState(deps, statePath);
  const save = async (s: MonitorState | null) => {
    state = s;
    if (s !== null) await deps.writeTextFile(statePath, JSON.stringify(s, null, 2) + "\n");
  };
  // Rounds and witness submissions take turns on the state.
  let turn = Promise.resolve();
  const exclusive = <T>(f: () => Promise<T>): Promise<T> => {
    const run = turn.then(f);
    turn = run.then(() => {}, () => {});
    return run;
  };
  const round = () => exclusive(async () => save(await monitorRound(deps, gateways, state, opts)));
  /** Follows the log up to a submitted checkpoint (the witness), printing what it verified. */
  const advance = (note: string) =>
    exclusive(async () => {
      const r = await followLog(deps.fetch, gateways[0], state, opts, note);
      for (const l of r.lines) deps.print(`${gateways[0]}: ${l}`);
      await save(r.state);
      return r.state;
    });
  let witness: { finished: Promise<void> } | null = null;
  if (p.values["witness-listen"] !== undefined) {
    try {
      witness = await startWitness(deps, p, () => state, advance);
    } catch (e) {
      if (!(e instanceof UsageError)) throw e;
      deps.print(`error: ${e.message}\n${MONITOR_USAGE}`);
      return 2;
    }
  }
  const once = p.flags.has("once") && witness === null;
  // While a gateway is unreachable, rounds back off (doubling, up to a minute or the interval).
  let wait = interval;
  for (;;) {
    try {
      await round();
      wait = interval;
    } catch (e) {
      if (!(e instanceof Unreachable)) {
        deps.print(`FAIL ${(e as Error).message}`);
        return 1;
      }
      if (once) {
        deps.print(`WARN ${e.message}: nothing verified`);
        return 1;
      }
      deps.print(`WARN ${e.message}; next try in ${wait} s (the witness keeps serving)`);
      await deps.sleep(wait * 1000);
      wait = Math.min(wait * 2, Math.max(interval, 60));
      continue;
    }
    if (once) return 0;
    await deps.sleep(interval * 1000);
  }
}

/** A request that got no answer at all (refused, reset, a name that does not resolve). */
export class Unreachable extends Error {
  constructor(readonly url: string, cause: unknown) {
    super(
      `${URL.canParse(url) ? new URL(url).origin : url} unreachable (${
        (cause as Error)?.message ?? cause
      })`,
    );
  }
}

/** `fetch` whose failures to get any answer are `Unreachable` (answers pass as they are). */
function reaching(fetch: Fetch): Fetch {
  return async (url, init) => {
    try {
      return await fetch(url, init);
    } catch (e) {
      throw new Unreachable(url, e);
    }
  };
}

async function loadState(deps: MonitorDeps, path: string): Promise<MonitorState | null> {
  const text = await deps.readTextFile(path);
  if (text === null) return null;
  const v = JSON.parse(text) as MonitorState;
  if (typeof v.origin !== "string" || typeof v.size !== "number") {
    throw new UsageError(`${path} is not a monitor state file`);
  }
  return v;
}

/** One round over every replica: follows the log, then checks the replicas agree. */
async function monitorRound(
  deps: MonitorDeps,
  gateways: string[],
  state: MonitorState | null,
  opts: { allowDevEvidence: boolean; quoteCheck?: QuoteCheck },
): Promise<MonitorState | null> {
  const seen: { gateway: string; size: number }[] = [];
  // Largest first: the others must then be prefixes of the history just verified.
  const sized: { g: string; size: number }[] = [];
  for (const g of gateways) {
    const got = await new LogReader(deps.fetch, `${g}/v1/aci/log`).checkpointOrNull();
    if (got === null) {
      deps.print(`${g}: no checkpoint served yet (waiting for entries or cosignatures)`);
    } else sized.push({ g, size: got.checkpoint.size });
  }
  if (sized.length === 0) return state;
  sized.sort((a, b) => b.size - a.size);
  for (const { g } of sized) {
    if (state === null || seen.length === 0) {
      const r = await followLog(deps.fetch, g, state, opts);
      state = r.state;
      for (const l of r.lines) deps.print(`${g}: ${l}`);
      seen.push({ gateway: g, size: state.size });
      continue;
    }
    await checkReplica(deps, g, state);
    const { checkpoint } = await new LogReader(deps.fetch, `${g}/v1/aci/log`).checkpoint();
    seen.push({ gateway: g, size: checkpoint.size });
  }
  if (gateways.length > 1) {
    deps.print(
      `split view: none — ${gateways.length} replicas serve one history (sizes ${
        seen.map((s) => s.size).join(", ")
      })`,
    );
  }
  return state;
}

/** A replica's checkpoint (at most `state`'s size) is signed and a prefix of `state`'s tree. */
async function checkReplica(deps: MonitorDeps, gateway: string, state: MonitorState) {
  const reader = new LogReader(deps.fetch, `${gateway}/v1/aci/log`);
  const { note, checkpoint: cp } = await reader.checkpoint();
  const keys = state.keysets.flatMap((k) => k.vkeys).map(parseVerifierKey).filter((k) =>
    k !== null
  );
  if (cp.origin !== state.origin) throw new Error(`${gateway} serves another origin`);
  if (cp.size === 0 && bytesEqual(cp.root, emptyRoot())) {
    // The empty tree is a prefix of every tree; its signature is checked once a keyset is logged.
    deps.print(`${gateway}: checkpoint size 0 (the empty tree), a prefix of any history`);
    return;
  }
  if (verifyNote(note, keys) === null) throw new Error(`${gateway}: checkpoint signature`);
  const root = new Uint8Array(Buffer.from(state.root, "base64"));
  if (cp.size > state.size) throw new Error(`${gateway} moved on during the round; rerun`);
  if (cp.size === state.size) {
    if (!bytesEqual(cp.root, root)) {
      throw new Error(`SPLIT VIEW: ${gateway} has another root at size ${cp.size}`);
    }
  } else if (cp.size > 0) {
    const proof = await reader.consistencyProof(cp.size, state.size);
    if (!verifyConsistency(cp.size, state.size, proof, cp.root, root)) {
      throw new Error(
        `SPLIT VIEW: ${gateway} at size ${cp.size} is not a prefix of size ${state.size}`,
      );
    }
  }
  deps.print(
    `${gateway}: checkpoint size ${cp.size} verified, a prefix of the history at ${state.size}`,
  );
}

// ---- the witness (C2SP tlog-witness add-checkpoint, tlog-cosignature/v1) ----

interface WitnessState {
  origin: string;
  size: number;
  root: string;
}

async function startWitness(
  deps: MonitorDeps,
  p: Args,
  state: () => MonitorState | null,
  advance: (note: string) => Promise<MonitorState>,
): Promise<{ finished: Promise<void> }> {
  const listen = p.values["witness-listen"]!;
  const keyFile = p.values["witness-key"];
  const name = p.values["witness-name"];
  if (keyFile === undefined || name === undefined) {
    throw new UsageError("--witness-listen needs --witness-key and --witness-name");
  }
  let seedHex = (await deps.readTextFile(keyFile))?.trim() ?? null;
  if (seedHex === null) {
    seedHex = bytesToHex(deps.randomBytes(32));
    await deps.writeTextFile(keyFile, seedHex + "\n", { secret: true });
  }
  const seed = parseHex(seedHex);
  if (seed === null || seed.length !== 32) {
    throw new UsageError(`${keyFile} is not a 32-byte hex seed`);
  }
  const signer = createNoteSigner(name, seed);
  const statePath = `${keyFile}.state.json`;
  const m = /^(.*):(\d+)$/.exec(listen);
  if (!m) throw new UsageError("--witness-listen must be host:port");
  // One submission at a time from reading the state to its update (tlog-witness: atomic);
  // a request's body is read and checked before it takes its turn, so a slow client holds
  // only its own request.
  let chain = Promise.resolve();
  const handler = async (req: Request): Promise<Response> => {
    const sub = await readSubmission(req, state);
    if (sub instanceof Response) return sub;
    const run = chain.then(() => addCheckpoint(deps, sub, signer, statePath, state, advance));
    chain = run.then(() => {}, () => {});
    return await run;
  };
  const server = deps.serve(m[1], Number(m[2]), handler);
  deps.print(`witness ${name} listening on ${server.url}; cosigner vkey ${signer.cosignerVkey}`);
  return { finished: server.finished };
}

const text = (status: number, body: string, type = "text/plain; charset=utf-8") =>
  new Response(body, { status, headers: { "content-type": type } });

/** A submission as read and checked without the witness's state. */
interface Submission {
  old: number;
  proof: Uint8Array[];
  note: string;
  cp: NonNullable<ReturnType<typeof parseCheckpointBody>>;
  /** Signed by a log key the monitor knows (else only following the log can tell). */
  knownSigned: boolean;
}

const MAX_SUBMISSION = 64 * 1024;
/** A submission's whole body must arrive within this (a client cannot hold the witness). */
const READ_DEADLINE_MS = 10_000;

/** The request's body, at most `max` bytes, within the deadline; else a Response. */
async function readCapped(req: Request, max: number): Promise<string | Response> {
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > max) return text(413, "too large\n");
  if (req.body === null) return "";
  const reader = req.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  const timer = setTimeout(() => void reader.cancel().catch(() => {}), READ_DEADLINE_MS);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > max) {
        await reader.cancel().catch(() => {});
        return text(413, "too large\n");
      }
      parts.push(value);
    }
  } catch {
    return text(408, "the request body did not arrive in time\n");
  } finally {
    clearTimeout(timer);
  }
  if (size < declared) return text(408, "the request body did not arrive in time\n");
  return new TextDecoder().decode(Buffer.concat(parts));
}

async function readSubmission(
  req: Request,
  monitored: () => MonitorState | null,
): Promise<Submission | Response> {
  const url = new URL(req.url);
  if (req.method !== "POST" || !url.pathname.endsWith("/add-checkpoint")) {
    await req.body?.cancel();
    return text(404, "not found\n");
  }
  const body = await readCapped(req, MAX_SUBMISSION);
  if (body instanceof Response) return body;
  const split = body.indexOf("\n\n");
  if (split < 0) return text(400, "malformed request\n");
  const head = body.slice(0, split).split("\n");
  const note = body.slice(split + 2);
  const om = /^old (0|[1-9][0-9]*)$/.exec(head[0] ?? "");
  if (!om || head.length - 1 > 63) return text(400, "malformed old size line\n");
  const old = Number(om[1]);
  const proof: Uint8Array[] = [];
  for (const line of head.slice(1)) {
    const h = unb64(line);
    if (h === null || h.length !== 32) return text(400, "malformed proof line\n");
    proof.push(h);
  }
  const cp = (() => {
    const i = note.lastIndexOf("\n\n");
    return i < 0 ? null : parseCheckpointBody(note.slice(0, i + 1));
  })();
  const parsed = parseNote(note);
  if (cp === null || parsed === null) return text(400, "malformed checkpoint\n");
  if (old > cp.size) return text(400, "old size is above the checkpoint size\n");
  const mon = monitored();
  if (mon !== null && mon.origin !== cp.origin) return text(404, "unknown log origin\n");
  const known = keysOf(mon);
  if (verifyNote(note, known) !== null) return { old, proof, note, cp, knownSigned: true };
  // Not by a key the monitor knows. Only a checkpoint beyond what it saw can be signed by a
  // key it has yet to find in the log (a rotation), and only under the origin's name with a
  // key id it does not know: anything else is refused before a byte is fetched.
  const unknownLogKey = parsed.signatures.some((sig) =>
    sig.name === cp.origin && !known.some((k) => k.name === sig.name && bytesEqual(k.id, sig.id))
  );
  if (mon !== null && (cp.size <= mon.size || !unknownLogKey)) {
    return text(403, "no valid signature by a known log key\n");
  }
  if (mon === null && !unknownLogKey) return text(403, "no signature under the log's name\n");
  return { old, proof, note, cp, knownSigned: false };
}

const keysOf = (s: MonitorState | null) =>
  (s?.keysets ?? []).flatMap((k) => k.vkeys).map(parseVerifierKey).filter((k) => k !== null);

async function addCheckpoint(
  deps: MonitorDeps,
  sub: Submission,
  signer: NoteSigner,
  statePath: string,
  monitored: () => MonitorState | null,
  advance: (note: string) => Promise<MonitorState>,
): Promise<Response> {
  const { old, proof, note, cp } = sub;
  const mon = monitored();
  if (mon !== null && mon.origin !== cp.origin) return text(404, "unknown log origin\n");
  if (mon === null || cp.size > mon.size) {
    // A checkpoint beyond what the monitor saw: follow the log up to it (its entries, the
    // keysets it holds, its signature, its consistency with the last one seen). What went
    // wrong is printed here; the submitter learns no more than the status (no log URLs).
    try {
      await advance(note);
    } catch (e) {
      const why = (e as Error).message;
      deps.print(`witness: refused ${cp.origin} size ${cp.size}: ${why}`);
      return /signed/.test(why)
        ? text(403, "no valid signature by a log key\n")
        : text(422, "the checkpoint is not consistent with the log as followed\n");
    }
  } else if (!sub.knownSigned && verifyNote(note, keysOf(mon)) === null) {
    return text(403, "no valid signature by a known log key\n");
  }
  const savedText = await deps.readTextFile(statePath);
  const saved: WitnessState | null = savedText === null ? null : JSON.parse(savedText);
  const latest = saved && saved.origin === cp.origin ? saved : null;
  const latestSize = latest?.size ?? 0;
  const conflict = () => text(409, `${latestSize}\n`, "text/x.tlog.size");
  if (old !== latestSize) return conflict();
  if (cp.size === 0 && !bytesEqual(cp.root, emptyRoot())) return text(422, "bad empty tree\n");
  if (old === 0) {
    if (proof.length !== 0) return text(422, "a proof from the empty tree must be empty\n");
  } else {
    const oldRoot = new Uint8Array(Buffer.from(latest!.root, "base64"));
    if (old === cp.size) {
      // The same size with another root: a fork (tlog-witness: 409).
      if (!bytesEqual(oldRoot, cp.root)) return conflict();
      if (proof.length !== 0) return text(422, "a proof between equal sizes must be empty\n");
    } else if (!verifyConsistency(old, cp.size, proof, oldRoot, cp.root)) {
      return text(422, "the consistency proof does not verify\n");
    }
  }
  const next: WitnessState = {
    origin: cp.origin,
    size: cp.size,
    root: Buffer.from(cp.root).toString("base64"),
  };
  await deps.writeTextFile(statePath, JSON.stringify(next) + "\n");
  const line = signer.cosign(cp.body, Math.floor(deps.now() / 1000));
  deps.print(`witness: cosigned ${cp.origin} size ${cp.size} (from ${old})`);
  return text(200, line);
}
