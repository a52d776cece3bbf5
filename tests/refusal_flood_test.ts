/**
 * Refusals fill the store (issue #15 item 5): a 10,000-request 429 flood from
 * one key. Every refusal carries an `x-receipt-id` that resolves to a signed
 * receipt, yet the flood adds at most `receipts.refusal_budget` own receipts
 * plus one shared receipt (which counts the rest) to the store; each refusal's
 * log line names the receipt it was served.
 */
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import {
  asRecord,
  events,
  fetchReceipt,
  fetchReport,
  postRaw,
  sha256Prefixed,
} from "./support/receipt_check.ts";
import { verifyReceipt } from "../src/verify/receipt.ts";
import { TLOG } from "../src/tlog/tiles.ts";

const FLOOD = 10_000;
const PARALLEL = 64;

/** A value's size: receipts are packed rows (bytes), other values are measured as JSON text. */
function valueSize(v: unknown): number {
  if (v instanceof Uint8Array) return v.byteLength;
  if (typeof v === "string") return v.length;
  return (JSON.stringify(v, (_, x) => typeof x === "bigint" ? x.toString() : x) ?? "").length;
}

/**
 * Entries and value bytes of the store outside the transparency log, and the log's own rows
 * (each stored receipt's digest enters the log: a bounded number of rows per logged receipt).
 */
async function storeSize(kv: Deno.Kv): Promise<{ entries: number; bytes: number; log: number }> {
  let entries = 0;
  let bytes = 0;
  let log = 0;
  for await (const e of kv.list({ prefix: [] })) {
    if (e.key[0] === TLOG) {
      log++;
      continue;
    }
    entries++;
    bytes += JSON.stringify(e.key).length + valueSize(e.value);
  }
  return { entries, bytes, log };
}

Deno.test("a 10,000-request 429 flood from one key adds at most budget + 1 receipts to the store", async () => {
  // A frozen clock 1 s into a refusal window: the rate-limit bucket never refills, and
  // the whole flood falls in one window.
  const t0 = Math.floor(Date.now() / 600_000) * 600_000 + 1_000;
  const gw = await startTestGateway({ now: () => t0 });
  try {
    const budget = gw.gateway.ctx.config.receipts.refusal_budget;
    assert.equal(budget, 10);
    const key = await gw.newKey({ tier: "free", credits: 100 });
    const body = { model: "demo/echo", messages: [{ role: "user", content: "flood" }] };
    // Use up the key's 60 requests per minute.
    for (let i = 0; i < 60; i++) {
      assert.equal((await postRaw(gw.url, "/v1/chat/completions", body, key)).status, 200);
    }
    const before = await storeSize(gw.kv);
    const ids = new Map<string, number>();
    let last = null as Awaited<ReturnType<typeof postRaw>> | null;
    let sent = 0;
    const worker = async () => {
      while (sent < FLOOD) {
        sent++;
        const ex = await postRaw(gw.url, "/v1/chat/completions", body, key);
        assert.equal(ex.status, 429);
        assert.ok(ex.receiptId, "every refusal has an x-receipt-id");
        ids.set(ex.receiptId, (ids.get(ex.receiptId) ?? 0) + 1);
        last = ex;
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    // Counts are flushed at least once a second.
    await new Promise((r) => setTimeout(r, 1_500));
    const after = await storeSize(gw.kv);
    const added = after.entries - before.entries;
    assert.ok(added <= budget + 1, `the flood added ${added} entries`);
    // The log holds the digests of those budget + 1 receipts: a leaf-index row each, plus the
    // tiles, entry bundles and checkpoint they share.
    const logRows = after.log - before.log;
    assert.ok(logRows <= 3 * (budget + 1), `the flood added ${logRows} log rows`);
    // Each receipt row is ~0.4 KB: the documented bound is (budget + 1) × 2 KB per key per window.
    assert.ok(
      after.bytes - before.bytes <= (budget + 1) * 2_048,
      `${after.bytes - before.bytes} B`,
    );
    assert.equal(ids.size, budget + 1);
    const [sharedId, sharedCount] = [...ids].find(([, n]) => n > 1)!;
    assert.equal(sharedCount, FLOOD - budget);

    // Every id resolves to a signed receipt; the shared one counts every refusal it covers
    // and binds the (identical) refusal body.
    for (const id of ids.keys()) {
      assert.equal((await fetchReceipt(gw.url, id, key)).status, 200);
    }
    const receipt = asRecord((await fetchReceipt(gw.url, sharedId, key)).body);
    const shared = events(receipt).find((e) => e.type === "refusals.shared")!;
    assert.equal(shared.count, FLOOD - budget);
    const { report } = await fetchReport(gw.url);
    const ex = last!;
    assert.deepEqual(
      verifyReceipt(receipt, { report, requestBody: ex.request, responseBody: ex.response })
        .filter((c) => !c.ok),
      [],
    );
    const returned = events(receipt).find((e) => e.type === "response.returned")!;
    assert.equal(returned.body_hash, sha256Prefixed(ex.response));
    // The request log names the receipt each refusal was served: the shared one past the
    // budget (not an id of its own that was never stored).
    const logged = new Map<string, number>();
    for (const l of gw.logs) {
      if (l.status === 429 && typeof l.receipt_id === "string") {
        logged.set(l.receipt_id, (logged.get(l.receipt_id) ?? 0) + 1);
      }
    }
    assert.deepEqual(logged, ids);
  } finally {
    await gw.close();
  }
});
