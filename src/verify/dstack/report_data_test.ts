import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { checkReportData, expectedReportData } from "./report_data.ts";

const address = new Uint8Array(20).map((_, i) => i + 1);
const nonce = new Uint8Array(32).map((_, i) => 0xa0 + i);
const spkiSha256 = new Uint8Array(createHash("sha256").update("spki der").digest());

Deno.test("v1: address right-padded to 32 ‖ nonce", () => {
  const r = expectedReportData({ version: "v1", address, nonce });
  assert.ok(r.ok);
  if (!r.ok) return;
  assert.deepEqual(r.reportData.subarray(0, 20), address);
  assert.deepEqual(r.reportData.subarray(20, 32), new Uint8Array(12));
  assert.deepEqual(r.reportData.subarray(32), nonce);
  assert.deepEqual(checkReportData(r.reportData, { version: "v1", address, nonce }), { ok: true });
});

Deno.test("v2: sha256(address ‖ sha256(SPKI)) ‖ nonce, with reasons for each half", () => {
  const e = { version: "v2" as const, address, spkiSha256, nonce };
  const r = expectedReportData(e);
  assert.ok(r.ok);
  if (!r.ok) return;
  const head = createHash("sha256").update(address).update(spkiSha256).digest();
  assert.deepEqual(r.reportData.subarray(0, 32), new Uint8Array(head));
  assert.deepEqual(checkReportData(r.reportData, e), { ok: true });

  const otherKey = { ...e, spkiSha256: new Uint8Array(32) };
  assert.deepEqual(checkReportData(r.reportData, otherKey), {
    ok: false,
    reason: "report data (v2) does not bind the signing address and TLS key",
  });
  const otherNonce = { ...e, nonce: new Uint8Array(32) };
  assert.deepEqual(checkReportData(r.reportData, otherNonce), {
    ok: false,
    reason: "report data nonce does not match the request nonce",
  });
  // A v1 quote never satisfies a v2 (TLS-binding) expectation.
  const v1 = expectedReportData({ version: "v1", address, nonce });
  assert.ok(v1.ok);
  if (v1.ok) assert.equal(checkReportData(v1.reportData, e).ok, false);
});

Deno.test("bad inputs are reasons, not exceptions", () => {
  assert.deepEqual(expectedReportData({ version: "v1", address, nonce: new Uint8Array(31) }), {
    ok: false,
    reason: "nonce must be 32 bytes, got 31",
  });
  assert.deepEqual(
    expectedReportData({ version: "v1", address: new Uint8Array(33), nonce }),
    { ok: false, reason: "v1 address must be at most 32 bytes, got 33" },
  );
  assert.deepEqual(checkReportData(new Uint8Array(10), { version: "v1", address, nonce }), {
    ok: false,
    reason: "report data must be 64 bytes, got 10",
  });
});
