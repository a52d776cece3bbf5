/**
 * A crash loses no money (issue #15 item 4): a real gateway process under
 * load — quota leases granted, requests in flight — is killed with SIGKILL.
 * The credits it held (lease slices, reservations of unanswered requests) are
 * missing from the key until another process on the store sees the dead
 * replica's announcement lapse and refunds its open holds from the ledger;
 * then every credit given is either in the balance or recorded as spent.
 */
import assert from "node:assert/strict";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { createKey } from "../src/keys/keys.ts";
import { getBalance, getUsage, NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";

Deno.test("kill -9 under load: the held credits come back, balance + spent = given", async () => {
  const dir = await Deno.makeTempDir();
  const storePath = `${dir}/gw.kv`;
  const upstream = await startDemoUpstream({ name: "plain" });
  // Every answer takes a while: requests are in flight when the process dies.
  upstream.setFault({ kind: "delay", ms: 150 });
  const config = baseConfig({ upstreamUrl: upstream.url, storePath });
  // A short replica TTL, so a dead replica is noticed within seconds (default 60 s).
  (config.store as Record<string, unknown>).replica_ttl_seconds = 2;
  const cfg = await writeConfig(dir, config);
  const kv = await Deno.openKv(storePath);
  let a = await spawnGateway(cfg);
  try {
    const given = 10n * NANO_PER_CREDIT;
    const { key, record } = await createKey(kv, {
      tier: "enterprise",
      rpm: 100_000,
      tpm: 100_000_000,
      now: Date.now,
      creditsNano: given,
    });
    const ledger = async () => {
      const balance = await getBalance(kv, record.key_id);
      const usage = await getUsage(kv, record.key_id);
      return { balance, spent: usage.spent_nano, requests: usage.requests };
    };
    const ask = (url: string, stream: boolean) =>
      fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "demo/echo",
          max_tokens: 40,
          stream,
          messages: [{ role: "user", content: "spend some credits on a crash test" }],
        }),
      }).then(async (r) => {
        await r.text();
        return r.status;
      });
    let stop = false;
    let answered = 0;
    const url = a.url;
    const worker = async (i: number) => {
      while (!stop) {
        try {
          if ((await ask(url, i % 2 === 0)) === 200) answered++;
        } catch {
          // the process died under this request
        }
      }
    };
    const load = Array.from({ length: 16 }, (_, i) => worker(i));
    await new Promise((r) => setTimeout(r, 1_500));
    await a.stop("SIGKILL");
    stop = true;
    await Promise.all(load);
    assert.ok(answered > 20, `${answered} answered before the crash`);

    const crashed = await ledger();
    const missing = given - crashed.balance - crashed.spent;
    // Its usage deltas not yet applied wait in its pending row, which every reader adds.
    const pendingRows = async () =>
      (await Array.fromAsync(kv.list({ prefix: ["usage_pending"] }))).map((e) => String(e.key[1]));
    const deadRows = await pendingRows();
    assert.equal(deadRows.length, 1, "the killed replica left its pending usage row");
    assert.ok(missing > 0n, "the crash left credits held (leases, requests in flight)");

    // Another process on the store refunds the dead replica's open holds.
    a = await spawnGateway(cfg);
    const deadline = Date.now() + 20_000;
    let now = await ledger();
    while (now.balance + now.spent !== given && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      now = await ledger();
    }
    assert.equal(
      now.balance + now.spent,
      given,
      `still missing ${given - now.balance - now.spent} of ${missing} nano after recovery`,
    );
    // Nothing of the dead replica's ledger is left, and the key is served as before.
    assert.equal(await ask(a.url, false), 200);
    const left = [];
    for await (const e of kv.list({ prefix: ["hold_instances"] })) left.push(e.key[1]);
    assert.equal(left.length, 1, "only the live replica's ledger remains");
    // The dead replica's usage deltas were applied to the counters, once: its row is gone.
    assert.ok(!(await pendingRows()).includes(deadRows[0]), "the dead replica's row was folded");
    assert.equal((await ledger()).requests >= crashed.requests, true);
  } finally {
    await a.stop();
    kv.close();
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});
