/**
 * CPU per receipt, measured without HTTP: what the receipt service's
 * `finalize` (JCS, Ed25519, the stored row) and the group committer's
 * per-row work cost on this machine, and what a receipt costs the store:
 * WAL frames (4 KiB pages written) per receipt, the stored row's size, and
 * whether rows spill into SQLite overflow pages. CPU time of the process (all
 * threads, so the KV SQLite worker is counted) is fairly robust to other load
 * on a shared VM, unlike wall-clock throughput.
 *
 * `deno run -A bench/receipt_cost.ts [receipts] [group size]` prints one line per part.
 */
import process from "node:process";
import { DatabaseSync } from "node:sqlite";
import { newReceiptId } from "../src/aci/receipt.ts";
import { createIdentity } from "../src/attestation/identity.ts";
import { type ReceiptDraft, ReceiptRecorder } from "../src/receipts/recorder.ts";
import { createReceiptService, type ReceiptService } from "../src/receipts/service.ts";
import { GroupCommitter, type KvWrite } from "../src/store/group_commit.ts";

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

/**
 * Group commits of `group` receipts (plus a usage sum each, as the gateway
 * settles) through the committer, on a fresh KV file: CPU, WAL frames, pages.
 */
async function commitCost(
  path: string,
  receipts: (kv: Deno.Kv) => ReceiptService,
  draft: (i: number) => ReceiptDraft,
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
        const writes: KvWrite[] = service.finalize(draft(seq++));
        writes.push({ op: "sum", key: ["usage", "k1", "requests"], value: 1n });
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

export interface ReceiptCost {
  finalizeUs: number;
  signOnlyUs: number;
  /** The gateway's shape (8 events, response id, owner): receipt row and chat index. */
  commit: CommitCost;
  /** The same receipts without a response id: no chat-index row. */
  commitNoIndex: CommitCost;
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
  let sign: { cpu: number };
  let sample: KvWrite[];
  let floorSample: KvWrite[];
  try {
    const receipts = service(kv);
    const drafts = Array.from({ length: 1000 }, (_, i) => gatewayLikeDraft(i, now).draft);
    fin = await measure(n, (i) => receipts.finalize(drafts[i % drafts.length]));
    const keys = identity.current().keys;
    const msg = encoder.encode("x".repeat(900));
    sign = await measure(n, () => keys.signEd25519(msg));
    sample = receipts.finalize(drafts[0]);
    floorSample = receipts.finalize(floorLikeDraft(0, now));
  } finally {
    kv.close();
  }
  const groups = Math.max(50, Math.floor(n / group / 4));
  const gateway = (i: number) => gatewayLikeDraft(i, Date.now()).draft;
  const commit = await commitCost(`${dir}/commit.kv`, service, gateway, groups, group, fin.cpu);
  const commitNoIndex = await commitCost(
    `${dir}/commit_no_index.kv`,
    service,
    (i) => ({ ...gateway(i), chatId: null }),
    groups,
    group,
    fin.cpu,
  );
  return {
    finalizeUs: fin.cpu,
    signOnlyUs: sign.cpu,
    commit,
    commitNoIndex,
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
    for (const [name, c] of [["", r.commit], [" (no chat index)", r.commitNoIndex]] as const) {
      console.log(
        `group commit of ${group} receipts (+1 sum each)${name}, beyond finalize: ` +
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
