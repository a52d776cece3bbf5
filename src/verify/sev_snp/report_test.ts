import assert from "node:assert/strict";
import { parseSnpReport, productOfCpuid, SNP_REPORT_LEN } from "./report.ts";

Deno.test("SNP product from CPUID: Milan, Genoa (incl. Bergamo/Siena models), Turin, else unknown", () => {
  assert.equal(productOfCpuid(0x19, 0x01), "Milan");
  assert.equal(productOfCpuid(0x19, 0x11), "Genoa");
  assert.equal(productOfCpuid(0x19, 0xa0), "Genoa");
  assert.equal(productOfCpuid(0x1a, 0x02), "Turin");
  assert.equal(productOfCpuid(0x19, 0x40), null);
  assert.equal(productOfCpuid(0x17, 0x01), null);
});

function report(version: number, cpuid: number[]): Uint8Array {
  const b = new Uint8Array(SNP_REPORT_LEN);
  b[0] = version;
  b.set([1, 2, 3, 4, 0, 0, 0, 9], 0x180); // REPORTED_TCB bytes
  b.set(cpuid, 0x188);
  b.set([1, 2, 3, 4, 5, 6, 7, 8], 0x1a0);
  return b;
}

Deno.test("SNP report layouts: Turin reads FMC, BL, TEE, SNP at 0..3 and an 8-byte hwID; others 0, 1, 6, 7", () => {
  const t = parseSnpReport(report(5, [0x1a, 0x02, 0x01]));
  assert.ok(t.ok);
  if (t.ok) {
    assert.equal(t.report.product, "Turin");
    assert.deepEqual(t.report.reportedTcb, { fmc: 1, bootloader: 2, tee: 3, snp: 4, microcode: 9 });
    assert.deepEqual([...t.report.hwId], [1, 2, 3, 4, 5, 6, 7, 8]);
  }
  const g = parseSnpReport(report(3, [0x19, 0x11, 0x01]));
  assert.ok(g.ok);
  if (g.ok) {
    assert.equal(g.report.product, "Genoa");
    assert.deepEqual(g.report.reportedTcb, { bootloader: 1, tee: 2, snp: 0, microcode: 9 });
    assert.equal(g.report.hwId.length, 64);
  }
  const v2 = parseSnpReport(report(2, [0, 0, 0]));
  assert.ok(v2.ok);
  if (v2.ok) assert.equal(v2.report.product, null);
  assert.deepEqual(parseSnpReport(report(3, [0x17, 0x31, 0])), {
    ok: false,
    reason: "SNP report CPUID family 0x17 model 0x31 is not a Milan, Genoa or Turin CPU",
  });
  assert.deepEqual(parseSnpReport(report(6, [0, 0, 0])), {
    ok: false,
    reason: "unsupported SNP report version 6",
  });
});
