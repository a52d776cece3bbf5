/**
 * Where our TDX verifier differs from dcap-qvl, on purpose (docs/decisions/
 * tdx-tcb-svn-rule.md): with a TDX module major version (TEE_TCB_SVN[1]) > 0,
 * Intel's QVL and go-tdx-guest grade TEE_TCB_SVN[0..1] by the TDX module
 * identity and skip them in the platform TCB level match; dcap-qvl (0.3.9)
 * compares all 16 bytes against the level. Google's COS quote shows it: ours
 * (and go-tdx-guest, per its PROVENANCE) say UpToDate, dcap-qvl OutOfDate. If
 * either side changes, this test says so.
 */
import assert from "node:assert/strict";
import { verify } from "@phala/dcap-qvl";
import { collateralFromDcapQvlJson } from "../src/verify/tdx/collateral.ts";
import { verifyTdxQuote } from "../src/verify/tdx/dcap.ts";
import { parseTdxQuote } from "../src/verify/tdx/quote.ts";

const REAL = new URL("./fixtures/real/", import.meta.url);
const COLLATERAL = "collateral/teekit-tcbinfo-2025-09-29_00806f050000+near-qe-crl-2025-09-02.json";
const AT = "2025-10-01T00:00:00Z";

async function both(file: string) {
  const quote = Deno.readFileSync(new URL(file, REAL));
  const json = JSON.parse(Deno.readTextFileSync(new URL(COLLATERAL, REAL)));
  const c = collateralFromDcapQvlJson(json);
  if (!c.ok) throw new Error(c.reason);
  const ours = await verifyTdxQuote(quote, { collateral: c.collateral, now: () => Date.parse(AT) });
  const theirs = verify(quote, json, Date.parse(AT) / 1000);
  return { quote, ours, theirs };
}

Deno.test("TEE_TCB_SVN[0..1]: on Google's COS quote ours says UpToDate (Intel QVL, go-tdx-guest), dcap-qvl OutOfDate", async () => {
  const { quote, ours, theirs } = await both("google/go-tdx-guest-cos-113-tdx-quote.dat");
  const p = parseTdxQuote(quote);
  assert.ok(p.ok);
  if (!p.ok) return;
  // TEE_TCB_SVN 04 01 07 00…: module major version 1, module SVN 4.
  assert.deepEqual([...p.quote.report.teeTcbSvn.subarray(0, 3)], [4, 1, 7]);
  assert.ok(ours.ok, ours.ok ? "" : ours.reason);
  if (!ours.ok) return;
  assert.equal(ours.tcbStatus, "UpToDate");
  assert.equal(ours.tdxModuleId, "TDX_01");
  assert.equal(
    theirs.status,
    "OutOfDate",
    "dcap-qvl now agrees: update the decision and this test",
  );
  assert.deepEqual(theirs.advisory_ids, ["INTEL-SA-00960", "INTEL-SA-00982", "INTEL-SA-00986"]);
});

Deno.test("TEE_TCB_SVN[0..1]: where bytes 0..1 do not decide the level, ours and dcap-qvl agree", async () => {
  const { ours, theirs } = await both("teekit/tdx-v4-zkdcap.dat");
  assert.ok(ours.ok);
  if (!ours.ok) return;
  assert.equal(ours.tcbStatus, theirs.status);
  assert.deepEqual([...ours.advisoryIds].sort(), [...theirs.advisory_ids].sort());
});
