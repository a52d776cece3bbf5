/**
 * CPU per receipt, measured without HTTP: what the receipt service's
 * `finalize` (JCS, Ed25519, the stored row) and the group committer's
 * per-row work cost on this machine, and what a receipt costs the store:
 * WAL frames (4 KiB pages written) per receipt, the stored row's size, and
 * whether rows spill into SQLite overflow pages. CPU time of the process (all
 * threads, so the KV SQLite worker is counted) is fairly robust to other load
 * on a shared VM, unlike wall-clock throughput.
 *
 * `deno run -A bench/probes/receipt_cost/receipt_cost.ts [receipts] [group size]` prints one line per part.
 */
import process from "node:process";
import { DatabaseSync } from "node:sqlite";
import { creditSettlementWrites } from "../../../src/admission/credits.ts";
import { holdClosedWrites, holdRateClosedWrites } from "../../../src/admission/holds.ts";
import { tokenSettlementWrites } from "../../../src/admission/rate_limit.ts";
import { dailyUsageWrites } from "../../../src/admission/usage_daily.ts";
import { newReceiptId } from "../../../src/aci/receipt.ts";
import { createIdentity } from "../../../src/attestation/identity.ts";
import { type ReceiptDraft, ReceiptRecorder } from "../../../src/receipts/recorder.ts";
import { createReceiptService, type ReceiptService } from "../../../src/receipts/service.ts";
import { GroupCommitter, type KvWrite } from "../../../src/store/group_commit.ts";

const encoder = new TextEncoder();
const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));
const hash = (i: number) => "sha256:" + ((i >>> 0).toString(16).padStart(8, "0")).repeat(8);

/** A draft like a gateway's non-streamed chat completion (one route, no translation). */
export function gatewayLikeDraft(i: number, nowMs: number): { draft: ReceiptDraft } {
  const h = hash(i);
  return {
    draft: {
      receiptId: newReceiptId(random, nowMs),
      endpoint: "/v1/chat/completions",
      method: "POST",
      model: "bench/chat",
      chatId: `chatcmpl-${i}`,
      ownerDigest: "d".repeat(64),
      events: [
        { type: "request.received", body_hash: h },
        { type: "middleware.forwarded", body_hash: h },
        { type: "route.selected", target_route_id: "mock:chat", attempt: 1 },
        { type: "request.forwarded", body_hash: hash(i + 1) },
        { type: "transparency.request_modified" },
        { type: "route.served", target_route_id: "mock:chat", attempt: 1 },
        { type: "response.received", body_hash: hash(i + 2) },
        { type: "response.returned", body_hash: hash(i + 2) },
      ],
    },
  };
}

/** A draft like the receipt floor's (bench/receipt_floor.ts): four events, no model, owner or response id. */
export function floorLikeDraft(i: number, nowMs: number): ReceiptDraft {
  const rec = new ReceiptRecorder(newReceiptId(random, nowMs), "/v1/chat/completions", "POST");
  rec.event({ type: "request.received", body_hash: hash(i) });
  rec.event({ type: "request.forwarded", body_hash: hash(i) });
  rec.event({ type: "response.received", body_hash: hash(i + 1) });
  rec.event({ type: "response.returned", body_hash: hash(i + 1) });
  return rec.draft;
}

function cpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

/** µs of CPU and of wall clock per call of `f`, after a warm-up (then `warm` is called). */
async function measure(
  n: number,
  f: (i: number) => unknown | Promise<unknown>,
  warm?: () => void,
): Promise<{ cpu: number; wall: number }> {
  for (let i = 0; i < Math.min(2000, n); i++) await f(i);
  warm?.();
  const c0 = cpuUs();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await f(i);
  return { cpu: (cpuUs() - c0) / n, wall: ((performance.now() - t0) * 1000) / n };
}

/**
 * Counts the frames SQLite appends to a KV file's WAL, from the WAL index
 * (`-shm` header: `mxFrame`, the last valid frame, at byte 16, native byte
 * order). A smaller value than last time means the WAL restarted after a
 * checkpoint, and it then counts the frames since the restart.
 */
