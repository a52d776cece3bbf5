/**
 * Every E2EE v2 error type of the spec, driven with hand-built requests
 * (encrypted by the independent test implementation): the status and `type`
 * it names, a signed receipt for the refusal, and not one request reaching
 * an upstream. Also: a timestamp outside the window, a wrong model key, a
 * tampered ciphertext, a moved field, and the hex case of a replayed nonce.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import {
  fetchReport,
  independentFailures,
  keysetOf,
  onlyEvent,
  sha256Prefixed,
  waitForReceipt,
} from "./support/receipt_check.ts";
import * as indep from "./support/e2ee_independent.ts";

type Algo = typeof indep.X25519 | typeof indep.SECP256K1;

interface Req {
  path?: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

async function serviceKey(gw: TestGateway, algo: Algo): Promise<string> {
  const { report } = await fetchReport(gw.url);
  const keys = keysetOf(report).e2ee_public_keys as { algo: string; public_key: string }[];
  return keys.find((k) => k.algo === algo)!.public_key;
}

/** A valid encrypted chat request; `field` overrides where the ciphertext claims to be. */
async function chatRequest(
  gw: TestGateway,
  opts: {
    algo?: Algo;
    content?: string;
    aadField?: string;
    ts?: number;
    nonce?: string;
    client?: { sk: Uint8Array; pk: string };
  } = {},
): Promise<Req & { nonce: string; client: { sk: Uint8Array; pk: string } }> {
  const algo = opts.algo ?? indep.X25519;
  const model = await serviceKey(gw, algo);
  const nonce = opts.nonce ?? randomBytes(32).toString("hex");
  const ts = opts.ts ?? Math.floor(Date.now() / 1000);
  const client = opts.client ?? indep.clientKeys(algo);
  const ad = indep.aad("request", {
    algo,
    field: opts.aadField ?? "messages.0.content",
    model: "demo/echo",
    nonce,
    ts,
  });
  const content = await indep.encrypt(algo, model, opts.content ?? "hello secret", ad);
  return {
    nonce,
    client,
    headers: {
      "x-e2ee-version": "2",
      "x-client-pub-key": client.pk,
      "x-model-pub-key": model,
      "x-e2ee-nonce": nonce,
      "x-e2ee-timestamp": String(ts),
    },
    body: { model: "demo/echo", messages: [{ role: "user", content }] },
  };
}

async function send(gw: TestGateway, r: Req) {
  const res = await fetch(`${gw.url}${r.path ?? "/v1/chat/completions"}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${gw.apiKey}`,
      ...r.headers,
    },
    body: JSON.stringify(r.body),
  });
  const raw = new Uint8Array(await res.arrayBuffer());
  return {
    status: res.status,
    headers: res.headers,
    raw,
    json: JSON.parse(new TextDecoder().decode(raw)),
  };
}

/** 400 with the spec's type, a receipt binding the refusal, and nothing sent upstream. */
async function refused(gw: TestGateway, r: Req, type: string, anthropic = false) {
  const upstreamBefore = gw.plain.stats.total + gw.secure.stats.total;
  const res = await send(gw, r);
  assert.equal(res.status, 400, `${type}: ${JSON.stringify(res.json)}`);
  const got = anthropic ? res.json.error.type : res.json.error.type;
  assert.equal(got, type);
  if (!anthropic) assert.equal(res.json.error.code, type);
  assert.equal(res.headers.get("x-e2ee-applied"), null);
  assert.equal(gw.plain.stats.total + gw.secure.stats.total, upstreamBefore, "nothing upstream");
  const id = res.headers.get("x-receipt-id");
  assert.ok(id, `${type}: refusal without a receipt`);
  const receipt = await waitForReceipt(gw.url, id!, gw.apiKey);
  const { report } = await fetchReport(gw.url);
  assert.deepEqual(
    independentFailures(receipt, keysetOf(report), {
      request: new TextEncoder().encode(JSON.stringify(r.body)),
      response: res.raw,
    }),
    [],
  );
  assert.equal(onlyEvent(receipt, "request.refused").reason, type);
  assert.ok(!(receipt.event_log as { type: string }[]).some((e) => e.type === "request.forwarded"));
}

