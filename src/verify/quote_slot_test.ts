import assert from "node:assert/strict";
import { devQuote } from "../aci/dev_quote.ts";
import { bytesToHex, hexToBytes } from "../aci/hex.ts";
import { fakeTdxQuote } from "./dev_report_fixture.ts";
import { quoteReportDataSlot } from "./quote_slot.ts";

const fixtures = new URL("../../tests/fixtures/", import.meta.url);

Deno.test({
  name: "quote slot: real TDX v4 (dstack) REPORTDATA at 568 is 64 x 0x01",
  fn() {
    const data = JSON.parse(
      Deno.readTextFileSync(new URL("dstack/vllm-proxy-sample-dstack-data.json", fixtures)),
    );
    const q = quoteReportDataSlot("tdx", hexToBytes(data.SAMPLE_DSTACK_QUOTE.quote));
    assert.equal(q.kind, "tdx");
    assert.equal(q.format, "TDX quote v4");
    assert.equal(bytesToHex(q.slot), "01".repeat(64));
  },
});

Deno.test({
  name: "quote slot: real TDX v5 (TDX 1.5 body) REPORTDATA at 574",
  fn() {
    const raw = Deno.readFileSync(new URL("tdx/dcap-qvl-tdx_quote_outdated", fixtures));
    const q = quoteReportDataSlot("tdx", raw);
    assert.equal(q.format, "TDX quote v5");
    assert.deepEqual(q.slot, raw.slice(574, 638));
    // This quote's report data is 32 bytes followed by 32 zero bytes: the offset is right.
    assert.equal(bytesToHex(q.slot.subarray(32)), "00".repeat(32));
  },
});

Deno.test({
  name: "quote slot: real SEV-SNP report REPORT_DATA at 0x50",
  fn() {
    const raw = Deno.readFileSync(new URL("sev-snp/go-sev-guest-attestation.bin", fixtures));
    const q = quoteReportDataSlot("sev_snp", raw);
    assert.equal(q.kind, "sev_snp");
    assert.equal(bytesToHex(q.slot), "0102030405" + "00".repeat(59));
  },
});

Deno.test("quote slot: development quote is recognized whatever tee_type claims", () => {
  const slot = new Uint8Array(64).fill(3);
  const q = quoteReportDataSlot("tdx", devQuote(slot));
  assert.equal(q.kind, "dev");
  assert.deepEqual(q.slot, slot);
});

Deno.test("quote slot: synthetic v4/v5 headers and malformed quotes", () => {
  const slot = new Uint8Array(64).fill(9);
  assert.deepEqual(quoteReportDataSlot("tdx", fakeTdxQuote(slot, 4)).slot, slot);
  assert.deepEqual(quoteReportDataSlot("tdx", fakeTdxQuote(slot, 5)).slot, slot);
  const sgx = fakeTdxQuote(slot);
  sgx[4] = 0;
  assert.throws(() => quoteReportDataSlot("tdx", sgx), /TEE type/);
  const v3 = fakeTdxQuote(slot);
  v3[0] = 3;
  assert.throws(() => quoteReportDataSlot("tdx", v3), /version/);
  assert.throws(() => quoteReportDataSlot("tdx", fakeTdxQuote(slot).subarray(0, 600)), /truncated/);
  assert.throws(() => quoteReportDataSlot("sev_snp", new Uint8Array(1000)), /1184/);
});
