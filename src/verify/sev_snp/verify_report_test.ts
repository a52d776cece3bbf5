import assert from "node:assert/strict";
import { parseSnpReport, snpReportHex } from "./report.ts";
import { splitAskArkPem, verifySnpReport } from "./verify_report.ts";

const FIX = new URL("../../../tests/fixtures/sev-snp/", import.meta.url);
const now = () => Date.parse("2024-01-01T00:00:00Z");

function load(product: "milan" | "genoa") {
  const split = splitAskArkPem(Deno.readTextFileSync(new URL(`amd-ask-ark-${product}.pem`, FIX)));
  if (!split.ok) throw new Error(split.reason);
  return {
    report: Deno.readFileSync(new URL("go-sev-guest-attestation.bin", FIX)),
    vcekDer: Deno.readFileSync(new URL("go-sev-guest-vcek.der", FIX)),
    ...split,
  };
}

Deno.test({
  name: "SNP report verifies through VCEK ← ASK ← ARK (Milan)",
  fn: async () => {
    const f = load("milan");
    const r = await verifySnpReport(f.report, { ...f, now });
    assert.ok(r.ok, r.ok ? "" : r.reason);
    if (!r.ok) return;
    assert.equal(snpReportHex(r.report).reportData, "0102030405" + "00".repeat(59));
    assert.equal(r.report.version, 2);
    // This sample's guest policy is 0x0b0000: bit 19 (debug allowed) is set.
    assert.equal(r.debugAllowed, true);
  },
});

Deno.test({
  name:
    "SNP: wrong ARK (Genoa), flipped report byte, flipped VCEK byte and expired VCEK fail precisely",
  fn: async () => {
    const f = load("milan");
    const g = load("genoa");
    const wrongRoot = await verifySnpReport(f.report, { ...f, arkDer: g.arkDer, now });
    assert.deepEqual(wrongRoot, {
      ok: false,
      reason: "VCEK chain does not reach the pinned AMD ARK",
    });

    const report = f.report.slice();
    report[0x90] ^= 0x01; // MEASUREMENT
    assert.deepEqual(await verifySnpReport(report, { ...f, now }), {
      ok: false,
      reason: "SNP report signature invalid",
    });

    const vcek = f.vcekDer.slice();
    vcek[vcek.length - 120] ^= 0x01; // inside the signed TBS extensions
    const badVcek = await verifySnpReport(f.report, { ...f, vcekDer: vcek, now });
    assert.equal(badVcek.ok, false);
    if (!badVcek.ok) assert.match(badVcek.reason, /^VCEK chain/);

    const late = await verifySnpReport(f.report, {
      ...f,
      now: () => Date.parse("2030-01-01T00:00:00Z"),
    });
    assert.deepEqual(late, {
      ok: false,
      reason: 'VCEK chain: certificate "SEV-VCEK" expired (notAfter 2029-09-24T00:55:28.000Z)',
    });
  },
});

Deno.test("SNP parser rejects a wrong length", () => {
  assert.deepEqual(parseSnpReport(new Uint8Array(100)), {
    ok: false,
    reason: "SNP report must be 1184 bytes, got 100",
  });
});
