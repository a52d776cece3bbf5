/**
 * Who may read a receipt, by which id, for how long; and the legacy
 * `/v1/signature/{id}` envelope (EIP-191 address recovery with
 * @noble/curves, Ed25519 with node:crypto).
 */
import assert from "node:assert/strict";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { fakeClock } from "./support/fake_clock.ts";
import {
  asRecord,
  clientResponseId,
  ed25519Verifies,
  fetchReceipt,
  fetchReport,
  getJson,
  type Json,
  keysetOf,
  postRaw,
  sha256Hex,
} from "./support/receipt_check.ts";
import { verifySignatureEnvelope } from "../src/verify/legacy.ts";

const DAY = 86_400_000;

function errorOf(body: unknown): Json {
  return asRecord(asRecord(body, "error body").error, "error");
}

async function chat(gw: TestGateway, key: string, stream = false) {
  const ex = await postRaw(gw.url, "/v1/chat/completions", {
    model: "demo/echo",
    stream,
    messages: [{ role: "user", content: "who may read this" }],
  }, key);
  assert.equal(ex.status, 200);
  return ex;
}

Deno.test("access: only the key that made the request reads its receipt; 401 without a credential, 404 otherwise", async () => {
  const gw = await startTestGateway();
  try {
    const owner = gw.apiKey;
    const other = await gw.newKey();
    const ex = await chat(gw, owner);
    const id = ex.receiptId!;
    const unknown = "rcpt-" + "0".repeat(32);
    for (const path of ["/v1/aci/receipts", "/v1/signature"]) {
      const url = (x: string) => `${gw.url}${path}/${x}`;
      assert.equal((await getJson(url(id), owner)).status, 200, path);

      const anon = await getJson(url(id));
      assert.equal(anon.status, 401, path);
      assert.equal(errorOf(anon.body).code, "invalid_api_key");

      const bad = await getJson(url(id), "cgw-not-a-real-key");
      assert.equal(bad.status, 401, path);
      assert.equal(errorOf(bad.body).code, "invalid_api_key");

      // Another key cannot tell an existing receipt from an unknown one.
      const foreign = await getJson(url(id), other);
      const missing = await getJson(url(unknown), owner);
      for (const r of [foreign, missing]) {
        assert.equal(r.status, 404, path);
        assert.equal(errorOf(r.body).type, "not_found");
      }
      assert.deepEqual(foreign.body, missing.body);
      const missingAnon = await getJson(url(unknown));
      assert.equal(missingAnon.status, 401, path);
      // An id no receipt can have (too long): the same answers, 401 before 404.
      const malformed = "a".repeat(257);
      assert.equal((await getJson(url(malformed))).status, 401, path);
      assert.equal((await getJson(url(malformed), owner)).status, 404, path);
    }
    for (const sub of ["inclusion", "bundle"]) {
      const url = `${gw.url}/v1/aci/receipts/${"a".repeat(257)}/${sub}`;
      assert.equal((await getJson(url)).status, 401, sub);
      assert.equal((await getJson(url, owner)).status, 404, sub);
    }
    // Nothing about the request leaks through the error.
    const foreign = await getJson(`${gw.url}/v1/aci/receipts/${id}`, other);
    assert.ok(!JSON.stringify(foreign.body).includes("who may read"));
  } finally {
    await gw.close();
  }
});

Deno.test("lookup by response id (chat, completions, messages, responses; streamed too) gives the same receipt", async () => {
  const gw = await startTestGateway();
  try {
    const other = await gw.newKey();
    const cases: [string, Json][] = [
      ["/v1/chat/completions", { model: "demo/echo", messages: [{ role: "user", content: "a" }] }],
      ["/v1/completions", { model: "demo/echo", prompt: "a", max_tokens: 8 }],
      ["/v1/messages", {
        model: "demo/echo",
        max_tokens: 8,
        messages: [{ role: "user", content: "a" }],
      }],
      ["/v1/responses", { model: "demo/echo", input: "a" }],
    ];
    for (const [path, body] of cases) {
      for (const stream of [false, true]) {
        const ex = await postRaw(gw.url, path, { ...body, stream }, gw.apiKey);
        assert.equal(ex.status, 200);
        const responseId = clientResponseId(ex.response, stream);
        assert.ok(responseId, `${path}: the client got a response id`);
        const byId = await fetchReceipt(gw.url, ex.receiptId!, gw.apiKey);
        const byResponse = await fetchReceipt(gw.url, responseId, gw.apiKey);
        assert.equal(byResponse.status, 200, `${path} stream=${stream} by ${responseId}`);
        assert.deepEqual(byResponse.body, byId.body);
        assert.equal(asRecord(byResponse.body).chat_id, responseId);
        // The same access rule applies to the response id.
        assert.equal((await fetchReceipt(gw.url, responseId, other)).status, 404);
        assert.equal((await fetchReceipt(gw.url, responseId, null)).status, 401);
        const legacy = await getJson(`${gw.url}/v1/signature/${responseId}`, gw.apiKey);
        assert.equal(legacy.status, 200);
        assert.deepEqual(asRecord(legacy.body).receipt, byId.body);
      }
    }
  } finally {
    await gw.close();
  }
});

