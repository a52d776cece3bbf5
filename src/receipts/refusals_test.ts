import assert from "node:assert/strict";
import type { KvWrite } from "../store/group_commit.ts";
import type { ReceiptDraft } from "./recorder.ts";
import { createRefusalStore } from "./refusals.ts";

function draft(id: string, owner: string): ReceiptDraft {
  return {
    receiptId: id,
    endpoint: "/v1/chat/completions",
    method: "POST",
    model: null,
    chatId: null,
    ownerDigest: owner,
    events: [
      { type: "request.received", body_hash: "sha256:00" },
      { type: "request.refused", reason: "rate_limited" },
      { type: "response.returned", body_hash: "sha256:11" },
    ],
  };
}

Deno.test("refusals: a budget of own receipts per key and window, then one shared receipt that counts", async () => {
  let t = 600_000 * 5;
  const persisted: { id: string; expire: number; count: unknown }[] = [];
  const written: KvWrite[][] = [];
  const store = createRefusalStore({
    policy: { budget: 2, windowMs: 600_000, retentionMs: 86_400_000 },
    now: () => t,
    persist: (d, expire) => {
      const shared = d.events.find((e) => e.type === "refusals.shared");
      persisted.push({
        id: d.receiptId,
        expire,
        count: (shared as Record<string, unknown> | undefined)?.count as number | undefined,
      });
      // The count sits before the response hash, which stays last.
      assert.equal(d.events.at(-1)!.type, "response.returned");
      return [{ op: "set", key: ["receipts", d.receiptId], value: "x", expireIn: expire }];
    },
    write: (ops) => {
      written.push(ops);
      return Promise.resolve();
    },
    flushMs: 10,
  });
  const ids = Array.from({ length: 6 }, (_, i) => store.record(draft(`r${i}`, "k1")));
  assert.deepEqual(ids.map((r) => r.receiptId), ["r0", "r1", "r2", "r2", "r2", "r2"]);
  // Own receipts and the shared one's first write are durable with their answer; later ones write nothing.
  assert.deepEqual(ids.map((r) => r.writes.length), [1, 1, 1, 0, 0, 0]);
  assert.equal(persisted[2].count, 1);
  assert.ok(persisted.every((p) => p.expire === 86_400_000));
  // Another key has its own budget.
  assert.equal(store.record(draft("o0", "k2")).receiptId, "o0");
  // The count is re-signed into the same entry shortly after.
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(persisted.at(-1)!.id, "r2");
  assert.equal(persisted.at(-1)!.count, 4);
  // A new window: a fresh budget.
  t += 600_000;
  assert.equal(store.record(draft("n0", "k1")).receiptId, "n0");
  store.record(draft("n1", "k1"));
  store.record(draft("n2", "k1"));
  store.record(draft("n3", "k1"));
  await store.close();
  assert.equal(persisted.at(-1)!.id, "n2");
  assert.equal(persisted.at(-1)!.count, 2);
  assert.ok(written.length >= 2);
});