Deno.test("E2EE errors: every type of the spec, each with a receipt and nothing upstream", async () => {
  // Every refusal here gets its own receipt (beyond the budget they would share one).
  const gw = await startTestGateway({ configure: (c) => (c.receipts.refusal_budget = 1000) });
  try {
    const ok = await chatRequest(gw);
    const without = (name: string) => {
      const h = { ...ok.headers };
      delete h[name];
      return { ...ok, headers: h };
    };
    const withHeader = (name: string, value: string) => ({
      ...ok,
      headers: { ...ok.headers, [name]: value },
    });
    for (const h of ["x-client-pub-key", "x-model-pub-key", "x-e2ee-nonce", "x-e2ee-timestamp"]) {
      await refused(gw, without(h), "e2ee_header_missing");
    }
    await refused(gw, without("x-e2ee-version"), "e2ee_header_missing");
    await refused(gw, withHeader("x-e2ee-version", "1"), "e2ee_invalid_version");
    await refused(gw, withHeader("x-e2ee-version", "3"), "e2ee_invalid_version");
    await refused(gw, withHeader("x-signing-algo", "ecdsa"), "e2ee_invalid_version");
    await refused(gw, withHeader("x-client-pub-key", "abcd"), "e2ee_invalid_public_key");
    // A low-order X25519 point (all zero) is not a key responses could be encrypted to.
    await refused(gw, withHeader("x-client-pub-key", "00".repeat(32)), "e2ee_invalid_public_key");
    // Wrong model key: a well-formed key this gateway does not hold.
    const stranger = indep.clientKeys(indep.X25519).pk;
    await refused(gw, withHeader("x-model-pub-key", stranger), "e2ee_model_key_mismatch");
    await refused(gw, withHeader("x-e2ee-nonce", "ab".repeat(31)), "e2ee_invalid_nonce");
    await refused(gw, withHeader("x-e2ee-nonce", "0x" + "ab".repeat(31)), "e2ee_invalid_nonce");
    await refused(gw, withHeader("x-e2ee-nonce", "zz".repeat(32)), "e2ee_invalid_nonce");
    await refused(gw, withHeader("x-e2ee-timestamp", "soon"), "e2ee_invalid_timestamp");
    const now = Math.floor(Date.now() / 1000);
    await refused(gw, await chatRequest(gw, { ts: now - 301 }), "e2ee_invalid_timestamp");
    await refused(gw, await chatRequest(gw, { ts: now + 400 }), "e2ee_invalid_timestamp");
    await refused(
      gw,
      { ...ok, body: { messages: ok.body.messages } },
      "e2ee_invalid_payload_model",
    );
    await refused(gw, { ...ok, body: { ...ok.body, model: 7 } }, "e2ee_invalid_payload_model");
    // Tampered ciphertext: one bit of the tag flipped.
    const msg = (ok.body.messages as { content: string }[])[0].content;
    const flipped = msg.slice(0, -1) + (msg.endsWith("0") ? "1" : "0");
    await refused(
      gw,
      { ...ok, body: { ...ok.body, messages: [{ role: "user", content: flipped }] } },
      "e2ee_decryption_failed",
    );
    // Moved field: a ciphertext made for messages.0 placed at messages.1.
    const m = await chatRequest(gw, { aadField: "messages.0.content" });
    const c0 = (m.body.messages as { content: string }[])[0].content;
    m.body.messages = [{ role: "system", content: c0 }, { role: "user", content: c0 }];
    await refused(gw, m, "e2ee_decryption_failed");
    // Another model in the body than the one bound into the AAD.
    await refused(
      gw,
      { ...ok, body: { ...ok.body, model: "demo/private" } },
      "e2ee_decryption_failed",
    );
    // No encrypted field at all.
    await refused(
      gw,
      { ...ok, body: { model: "demo/echo", messages: [] } },
      "e2ee_decryption_failed",
    );
    // A bounded number of encrypted fields (each costs an ECDH before admission).
    const many = await send(gw, {
      ...ok,
      body: {
        model: "demo/echo",
        messages: Array.from({ length: 1025 }, () => ({ role: "user", content: "ab" })),
      },
    });
    assert.equal(many.status, 400);
    assert.match(many.json.error.message, /at most 1024 encrypted fields/);
    // Endpoints E2EE v2 does not define.
    await refused(
      gw,
      { ...ok, path: "/v1/responses", body: { model: "demo/echo", input: "x" } },
      "e2ee_unsupported_endpoint",
    );
    await refused(
      gw,
      { ...ok, path: "/v1/messages", body: { model: "demo/echo", max_tokens: 5, messages: [] } },
      "e2ee_unsupported_endpoint",
      true,
    );

    // The valid request is served (once), with a receipt over the restored body.
    const served = await send(gw, ok);
    assert.equal(served.status, 200, JSON.stringify(served.json));
    const restored = JSON.stringify({
      model: "demo/echo",
      messages: [{ role: "user", content: "hello secret" }],
    });
    const receipt = await waitForReceipt(gw.url, served.headers.get("x-receipt-id")!, gw.apiKey);
    assert.equal(
      onlyEvent(receipt, "request.received").body_hash,
      sha256Prefixed(new TextEncoder().encode(restored)),
    );
    // Replay: the same request again; and a fresh encryption under the same nonce in upper
    // case (the same nonce bytes) from the same client key.
    await refused(gw, ok, "e2ee_replay_detected");
    const upper = await chatRequest(gw, { nonce: ok.nonce.toUpperCase(), client: ok.client });
    await refused(gw, upper, "e2ee_replay_detected");
    // Another client key may not reuse it either: the AAD does not bind the client key, so
    // the claim is per service key and nonce (docs/decisions/e2ee-replay-per-service-key.md).
    await refused(gw, await chatRequest(gw, { nonce: ok.nonce }), "e2ee_replay_detected");
  } finally {
    await gw.close();
  }
});

