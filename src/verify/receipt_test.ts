import assert from "node:assert/strict";
import { sha256Prefixed } from "../aci/digest.ts";
import { keysetDigest } from "../aci/keyset.ts";
import { type Receipt, signReceipt, type UnsignedReceipt } from "../aci/receipt.ts";
import { generateWorkloadKeys } from "../aci/signer.ts";
import type { Check } from "./checks.ts";
import { makeReport } from "./dev_report_fixture.ts";
import { verifyReceipt } from "./receipt.ts";

const enc = new TextEncoder();
const REQ = enc.encode('{"model":"m","messages":[{"role":"user","content":"hi"}]}');
const RES = enc.encode('data: {"id":"c1"}\n\ndata: [DONE]\n\n');
const SESSION = "5e".repeat(32);
const keys = generateWorkloadKeys();
const { report, keyset } = makeReport(keys, null);

function unsigned(): UnsignedReceipt {
  return {
    api_version: "aci/1",
    receipt_id: "rcpt-" + "0f".repeat(16),
    chat_id: "c1",
    model: "m",
    workload_keyset_digest: keysetDigest(keyset),
    endpoint: "/v1/chat/completions",
    method: "POST",
    served_at: 1_750_000_000,
    event_log: [
      { type: "request.received", body_hash: sha256Prefixed(REQ) },
      { type: "route.selected", target_route_id: "r1" },
      { type: "request.forwarded", body_hash: sha256Prefixed(REQ) },
      {
        type: "upstream.verified",
        result: "verified",
        required: true,
        model_id: "m",
        session_id: SESSION,
      },
      { type: "response.received", body_hash: sha256Prefixed(RES) },
      { type: "response.returned", body_hash: sha256Prefixed(RES) },
    ],
  };
}

const signed = (): Receipt => signReceipt(unsigned(), keys);
const byName = (cs: Check[]) => Object.fromEntries(cs.map((c) => [c.name, c]));
const failed = (cs: Check[]) => cs.filter((c) => !c.ok).map((c) => c.name);

Deno.test("verify receipt: sign -> verify round trip passes every check (report or bare keyset)", () => {
  for (const source of [report, keyset]) {
    const checks = verifyReceipt(JSON.parse(JSON.stringify(signed(), null, 1)), {
      report: source,
      requestBody: REQ,
      responseBody: RES,
      requireVerifiedUpstream: true,
    });
    assert.deepEqual(failed(checks), []);
    assert.deepEqual(checks.map((c) => c.name), [
      "receipt.api_version",
      "receipt.keyset_digest",
      "receipt.signature",
      "receipt.event_log",
      "receipt.request_body_hash",
      "receipt.response_body_hash",
      "receipt.upstream_verified",
    ]);
  }
});

Deno.test("verify receipt: one flipped body byte fails only that body's check", () => {
  const req = REQ.slice();
  req[5] ^= 1;
  assert.deepEqual(
    failed(verifyReceipt(signed(), { report, requestBody: req, responseBody: RES })),
    [
      "receipt.request_body_hash",
    ],
  );
  const res = RES.slice();
  res[res.length - 1] ^= 1;
  assert.deepEqual(
    failed(verifyReceipt(signed(), { report, requestBody: REQ, responseBody: res })),
    [
      "receipt.response_body_hash",
    ],
  );
});

Deno.test("verify receipt: a tampered event, digest or signature fails the named check", () => {
  const event = signed();
  event.event_log[1] = { type: "route.selected", target_route_id: "r2" };
  assert.deepEqual(failed(verifyReceipt(event, { report })), ["receipt.signature"]);

  const digest = signed();
  digest.workload_keyset_digest = "sha256:" + "11".repeat(32);
  assert.deepEqual(failed(verifyReceipt(digest, { report })), [
    "receipt.keyset_digest",
    "receipt.signature",
  ]);

  const sig = signed();
  sig.signature = (sig.signature[0] === "0" ? "1" : "0") + sig.signature.slice(1);
  assert.deepEqual(failed(verifyReceipt(sig, { report })), ["receipt.signature"]);

  const otherKeys = generateWorkloadKeys();
  const foreign = signReceipt(unsigned(), otherKeys);
  const c = byName(verifyReceipt(foreign, { report }));
  assert.equal(c["receipt.signature"].ok, false);
  assert.match(c["receipt.signature"].detail, /not in receipt_signing_keys/);
});

Deno.test("verify receipt: the secp256k1 entry can never verify a receipt", () => {
  const r = signed();
  r.key_id = keys.secp256k1KeyId;
  const c = byName(verifyReceipt(r, { report }));
  assert.equal(c["receipt.signature"].ok, false);
  assert.match(c["receipt.signature"].detail, /unsupported algo secp256k1/);
});

Deno.test("verify receipt: upstream.verified absence or failure only fails when required", () => {
  const u = unsigned();
  u.event_log = u.event_log.filter((e) => e.type !== "upstream.verified");
  const absent = signReceipt(u, keys);
  assert.ok(byName(verifyReceipt(absent, { report }))["receipt.upstream_verified"].ok);
  const strict = byName(verifyReceipt(absent, { report, requireVerifiedUpstream: true }));
  assert.equal(strict["receipt.upstream_verified"].ok, false);
  assert.match(strict["receipt.upstream_verified"].detail, /not attested/);

  const f = unsigned();
  f.event_log[3] = {
    type: "upstream.verified",
    result: "failed",
    required: false,
    model_id: "m",
    reason: "quote_expired",
    upstream_name: "u1",
  };
  const failedUp = byName(
    verifyReceipt(signReceipt(f, keys), { report, requireVerifiedUpstream: true }),
  );
  assert.equal(failedUp["receipt.upstream_verified"].ok, false);
  assert.match(failedUp["receipt.upstream_verified"].detail, /quote_expired/);
});

Deno.test("verify receipt: without a report nothing about the signer is established", () => {
  const c = byName(verifyReceipt(signed()));
  assert.equal(c["receipt.keyset_digest"].ok, false);
  assert.equal(c["receipt.signature"].ok, false);
  assert.equal(verifyReceipt(null)[0].ok, false);
});
