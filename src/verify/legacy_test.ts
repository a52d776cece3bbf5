import assert from "node:assert/strict";
import { sha256, sha256Prefixed } from "../aci/digest.ts";
import { bytesToHex } from "../aci/hex.ts";
import { signatureEnvelope } from "../aci/legacy.ts";
import { generateWorkloadKeys } from "../aci/signer.ts";
import type { Check } from "./checks.ts";
import { makeLegacyReport, makeReceipt, makeReport } from "./dev_report_fixture.ts";
import { verifyLegacyReport, verifySignatureEnvelope } from "./legacy.ts";

const enc = new TextEncoder();
const REQ = enc.encode('{"model":"m"}');
const RES = enc.encode('{"id":"c1"}');
// Secret key 1: its address 0x7E5F…5Bdf has mixed-case letters, so checksum tampering is visible.
const ONE = new Uint8Array(32);
ONE[31] = 1;
const keys = generateWorkloadKeys({ secp256k1SecretKey: ONE });
const { report, keyset } = makeReport(keys, null);
const failed = (cs: Check[]) => cs.filter((c) => !c.ok).map((c) => c.name);
const byName = (cs: Check[]) => Object.fromEntries(cs.map((c) => [c.name, c]));
const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

function receipt() {
  return makeReceipt(keys, keyset, "rcpt-" + "aa".repeat(16), REQ, RES);
}

Deno.test("legacy envelope: ecdsa and ed25519 envelopes verify end to end", () => {
  for (const algo of ["ecdsa", "ed25519"] as const) {
    const r = receipt();
    const env = JSON.parse(JSON.stringify(
      signatureEnvelope(r, sha256Prefixed(REQ), sha256Prefixed(RES), algo, keys),
    ));
    const legacyReport = makeLegacyReport(keys, algo, null, random);
    const checks = verifySignatureEnvelope(env, {
      report: legacyReport,
      requestBody: REQ,
      responseBody: RES,
    });
    assert.deepEqual(failed(checks), [], algo);
    assert.ok(byName(checks)["signature.report_address"].ok);
    assert.ok(byName(checks)["receipt.signature"].ok, "nested receipt is verified too");
  }
});

Deno.test("legacy envelope: lowercase address accepted; wrong address, text or body fail", () => {
  const r = receipt();
  const env = signatureEnvelope(r, sha256Prefixed(REQ), sha256Prefixed(RES), "ecdsa", keys);
  const lower = { ...env, signing_address: env.signing_address.toLowerCase() };
  assert.deepEqual(failed(verifySignatureEnvelope(lower, { report })), []);

  const other = generateWorkloadKeys();
  const wrongAddr = { ...env, signing_address: other.ethereumAddress };
  assert.ok(failed(verifySignatureEnvelope(wrongAddr, { report })).includes("signature.signature"));

  const badChecksum = { ...env, signing_address: "0x" + flipCase(env.signing_address.slice(2)) };
  assert.ok(
    failed(verifySignatureEnvelope(badChecksum, { report })).includes("signature.signature"),
  );

  const text = { ...env, text: env.text.replace(/^./, (c) => (c === "0" ? "1" : "0")) };
  const tf = failed(verifySignatureEnvelope(text, { report }));
  assert.ok(tf.includes("signature.signature") && tf.includes("signature.receipt_binding"));

  const body = RES.slice();
  body[0] ^= 1;
  assert.deepEqual(failed(verifySignatureEnvelope(env, { report, responseBody: body })), [
    "signature.response_body_hash",
    "receipt.response_body_hash",
  ]);
});

Deno.test("legacy envelope: a key outside the attested keyset is not accepted", () => {
  const other = generateWorkloadKeys();
  const r = receipt();
  const env = signatureEnvelope(r, sha256Prefixed(REQ), sha256Prefixed(RES), "ed25519", other);
  const c = byName(verifySignatureEnvelope(env, { report }));
  assert.ok(c["signature.signature"].ok, "validly signed by the other key");
  assert.equal(c["signature.key_attested"].ok, false);
});

Deno.test("legacy report: address, keyset and quote layout with a 64-hex or free-form nonce", async () => {
  for (const algo of ["ecdsa", "ed25519"] as const) {
    for (const nonce of ["ab".repeat(32), "AB".repeat(32), "free-form nonce"]) {
      const rep = makeLegacyReport(keys, algo, nonce, random);
      const checks = await verifyLegacyReport(rep, { nonce, allowDevEvidence: true });
      assert.deepEqual(failed(checks), [], `${algo} ${nonce}`);
    }
  }
  const rep = makeLegacyReport(keys, "ecdsa", "free-form nonce", random);
  assert.equal(
    rep.request_nonce as string,
    bytesToHex(sha256("free-form nonce")),
  );
  const replay = await verifyLegacyReport(rep, { nonce: "another nonce" });
  assert.ok(failed(replay).includes("legacy.quote_report_data"));
  assert.ok(failed(replay).includes("legacy.hardware_evidence"), "dev evidence fails by default");
});

Deno.test("legacy report: without a nonce only the echoed nonce is compared, and it says so", async () => {
  const rep = makeLegacyReport(keys, "ecdsa", null, random);
  const c = byName(await verifyLegacyReport(rep, { allowDevEvidence: true }));
  assert.ok(c["legacy.quote_report_data"].ok);
  assert.match(c["legacy.nonce"].detail, /NOT fresh/);
  const wrongKey = { ...rep, signing_public_key: generateWorkloadKeys().secp256k1PublicKeyHex };
  const w = failed(await verifyLegacyReport(wrongKey, { allowDevEvidence: true }));
  assert.ok(w.includes("legacy.signing_address"));
  assert.ok(w.includes("legacy.key_attested"));
});

function flipCase(s: string): string {
  return [...s].map((ch) => (ch === ch.toLowerCase() ? ch.toUpperCase() : ch.toLowerCase())).join(
    "",
  );
}
