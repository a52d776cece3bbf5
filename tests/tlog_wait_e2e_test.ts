/**
 * `GET /v1/aci/receipts/{id}/inclusion?wait=ms` through the real gateway: the
 * request is held until the receipt's checkpoint is signed and answered with
 * the proof right after the append (well before the wait); a wait that runs
 * out answers today's 503 `log_pending`; a client that goes away leaves no
 * waiter behind; bad values are refused; the verifying client asks once per
 * answer instead of polling; and a waiter on one replica is answered after
 * another replica's append (two processes, one store).
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import {
  fetchReceipt,
  fetchReport,
  type Json,
  keysetOf,
  postRaw,
} from "./support/receipt_check.ts";
import {
  checkInclusion,
  type InclusionAnswer,
  logVkeys,
  receiptEntryOf,
} from "./support/tlog_check.ts";
import { createVerifyingFetch, fetchTransport } from "../src/client/node.ts";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { createKey } from "../src/keys/keys.ts";
import { NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";

/** A slow batch: a receipt waits ~500 ms for its checkpoint, long enough to watch it wait. */
const BATCH_MS = 500;

const chat = (content: string) => ({
  model: "demo/echo",
  messages: [{ role: "user", content }],
});

async function answer(base: string, key: string, content: string): Promise<string> {
  const ex = await postRaw(base, "/v1/chat/completions", chat(content), key);
  assert.equal(ex.status, 200);
  return ex.receiptId!;
}

async function inclusion(
  base: string,
  id: string,
  key: string,
  wait: string,
  signal?: AbortSignal,
): Promise<{ status: number; body: Json; headers: Headers; ms: number; at: number }> {
  const t0 = performance.now();
  const res = await fetch(
    `${base}/v1/aci/receipts/${encodeURIComponent(id)}/inclusion?wait=${wait}`,
    { headers: { authorization: `Bearer ${key}` }, signal },
  );
  const body = await res.json() as Json;
  const at = performance.now();
  return { status: res.status, body, headers: res.headers, ms: at - t0, at };
}

