/**
 * Checking the gateway's transparency log from outside: reading its C2SP
 * tiles and bundles over HTTP, authenticating a checkpoint by the attested
 * keysets the log itself holds (each keyset entry's archived report must hash
 * to the logged digest and verify), and following it from one checkpoint to
 * the next (consistency, new entries hashing into the tiles). Used by
 * `task monitor`, its witness, and `task verify`. I/O comes in as `fetch`.
 */
import { sha256Prefixed } from "../aci/digest.ts";
import { jcsBytes } from "../aci/jcs.ts";
import { type LogEntry, parseLogEntry } from "../aci/log_entry.ts";
import {
  encodeTileIndex,
  HASH_BYTES,
  leafHash,
  subtreeReaderOver,
  TILE_WIDTH,
  treeHash,
  verifyConsistency,
} from "../aci/merkle.ts";
import {
  b64,
  type Checkpoint,
  NOTE_KEY_ALGO,
  parseCheckpointBody,
  type ParsedVerifierKey,
  parseNote,
  parseVerifierKey,
  SIG_ED25519,
  unb64,
  verifierKey,
  verifyNote,
} from "../aci/note.ts";
import { bytesEqual, bytesToHex, parseHex } from "../aci/hex.ts";
import { isRecord } from "./json_shape.ts";
import { extractKeyset, verifyReport } from "./report.ts";
import type { EvidenceOptions } from "./evidence.ts";

export type Fetch = (url: string, init?: RequestInit) => Promise<Response>;

/** The vkeys of a keyset's checkpoint keys (algo c2sp-note-ed25519), named for `origin`. */
export function keysetLogKeys(keyset: unknown, origin: string): ParsedVerifierKey[] {
  if (!isRecord(keyset) || !Array.isArray(keyset.receipt_signing_keys)) return [];
  const out: ParsedVerifierKey[] = [];
  for (const k of keyset.receipt_signing_keys) {
    if (!isRecord(k) || k.algo !== NOTE_KEY_ALGO || typeof k.public_key !== "string") continue;
    const raw = parseHex(k.public_key);
    if (raw === null || raw.length !== 32) continue;
    const parsed = parseVerifierKey(verifierKey(origin, SIG_ED25519, raw));
    if (parsed) out.push(parsed);
  }
  return out;
}

async function getBytes(fetch: Fetch, url: string): Promise<Uint8Array> {
  const res = await fetch(url);
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new Error(`${url} answered HTTP ${res.status}`);
  }
  return new Uint8Array(await res.arrayBuffer());
}

/** Reads a log over HTTP: `prefix` is `<gateway>/v1/aci/log`. */
export class LogReader {
  readonly #fetch: Fetch;
  readonly prefix: string;
  readonly #tiles = new Map<string, Uint8Array>();

  constructor(fetch: Fetch, prefix: string) {
    this.#fetch = fetch;
    this.prefix = prefix.replace(/\/+$/, "");
  }

  /** The served checkpoint; null while the log serves none yet (503 log_pending). */
  async checkpointOrNull(): Promise<{ note: string; checkpoint: Checkpoint } | null> {
    const res = await this.#fetch(`${this.prefix}/checkpoint`);
    const note = await res.text();
    if (res.status === 503) return null;
    if (res.status !== 200) throw new Error(`checkpoint answered HTTP ${res.status}`);
    return parsedCheckpoint(note);
  }

  async checkpoint(): Promise<{ note: string; checkpoint: Checkpoint }> {
    const cp = await this.checkpointOrNull();
    if (cp === null) throw new Error(`${this.prefix} serves no checkpoint yet`);
    return cp;
  }

