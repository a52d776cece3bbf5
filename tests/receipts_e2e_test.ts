/**
 * Signed receipts end to end: for every inference endpoint, streamed and not,
 * the receipt named by `x-receipt-id` verifies (library and an independent
 * re-computation) against the exact bytes the client sent and received, and
 * its hashes match the bytes on the upstream wire (a recording proxy).
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import {
  startTestGateway,
  TEST_ADMIN_TOKEN,
  type TestGateway,
  type TestGatewayOptions,
} from "./support/gateway.ts";
import { type RecordingProxy, startRecordingProxy } from "./support/recording_proxy.ts";
import { createHash } from "node:crypto";
import {
  asRecord,
  assertEventOrder,
  clientResponseId,
  fetchReceipt,
  fetchReport,
  getJson,
  independentFailures,
  jcs,
  type Json,
  keysetOf,
  onlyEvent,
  postRaw,
  sha256Prefixed,
  text,
} from "./support/receipt_check.ts";
import { verifyReceipt } from "../src/verify/receipt.ts";
import { fakeClock } from "./support/fake_clock.ts";
import { plainRoutesOnly } from "./support/route_config.ts";

/** A gateway whose `plain` provider is reached through a recording proxy. */
async function withProxiedGateway(
  fn: (gw: TestGateway, proxy: RecordingProxy) => Promise<void>,
  opts: TestGatewayOptions = {},
) {
  let proxy: RecordingProxy | null = null;
  const gw = await startTestGateway({
    ...opts,
    configure: (c) => {
      opts.configure?.(c);
      // The wire is only observable on the plain (non-TLS, unpinned) upstream.
      plainRoutesOnly(c);
      const plain = c.providers.find((p) => p.name === "plain");
      assert.ok(plain);
      proxy = startRecordingProxy(plain.base_url);
      plain.base_url = proxy.url;
    },
  });
  try {
    assert.ok(proxy);
    await fn(gw, proxy);
  } finally {
    await gw.close();
    await (proxy as RecordingProxy | null)?.close();
  }
}

const MARKER = "zebra-quartz-7731";

const CASES: { path: string; body: Json; streams: boolean[] }[] = [
  {
    path: "/v1/chat/completions",
    body: { model: "demo/echo", messages: [{ role: "user", content: `say ${MARKER}` }] },
    streams: [false, true],
  },
  {
    path: "/v1/completions",
    body: { model: "demo/echo", prompt: `say ${MARKER}`, max_tokens: 32 },
    streams: [false, true],
  },
  {
    path: "/v1/embeddings",
    body: { model: "demo/embed-small", input: `embed ${MARKER}` },
    streams: [false],
  },
  {
    path: "/v1/messages",
    body: {
      model: "demo/echo",
      max_tokens: 64,
      messages: [{ role: "user", content: `say ${MARKER}` }],
    },
    streams: [false, true],
  },
  {
    path: "/v1/responses",
    body: { model: "demo/echo", input: `say ${MARKER}` },
    streams: [false, true],
  },
];

