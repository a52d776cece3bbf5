/**
 * Receipts are durable: they survive a restart (two gateways, one after the
 * other, on one KV file, each with its own keyset), nothing acknowledged is
 * lost when the real process gets SIGTERM under load (drain and flush), and
 * after `kill -9` under load every response the client fully received has its
 * receipt in the store (a response is released only after its commit).
 */
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { plainRoutesOnly } from "./support/route_config.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";
import {
  asRecord,
  clientResponseId,
  fetchReceipt,
  getJson,
  independentFailures,
  type Json,
  keysetOf,
  onlyEvent,
  postRaw,
  sha256Prefixed,
  text,
} from "./support/receipt_check.ts";
import { verifyReceipt } from "../src/verify/receipt.ts";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { createKey } from "../src/keys/keys.ts";
import { NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { parseStoredReceipt, RECEIPT_PREFIX } from "../src/receipts/service.ts";

Deno.test("restart between response and lookup: receipts and response-id lookups survive, old keyset still verifies", async () => {
  const dir = await Deno.makeTempDir({ prefix: "receipts_restart_" });
  const kvPath = `${dir}/gw.kv`;
  try {
    const first = await startTestGateway({ kvPath, configure: plainRoutesOnly });
    const keyA = first.apiKey;
    const served: {
      receiptId: string;
      responseId: string;
      request: Uint8Array;
      response: Uint8Array;
      receipt: Json;
    }[] = [];
    let digest1: string;
    try {
      digest1 = first.gateway.identity.current().digest;
      for (const stream of [false, true]) {
        const ex = await postRaw(first.url, "/v1/chat/completions", {
          model: "demo/echo",
          stream,
          messages: [{ role: "user", content: "remember me" }],
        }, keyA);
        assert.equal(ex.status, 200);
        const receipt = asRecord((await fetchReceipt(first.url, ex.receiptId!, keyA)).body);
        served.push({
          receiptId: ex.receiptId!,
          responseId: clientResponseId(ex.response, stream)!,
          request: ex.request,
          response: ex.response,
          receipt,
        });
      }
    } finally {
      await first.close();
    }

    const second = await startTestGateway({ kvPath, configure: plainRoutesOnly });
    try {
      const digest2 = second.gateway.identity.current().digest;
      assert.notEqual(digest2, digest1, "a restarted gateway has a fresh keyset");
      // Another key on the new process gets the same upstream response id (the
      // restarted demo upstream counts from 1 again): it must not shadow key A's.
      const exB = await postRaw(second.url, "/v1/chat/completions", {
        model: "demo/echo",
        messages: [{ role: "user", content: "me too" }],
      }, second.apiKey);
      const idB = clientResponseId(exB.response, false)!;
      assert.equal(idB, served[0].responseId, "premise: the response ids collide");
      const receiptB = asRecord((await fetchReceipt(second.url, idB, second.apiKey)).body);
      assert.equal(receiptB.receipt_id, exB.receiptId);

      // The first keyset's report is archived, so the old receipts still verify.
      const archived = await getJson(
        `${second.url}/v1/aci/attestation?workload_keyset_digest=${encodeURIComponent(digest1)}`,
      );
      assert.equal(archived.status, 200);
      const report = asRecord(archived.body);
      assert.equal(report.workload_keyset_digest, digest1);
      for (const s of served) {
        for (const id of [s.receiptId, s.responseId]) {
          const got = await fetchReceipt(second.url, id, keyA);
          assert.equal(got.status, 200, id);
          assert.deepEqual(got.body, s.receipt);
        }
        const bodies = { requestBody: s.request, responseBody: s.response };
        assert.deepEqual(
          verifyReceipt(s.receipt, { report, ...bodies }).filter((c) => !c.ok),
          [],
        );
        assert.deepEqual(
          independentFailures(s.receipt, keysetOf(report), {
            request: s.request,
            response: s.response,
          }),
          [],
        );
        // Still bound to key A after the restart.
        assert.equal((await fetchReceipt(second.url, s.receiptId, second.apiKey)).status, 404);
      }
    } finally {
      await second.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

interface Outcome {
  stream: boolean;
  status: number | null;
  receiptId: string | null;
  body: Uint8Array | null;
  /** The whole body arrived (JSON parsed; a stream reached `data: [DONE]`). */
  complete: boolean;
  finishedAt: number;
}

async function oneRequest(url: string, key: string, i: number): Promise<Outcome> {
  const stream = i % 2 === 1;
  const out: Outcome = {
    stream,
    status: null,
    receiptId: null,
    body: null,
    complete: false,
    finishedAt: 0,
  };
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({
        model: "demo/echo",
        stream,
        messages: [{ role: "user", content: `request number ${i} of the load` }],
      }),
      signal: AbortSignal.timeout(15_000),
    });
    out.status = res.status;
    out.receiptId = res.headers.get("x-receipt-id");
    out.body = new Uint8Array(await res.arrayBuffer());
    const t = text(out.body);
    out.complete = res.status === 200 &&
      (stream ? t.endsWith("data: [DONE]\n\n") : parses(t));
  } catch {
    // refused connection or cut stream: not acknowledged
  }
  out.finishedAt = performance.now();
  return out;
}

function parses(t: string): boolean {
  try {
    JSON.parse(t);
    return true;
  } catch {
    return false;
  }
}

/**
 * Runs the real gateway process under load, sends `signal` while requests are
 * in flight, then checks the KV file: every fully received response has its
 * receipt, hashing exactly the bytes the client got.
 */
async function loadThenSignal(signal: "SIGTERM" | "SIGKILL") {
  const dir = await Deno.makeTempDir({ prefix: `receipts_${signal}_` });
  const upstream = await startDemoUpstream({ name: "plain" });
  const storePath = `${dir}/gw.kv`;
  try {
    const setup = await Deno.openKv(storePath);
    const { key } = await createKey(setup, {
      tier: "enterprise",
      rpm: 100_000,
      tpm: 100_000_000,
      now: Date.now,
      creditsNano: 1_000n * NANO_PER_CREDIT,
    });
    setup.close();
    // Every upstream answer waits 150 ms before its first byte: a steady crowd
    // of requests is in flight at the signal.
    upstream.setFault({ kind: "delay", ms: 150 });
    const gw = await spawnGateway(
      await writeConfig(dir, baseConfig({ upstreamUrl: upstream.url, storePath })),
    );
    const total = 200;
    const pending: Promise<Outcome>[] = [];
    let signalledAt = 0;
    let launchedBeforeSignal = 0;
    // 10 requests every 50 ms; the signal goes out half-way, when the last
    // ~150 ms of launches are still waiting on the upstream.
    for (let i = 0; i < total; i++) {
      if (i === total / 2) {
        signalledAt = performance.now();
        launchedBeforeSignal = i;
        gw.child.kill(signal);
      }
      pending.push(oneRequest(gw.url, key, i));
      if (i % 10 === 9) await new Promise((r) => setTimeout(r, 50));
    }
    const outcomes = await Promise.all(pending);
    const status = await gw.child.status;
    if (signal === "SIGTERM") assert.equal(status.code, 0, gw.stderr.join("\n"));
    else assert.equal(status.signal, "SIGKILL");

    const done = outcomes.filter((o) => o.complete);
    assert.ok(done.length > 0, "some responses completed");
    const kv = await Deno.openKv(storePath);
    try {
      for (const o of done) {
        assert.match(o.receiptId ?? "", /^rcpt-/);
        const entry = parseStoredReceipt((await kv.get([RECEIPT_PREFIX, o.receiptId!])).value);
        assert.ok(entry, `receipt ${o.receiptId} of a delivered response is missing`);
        assert.equal(
          onlyEvent(entry.receipt as unknown as Json, "response.returned").body_hash,
          sha256Prefixed(o.body!),
        );
      }
    } finally {
      kv.close();
    }
    return { outcomes, done, signalledAt, launchedBeforeSignal };
  } finally {
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name: "SIGTERM under load: the process drains, and every delivered response has its receipt",
  async fn() {
    const { outcomes, done, signalledAt } = await loadThenSignal("SIGTERM");
    // Drain, not abandon: responses in flight at the signal were still delivered,
    // and no response that started (status 200 sent) was cut.
    assert.ok(
      done.some((o) => o.finishedAt > signalledAt),
      "some requests in flight at SIGTERM completed during the drain",
    );
    // A refusal is an answer too (a 503 at the connection cap, when a loaded machine slows the
    // gateway down): whole, as its error body shows; only a 200 may not end early.
    const cut = (o: Outcome) =>
      o.status !== null && !o.complete &&
      !(o.status !== 200 && parses(text(o.body ?? new Uint8Array())));
    assert.deepEqual(outcomes.filter(cut), []);
    assert.ok(done.some((o) => o.stream) && done.some((o) => !o.stream));
  },
});

Deno.test({
  name: "kill -9 under load: every response the client fully received has its receipt",
  async fn() {
    const { outcomes, launchedBeforeSignal } = await loadThenSignal("SIGKILL");
    // The kill really cut requests that were in flight.
    const before = outcomes.slice(0, launchedBeforeSignal);
    assert.ok(before.some((o) => !o.complete), "requests in flight died with the process");
  },
});
