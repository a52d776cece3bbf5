import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { spkiSha256FromPem } from "../upstream/spki.ts";
import { issueServerCert, makeCa } from "./certs.ts";

const NOW = Date.UTC(2030, 0, 15);
const DAY = 86_400_000;

Deno.test("certs: CA and leaf validity follow the injected clock; the pin is the leaf's SPKI", async () => {
  const ca = await makeCa({ now: NOW, commonName: "Dev CA", validDays: 7 });
  const leaf = await issueServerCert(ca, { now: NOW, hosts: ["dev.local", "127.0.0.1"] });
  const caX = new X509Certificate(ca.certPem);
  const leafX = new X509Certificate(leaf.certPem);
  assert.equal(caX.subject, "CN=Dev CA");
  assert.equal(Date.parse(caX.validFrom), NOW - DAY);
  assert.equal(Date.parse(caX.validTo), NOW + 7 * DAY);
  assert.equal(Date.parse(leafX.validTo), NOW + 30 * DAY);
  assert.ok(leafX.verify(caX.publicKey), "leaf is signed by the CA");
  assert.ok(leafX.checkIssued(caX));
  assert.equal(leafX.ca, false);
  assert.equal(caX.ca, true);
  assert.match(leafX.subjectAltName ?? "", /DNS:dev\.local/);
  assert.match(leafX.subjectAltName ?? "", /IP Address:127\.0\.0\.1/);
  assert.equal(leaf.spkiSha256, spkiSha256FromPem(leaf.certPem));
  assert.match(leaf.keyPem, /^-----BEGIN PRIVATE KEY-----\n/);
});

Deno.test("certs: each leaf gets its own key", async () => {
  const ca = await makeCa({ now: NOW });
  const a = await issueServerCert(ca, { now: NOW });
  const b = await issueServerCert(ca, { now: NOW });
  assert.notEqual(a.spkiSha256, b.spkiSha256);
});

Deno.test("certs: bad inputs are rejected, not clamped", async () => {
  await assert.rejects(makeCa({ now: NOW, validDays: 0 }), RangeError);
  await assert.rejects(makeCa({ now: Number.NaN }), RangeError);
  const ca = await makeCa({ now: NOW });
  await assert.rejects(issueServerCert(ca, { now: NOW, hosts: [] }), RangeError);
});
