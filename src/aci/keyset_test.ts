import assert from "node:assert/strict";
import { keysetDigest, type WorkloadKeyset } from "./keyset.ts";

// The public ACI test vector (spec/test-vectors.md §1 of the reference implementation).
const keyset: WorkloadKeyset = {
  subject: "dstack-app://example-app",
  not_after: 1800000000,
  receipt_signing_keys: [{
    key_id: "receipt-1",
    algo: "ed25519",
    public_key: "8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394",
  }],
  e2ee_public_keys: [{
    key_id: "e2ee-1",
    algo: "x25519-aes-256-gcm-hkdf-sha256",
    public_key: "5dfedd3b6bd47f6fa28ee15d969d5bb0ea53774d488bdaf9df1c6e0124b3ef22",
  }],
  tls_public_keys: [{ spki_sha256: "c0".repeat(32), domain: "api.example.com" }],
};

Deno.test("keyset: digest equals the published ACI vector", () => {
  assert.equal(
    keysetDigest(keyset),
    "sha256:53a5cd44b30dcc51999754c719f2628a041f174ecbf9662a6f8e898a10cd9371",
  );
});

Deno.test("keyset: digest is sha256 over the hand-written JCS bytes (WebCrypto, independent)", async () => {
  const handJcs =
    '{"e2ee_public_keys":[{"algo":"x25519-aes-256-gcm-hkdf-sha256","key_id":"e2ee-1",' +
    '"public_key":"5dfedd3b6bd47f6fa28ee15d969d5bb0ea53774d488bdaf9df1c6e0124b3ef22"}],' +
    '"not_after":1800000000,"receipt_signing_keys":[{"algo":"ed25519","key_id":"receipt-1",' +
    '"public_key":"8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394"}],' +
    '"subject":"dstack-app://example-app","tls_public_keys":[{"domain":"api.example.com",' +
    `"spki_sha256":"${"c0".repeat(32)}"}]}`;
  const d = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(handJcs)),
  );
  const hex = [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
  assert.equal(keysetDigest(keyset), "sha256:" + hex);
});

Deno.test("keyset: the served encoding is free, any content change changes the digest", () => {
  const reordered = JSON.parse(JSON.stringify(keyset, null, 2));
  assert.equal(keysetDigest(reordered), keysetDigest(keyset), "encoding is free");
  const changed = structuredClone(keyset);
  changed.not_after += 1;
  assert.notEqual(keysetDigest(changed), keysetDigest(keyset));
});
