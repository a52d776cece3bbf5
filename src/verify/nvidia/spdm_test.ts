import assert from "node:assert/strict";
import { hexEvidence, vector } from "../../../tests/support/nvidia_fixtures.ts";
import { driverVersion, OPAQUE, parseSpdmEvidence, vbiosVersion } from "./spdm.ts";

const FULL = vector("hopper-550.90.07-FULL");

Deno.test("spdm: the FULL capture parses field by field", () => {
  const bytes = hexEvidence(FULL.evidence);
  const r = parseSpdmEvidence(bytes);
  assert.ok(r.ok);
  const e = r.evidence;
  assert.equal(e.blocks.length, 64);
  assert.deepEqual(e.blocks.map((b) => b.index), Array.from({ length: 64 }, (_, i) => i + 1));
  assert.equal(
    [...e.requestNonce].map((b) => b.toString(16).padStart(2, "0")).join(""),
    FULL.nonce,
  );
  assert.equal(driverVersion(e), "550.90.07");
  assert.equal(vbiosVersion(e), "96.00.9F.00.01");
  assert.equal(e.signedMessage.length + e.signature.length, bytes.length);
  assert.equal(e.opaque.get(OPAQUE.FWID)?.length, 48);
  assert.equal(e.trailingBytes, 0);
});

Deno.test("spdm: VBIOS version encoding as NVIDIA prints it", () => {
  const r = parseSpdmEvidence(hexEvidence(FULL.evidence));
  assert.ok(r.ok);
  const e = r.evidence;
  // The README's example: the 8 bytes 00 9f 00 96 01 00 00 00 read as 96.00.9F.00.01.
  e.opaque.set(OPAQUE.VBIOS_VERSION, Uint8Array.from([0x00, 0x9f, 0x00, 0x96, 0x01, 0, 0, 0]));
  assert.equal(vbiosVersion(e), "96.00.9F.00.01");
  e.opaque.set(OPAQUE.VBIOS_VERSION, new Uint8Array(3));
  assert.equal(vbiosVersion(e), null);
});

Deno.test("spdm: truncated and mutated evidence is refused with a reason, never a throw", () => {
  const bytes = hexEvidence(FULL.evidence);
  for (let n = 0; n < bytes.length; n += 29) {
    const r = parseSpdmEvidence(bytes.slice(0, n));
    assert.equal(r.ok, false, `length ${n}`);
  }
  // Deterministic pseudo-random single-byte edits in the structural fields.
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  for (let i = 0; i < 300; i++) {
    const m = bytes.slice();
    const at = rnd() % 60 + (i % 2 ? 0 : bytes.length - 600);
    m[at] = rnd() % 256;
    const r = parseSpdmEvidence(m);
    if (!r.ok) assert.equal(typeof r.reason, "string");
  }
  const wrongCode = bytes.slice();
  wrongCode[1] = 0x81;
  const r = parseSpdmEvidence(wrongCode);
  assert.ok(!r.ok && /not GET_MEASUREMENTS/.test(r.reason));
});