class WalFrameCounter {
  #file: Deno.FsFile;
  #header = new Uint8Array(20);
  #last: number;
  frames = 0;
  constructor(kvPath: string) {
    this.#file = Deno.openSync(`${kvPath}-shm`, { read: true });
    this.#last = this.#mxFrame();
  }
  #mxFrame(): number {
    this.#file.seekSync(0, Deno.SeekMode.Start);
    if (this.#file.readSync(this.#header) !== this.#header.length) return this.#last;
    return new DataView(this.#header.buffer).getUint32(16, true);
  }
  /** Reads the WAL's length now; `frames` adds what was appended since the last read. */
  poll(): void {
    const mx = this.#mxFrame();
    this.frames += mx >= this.#last ? mx - this.#last : mx;
    this.#last = mx;
  }
  close(): void {
    this.#file.close();
  }
}

/** How the KV table's pages look after a run (SQLite's `dbstat`). */
export interface TablePages {
  leafPages: number;
  overflowPages: number;
  /** The largest cell payload on any leaf page (bytes; SQLite keeps up to 1,002 of it on the page). */
  maxPayload: number;
}

function tablePages(path: string): TablePages {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const r = db.prepare(
      "select sum(pagetype = 'leaf') as leaf, sum(pagetype = 'overflow') as overflow, " +
        "max(case when pagetype = 'leaf' then mx_payload else 0 end) as mx " +
        "from dbstat where name = 'kv'",
    ).get() as { leaf: number; overflow: number; mx: number };
    return { leafPages: r.leaf, overflowPages: r.overflow, maxPayload: r.mx };
  } finally {
    db.close();
  }
}

export interface CommitCost {
  /** CPU per receipt of the commits beyond `finalize` (all threads). */
  perReceiptUs: number;
  wallPerGroupMs: number;
  walFramesPerReceipt: number;
  pages: TablePages;
}

/** One usage sum per receipt (the bench's historical shape). */
const oneSum = (): KvWrite[] => [{ op: "sum", key: ["usage", "k1", "requests"], value: 1n }];

/**
 * What the gateway commits with a receipt when it settles a request of one
 * key and model served from a quota lease: the hold closed (credits, the
 * lease's request and tokens), credit refund and usage totals, token refund,
 * daily usage (the pipeline's own write builders).
 */
function settlementSums(i: number): KvWrite[] {
  const actual = { promptTokens: 20 + (i % 7), completionTokens: 30, costNano: 900n };
  return [
    ...holdClosedWrites("instance-1", "k1", 1000n),
    ...holdRateClosedWrites("instance-1", "k1", 1, 80),
    ...creditSettlementWrites("k1", 1000n, actual),
    ...tokenSettlementWrites("k1", 80, actual.promptTokens + actual.completionTokens),
    ...dailyUsageWrites("k1", "bench/chat", Date.now(), actual),
  ];
}

/** An upstream's response id: `chatcmpl-` and 29 random letters and digits, as OpenAI's. */
function randomChatId(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let s = "chatcmpl-";
  for (const b of random(29)) s += alphabet[b % alphabet.length];
  return s;
}

/**
 * Group commits of `group` receipts (plus `extra` writes each, as the gateway
 * settles) through the committer, on a fresh KV file: CPU, WAL frames, pages.
 */
async function commitCost(
  path: string,
  receipts: (kv: Deno.Kv) => ReceiptService,
  draft: (i: number) => ReceiptDraft,
  extra: (i: number) => KvWrite[],
  groups: number,
  group: number,
  finalizeUs: number,
): Promise<CommitCost> {
  const kv = await Deno.openKv(path);
  let c: { cpu: number; wall: number };
  let frames = 0;
  try {
    const service = receipts(kv);
    const committer = new GroupCommitter(kv);
    await kv.set(["warm"], 1); // creates the WAL index the counter reads
    const wal = new WalFrameCounter(path);
    let seq = 0;
    const oneGroup = async () => {
      const all: Promise<void>[] = [];
      for (let j = 0; j < group; j++) {
        const i = seq++;
        const writes: KvWrite[] = service.finalize(draft(i));
        writes.push(...extra(i));
        all.push(committer.write(writes));
      }
      await Promise.all(all);
      wal.poll();
    };
    c = await measure(groups, oneGroup, () => (wal.frames = 0));
    frames = wal.frames;
    wal.close();
  } finally {
    kv.close();
  }
  return {
    perReceiptUs: c.cpu / group - finalizeUs,
    wallPerGroupMs: c.wall / 1000,
    walFramesPerReceipt: frames / (groups * group),
    pages: tablePages(path),
  };
}

/** The commit cases measured, each on a fresh store. */
export const COMMIT_CASES = {
  /** The gateway's shape with the bench's one sum (comparable with earlier runs). */
  "gateway shape, +1 sum": { chat: "sequential", extra: oneSum },
  "no chat index, +1 sum": { chat: "none", extra: oneSum },
  /** Response ids as upstreams make them: each index row lands at a random place in the B-tree. */
  "random response ids, +1 sum": { chat: "random", extra: oneSum },
  "random response ids, 13 settlement sums": { chat: "random", extra: settlementSums },
  /** What bench/receipt_floor.ts commits: the receipt alone. */
  "floor shape, receipt only": { chat: "floor", extra: () => [] },
} as const;