Deno.test("every endpoint, streamed and not: the receipt binds the exact bytes on both sides", async () => {
  const clock = fakeClock();
  await withProxiedGateway(async (gw, proxy) => {
    const { report } = await fetchReport(gw.url);
    const keyset = keysetOf(report);
    for (const c of CASES) {
      for (const stream of c.streams) {
        const label = `${c.path} stream=${stream}`;
        // Spacing the client chose must be hashed as sent, not as re-serialized.
        const sent = JSON.stringify(stream ? { ...c.body, stream } : c.body, null, 1);
        const ex = await postRaw(gw.url, c.path, sent, gw.apiKey);
        assert.equal(ex.status, 200, label);
        assert.match(ex.receiptId ?? "", /^rcpt-[0-9a-f]{32}$/, label);
        const got = await fetchReceipt(gw.url, ex.receiptId!, gw.apiKey);
        assert.equal(got.status, 200, label);
        assert.match(got.headers.get("content-type") ?? "", /^application\/json/);
        const receipt = got.body as Json;
        // Served exactly as signed: the canonical (JCS) bytes, which the stored row keeps.
        const served = await fetch(`${gw.url}/v1/aci/receipts/${ex.receiptId}`, {
          headers: { authorization: `Bearer ${gw.apiKey}` },
        });
        assert.deepEqual(new Uint8Array(await served.arrayBuffer()), jcs(receipt), label);

        // The library's checks, against the bytes the client holds.
        const checks = verifyReceipt(receipt, {
          report,
          requestBody: ex.request,
          responseBody: ex.response,
        });
        assert.deepEqual(checks.filter((x) => !x.ok), [], label);
        assert.ok(checks.some((x) => x.name === "receipt.response_body_hash" && x.ok));
        // And independently: canonicalize + node:crypto.
        assert.deepEqual(
          independentFailures(receipt, keyset, { request: ex.request, response: ex.response }),
          [],
          label,
        );

        // The upstream side: the exact bytes forwarded and received on the wire.
        const wire = proxy.exchanges.at(-1)!;
        assert.equal(
          onlyEvent(receipt, "request.forwarded").body_hash,
          sha256Prefixed(wire.request),
        );
        assert.equal(
          onlyEvent(receipt, "response.received").body_hash,
          sha256Prefixed(await wire.response),
          label,
        );
        assertEventOrder(receipt, "served");
        assert.equal(
          onlyEvent(receipt, "route.selected").target_route_id,
          "plain:demo-chat".replace(
            "demo-chat",
            c.path === "/v1/embeddings" ? "demo-embed" : "demo-chat",
          ),
        );

        // Document fields.
        assert.equal(receipt.api_version, "aci/1");
        assert.equal(receipt.receipt_id, ex.receiptId);
        assert.equal(receipt.endpoint, c.path);
        assert.equal(receipt.method, "POST");
        assert.equal(receipt.model, c.body.model);
        assert.equal(receipt.served_at, Math.floor(clock.now() / 1000));
        assert.equal(receipt.workload_keyset_digest, gw.gateway.identity.current().digest);
        assert.equal(receipt.workload_keyset_digest, report.workload_keyset_digest);
        assert.equal(
          receipt.chat_id,
          c.path === "/v1/embeddings" ? null : clientResponseId(ex.response, stream),
          label,
        );
        if (stream) {
          assert.match(
            text(ex.response),
            c.path === "/v1/chat/completions" || c.path === "/v1/completions"
              ? /data: \[DONE\]\n\n$/
              : /\n\n$/,
          );
        }
        // Hashes and metadata only: no prompt, completion or key.
        const serialized = JSON.stringify(receipt);
        assert.ok(!serialized.includes(MARKER), `${label}: receipt leaks content`);
        assert.ok(!serialized.includes(gw.apiKey), `${label}: receipt leaks the key`);
        assert.ok(!serialized.includes("Echo"), `${label}: receipt leaks the completion`);
      }
    }
  }, { now: clock.now });
});

const encoder = new TextEncoder();

/** A fetch for SDKs that keeps the exact request body bytes they send. */
function recordingFetch(sent: Uint8Array[]): typeof fetch {
  return (input, init) => {
    const body = init?.body;
    if (typeof body === "string") sent.push(encoder.encode(body));
    else if (body instanceof Uint8Array) sent.push(body);
    else throw new Error("the SDK sent a body type this test does not record");
    return fetch(input, init);
  };
}

