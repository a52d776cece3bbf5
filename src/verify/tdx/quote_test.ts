import assert from "node:assert/strict";
import { qeReportBindsAttestationKey, verifyQuoteSignature } from "./dcap.ts";
import { parseTdxQuote, tdReportToHex } from "./quote.ts";
import { checkTdPolicy } from "./td_policy.ts";
import { bytesToHex } from "../../aci/hex.ts";

const FIX = new URL("../../../tests/fixtures/tdx/", import.meta.url);

Deno.test({
  name:
    "go-tdx-guest v5 sample parses (TD 1.5 body, REPORTDATA at 574) and its quote signature verifies",
  fn: async () => {
    const bytes = Deno.readFileSync(new URL("go-tdx-guest-quote_v5_sample.dat", FIX));
    const r = parseTdxQuote(bytes);
    assert.ok(r.ok, r.ok ? "" : r.reason);
    if (!r.ok) return;
    const q = r.quote;
    assert.equal(q.version, 5);
    assert.equal(q.bodyType, 3);
    assert.equal(q.signedRegion.length, 54 + 648);
    assert.deepEqual(q.report.reportData, bytes.subarray(574, 638));
    assert.equal(q.pckChainDer.length, 3);
    assert.equal(await verifyQuoteSignature(q), true);
    assert.equal(qeReportBindsAttestationKey(q), true);
    const bad = bytes.slice();
    bad[600] ^= 0x80;
    const rb = parseTdxQuote(bad);
    assert.ok(rb.ok);
    if (rb.ok) assert.equal(await verifyQuoteSignature(rb.quote), false);
  },
});

Deno.test({
  name: "v4 quote fields sit at the documented offsets",
  fn: () => {
    const bytes = Deno.readFileSync(new URL("dcap-qvl-tdx_quote", FIX));
    const r = parseTdxQuote(bytes);
    assert.ok(r.ok);
    if (!r.ok) return;
    const h = tdReportToHex(r.quote.report);
    assert.equal(h.mrTd, bytesToHex(bytes.subarray(48 + 136, 48 + 184)));
    assert.equal(h.rtmr3, bytesToHex(bytes.subarray(48 + 328 + 144, 48 + 328 + 192)));
    assert.equal(h.reportData, bytesToHex(bytes.subarray(568, 632)));
    assert.equal(h.tdAttributes, "0000001000000000");
    assert.equal(r.quote.report.mrServiceTd, undefined);
    assert.deepEqual(checkTdPolicy(r.quote.report), {
      ok: true,
      debug: false,
      septVeDisable: true,
    });
  },
});

Deno.test("parser rejects truncated and unknown quotes with reasons", () => {
  assert.deepEqual(parseTdxQuote(new Uint8Array(10)), {
    ok: false,
    reason: "quote too short: 10 bytes",
  });
  const v3 = new Uint8Array(700);
  v3[0] = 3;
  assert.deepEqual(parseTdxQuote(v3), { ok: false, reason: "unsupported quote version 3" });
  const v4 = new Uint8Array(700);
  v4[0] = 4;
  new DataView(v4.buffer).setUint32(632, 5000, true);
  assert.deepEqual(parseTdxQuote(v4), {
    ok: false,
    reason: "signature data length 5000 exceeds the quote (700 bytes)",
  });
  const v5 = new Uint8Array(800);
  v5[0] = 5;
  v5[48] = 9;
  assert.deepEqual(parseTdxQuote(v5), { ok: false, reason: "unsupported v5 body: type 9 size 0" });
});

Deno.test("TD policy flags DEBUG before SEPT_VE_DISABLE", () => {
  // The policy reads only tdAttributes.
  const attrs = new Uint8Array(8);
  attrs[0] = 1;
  attrs[3] = 0x10;
  const base = { tdAttributes: attrs } as Parameters<typeof checkTdPolicy>[0];
  assert.deepEqual(checkTdPolicy(base), {
    ok: false,
    debug: true,
    septVeDisable: true,
    reason: "TD attributes: DEBUG is 1",
  });
});
