import assert from "node:assert/strict";
import { ethereumAddress, uncompressedPublicKey } from "./ethereum.ts";
import { hexToBytes } from "./hex.ts";

// NEAR AI Cloud's model attestation (tests/fixtures/near-ai/PROVENANCE.md) serves its secp256k1
// key as 64 raw bytes x‖y; its signing_address is the key's Ethereum address.
const NEAR = JSON.parse(
  Deno.readTextFileSync(
    new URL(
      "../../tests/fixtures/near-ai/nearai_cloud_report_openai_gpt_oss_120b.json",
      import.meta.url,
    ),
  ),
);

Deno.test("ethereum: a raw 64-byte x‖y key (NEAR AI) derives its signing address", () => {
  const m = NEAR.model_attestations[0];
  const raw = hexToBytes(m.signing_public_key);
  assert.equal(raw.length, 64);
  assert.equal(ethereumAddress(raw).toLowerCase(), m.signing_address.toLowerCase());
  const full = uncompressedPublicKey(raw);
  assert.equal(full[0], 4);
  assert.deepEqual(full.subarray(1), raw);
  // The same key in its 65- and 33-byte SEC1 forms gives the same address.
  assert.equal(ethereumAddress(full), ethereumAddress(raw));
});

Deno.test("ethereum: 64 bytes that are not a curve point are refused", () => {
  const bad = hexToBytes(NEAR.model_attestations[0].signing_public_key);
  bad[63] ^= 1;
  assert.throws(() => ethereumAddress(bad));
  assert.throws(() => ethereumAddress(new Uint8Array(63)));
});