Deno.test("retention: served until the configured retention ends, then 404 (fake clock)", async () => {
  for (const days of [30, 2]) {
    const clock = fakeClock();
    const gw = await startTestGateway({
      now: clock.now,
      // 30 is the default: only override it for the short case.
      configure: days === 30 ? undefined : (c) => void (c.receipts.retention_days = days),
    });
    try {
      const ex = await chat(gw, gw.apiKey);
      const responseId = clientResponseId(ex.response, false)!;
      clock.advance(days * DAY - 1_000);
      assert.equal((await fetchReceipt(gw.url, ex.receiptId!, gw.apiKey)).status, 200, `${days}d`);
      assert.equal((await fetchReceipt(gw.url, responseId, gw.apiKey)).status, 200);
      clock.advance(2_000);
      for (const id of [ex.receiptId!, responseId]) {
        const r = await fetchReceipt(gw.url, id, gw.apiKey);
        assert.equal(r.status, 404, `${days}d, ${id}`);
        assert.equal(errorOf(r.body).type, "not_found");
        assert.equal((await getJson(`${gw.url}/v1/signature/${id}`, gw.apiKey)).status, 404);
      }
    } finally {
      await gw.close();
    }
  }
});

/** EIP-191 personal_sign recovery, independently of src/aci/ethereum.ts. */
function recoverAddress(text: string, signatureHex: string): string {
  const sig = Uint8Array.from(signatureHex.slice(2).match(/../g)!.map((h) => parseInt(h, 16)));
  assert.equal(sig.length, 65);
  const v = sig[64];
  assert.ok(v === 27 || v === 28, "v = 27 + recovery id");
  const message = new TextEncoder().encode(text);
  const prefixed = new TextEncoder().encode(`\x19Ethereum Signed Message:\n${message.length}`);
  const digest = keccak_256(new Uint8Array([...prefixed, ...message]));
  const recovered = new Uint8Array(65);
  recovered[0] = v - 27;
  recovered.set(sig.subarray(0, 64), 1);
  const pub = secp256k1.Point.fromBytes(
    secp256k1.recoverPublicKey(recovered, digest, { prehash: false }),
  ).toBytes(false);
  const address = keccak_256(pub.subarray(1)).slice(12);
  return "0x" + Array.from(address, (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("legacy /v1/signature/{id}: ecdsa recovers to the report's address, ed25519 verifies, text binds both bodies", async () => {
  const gw = await startTestGateway();
  try {
    const { report } = await fetchReport(gw.url);
    const keyset = keysetOf(report);
    for (const stream of [false, true]) {
      const ex = await chat(gw, gw.apiKey, stream);
      const receipt = (await fetchReceipt(gw.url, ex.receiptId!, gw.apiKey)).body;
      const text = `${sha256Hex(ex.request)}:${sha256Hex(ex.response)}`;
      for (const algo of ["ecdsa", "ed25519"] as const) {
        // ecdsa is the default when signing_algo is absent.
        const query = algo === "ecdsa" && !stream ? "" : `?signing_algo=${algo}`;
        const got = await getJson(`${gw.url}/v1/signature/${ex.receiptId}${query}`, gw.apiKey);
        assert.equal(got.status, 200);
        const env = asRecord(got.body, "envelope");
        assert.deepEqual(Object.keys(env).sort(), [
          "receipt",
          "signature",
          "signing_address",
          "signing_algo",
          "text",
        ]);
        assert.equal(env.signing_algo, algo);
        assert.equal(env.text, text);
        assert.deepEqual(env.receipt, receipt);
        const nonce = "ab".repeat(32);
        const legacyReport = await getJson(
          `${gw.url}/v1/attestation/report?nonce=${nonce}&signing_algo=${algo}`,
        );
        const reportAddress = String(asRecord(legacyReport.body).signing_address);
        if (algo === "ecdsa") {
          assert.match(String(env.signature), /^0x[0-9a-f]{130}$/);
          const recovered = recoverAddress(text, String(env.signature));
          assert.equal(recovered, String(env.signing_address).toLowerCase());
          assert.equal(recovered, reportAddress.toLowerCase());
        } else {
          assert.match(String(env.signature), /^[0-9a-f]{128}$/);
          const address = String(env.signing_address);
          assert.equal(address, reportAddress);
          assert.ok(
            ed25519Verifies(address, String(env.signature), new TextEncoder().encode(text)),
          );
          const listed = (keyset.receipt_signing_keys as Json[]).find((k) => k.algo === "ed25519");
          assert.equal(listed?.public_key, address);
        }
        const checks = verifySignatureEnvelope(env, {
          report,
          requestBody: ex.request,
          responseBody: ex.response,
        });
        assert.deepEqual(checks.filter((c) => !c.ok), [], `${algo} stream=${stream}`);
        // A one-character change of the text breaks it.
        const forged = { ...env, text: text.replace(/^./, text[0] === "0" ? "1" : "0") };
        assert.ok(
          verifySignatureEnvelope(forged, { report }).some((c) =>
            c.name === "signature.signature" && !c.ok
          ),
        );
      }
    }
    const bad = await getJson(`${gw.url}/v1/signature/x?signing_algo=rsa`, gw.apiKey);
    assert.equal(bad.status, 400);
  } finally {
    await gw.close();
  }
});