/** Records when the served checkpoint's size changed (polled by the test, not the client). */
async function watchCheckpoint(base: string) {
  const read = async () =>
    Number((await (await fetch(`${base}/v1/aci/log/checkpoint`)).text()).split("\n")[1]);
  const size = await read();
  let changedAt = NaN;
  let stop = false;
  const done = (async () => {
    while (!stop && Number.isNaN(changedAt)) {
      if (await read() !== size) changedAt = performance.now();
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    /** When it was first seen changed (after `stop`: at the latest then). */
    async stop(): Promise<number> {
      stop = true;
      await done;
      if (Number.isNaN(changedAt) && await read() !== size) changedAt = performance.now();
      return changedAt;
    },
  };
}

const slowBatch = () =>
  startTestGateway({
    configure: (c) => {
      c.transparency_log.batch_ms = BATCH_MS;
      c.transparency_log.sweep_interval_ms = 1000;
    },
  });

/**
 * An answer whose receipt starts a batch of its own: the log has nothing pending before it
 * (the previous answers' entries were appended), so its append comes ~BATCH_MS later.
 */
async function settledAnswer(gw: TestGateway, content: string): Promise<string> {
  await gw.gateway.ctx.tlog.settle();
  return await answer(gw.url, gw.apiKey, content);
}

/**
 * Runs a timed scenario again (three tries) when the machine was too slow for its premise
 * (`null`: the append came before the request could wait for it).
 */
async function unlessLoadInterferes<T>(what: string, f: () => Promise<T | null>): Promise<T> {
  for (let i = 0; i < 3; i++) {
    const got = await f();
    if (got !== null) return got;
  }
  throw new Error(`${what}: the append came first three times`);
}

async function waiters(gw: TestGateway, n: number, withinMs: number): Promise<boolean> {
  const end = performance.now() + withinMs;
  while (gw.gateway.ctx.tlog.waiters.size !== n) {
    if (performance.now() > end) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
  return true;
}

Deno.test("inclusion ?wait: answered right after the append, 503 when the wait runs out, a gone client leaves nothing", async () => {
  const gw = await slowBatch();
  try {
    const base = gw.url;
    const keys = logVkeys(
      keysetOf((await fetchReport(base)).report),
      "dev.gateway.local/v1/aci/log",
    );

    // Refused values, in the documented error envelope.
    const first = await answer(base, gw.apiKey, "wait for me");
    for (const bad of ["-1", "abc", "5001", "1.5", "01"]) {
      const r = await inclusion(base, first, gw.apiKey, bad);
      assert.equal(r.status, 400, bad);
      const error = r.body.error as Json;
      assert.equal(error.type, "invalid_request_error");
      assert.equal(error.param, "wait");
    }

    // A malformed tree_size is a 400 at once, for a receipt still pending and with a wait.
    const pendingId = await settledAnswer(gw, "not yet in the log");
    for (const q of ["tree_size=abc", "tree_size=abc&wait=4000"]) {
      const t0 = performance.now();
      const r = await fetch(`${base}/v1/aci/receipts/${pendingId}/inclusion?${q}`, {
        headers: { authorization: `Bearer ${gw.apiKey}` },
      });
      const body = await r.json();
      assert.equal(r.status, 400, `${q}: ${JSON.stringify(body)}`);
      assert.equal(body.error.param, "tree_size");
      assert.ok(performance.now() - t0 < 1_000, q);
    }

    // A wait shorter than the batch runs out: today's 503 log_pending, after the wait.
    const timedOut = await unlessLoadInterferes("timeout", async () => {
      const id = await settledAnswer(gw, "time me out");
      const r = await inclusion(base, id, gw.apiKey, "150");
      return r.status === 200 ? null : r; // appended within 150 ms after all: a slow machine
    });
    assert.equal(timedOut.status, 503, JSON.stringify(timedOut.body));
    assert.equal((timedOut.body.error as Json).code, "log_pending");
    assert.equal(timedOut.headers.get("retry-after"), "1");
    assert.ok(timedOut.ms >= 150, `answered after ${timedOut.ms} ms`);
    assert.ok(timedOut.ms < 2_000, `answered after ${timedOut.ms} ms`);
    assert.ok(await waiters(gw, 0, 100));

    // Held until the append, answered with a proof that verifies right after it.
    const { id, held, appendSeen } = await unlessLoadInterferes("held", async () => {
      const id = await settledAnswer(gw, "prove me");
      const watch = await watchCheckpoint(base);
      const sent = performance.now();
      const held = await inclusion(base, id, gw.apiKey, "4000");
      const appendSeen = await watch.stop();
      // The append came before the request was even sent: nothing to show here.
      return appendSeen < sent ? null : { id, held, appendSeen };
    });
    assert.equal(held.status, 200, JSON.stringify(held.body));
    assert.ok(held.ms < 2_000, `held ${held.ms} ms: well before the wait of 4000`);
    const sinceAppend = held.at - appendSeen;
    // The watcher polls every 5 ms (and may itself lag on a loaded machine): the answer may
    // even arrive before it saw the append; polling every 10–50 ms would add that much.
    assert.ok(sinceAppend < 300, `answered ${sinceAppend} ms after the checkpoint changed`);
    const receipt = (await fetchReceipt(base, id, gw.apiKey)).body as Json;
    checkInclusion(held.body as unknown as InclusionAnswer, receiptEntryOf(receipt), keys);

    // A client that goes away: its waiter is gone at once, not at its deadline.
    await unlessLoadInterferes("abort", async () => {
      const gone = await settledAnswer(gw, "abandon me");
      const abort = new AbortController();
      const abandoned = inclusion(base, gone, gw.apiKey, "4000", abort.signal).catch((e) => e);
      // Not seen waiting: it came after the append (answered at once) on a slow machine.
      if (!await waiters(gw, 1, 300)) {
        await abandoned;
        return null;
      }
      abort.abort();
      assert.ok(await abandoned instanceof Error);
      assert.ok(await waiters(gw, 0, 200), "the waiter left with its client");
      return true;
    });
  } finally {
    await gw.close();
  }
});

Deno.test("inclusion ?wait: the verifying client asks once per answer instead of polling", async () => {
  const gw = await slowBatch();
  let asked = 0;
  const f = createVerifyingFetch({
    baseURL: gw.baseURL,
    policy: { allow_dev_evidence: true, inclusion: "required" },
    transport: fetchTransport((input, init) => {
      if (new URL(String(input)).pathname.endsWith("/inclusion")) asked++;
      return fetch(input, init);
    }),
  });
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, fetch: f, maxRetries: 0 });
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const r = await client.chat.completions.create(chat(`once ${i}`) as never).withResponse();
      const names = (r.response.headers.get("x-aci-verified") ?? "").split(",");
      assert.ok(names.includes("log-inclusion"), names.join());
      // It waited for a batch of 500 ms: polling every 10–50 ms would have asked ~10 times.
      assert.ok(performance.now() - t0 > 100);
    }
    assert.equal(asked, 3, `${asked} inclusion requests for 3 answers`);
  } finally {
    f.close();
    await gw.close();
  }
});

