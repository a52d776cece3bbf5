import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { normalizeSpkiPin, spkiSha256FromCertDer, spkiSha256FromPem } from "./spki.ts";
import { issueServerCert, makeTestCa } from "../../tests/support/tls_servers.ts";

const ca = await makeTestCa();
const a = await issueServerCert(ca);
const b = await issueServerCert(ca);

Deno.test("PEM digest equals the SHA-256 of the key's WebCrypto SPKI export", () => {
  // issueServerCert derives its pin from crypto.subtle.exportKey("spki"), independently.
  assert.equal(spkiSha256FromPem(a.certPem), a.spkiSha256);
  assert.match(spkiSha256FromPem(a.certPem), /^[0-9a-f]{64}$/);
});

Deno.test("DER and PEM of the same certificate give the same digest", () => {
  const der = new Uint8Array(new X509Certificate(a.certPem).raw);
  assert.equal(spkiSha256FromCertDer(der), a.spkiSha256);
});

Deno.test("different keys give different digests; the CA's own key differs too", () => {
  assert.notEqual(spkiSha256FromPem(b.certPem), spkiSha256FromPem(a.certPem));
  assert.notEqual(spkiSha256FromPem(ca.certPem), spkiSha256FromPem(a.certPem));
});

Deno.test("garbage is not a certificate", () => {
  assert.throws(() => spkiSha256FromCertDer(new Uint8Array([1, 2, 3])));
  assert.throws(() => spkiSha256FromPem("not a pem"));
});

Deno.test("normalizeSpkiPin lowercases valid pins and rejects malformed ones", () => {
  assert.equal(normalizeSpkiPin(a.spkiSha256.toUpperCase()), a.spkiSha256);
  assert.throws(() => normalizeSpkiPin(""), TypeError);
  assert.throws(() => normalizeSpkiPin(a.spkiSha256.slice(1)), TypeError);
  assert.throws(() => normalizeSpkiPin(a.spkiSha256 + "0"), TypeError);
  assert.throws(() => normalizeSpkiPin(`sha256/${a.spkiSha256}`), TypeError);
  assert.throws(() => normalizeSpkiPin("z".repeat(64)), TypeError);
});
