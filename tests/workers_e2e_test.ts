/**
 * `serve.workers: 2` (docs/decisions/workers.md): one gateway host, two worker
 * processes under main.ts's supervisor, one loopback port (SO_REUSEPORT), one
 * store. Driven with the real `openai` SDK over many connections:
 * requests land on both workers (receipts signed by two keysets), both keep
 * quota leases (the hold ledger shows a slice granted by each), a key's
 * credits are exact under a concurrent race on its last credits, every 200
 * has a durable receipt, the transparency log is one history with one
 * appender, a SIGKILLed worker is restarted by the supervisor with no
 * acknowledged receipt lost, SIGTERM drains an in-flight request, and E2EE
 * requests sealed to one worker's attested keys are opened by either, with
 * a replay refused across them.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { randomBytes } from "node:crypto";
import * as indep from "./support/e2ee_independent.ts";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { createKey } from "../src/keys/keys.ts";
import { getBalance, getUsage, NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { baseConfig, type GatewayProcess, spawnGateway, writeConfig } from "./support/process.ts";
import { type Json } from "./support/receipt_check.ts";
import {
  checkInclusion,
  logKeysFromEntries,
  readEntries,
  receiptEntryOf,
  waitInclusion,
} from "./support/tlog_check.ts";
import { parseCheckpointBody, parseNote } from "../src/aci/note.ts";
import { bytesToHex } from "../src/aci/hex.ts";
import { hashOfHashes, leafHash } from "../src/aci/merkle.ts";

const ORIGIN = "localhost/v1/aci/log";

/** Resolves once `gw` printed `line` (or `n` lines starting with it). */
async function printed(gw: GatewayProcess, prefix: string, n = 1): Promise<void> {
  const t0 = performance.now();
  while (gw.stderr.filter((l) => l.startsWith(prefix)).length < n) {
    if (performance.now() - t0 > 60_000) {
      throw new Error(`never printed ${n}× "${prefix}":\n${gw.stderr.join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The supervisor's worker processes (Linux: its children). */
function workerPids(gw: GatewayProcess): number[] {
  const pid = gw.child.pid;
  return Deno.readTextFileSync(`/proc/${pid}/task/${pid}/children`).trim().split(/\s+/)
    .filter((s) => s !== "").map(Number);
}

/** An SDK client on its own connection pool: the kernel places each new connection. */
function sdk(url: string, apiKey: string) {
  const client = Deno.createHttpClient({});
  const openai = new OpenAI({
    baseURL: `${url}/v1`,
    apiKey,
    maxRetries: 0,
    fetch: (input: string | URL | Request, init?: RequestInit) => fetch(input, { ...init, client }),
  });
  let open = true;
  return {
    openai,
    close: () => {
      if (open) client.close();
      open = false;
    },
  };
}

type Outcome = { status: number; id?: string; cost?: bigint; code?: string };

async function ask(openai: OpenAI, text: string): Promise<Outcome> {
  try {
    const { data, response } = await openai.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: text }],
      max_tokens: 5,
    }).withResponse();
    const u = data.usage!;
    return {
      status: response.status,
      id: response.headers.get("x-receipt-id") ?? undefined,
      cost: BigInt(Math.ceil(u.prompt_tokens * 1000 + u.completion_tokens * 2000 - 1e-6)),
    };
  } catch (e) {
    if (e instanceof OpenAI.APIError && typeof e.status === "number") {
      return { status: e.status, code: e.code ?? undefined };
    }
    return { status: 0 }; // the connection died (a killed worker)
  }
}

async function receipt(url: string, id: string, apiKey: string): Promise<Json> {
  const r = await fetch(`${url}/v1/aci/receipts/${id}`, {
    headers: { authorization: `Bearer ${apiKey}` },
  });
  assert.equal(r.status, 200, `receipt ${id}`);
  return await r.json() as Json;
}

const TOKEN = "workers-operator-token-" + "c0ffee12".repeat(4);

async function startWorkers(dir: string, upstreamUrl: string, storePath: string) {
  const cfg = baseConfig({ upstreamUrl, storePath });
  cfg.serve = { workers: 2 };
  const path = await writeConfig(dir, cfg);
  const gw = await spawnGateway(path, [], { GATEWAY_ADMIN_TOKEN: TOKEN });
  await printed(gw, "2 workers serving");
  // The pid to signal is the supervisor's, named once its workers serve.
  await printed(gw, `gateway pid ${gw.child.pid}: SIGTERM drains and stops it, SIGHUP reloads`);
  assert.ok(gw.stderr.some((l) => l.endsWith("(supervising 2 workers)")));
  return { gw, path, cfg };
}

Deno.test("two workers on one port: both serve, both lease, money exact, one log", async () => {
  const dir = await Deno.makeTempDir();
  const storePath = `${dir}/gw.kv`;
  const upstream = await startDemoUpstream({ name: "plain" });
  const kv = await Deno.openKv(storePath);
  const { gw } = await startWorkers(dir, upstream.url, storePath);
  const opened: { close(): void }[] = [];
  try {
    const big = await createKey(kv, {
      tier: "enterprise",
      rpm: 100_000,
      tpm: 100_000_000,
      now: Date.now,
      creditsNano: 1000n * NANO_PER_CREDIT,
    });
    const creditsNano = 400_000n;
    const money = await createKey(kv, {
      tier: "enterprise",
      rpm: 100_000,
      tpm: 100_000_000,
      now: Date.now,
      creditsNano,
    });
    const bigSdks = Array.from({ length: 16 }, () => sdk(gw.url, big.key));
    const moneySdks = Array.from({ length: 16 }, () => sdk(gw.url, money.key));
    opened.push(...bigSdks, ...moneySdks);

    // Load from 16 connections, with checkpoints watched meanwhile.
    const checkpoints: string[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const r = await fetch(`${gw.url}/v1/aci/log/checkpoint`).catch(() => null);
        if (r === null) return; // the gateway stopped (a failed assertion)
        if (r.status === 200) checkpoints.push(await r.text());
        else await r.body?.cancel();
        await new Promise((res) => setTimeout(res, 25));
      }
    })();
    const outcomes = (await Promise.all(bigSdks.map(async (s, i) => {
      const out: Outcome[] = [];
      for (let j = 0; j < 12; j++) out.push(await ask(s.openai, `worker load ${i} ${j}`));
      return out;
    }))).flat();
    assert.ok(outcomes.every((o) => o.status === 200), outcomes.map((o) => o.status).join());

    // Both workers served: their receipts are signed under two keysets, both attested.
    const digests = new Set<string>();
    for (const o of outcomes) {
      digests.add((await receipt(gw.url, o.id!, big.key)).workload_keyset_digest as string);
    }
    assert.equal(digests.size, 2, "receipts from both workers");
    const report = await (await fetch(`${gw.url}/v1/aci/attestation`)).json();
    assert.equal(report.all_attestations.length, 2);

    // Both workers kept quota leases on (a second worker is not a second replica): each
    // has reserved lease slices of the key's requests in its hold ledger.
    const leased = new Map<string, bigint>();
    for await (const e of kv.list<Deno.KvU64>({ prefix: ["hold"] })) {
      if (e.key[2] === big.record.key_id && e.key[3] === "req_reserved") {
        leased.set(e.key[1] as string, e.value.value);
      }
    }
    assert.equal(leased.size, 2, `lease holders: ${[...leased.keys()]}`);
    const hosts = new Set([...leased.keys()].map((id) => id.split(".")[0]));
    assert.equal(hosts.size, 1, "one host");
    for (const [id, n] of leased) assert.ok(n > 0n, `${id} reserved no lease slice`);

    // A race on a key's last credits from 16 connections over both workers.
    const race = (await Promise.all(moneySdks.map(async (s, i) => {
      const out: Outcome[] = [];
      for (let j = 0; j < 5; j++) out.push(await ask(s.openai, `race ${i} ${j}`));
      return out;
    }))).flat();
    const paid = race.filter((o) => o.status === 200);
    const refused = race.filter((o) => o.status !== 200);
    assert.ok(
      refused.every((o) => o.status === 403 && o.code === "insufficient_credits"),
      race.map((o) => `${o.status} ${o.code ?? ""}`).join(),
    );
    assert.ok(refused.length > 0, "the credits ran out");
    assert.ok(paid.length >= 5, `${paid.length} paid`);
    const spent = paid.reduce((a, o) => a + o.cost!, 0n);
    assert.ok(spent <= creditsNano, `spent ${spent} of ${creditsNano}`);
    for (const o of paid) await receipt(gw.url, o.id!, money.key);

    // The log: one history, appended by one worker (one checkpoint key), every receipt in it.
    watching = false;
    await watcher;
    const acknowledged = [...outcomes.map((o) => ({ id: o.id!, key: big.key }))];
    let finalSize = 0;
    for (const { id, key } of acknowledged) {
      finalSize = Math.max(
        finalSize,
        (await waitInclusion(gw.url, id, key, 20_000)).answer.tree_size,
      );
    }
    const prefix = `${gw.url}/v1/aci/log`;
    const final = parseCheckpointBody(
      parseNote(await (await fetch(`${prefix}/checkpoint`)).text())!.text,
    )!;
    const entries = await readEntries(prefix, final.size);
    assert.deepEqual(hashOfHashes(entries.map(leafHash)), final.root);
    const keys = await logKeysFromEntries(gw.url, ORIGIN, entries);
    assert.equal(keys.length, 2, "both workers' keysets are logged");
    // Before the first append every worker serves the empty tree's checkpoint signed with its
    // own key (C2SP: size 0 commits to nothing); appended checkpoints come from the one appender.
    const appended = checkpoints.filter((n) => parseCheckpointBody(parseNote(n)!.text)!.size > 0);
    const signers = new Set(
      appended.flatMap((n) => parseNote(n)!.signatures.map((s) => bytesToHex(s.id))),
    );
    assert.ok(appended.length > 3, `${appended.length} appended checkpoints seen`);
    assert.equal(signers.size, 1, "one appender signs the host's checkpoints");
    const indexes = new Set<number>();
    for (const { id, key } of acknowledged) {
      const { answer } = await waitInclusion(gw.url, id, key);
      checkInclusion(answer, receiptEntryOf(await receipt(gw.url, id, key)), keys);
      assert.ok(!indexes.has(answer.leaf_index), "one leaf per receipt");
      indexes.add(answer.leaf_index);
    }

    // SIGTERM drains both workers; their leases are handed back, so the balance is exact.
    for (const s of opened) s.close();
    opened.length = 0;
    const status = await gw.stop("SIGTERM");
    assert.equal(status.code, 0);
    assert.equal(await getBalance(kv, money.record.key_id), creditsNano - spent);
    assert.equal((await getUsage(kv, money.record.key_id)).requests, BigInt(paid.length));
  } finally {
    for (const s of opened) s.close();
    await gw.stop().catch(() => {});
    kv.close();
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a SIGKILLed worker is restarted and loses no acknowledged receipt; SIGTERM drains", async () => {
  const dir = await Deno.makeTempDir();
  const storePath = `${dir}/gw.kv`;
  const upstream = await startDemoUpstream({ name: "plain" });
  upstream.setFault({ kind: "delay", ms: 10 });
  const kv = await Deno.openKv(storePath);
  const { gw } = await startWorkers(dir, upstream.url, storePath);
  const opened: { close(): void }[] = [];
  try {
    const { key } = await createKey(kv, {
      tier: "enterprise",
      rpm: 100_000,
      tpm: 100_000_000,
      now: Date.now,
      creditsNano: 1000n * NANO_PER_CREDIT,
    });
    const before = workerPids(gw);
    assert.equal(before.length, 2);
    const acknowledged: string[] = [];
    let stop = false;
    const loop = async (i: number) => {
      while (!stop) {
        const s = sdk(gw.url, key); // a fresh connection each time: both workers get some
        opened.push(s);
        const o = await ask(s.openai, `kill load ${i}`);
        s.close();
        if (o.status === 200) acknowledged.push(o.id!);
      }
    };
    const load = Array.from({ length: 8 }, (_, i) => loop(i));
    while (acknowledged.length < 40) await new Promise((r) => setTimeout(r, 20));
    Deno.kill(before[1], "SIGKILL");
    // The supervisor notices and starts a third worker process (its keyset digest line).
    await printed(gw, "keyset digest ", 3);
    const after = workerPids(gw);
    assert.equal(after.length, 2);
    assert.ok(after.includes(before[0]) && !after.includes(before[1]), `${before} → ${after}`);
    const lastDigest = gw.stderr.filter((l) => l.startsWith("keyset digest ")).at(-1)!
      .slice("keyset digest ".length);
    // Load goes on until the restarted worker has served some of it.
    const t0 = performance.now();
    for (;;) {
      const n = acknowledged.length;
      while (acknowledged.length < n + 20) await new Promise((r) => setTimeout(r, 20));
      const served = await Promise.all(
        acknowledged.slice(n).map(async (id) =>
          (await receipt(gw.url, id, key)).workload_keyset_digest
        ),
      );
      if (served.includes(lastDigest)) break;
      assert.ok(performance.now() - t0 < 60_000, "the restarted worker never served");
    }
    stop = true;
    await Promise.all(load);
    // Every acknowledged receipt — from the killed worker too — is durable.
    for (const id of acknowledged) await receipt(gw.url, id, key);

    // SIGTERM while a request is in flight: it completes, then the host exits 0.
    upstream.setFault({ kind: "delay", ms: 1_500 });
    const seen = upstream.stats.total;
    const s = sdk(gw.url, key);
    opened.push(s);
    const inFlight = ask(s.openai, "drain me");
    while (upstream.stats.total === seen) await new Promise((r) => setTimeout(r, 10));
    gw.child.kill("SIGTERM");
    const drained = await inFlight;
    s.close();
    assert.equal(drained.status, 200);
    assert.equal((await gw.child.status).code, 0);
    for (const pid of after) assert.throws(() => Deno.kill(pid, "SIGCONT"), "worker exited");
    // Its receipt is durable: a fresh single-process gateway on the store serves it.
    const cfg = baseConfig({ upstreamUrl: upstream.url, storePath });
    const one = await spawnGateway(await writeConfig(dir, cfg));
    try {
      await receipt(one.url, drained.id!, key);
    } finally {
      assert.equal((await one.stop("SIGTERM")).code, 0);
    }
  } finally {
    for (const s of opened) s.close();
    await gw.stop().catch(() => {});
    kv.close();
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("two workers publish and accept the same E2EE keys (no seed configured); a replay is refused across them; configuration changes reach both", async () => {
  const dir = await Deno.makeTempDir();
  const storePath = `${dir}/gw.kv`;
  const upstream = await startDemoUpstream({ name: "plain" });
  const kv = await Deno.openKv(storePath);
  const { gw, path, cfg } = await startWorkers(dir, upstream.url, storePath);
  try {
    const { key } = await createKey(kv, {
      tier: "enterprise",
      rpm: 100_000,
      tpm: 100_000_000,
      now: Date.now,
      creditsNano: 10n * NANO_PER_CREDIT,
    });
    /** One request on a fresh connection (the kernel picks its worker). */
    const fresh = async (path: string, init?: RequestInit) => {
      const client = Deno.createHttpClient({});
      try {
        const r = await fetch(`${gw.url}${path}`, { ...init, client });
        return { status: r.status, headers: r.headers, body: await r.json() };
      } finally {
        client.close();
      }
    };
    // Both workers' keysets: their own receipt keys, one set of E2EE keys.
    const keysets = new Map<string, Json>();
    for (let i = 0; i < 200 && keysets.size < 2; i++) {
      const r = (await fresh("/v1/aci/attestation")).body;
      keysets.set(r.workload_keyset_digest, r.attestation.workload_keyset);
    }
    assert.equal(keysets.size, 2, "attestations from both workers");
    const [ka, kb] = [...keysets.values()] as Json[];
    assert.deepEqual(ka.e2ee_public_keys, kb.e2ee_public_keys);
    const service = (ka.e2ee_public_keys as Json[])[0].public_key as string;

    const sealed = async () => {
      const nonce = randomBytes(32).toString("hex");
      const ts = Math.floor(Date.now() / 1000);
      const client = indep.clientKeys(indep.X25519);
      const ad = indep.aad("request", {
        algo: indep.X25519,
        field: "messages.0.content",
        model: "demo/echo",
        nonce,
        ts,
      });
      return {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${key}`,
          "x-e2ee-version": "2",
          "x-client-pub-key": client.pk,
          "x-model-pub-key": service,
          "x-e2ee-nonce": nonce,
          "x-e2ee-timestamp": String(ts),
        },
        body: JSON.stringify({
          model: "demo/echo",
          messages: [{
            role: "user",
            content: await indep.encrypt(indep.X25519, service, "hi", ad),
          }],
          max_tokens: 5,
        }),
      };
    };
    // Sealed to the keys one worker attested, each is opened by whichever worker gets it.
    const served = await Promise.all(
      Array.from({ length: 12 }, async () => fresh("/v1/chat/completions", await sealed())),
    );
    assert.ok(served.every((r) => r.status === 200), JSON.stringify(served.map((r) => r.body)));
    const signers = new Set<string>();
    for (const r of served) {
      const id = r.headers.get("x-receipt-id")!;
      signers.add((await receipt(gw.url, id, key)).workload_keyset_digest as string);
    }
    assert.equal(signers.size, 2, "sealed requests served by both workers");
    // Copies of one sealed request on 8 connections at once: one is served, the rest replays.
    for (let round = 0; round < 2; round++) {
      const init = await sealed();
      const results = await Promise.all(
        Array.from({ length: 8 }, () => fresh("/v1/chat/completions", init)),
      );
      assert.equal(results.filter((r) => r.status === 200).length, 1);
      for (const r of results.filter((r) => r.status !== 200)) {
        assert.equal(r.status, 400);
        assert.equal(r.body.error.type, "e2ee_replay_detected");
      }
    }

    // An admin PUT would reach one worker: refused, naming SIGHUP. SIGHUP reaches both.
    const admin = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
    const put = await fresh("/admin/v1/config", {
      method: "PUT",
      headers: admin,
      body: JSON.stringify(cfg),
    });
    assert.equal(put.status, 400);
    assert.match(put.body.error.message, /2 workers.*SIGHUP/);
    const models = cfg.models as { pricing: { prompt: number } }[];
    models[0].pricing.prompt = 0.000003;
    await Deno.writeTextFile(path, JSON.stringify(cfg));
    gw.child.kill("SIGHUP");
    const t0 = performance.now();
    for (let same = 0; same < 12;) {
      const v = (await fresh("/admin/v1/config", { headers: admin })).body;
      same = v.version === 2 ? same + 1 : 0;
      assert.ok(performance.now() - t0 < 30_000, "a worker never reloaded");
      if (same === 0) await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    assert.equal((await gw.stop("SIGTERM")).code, 0);
    kv.close();
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});
