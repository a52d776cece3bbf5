import assert from "node:assert/strict";
import { fullNrasPayload, hexEvidence, vector } from "../../../tests/support/nvidia_fixtures.ts";
import { parseGpuPayload } from "./payload.ts";

Deno.test("payload: NRAS request format as JSON text (dstack/NEAR nvidia_payload)", () => {
  const r = parseGpuPayload(JSON.stringify(fullNrasPayload()));
  assert.ok(r.ok);
  assert.equal(r.payload.nonce, vector("hopper-550.90.07-FULL").nonce);
  assert.equal(r.payload.gpus.length, 1);
  assert.equal(r.payload.gpus[0].arch, "HOPPER");
  assert.match(r.payload.gpus[0].certificatePem, /^-----BEGIN CERTIFICATE-----/);
  assert.deepEqual(
    r.payload.gpus[0].evidence,
    hexEvidence(vector("hopper-550.90.07-FULL").evidence),
  );
});

Deno.test("payload: hex evidence, raw PEM and the top-level arch are accepted", () => {
  const p = fullNrasPayload();
  const e = p.evidence_list[0];
  const hex = [...Uint8Array.from(atob(e.evidence), (c) => c.charCodeAt(0))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  const r = parseGpuPayload({
    arch: "hopper",
    evidence_list: [{ certificate: atob(e.certificate), evidence: hex }],
  });
  assert.ok(r.ok);
  assert.equal(r.payload.gpus[0].arch, "HOPPER");
  assert.equal(r.payload.nonce, null);
});

Deno.test("payload: malformed input gets a precise reason", () => {
  const good = fullNrasPayload().evidence_list[0];
  const cases: [unknown, RegExp][] = [
    ["{not json", /not JSON/],
    [42, /not an object/],
    [{ evidence_list: [] }, /no evidence_list/],
    [{ evidence_list: [{ ...good, arch: "AMPERE" }] }, /GPU 0: architecture "AMPERE"/],
    [{ evidence_list: [{ ...good, certificate: btoa("hello") }] }, /GPU 0: certificate/],
    [{ evidence_list: [{ ...good, evidence: "%%%" }] }, /GPU 0: evidence is not base64 or hex/],
    [{ evidence_list: Array(65).fill(good) }, /more than 64 GPUs/],
  ];
  for (const [input, reason] of cases) {
    const r = parseGpuPayload(input);
    assert.ok(!r.ok, JSON.stringify(input).slice(0, 40));
    assert.match(r.reason, reason);
  }
});