Deno.test("inclusion ?wait: a waiter on replica B is answered after replica A's append", async () => {
  const dir = await Deno.makeTempDir();
  const storePath = `${dir}/gw.kv`;
  const upstream = await startDemoUpstream({ name: "plain" });
  // A appends its own entries after 300 ms; B's sweep only takes rows older than 1 s, by
  // which time A's append deleted them: B never appends this entry, it can only notice.
  const config = {
    ...baseConfig({ upstreamUrl: upstream.url, storePath }),
    transparency_log: { batch_ms: 300, sweep_interval_ms: 1000 },
  };
  const cfg = await writeConfig(dir, config);
  const kv = await Deno.openKv(storePath);
  const a = await spawnGateway(cfg);
  const b = await spawnGateway(cfg);
  try {
    const { key } = await createKey(kv, {
      tier: "enterprise",
      rpm: 100_000,
      tpm: 100_000_000,
      now: Date.now,
      creditsNano: 10n * NANO_PER_CREDIT,
    });
    for (let i = 0; i < 2; i++) {
      const id = await answer(a.url, key, `replicated ${i}`);
      const r = await inclusion(b.url, id, key, "4000");
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.ok(r.ms < 3_000, `B answered after ${r.ms} ms (the wait was 4000)`);
      const receipt = (await fetchReceipt(b.url, id, key)).body as Json;
      // Each replica signs its appends with its own log key: either one may verify.
      const origin = String((r.body as Json).origin);
      const keys = [
        ...logVkeys(keysetOf((await fetchReport(a.url)).report), origin),
        ...logVkeys(keysetOf((await fetchReport(b.url)).report), origin),
      ];
      checkInclusion(r.body as unknown as InclusionAnswer, receiptEntryOf(receipt), keys);
    }

    // Shutdown releases waiters: A dies before appending its answer's entry (B's sweep would
    // take it only after a second), B is told to stop while a request waits for it there.
    const orphan = await answer(a.url, key, "orphan");
    await a.stop("SIGKILL");
    const waiting = inclusion(b.url, orphan, key, "4000");
    await new Promise((r) => setTimeout(r, 150));
    const stopped = b.stop();
    const r = await waiting;
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.equal((r.body.error as Json).code, "log_pending");
    assert.ok(r.ms < 3_000, `answered ${r.ms} ms after asking: at the drain, not the deadline`);
    assert.equal((await stopped).code, 0);
  } finally {
    await a.stop();
    await b.stop();
    kv.close();
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});
