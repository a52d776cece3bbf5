/**
 * Load and races, on loopback: 1,000 streams open at once and close (half of
 * them by the client leaving) without leaking sockets or memory; N racing
 * requests against a limit of M admit exactly M, and racing requests never
 * reserve more credit than the balance holds, also across two gateways
 * sharing one KV store.
 */
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { startCountingUpstream } from "./support/counting_upstream.ts";
import { getBalance, getUsage, NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { keyDigest } from "../src/keys/keys.ts";
import { digestIndexKey } from "../src/keys/kv_layout.ts";
import v8 from "node:v8";
import vm from "node:vm";

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

function heapAfterGc(): number {
  gc();
  gc();
  return Deno.memoryUsage().heapUsed;
}

const STREAMS = 1_000;

/** Open file descriptors of this process (sockets included); null off Linux. */
function openFds(): number | null {
  try {
    return [...Deno.readDirSync("/proc/self/fd")].length;
  } catch {
    return null;
  }
}

async function settle(pred: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
}

Deno.test("1,000 concurrent streams open and close with no leaked sockets or memory growth", async () => {
  const upstream = startCountingUpstream({ chunks: 4, gapMs: 0, barrier: true });
  const gw = await startTestGateway({
    configure: (c) => {
      c.providers.find((p) => p.name === "plain")!.base_url = upstream.url;
    },
  });
  // No idle pooling on the client side, so every finished stream gives its socket back.
  const client = Deno.createHttpClient({ poolMaxIdlePerHost: 0 });
  try {
    const key = await gw.newKey({
      tier: "enterprise",
      rpm: 1_000_000,
      tpm: 1_000_000_000,
      credits: 1_000_000,
    });
    const body = JSON.stringify({
      model: "demo/vision", // routed to the plain provider only: the counting upstream
      stream: true,
      messages: [{ role: "user", content: "go" }],
    });
    const decoder = new TextDecoder();

    /** One round: all streams open at once, then odd ones leave and even ones read to the end. */
    const round = async () => {
      const base = { ...upstream.stats };
      upstream.hold();
      const firstChunks: Promise<ReadableStreamDefaultReader<Uint8Array>>[] = [];
      for (let i = 0; i < STREAMS; i++) {
        firstChunks.push((async () => {
          const res = await fetch(`${gw.url}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body,
            client,
          });
          assert.equal(res.status, 200);
          const reader = res.body!.getReader();
          const { value } = await reader.read();
          assert.ok(decoder.decode(value).startsWith("data: "));
          return reader;
        })());
      }
      const readers = await Promise.all(firstChunks);
      // Every one of them is open upstream at the same moment.
      await upstream.waitFor((s) => s.open === STREAMS, 20_000);
      // Odd streams: the client leaves while the upstream holds. Each departure must
      // abort its upstream request before the upstream is allowed to go on.
      await Promise.all(readers.filter((_, i) => i % 2 === 1).map((r) => r.cancel()));
      await upstream.waitFor((s) => s.cancelled - base.cancelled === STREAMS / 2, 20_000);
      const ends = readers.map(async (reader, i) => {
        if (i % 2 === 1) return;
        let text = "";
        while (true) {
          const { value, done } = await reader.read();
          if (done) break;
          text += decoder.decode(value);
        }
        assert.ok(text.endsWith("data: [DONE]\n\n"), `stream ${i} completed`);
      });
      upstream.release();
      await Promise.all(ends);
      await upstream.waitFor((s) => s.open === 0, 20_000);
      assert.equal(upstream.stats.started - base.started, STREAMS);
      assert.equal(upstream.stats.maxOpen, STREAMS);
      assert.equal(upstream.stats.completed - base.completed, STREAMS / 2);
      assert.equal(upstream.stats.cancelled - base.cancelled, STREAMS / 2);
    };

    await round(); // warm-up: pools, JIT, KV
    const fds0 = openFds();
    const heap0 = heapAfterGc();
    await round();
    // Sockets close asynchronously after the last byte: give them a moment.
    await settle(() => fds0 === null || openFds()! <= fds0 + 10, 5_000);
    const fds1 = openFds();
    const heap1 = heapAfterGc();
    if (fds0 !== null && fds1 !== null) {
      assert.ok(fds1 <= fds0 + 10, `file descriptors ${fds0} → ${fds1}`);
    }
    // Every stream left the shared deadline ticker (whose timer then stops).
    assert.equal(gw.gateway.ctx.streamTicker.size, 0);
    // Measured after full GCs: without them the old generation's garbage (whose collection V8
    // defers longer once the tokenizer's ~40 MB of tables live in the heap) reads as growth.
    assert.ok(heap1 - heap0 < 40 * 1024 * STREAMS, `heap ${heap0} → ${heap1}`);
  } finally {
    client.close();
    await gw.close();
    await upstream.close();
  }
  // Leaked timers or ops would also fail this test through Deno's sanitizers.
});

async function keyIdOf(gw: TestGateway, key: string): Promise<string> {
  const id = (await gw.kv.get<string>(digestIndexKey(keyDigest(key)))).value;
  assert.ok(id);
  return id;
}

/** Two gateways (each with its own upstreams) on one KV file, on a frozen clock. */
async function twoGateways(): Promise<{ a: TestGateway; b: TestGateway; close(): Promise<void> }> {
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/shared.kv`;
  const t0 = Date.now();
  // Frozen: a minute-window boundary must not fall inside the race.
  const now = () => t0;
  const a = await startTestGateway({ kvPath, now });
  const b = await startTestGateway({ kvPath, now });
  return {
    a,
    b,
    async close() {
      await a.close();
      await b.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

function chat(gw: TestGateway, key: string, extra: Record<string, unknown> = {}) {
  return fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "demo/echo",
      messages: [{ role: "user", content: "hi" }],
      ...extra,
    }),
  }).then(async (r) => ({ status: r.status, body: await r.text() }));
}

Deno.test("N racing requests against a limit of M admit exactly M, across two gateways", async () => {
  const { a, b, close } = await twoGateways();
  try {
    const M = 7;
    const N = 40;
    const key = await a.newKey({ tier: "enterprise", rpm: M, tpm: 10_000_000, credits: 1_000 });
    const results = await Promise.all(
      Array.from({ length: N }, (_, i) => chat(i % 2 === 0 ? a : b, key)),
    );
    const ok = results.filter((r) => r.status === 200).length;
    const limited = results.filter((r) => r.status === 429);
    assert.equal(ok, M, JSON.stringify(results.map((r) => r.status)));
    assert.equal(limited.length, N - M);
    for (const r of limited) assert.equal(JSON.parse(r.body).error.code, "rate_limit_exceeded");

    // Tokens per minute: the same exactness when the limit is on tokens.
    const tkey = await a.newKey({ tier: "enterprise", rpm: 1_000, tpm: 2_500, credits: 1_000 });
    // Each request reserves its prompt estimate + max_tokens (500): 4 fit in 2,500, 5 do not.
    // Unused tokens are refunded on settlement, so admitted requests are held in flight
    // (upstream delay) until every racer has been decided.
    for (const gw of [a, b]) {
      gw.plain.setFault({ kind: "delay", ms: 800 });
      gw.secure.setFault({ kind: "delay", ms: 800 });
    }
    const tres = await Promise.all(
      Array.from({ length: 30 }, (_, i) => chat(i % 2 === 0 ? a : b, tkey, { max_tokens: 500 })),
    );
    assert.equal(
      tres.filter((r) => r.status === 200).length,
      4,
      JSON.stringify(tres.map((r) => r.status)),
    );
    assert.equal(tres.filter((r) => r.status === 429).length, 26);
  } finally {
    await close();
  }
});

Deno.test("racing requests never reserve more credit than the balance, across two gateways", async () => {
  const { a, b, close } = await twoGateways();
  try {
    // One request reserves ~(5 prompt tokens × 0.0000002 + 1000 × 0.0000008) ≈ 0.000801
    // credits: 0.0044 covers five reservations and not six.
    const credits = 0.0044;
    const key = await a.newKey({ tier: "enterprise", rpm: 10_000, tpm: 10_000_000, credits });
    const keyId = await keyIdOf(a, key);
    // Admitted requests stay in flight until every racer has been decided, so no
    // settlement can return credit mid-race: exactly five fit.
    for (const gw of [a, b]) {
      gw.plain.setFault({ kind: "delay", ms: 800 });
      gw.secure.setFault({ kind: "delay", ms: 800 });
    }
    const N = 30;
    const results = await Promise.all(
      Array.from({ length: N }, (_, i) => chat(i % 2 === 0 ? a : b, key, { max_tokens: 1000 })),
    );
    const ok = results.filter((r) => r.status === 200).length;
    assert.equal(ok, 5, JSON.stringify(results.map((r) => r.status)));
    assert.equal(results.filter((r) => r.status === 403).length, N - 5);

    // Settled on real usage: the balance is exactly what was given minus what was spent.
    const balance = await getBalance(a.kv, keyId);
    const usage = await getUsage(a.kv, keyId);
    const given = BigInt(Math.round(credits * 1e6)) * (NANO_PER_CREDIT / 1_000_000n);
    assert.equal(usage.requests, 5n);
    assert.ok(usage.spent_nano > 0n);
    assert.ok(balance >= 0n, `balance ${balance}`);
    assert.equal(balance + usage.spent_nano, given);
  } finally {
    for (const gw of [a, b]) {
      gw.plain.setFault(null);
      gw.secure.setFault(null);
    }
    await close();
  }
});