Deno.test("SDKs: receipt id via .withResponse(), exact bytes via .asResponse(), all verify", async () => {
  await withProxiedGateway(async (gw) => {
    const { report } = await fetchReport(gw.url);
    const keyset = keysetOf(report);
    const sent: Uint8Array[] = [];
    const openai = new OpenAI({
      baseURL: gw.baseURL,
      apiKey: gw.apiKey,
      maxRetries: 0,
      fetch: recordingFetch(sent),
    });
    const check = async (id: string | null, response: Uint8Array | null, chatId?: string) => {
      assert.match(id ?? "", /^rcpt-/);
      const r = await fetchReceipt(gw.url, id!, gw.apiKey);
      assert.equal(r.status, 200);
      const receipt = r.body as Json;
      const bodies = { request: sent.at(-1)!, ...(response ? { response } : {}) };
      assert.deepEqual(verifyReceipt(receipt, { report, ...bodies }).filter((c) => !c.ok), []);
      assert.deepEqual(independentFailures(receipt, keyset, bodies), []);
      if (chatId !== undefined) assert.equal(receipt.chat_id, chatId);
    };

    // Parsed result plus headers: the receipt id and the response id agree.
    const { data, response } = await openai.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "hello" }],
    }).withResponse();
    await check(response.headers.get("x-receipt-id"), null, data.id);

    // Raw response: the exact bytes, streamed and not.
    for (const stream of [false, true]) {
      const raw = await openai.chat.completions.create({
        model: "demo/echo",
        stream,
        messages: [{ role: "user", content: "hello" }],
      }).asResponse();
      await check(raw.headers.get("x-receipt-id"), new Uint8Array(await raw.arrayBuffer()));
    }

    const anthropic = new Anthropic({
      baseURL: gw.url,
      apiKey: gw.apiKey,
      maxRetries: 0,
      fetch: recordingFetch(sent),
    });
    const msg = await anthropic.messages.create({
      model: "demo/echo",
      max_tokens: 32,
      messages: [{ role: "user", content: "hello" }],
    }).withResponse();
    // Lookup by the msg_ id the client got.
    await check(msg.response.headers.get("x-receipt-id"), null, msg.data.id);
    for (const stream of [false, true]) {
      const raw = await anthropic.messages.create({
        model: "demo/echo",
        max_tokens: 32,
        stream,
        messages: [{ role: "user", content: "hello" }],
      }).asResponse();
      await check(raw.headers.get("x-receipt-id"), new Uint8Array(await raw.arrayBuffer()));
    }
  });
});

Deno.test("confidential serving: upstream.verified names an attested session whose document hashes to its id", async () => {
  const gw = await startTestGateway();
  try {
    const { report } = await fetchReport(gw.url);
    const health = asRecord((await getJson(`${gw.url}/healthz`, TEST_ADMIN_TOKEN)).body);
    const secure = asRecord(asRecord(health.upstreams ?? {}).secure ?? {});
    for (const stream of [false, true]) {
      const ex = await postRaw(gw.url, "/v1/chat/completions", {
        model: "demo/private",
        stream,
        provider: { aci_verified: true },
        messages: [{ role: "user", content: "confidential" }],
      }, gw.apiKey);
      const receipt = asRecord((await fetchReceipt(gw.url, ex.receiptId!, gw.apiKey)).body);
      const bodies = { requestBody: ex.request, responseBody: ex.response };
      if (secure.verified !== true) {
        // A harness without an upstream verifier: refused before anything was sent.
        assert.equal(ex.status, 503);
        assertEventOrder(receipt, "refused");
        continue;
      }
      assert.equal(ex.status, 200);
      const checks = verifyReceipt(receipt, { report, ...bodies, requireVerifiedUpstream: true });
      assert.deepEqual(checks.filter((c) => !c.ok), []);
      assertEventOrder(receipt, "served");
      const v = onlyEvent(receipt, "upstream.verified");
      assert.equal(v.result, "verified");
      assert.equal(v.required, true);
      assert.equal(v.model_id, "demo/private");
      const session = await getJson(`${gw.url}/v1/aci/sessions/${v.session_id}`, gw.apiKey);
      assert.equal(session.status, 200);
      assert.equal(createHash("sha256").update(jcs(session.body)).digest("hex"), v.session_id);
    }
  } finally {
    await gw.close();
  }
});