Deno.test("E2EE: per-part content fields, the secp256k1 64-byte key form, and answers decrypted independently", async () => {
  const gw = await startTestGateway();
  try {
    const algo = indep.SECP256K1;
    const model = await serviceKey(gw, algo);
    const nonce = randomBytes(32).toString("hex").toUpperCase(); // either case is a valid nonce
    const ts = Math.floor(Date.now() / 1000);
    const client = indep.clientKeys(algo);
    const ad = (field: string) =>
      indep.aad("request", { algo, field, model: "demo/vision", nonce, ts });
    const body = {
      model: "demo/vision",
      messages: [{
        role: "user",
        content: [
          {
            type: "text",
            text: await indep.encrypt(algo, model, "describe", ad("messages.0.content.0.text")),
          },
          {
            type: "image_url",
            image_url: {
              url: await indep.encrypt(
                algo,
                model,
                "data:image/png;base64,AAAA",
                ad("messages.0.content.1.image_url.url"),
              ),
            },
          },
        ],
      }],
    };
    const res = await send(gw, {
      headers: {
        "x-e2ee-version": "2",
        "x-client-pub-key": "0x" + client.pk.slice(2), // 64-byte form without 04
        "x-model-pub-key": model,
        "x-e2ee-nonce": nonce,
        "x-e2ee-timestamp": String(ts),
      },
      body,
    });
    assert.equal(res.status, 200, JSON.stringify(res.json));
    assert.equal(res.headers.get("x-e2ee-algo"), algo);
    const content = res.json.choices[0].message.content as string;
    assert.match(content, /^[0-9a-f]+$/);
    const plain = await indep.decrypt(
      algo,
      client.sk,
      content,
      indep.aad("response", {
        algo,
        field: "choices.0.message.content",
        id: res.json.id,
        model: "demo/vision",
        nonce,
        ts,
      }),
    );
    assert.match(plain, /describe/);
    const upstream = gw.plain.stats.lastBody as { messages: { content: unknown }[] };
    assert.deepEqual(upstream.messages[0].content, [
      { type: "text", text: "describe" },
      { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
    ]);
  } finally {
    await gw.close();
  }
});
