import assert from "node:assert/strict";
import { bytesToHex } from "../aci/hex.ts";
import { measuredValues, measurementCheck, parsePolicy } from "./policy.ts";

const quote = await Deno.readFile(
  new URL("../../tests/fixtures/tdx/dcap-qvl-tdx_quote", import.meta.url),
);
const report = { attestation: { tee_type: "tdx", evidence: { quote: bytesToHex(quote) } } };

Deno.test("policy: defaults are strict, unknown fields and bad hex are refused", () => {
  const p = parsePolicy({});
  assert.equal(p.allow_dev_evidence, false);
  assert.equal(p.accept_any_measurement, false);
  assert.equal(p.inclusion, "when_offered");
  assert.throws(() => parsePolicy({ allow_dev: true }), /policy/);
  assert.throws(
    () => parsePolicy({ measurements: [{ tee_type: "tdx", mrtd: "zz" }] }),
    /measurements/,
  );
});

Deno.test("policy: a TDX quote's MRTD is accepted only when listed (or any, explicitly)", () => {
  const m = measuredValues(report);
  assert.ok(typeof m !== "string");
  assert.equal(m.mrtd.length, 96);
  assert.ok(!measurementCheck(report, parsePolicy({}), false).ok);
  assert.ok(measurementCheck(report, parsePolicy({ accept_any_measurement: true }), false).ok);
  const listed = parsePolicy({ measurements: [{ tee_type: "tdx", mrtd: m.mrtd.toUpperCase() }] });
  assert.ok(measurementCheck(report, listed, false).ok);
  const wrongRtmr = parsePolicy({
    measurements: [{ tee_type: "tdx", mrtd: m.mrtd, rtmr0: "00".repeat(48) }],
  });
  assert.ok(!measurementCheck(report, wrongRtmr, false).ok);
});

Deno.test("policy: development evidence only with the explicit opt-in", () => {
  assert.ok(!measurementCheck({}, parsePolicy({ accept_any_measurement: true }), true).ok);
  assert.ok(measurementCheck({}, parsePolicy({ allow_dev_evidence: true }), true).ok);
});