export interface ReceiptCost {
  finalizeUs: number;
  floorFinalizeUs: number;
  signOnlyUs: number;
  commits: Record<keyof typeof COMMIT_CASES, CommitCost>;
  /** Stored receipt row's value, bytes: the gateway's shape and the floor's. */
  rowBytes: number;
  floorRowBytes: number;
  rowsPerReceipt: number;
}

function valueBytes(w: KvWrite): number {
  if (w.op !== "set") return 0;
  if (w.value instanceof Uint8Array) return w.value.byteLength;
  return typeof w.value === "string" ? encoder.encode(w.value).byteLength : 0;
}

export async function receiptCost(dir: string, n = 20_000, group = 16): Promise<ReceiptCost> {
  const now = Date.now();
  const identity = createIdentity({ subject: null, ttlSeconds: 86_400, now: () => now });
  const service = (kv: Deno.Kv) =>
    createReceiptService(kv, { identity, now: Date.now, retentionDays: 30 });
  const kv = await Deno.openKv(`${dir}/finalize.kv`);
  let fin: { cpu: number };
  let floorFin: { cpu: number };
  let sign: { cpu: number };
  let sample: KvWrite[];
  let floorSample: KvWrite[];
  try {
    const receipts = service(kv);
    const drafts = Array.from({ length: 1000 }, (_, i) => gatewayLikeDraft(i, now).draft);
    fin = await measure(n, (i) => receipts.finalize(drafts[i % drafts.length]));
    const floorDrafts = Array.from({ length: 1000 }, (_, i) => floorLikeDraft(i, now));
    floorFin = await measure(n, (i) => receipts.finalize(floorDrafts[i % floorDrafts.length]));
    const keys = identity.current().keys;
    const msg = encoder.encode("x".repeat(900));
    sign = await measure(n, () => keys.signEd25519(msg));
    sample = receipts.finalize(drafts[0]);
    floorSample = receipts.finalize(floorLikeDraft(0, now));
  } finally {
    kv.close();
  }
  const groups = Math.max(50, Math.floor(n / group / 4));
  const commits = {} as Record<keyof typeof COMMIT_CASES, CommitCost>;
  for (const [name, c] of Object.entries(COMMIT_CASES)) {
    const draft = (i: number): ReceiptDraft => {
      if (c.chat === "floor") return floorLikeDraft(i, Date.now());
      const d = gatewayLikeDraft(i, Date.now()).draft;
      if (c.chat === "none") return { ...d, chatId: null };
      return c.chat === "random" ? { ...d, chatId: randomChatId() } : d;
    };
    const path = `${dir}/commit_${Object.keys(commits).length}.kv`;
    commits[name as keyof typeof COMMIT_CASES] = await commitCost(
      path,
      service,
      draft,
      c.extra,
      groups,
      group,
      c.chat === "floor" ? floorFin.cpu : fin.cpu,
    );
  }
  return {
    finalizeUs: fin.cpu,
    floorFinalizeUs: floorFin.cpu,
    signOnlyUs: sign.cpu,
    commits,
    rowBytes: valueBytes(sample[0]),
    floorRowBytes: valueBytes(floorSample[0]),
    rowsPerReceipt: sample.length,
  };
}

if (import.meta.main) {
  const n = Number(Deno.args[0] ?? 20_000);
  const group = Number(Deno.args[1] ?? 16);
  const dir = await Deno.makeTempDir({ prefix: "receipt_cost_" });
  try {
    const r = await receiptCost(dir, n, group);
    const f = (x: number) => x.toFixed(1);
    console.log(`finalize (JCS + Ed25519 + stored row): ${f(r.finalizeUs)} µs CPU per receipt`);
    console.log(`  of which Ed25519 sign of ~900 bytes: ${f(r.signOnlyUs)} µs`);
    console.log(
      `finalize, the floor's shape (4 events): ${f(r.floorFinalizeUs)} µs CPU per receipt`,
    );
    for (const [name, c] of Object.entries(r.commits)) {
      console.log(
        `group commit of ${group} receipts (${name}), beyond finalize: ` +
          `${f(c.perReceiptUs)} µs CPU per receipt (all threads), ` +
          `${c.wallPerGroupMs.toFixed(3)} ms wall per commit, ` +
          `${c.walFramesPerReceipt.toFixed(2)} WAL frames per receipt; kv table: ` +
          `${c.pages.leafPages} leaf + ${c.pages.overflowPages} overflow pages, ` +
          `largest payload ${c.pages.maxPayload} bytes`,
      );
    }
    console.log(
      `KV rows per receipt: ${r.rowsPerReceipt}, receipt row value: ${r.rowBytes} bytes ` +
        `(gateway shape, 8 events), ${r.floorRowBytes} bytes (floor shape, 4 events)`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
