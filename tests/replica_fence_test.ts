/**
 * A replica paused past its TTL cannot be credited twice (#25 item 12), with
 * two real gateway processes on one store: replica A admits a request (its
 * reservation is a hold in A's ledger) and is frozen with SIGSTOP; replica B
 * sees A gone and recovers A's holds (refunding the reservation); A is then
 * resumed with SIGCONT and finishes the request. Before fencing, A's own
 * settlement then refunded the same reservation a second time; now A's
 * ledger is fenced and its commits fail, so the key's balance never exceeds
 * the credits given minus those spent.
 */
import assert from "node:assert/strict";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { createKey } from "../src/keys/keys.ts";
import { NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { holdFenceKey } from "../src/admission/holds.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";
import { sleep } from "../src/store/transient.ts";

const GIVEN = 10;

/** Polls `f` every 50 ms until it returns a value (bounded). */
async function until<T>(what: string, f: () => Promise<T | null>, ms = 30_000): Promise<T> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const v = await f();
    if (v !== null) return v;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

Deno.test("a replica frozen past its TTL (SIGSTOP) and resumed (SIGCONT) is fenced: its holds are credited once", async () => {
  const dir = await Deno.makeTempDir();
  const upstream = await startDemoUpstream({ name: "plain" });
  const storePath = `${dir}/gw.kv`;
  const cfg = baseConfig({ upstreamUrl: upstream.url, storePath }) as Record<string, unknown>;
  cfg.store = { path: storePath, replica_ttl_seconds: 1, quota_leases: false };
  const kv = await Deno.openKv(storePath);
  const { key } = await createKey(kv, {
    tier: "pro",
    now: Date.now,
    creditsNano: BigInt(GIVEN) * NANO_PER_CREDIT,
  });
  const config = await writeConfig(dir, cfg);
  const a = await spawnGateway(config);
  const b = await spawnGateway(config);
  let stopped = false;
  try {
    // A's request waits at the upstream long enough to be frozen in flight.
    upstream.setFault({ kind: "delay", ms: 1_500 });
    const inFlight = fetch(`${a.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "demo/echo",
        messages: [{ role: "user", content: "hold this" }],
        max_tokens: 1000,
      }),
    }).then(async (r) => ({ status: r.status, text: await r.text() }));
    await until(
      "the upstream to receive A's request",
      () => Promise.resolve(upstream.stats.total > 0 ? true : null),
    );
    // A's hold is in the ledger: its instance id names it.
    const instance = await until("A's hold", async () => {
      for await (const e of kv.list({ prefix: ["hold_instances"] })) return e.key[1] as string;
      return null;
    });
    Deno.kill(a.child.pid, "SIGSTOP");
    stopped = true;
    // B's heartbeat finds A gone and recovers its holds (deletes A's ledger entry).
    await until("B to recover A's holds", async () => {
      const e = await kv.get(["hold_instances", instance]);
      return e.versionstamp === null ? true : null;
    });
    const fence = await kv.get(holdFenceKey(instance));
    console.log(`A (${instance}) recovered by B; fence written: ${fence.versionstamp !== null}`);
    Deno.kill(a.child.pid, "SIGCONT");
    stopped = false;
    const answer = await inFlight;
    console.log(`A's request after SIGCONT: ${answer.status} ${answer.text.slice(0, 160)}`);
    // Whatever A did after resuming is durable now or never: read the key through B.
    await sleep(500);
    const info = await fetch(`${b.url}/v1/key`, { headers: { authorization: `Bearer ${key}` } });
    const figures = (await info.json() as {
      data: { balance: string; available: string; spent: string };
    }).data;
    console.log(`key after recovery and resume: ${JSON.stringify(figures)}`);
    const balance = Number(figures.balance);
    const spent = Number(figures.spent);
    assert.ok(
      balance <= GIVEN - spent + 1e-9,
      `balance ${balance} > given ${GIVEN} − spent ${spent}: credited twice`,
    );
    assert.ok(Number(figures.available) <= GIVEN - spent + 1e-9, "available over given − spent");
    assert.equal(
      answer.status === 200,
      false,
      "A answered after being fenced (no durable receipt)",
    );
  } finally {
    if (stopped) Deno.kill(a.child.pid, "SIGCONT");
    await a.stop();
    await b.stop();
    await upstream.close();
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
});