  /** Tile (level, index) as needed for a tree of `size` (full, or the partial width of that size). */
  async tile(level: number, index: number, size: number): Promise<Uint8Array> {
    const hashes = Math.floor(size / TILE_WIDTH ** level);
    const width = Math.min(TILE_WIDTH, hashes - index * TILE_WIDTH);
    if (width <= 0) throw new Error(`tile ${level}/${index} is beyond size ${size}`);
    const key = `${level}/${index}/${width}`;
    const hit = this.#tiles.get(key);
    if (hit) return hit;
    const path = `tile/${level}/${encodeTileIndex(index)}${
      width < TILE_WIDTH ? `.p/${width}` : ""
    }`;
    const bytes = await getBytes(this.#fetch, `${this.prefix}/${path}`);
    if (bytes.length !== width * HASH_BYTES) throw new Error(`${path} has the wrong length`);
    this.#tiles.set(key, bytes);
    return bytes;
  }

  /** The root of the tree of `size` recomputed from the tiles. */
  root(size: number): Promise<Uint8Array> {
    return treeHash(subtreeReaderOver((l, i) => this.tile(l, i, size)), size);
  }

  /** Entries [from, to) from the entry bundles, each checked against its level-0 tile hash. */
  async entries(from: number, to: number): Promise<Uint8Array[]> {
    const out: Uint8Array[] = [];
    for (let b = Math.floor(from / TILE_WIDTH); b * TILE_WIDTH < to; b++) {
      const width = Math.min(TILE_WIDTH, to - b * TILE_WIDTH);
      const path = `tile/entries/${encodeTileIndex(b)}${width < TILE_WIDTH ? `.p/${width}` : ""}`;
      const bytes = await getBytes(this.#fetch, `${this.prefix}/${path}`);
      const tile = await this.tile(0, b, to);
      let pos = 0;
      for (let i = 0; i < width; i++) {
        if (pos + 2 > bytes.length) throw new Error(`${path} is truncated`);
        const n = (bytes[pos] << 8) | bytes[pos + 1];
        const entry = bytes.slice(pos + 2, pos + 2 + n);
        pos += 2 + n;
        const index = b * TILE_WIDTH + i;
        const expected = tile.subarray(i * HASH_BYTES, (i + 1) * HASH_BYTES);
        if (!bytesEqual(leafHash(entry), expected)) {
          throw new Error(`entry ${index} does not hash to its tile hash`);
        }
        if (index >= from) out.push(entry);
      }
      if (pos !== bytes.length) throw new Error(`${path} has trailing bytes`);
    }
    return out;
  }

  async consistencyProof(from: number, to: number): Promise<Uint8Array[]> {
    const res = await this.#fetch(`${this.prefix}/consistency?from=${from}&to=${to}`);
    const body = await res.json();
    if (res.status !== 200 || !Array.isArray(body.proof)) {
      throw new Error(`consistency ${from}→${to} answered HTTP ${res.status}`);
    }
    return (body.proof as unknown[]).map((p) => {
      const h = typeof p === "string" ? unb64(p) : null;
      if (h === null || h.length !== HASH_BYTES) throw new Error("malformed consistency proof");
      return h;
    });
  }
}

function parsedCheckpoint(note: string): { note: string; checkpoint: Checkpoint } {
  const parsed = parseNote(note);
  const cp = parsed ? parseCheckpointBody(parsed.text) : null;
  if (cp === null) throw new Error("the checkpoint is not a C2SP checkpoint note");
  return { note, checkpoint: cp };
}

/** A keyset the log holds, with the checkpoint keys its verified report lists. */
export interface LoggedKeyset {
  keyset_digest: string;
  report_digest: string;
  vkeys: string[];
  /** The report's evidence verdict (development evidence is accepted only when allowed). */
  evidence: string;
}

/**
 * Authenticates a keyset entry: its archived report (from `gateway`) must hash
 * to the logged report digest, its keyset to the logged keyset digest, and the
 * report verify (nonce-less: archived reports are not fresh).
 */
async function loggedKeyset(
  fetch: Fetch,
  gateway: string,
  origin: string,
  entry: Extract<LogEntry, { kind: "keyset" }>,
  opts: EvidenceOptions,
): Promise<LoggedKeyset> {
  const url = `${gateway}/v1/aci/attestation?workload_keyset_digest=${entry.keyset_digest}`;
  const report: unknown = JSON.parse(new TextDecoder().decode(await getBytes(fetch, url)));
  if (sha256Prefixed(jcsBytes(report)) !== entry.report_digest) {
    throw new Error(
      `the archived report of ${entry.keyset_digest} does not hash to the logged digest`,
    );
  }
  const keyset = extractKeyset(report);
  if (keyset === null || sha256Prefixed(jcsBytes(keyset)) !== entry.keyset_digest) {
    throw new Error(`the archived keyset does not hash to ${entry.keyset_digest}`);
  }
  const checks = await verifyReport(report, { ...opts, nonce: null });
  const failed = checks.filter((c) => !c.ok);
  if (failed.length > 0) {
    throw new Error(
      `the report of keyset ${entry.keyset_digest} does not verify: ${failed[0].name}: ${
        failed[0].detail
      }`,
    );
  }
  const evidence = checks.find((c) => c.name.endsWith("hardware_evidence"))?.detail ?? "";
  return {
    keyset_digest: entry.keyset_digest,
    report_digest: entry.report_digest,
    vkeys: keysetLogKeys(keyset, origin).map((k) => verifierKey(k.name, k.type, k.publicKey)),
    evidence,
  };
}

/** What a monitor keeps between runs (its state file). */
export interface MonitorState {
  origin: string;
  size: number;
  /** Base64 root hash. */
  root: string;
  checkpoint: string;
  keysets: LoggedKeyset[];
}

export interface FollowResult {
  state: MonitorState;
  lines: string[];
}

/**
 * One step of following a log: the checkpoint served at `gateway` must be
 * consistent with `state` (none: the empty tree), its new entries must be
 * digests only and hash into its tiles, its root must be the tiles' root, and
 * its signature must verify under a checkpoint key of a keyset the log
 * itself holds. Throws with the reason on any failure (a fork, a rollback,
 * a bad signature, a malformed entry).
 */
export async function followLog(
  fetch: Fetch,
  gateway: string,
  state: MonitorState | null,
  opts: EvidenceOptions,
  /** A checkpoint note to follow instead of the one served (a witness's submission). */
  given?: string,
): Promise<FollowResult> {
  const base = gateway.replace(/\/+$/, "");
  const reader = new LogReader(fetch, `${base}/v1/aci/log`);
  const { note, checkpoint: cp } = given === undefined
    ? await reader.checkpoint()
    : parsedCheckpoint(given);
  const lines: string[] = [];
  if (state && state.origin !== cp.origin) {
    throw new Error(`origin changed: ${state.origin} → ${cp.origin}`);
  }
  const from = state?.size ?? 0;
  const oldRoot = state ? (unb64(state.root) ?? new Uint8Array(0)) : null;
  if (cp.size < from) throw new Error(`rollback: size ${cp.size} < last seen ${from}`);
  const root = await reader.root(cp.size);
  if (!bytesEqual(root, cp.root)) throw new Error("the checkpoint's root is not its tiles' root");
  if (cp.size === 0 && given === undefined) {
    // The empty tree (root SHA-256 of ""): it commits to nothing and every later tree is
    // consistent with it, so following it proves nothing yet. Its signature cannot be
    // checked against the log's own keysets (it holds none yet) and is not needed: the
    // next round follows from size 0. A witness cosigns only what it could verify.
    lines.push(`checkpoint ${cp.origin} size 0 (the empty tree): nothing logged yet`);
    return {
      state: { origin: cp.origin, size: 0, root: b64(cp.root), checkpoint: note, keysets: [] },
      lines,
    };
  }
  if (oldRoot !== null && from > 0) {
    const proof = await reader.consistencyProof(from, cp.size);
    if (!verifyConsistency(from, cp.size, proof, oldRoot, cp.root)) {
      throw new Error(`FORK: size ${cp.size} is not consistent with the last seen size ${from}`);
    }
    lines.push(`consistent: ${from} → ${cp.size} (RFC 6962 consistency proof verified)`);
  }
  const keysets = [...(state?.keysets ?? [])];
  const counts = { receipt: 0, session: 0, keyset: 0 };
  const entries = await reader.entries(from, cp.size);
  for (const raw of entries) {
    const e = parseLogEntry(raw);
    if (e === null) throw new Error("an entry is not a digest-only log entry");
    counts[e.kind]++;
    if (e.kind === "keyset" && !keysets.some((k) => k.keyset_digest === e.keyset_digest)) {
      const k = await loggedKeyset(fetch, base, cp.origin, e, opts);
      keysets.push(k);
      lines.push(
        `keyset ${k.keyset_digest}: report verified (${k.evidence}); log key ${k.vkeys.join(", ")}`,
      );
    }
  }
  lines.push(
    `entries ${from}..${cp.size}: ${counts.receipt} receipts, ${counts.session} sessions, ` +
      `${counts.keyset} keysets; each hashes into the tiles, the tiles into the root`,
  );
  const keys = keysets.flatMap((k) => k.vkeys).map(parseVerifierKey).filter((k) => k !== null);
  const verified = verifyNote(note, keys);
  if (verified === null) {
    throw new Error("the checkpoint is not signed by a key of any keyset the log holds");
  }
  lines.push(
    `checkpoint ${cp.origin} size ${cp.size} root ${b64(cp.root)} ` +
      `signed by ${verified.verifiedBy.map((k) => bytesToHex(k.id)).join(", ")}`,
  );
  return {
    state: {
      origin: cp.origin,
      size: cp.size,
      root: b64(cp.root),
      checkpoint: note,
      keysets,
    },
    lines,
  };
}
