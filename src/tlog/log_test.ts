import assert from "node:assert/strict";
import { framed } from "../store/mod.ts";
import { createTransparencyLog } from "./log.ts";
import { type Head, HEAD_KEY, PENDING_PREFIX } from "./tiles.ts";

const entry = (n: number) => new TextEncoder().encode(`{"kind":"session","session_id":"s${n}"}`);

/** A log on its own store, its sweep every 30 ms; nothing kicks it but the sweep. */
async function idleLog() {
  const kv = await Deno.openKv(":memory:");
  const log = createTransparencyLog({
    kv,
    origin: "example.test/log",
    now: Date.now,
    randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
    sign: () => "— example.test/log AAAA",
    witnesses: [],
    requiredCosignatures: 0,
    sweepIntervalMs: 30,
    batchMs: 10,
    log: () => {},
  });
  const size = async () => (await kv.get<Head>(HEAD_KEY)).value?.size ?? 0;
  return { kv, log, size };
}

async function until(f: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    if (await f()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return f();
}

Deno.test("sweep: a dead replica's stale rows are appended by an idle replica, before and after its own passes", async () => {
  const { kv, log, size } = await idleLog();
  try {
    // Committed by a replica that died before appending: older than a sweep interval.
    await kv.set([...PENDING_PREFIX, Date.now() - 1_000, "dead0"], framed([entry(1)]));
    assert.ok(await until(async () => (await size()) === 1, 2_000), "swept and appended");
    // This replica has just caught up (its own pass); another stale row arrives after it: once
    // that pass is older than the interval, the sweep looks again.
    await kv.set([...PENDING_PREFIX, Date.now() - 1_000, "dead1"], framed([entry(2)]));
    assert.ok(await until(async () => (await size()) === 2, 2_000), "the later row too");
    const left = [];
    for await (const e of kv.list({ prefix: PENDING_PREFIX })) left.push(e.key);
    assert.deepEqual(left, []);
  } finally {
    await log.close();
    kv.close();
  }
});

Deno.test("sweep: fresh rows (younger than the interval) are left to their own replica's batch", async () => {
  const { kv, log, size } = await idleLog();
  try {
    await kv.set([...PENDING_PREFIX, Date.now() + 60_000, "live0"], framed([entry(3)]));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(await size(), 0, "not swept: its replica's batch timer takes it");
    log.kick();
    assert.ok(await until(async () => (await size()) === 1, 2_000), "appended when kicked");
  } finally {
    await log.close();
    kv.close();
  }
});
