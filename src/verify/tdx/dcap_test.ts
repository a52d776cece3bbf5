import assert from "node:assert/strict";
import { collateralFromDcapQvlJson, type TdxCollateral } from "./collateral.ts";
import { verifyTdxQuote } from "./dcap.ts";
import { parseHex } from "../../aci/hex.ts";

const FIX = new URL("../../../tests/fixtures/tdx/", import.meta.url);

function readBin(name: string): Uint8Array {
  return Deno.readFileSync(new URL(name, FIX));
}
function readCollateral(name: string): TdxCollateral {
  const r = collateralFromDcapQvlJson(Deno.readTextFileSync(new URL(name, FIX)));
  if (!r.ok) throw new Error(r.reason);
  return r.collateral;
}
function nearQuote(): Uint8Array {
  const q = parseHex(Deno.readTextFileSync(new URL("near-quote_hex.txt", FIX)).trim());
  if (!q) throw new Error("near quote hex");
  return q;
}
const at = (iso: string) => () => Date.parse(iso);

Deno.test({
  name: "dcap-qvl v4 quote verifies UpToDate inside its collateral window",
  fn: async () => {
    const r = await verifyTdxQuote(readBin("dcap-qvl-tdx_quote"), {
      collateral: readCollateral("dcap-qvl-tdx_quote_collateral.json"),
      now: at("2025-06-19T11:16:03Z"),
    });
    assert.equal(r.ok, true, r.ok ? "" : r.reason);
    if (!r.ok) return;
    assert.equal(r.version, 4);
    assert.equal(r.teeType, "tdx");
    assert.equal(r.tcbStatus, "UpToDate");
    assert.equal(r.fmspc, "b0c06f000000");
    assert.equal(r.tdPolicy.ok, true);
    // Earliest nextUpdate: the PCK CRL (2025-07-19T10:00:35Z).
    assert.equal(r.collateralExpiresAt, Date.parse("2025-07-19T10:00:35Z") / 1000);
    assert.equal(r.reportHex.reportData.length, 128);
  },
});

Deno.test({
  name: "dcap-qvl v4 quote fails outside its collateral window",
  fn: async () => {
    const quote = readBin("dcap-qvl-tdx_quote");
    const collateral = readCollateral("dcap-qvl-tdx_quote_collateral.json");
    const late = await verifyTdxQuote(quote, { collateral, now: at("2025-07-20T00:00:00Z") });
    assert.equal(late.ok, false);
    if (!late.ok) assert.match(late.reason, /expired: nextUpdate 2025-07-19T10:00:35/);
    const early = await verifyTdxQuote(quote, { collateral, now: at("2025-06-19T10:10:00Z") });
    assert.equal(early.ok, false);
    if (!early.ok) {
      assert.match(early.reason, /not yet valid: tcbInfo issueDate 2025-06-19T10:16:03Z/);
    }
  },
});

Deno.test({
  name: "a v5 (TDX 1.5) quote whose platform is below every TCB level fails (NotSupported)",
  fn: async () => {
    const r = await verifyTdxQuote(readBin("dcap-qvl-tdx_quote_outdated"), {
      collateral: readCollateral("dcap-qvl-tdx_quote_outdated_collateral.json"),
      now: at("2026-02-18T11:58:51Z"),
    });
    assert.equal(r.ok, false);
    if (r.ok) return;
    // Its PCK SGX component 8 (SEAMLDR ACM) is 3, below every listed level's 5.
    assert.equal(r.stage, "tcb");
    assert.match(
      r.reason,
      /^TCB status NotSupported: no TCB level matches the PCK certificate's SGX components/,
    );
  },
});

Deno.test({
  name: "NEAR quote verifies UpToDate",
  fn: async () => {
    const r = await verifyTdxQuote(nearQuote(), {
      collateral: readCollateral("near-quote_collateral.json"),
      now: at("2025-09-02T08:41:59Z"),
    });
    assert.equal(r.ok, true, r.ok ? "" : r.reason);
    if (r.ok) assert.equal(r.tcbStatus, "UpToDate");
  },
});

Deno.test({
  name: "flipped bytes in each signed region fail with a precise reason",
  fn: async () => {
    const quote = readBin("dcap-qvl-tdx_quote");
    const collateral = readCollateral("dcap-qvl-tdx_quote_collateral.json");
    const now = at("2025-06-19T11:16:03Z");
    const flipped = (offset: number) => {
      const q = quote.slice();
      q[offset] ^= 0x01;
      return q;
    };
    const body = await verifyTdxQuote(flipped(568), { collateral, now });
    assert.deepEqual(body, {
      ok: false,
      stage: "quote_signature",
      reason: "quote signature invalid",
    });

    const qe = await verifyTdxQuote(flipped(770 + 10), { collateral, now });
    assert.deepEqual(qe, { ok: false, stage: "qe_report", reason: "QE report signature invalid" });

    // A byte inside the PCK leaf's base64 (in its public key area).
    const text = new TextDecoder("latin1").decode(quote);
    const pemStart = text.indexOf("-----BEGIN CERTIFICATE-----");
    const pck = await verifyTdxQuote(flipped(pemStart + 28 + 300), { collateral, now });
    assert.equal(pck.ok, false);
    if (!pck.ok) {
      assert.equal(pck.stage, "pck_chain");
      assert.match(pck.reason, /^PCK chain/);
    }

    const badTcb = {
      ...collateral,
      tcbInfo: collateral.tcbInfo.replace(
        '"tcbEvaluationDataNumber":17',
        '"tcbEvaluationDataNumber":18',
      ),
    };
    assert.notEqual(badTcb.tcbInfo, collateral.tcbInfo);
    const tcb = await verifyTdxQuote(quote, { collateral: badTcb, now });
    assert.deepEqual(tcb, { ok: false, stage: "collateral", reason: "TCB Info signature invalid" });
  },
});

Deno.test({
  name: "oracle: @phala/dcap-qvl agrees on the v4 and NEAR quotes",
  fn: async () => {
    const { verify } = await import("@phala/dcap-qvl");
    const cases: [Uint8Array, string, string][] = [
      [readBin("dcap-qvl-tdx_quote"), "dcap-qvl-tdx_quote_collateral.json", "2025-06-19T11:16:03Z"],
      [nearQuote(), "near-quote_collateral.json", "2025-09-02T08:41:59Z"],
    ];
    for (const [quote, colName, iso] of cases) {
      const json = JSON.parse(Deno.readTextFileSync(new URL(colName, FIX)));
      const oracle = verify(quote, json, Date.parse(iso) / 1000);
      const ours = await verifyTdxQuote(quote, {
        collateral: readCollateral(colName),
        now: at(iso),
      });
      assert.equal(ours.ok, true);
      if (ours.ok) {
        assert.equal(ours.tcbStatus, oracle.status);
        assert.deepEqual(ours.advisoryIds, oracle.advisory_ids);
      }
    }
  },
});
