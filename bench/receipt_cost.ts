/**
 * CPU per receipt, measured without HTTP: what the receipt service's
 * `finalize` (JCS, Ed25519, the stored row's JSON) and the group committer's
 * per-row work cost on this machine. CPU time of the process (all threads,
 * so the KV SQLite worker is counted) is fairly robust to other load on a
 * shared VM, unlike wall-clock throughput.
 *
 * `deno run -A bench/receipt_cost.ts [receipts] [group size]` prints one line per part.
 */
import process from "node:process";
import { newReceiptId } from "../src/aci/receipt.ts";
import { createIdentity } from "../src/attestation/identity.ts";
import type { ReceiptDraft } from "../src/receipts/recorder.ts";
import { createReceiptService } from "../src/receipts/service.ts";
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

function cpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

/** µs of CPU and of wall clock per call of `f`, after a warm-up. */
async function measure(
  n: number,
  f: (i: number) => unknown | Promise<unknown>,
): Promise<{ cpu: number; wall: number }> {
  for (let i = 0; i < Math.min(2000, n); i++) await f(i);
  const c0 = cpuUs();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await f(i);
  return { cpu: (cpuUs() - c0) / n, wall: ((performance.now() - t0) * 1000) / n };
}

export interface ReceiptCost {
  finalizeUs: number;
  signOnlyUs: number;
  commitPerReceiptUs: number;
  commitWallPerGroupMs: number;
  rowBytes: number;
  rowsPerReceipt: number;
}

export async function receiptCost(dir: string, n = 20_000, group = 16): Promise<ReceiptCost> {
  const now = Date.now();
  const identity = createIdentity({ subject: null, ttlSeconds: 86_400, now: () => now });
  const kv = await Deno.openKv(`${dir}/receipt_cost.kv`);
  try {
    const receipts = createReceiptService(kv, { identity, now: () => now, retentionDays: 30 });
    const drafts = Array.from({ length: 1000 }, (_, i) => gatewayLikeDraft(i, now).draft);
    const fin = await measure(n, (i) => receipts.finalize(drafts[i % drafts.length]));
    const keys = identity.current().keys;
    const msg = encoder.encode("x".repeat(900));
    const sign = await measure(n, () => keys.signEd25519(msg));
    const sample = receipts.finalize(drafts[0]);
    // Group commits: `group` receipts (plus a usage sum each, as the gateway
    // settles) per commit, through the committer, the KV worker's CPU included.
    const committer = new GroupCommitter(kv);
    let seq = 0;
    const groups = Math.max(50, Math.floor(n / group / 4));
    const oneGroup = async () => {
      const all: Promise<void>[] = [];
      for (let j = 0; j < group; j++) {
        const d = gatewayLikeDraft(seq++, Date.now()).draft;
        const writes: KvWrite[] = receipts.finalize(d);
        writes.push({ op: "sum", key: ["usage", "k1", "requests"], value: 1n });
        all.push(committer.write(writes));
      }
      await Promise.all(all);
    };
    const c = await measure(groups, oneGroup);
    const commitPerReceiptUs = c.cpu / group - fin.cpu;
    return {
      finalizeUs: fin.cpu,
      signOnlyUs: sign.cpu,
      commitPerReceiptUs,
      commitWallPerGroupMs: c.wall / 1000,
      rowBytes: sample.reduce(
        (a, w) => a + (w.op === "set" && typeof w.value === "string" ? w.value.length : 0),
        0,
      ),
      rowsPerReceipt: sample.length,
    };
  } finally {
    kv.close();
  }
}

if (import.meta.main) {
  const n = Number(Deno.args[0] ?? 20_000);
  const group = Number(Deno.args[1] ?? 16);
  const dir = await Deno.makeTempDir({ prefix: "receipt_cost_" });
  try {
    const r = await receiptCost(dir, n, group);
    const f = (x: number) => x.toFixed(1);
    console.log(`finalize (JCS + Ed25519 + stored JSON): ${f(r.finalizeUs)} µs CPU per receipt`);
    console.log(`  of which Ed25519 sign of ~900 bytes: ${f(r.signOnlyUs)} µs`);
    console.log(
      `group commit of ${group} receipts (+1 sum each), beyond finalize: ` +
        `${f(r.commitPerReceiptUs)} µs CPU per receipt (all threads), ` +
        `${r.commitWallPerGroupMs.toFixed(3)} ms wall per commit`,
    );
    console.log(`KV rows per receipt: ${r.rowsPerReceipt}, receipt row value: ${r.rowBytes} bytes`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
