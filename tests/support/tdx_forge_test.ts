import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { verifyTdxQuote } from "../../src/verify/tdx/dcap.ts";
import { verifyTdxQuoteWithSource } from "../../src/verify/tdx/collateral_source.ts";
import { collateralFromDcapQvlJson } from "../../src/verify/tdx/collateral.ts";
import { INTEL_SGX_ROOT_CA_DER } from "../../src/verify/tdx/intel_root.ts";
import { parseTdxQuote } from "../../src/verify/tdx/quote.ts";
import { forgeTdxEnvironment } from "./tdx_forge.ts";

const AT = Date.parse("2026-03-01T12:00:00Z");
const now = () => AT;
const reportData = new Uint8Array(64).map((_, i) => i * 3);

Deno.test("forged quote verifies UpToDate under the forge's root", async () => {
  const forge = await forgeTdxEnvironment({ at: AT });
  const rtmr3 = new Uint8Array(48).fill(0x33);
  const quote = forge.mintQuote(reportData, {
    rtmrs: [new Uint8Array(48), new Uint8Array(48), new Uint8Array(48), rtmr3],
  });
  const r = await verifyTdxQuote(quote, {
    collateral: forge.collateral,
    now,
    rootCaDer: forge.rootCertDer,
  });
  assert.ok(r.ok, r.ok ? "" : r.reason);
  if (!r.ok) return;
  assert.equal(r.tcbStatus, "UpToDate");
  assert.equal(r.fmspc, forge.fmspc);
  assert.deepEqual(r.report.reportData, reportData);
  assert.deepEqual(r.report.rtmrs[3], rtmr3);
  assert.equal(r.tdPolicy.ok, true);
  assert.equal(r.collateralExpiresAt, Math.floor((AT + 30 * 86_400_000) / 1000));
  const viaSource = await verifyTdxQuoteWithSource(quote, {
    source: forge.source,
    now,
    rootCaDer: forge.rootCertDer,
  });
  assert.equal(viaSource.ok, true);
  // The dcap-qvl JSON shape round-trips.
  const round = collateralFromDcapQvlJson(forge.collateralJson);
  assert.ok(round.ok);
  if (round.ok) assert.deepEqual(round.collateral, forge.collateral);
});

Deno.test("forged quote fails under the real Intel root", async () => {
  const forge = await forgeTdxEnvironment({ at: AT });
  const quote = forge.mintQuote(reportData);
  const r = await verifyTdxQuote(quote, { collateral: forge.collateral, now });
  assert.deepEqual(r, {
    ok: false,
    stage: "pck_chain",
    reason: "PCK chain does not reach the pinned Intel SGX Root CA",
  });
  const explicit = await verifyTdxQuote(quote, {
    collateral: forge.collateral,
    now,
    rootCaDer: INTEL_SGX_ROOT_CA_DER,
  });
  assert.equal(explicit.ok, false);
});

Deno.test("forge: wrong time, other forge's root, debug TD, revoked leaf and Revoked TCB fail precisely", async () => {
  const forge = await forgeTdxEnvironment({ at: AT });
  const quote = forge.mintQuote(reportData);
  const base = { collateral: forge.collateral, rootCaDer: forge.rootCertDer };

  const late = await verifyTdxQuote(quote, { ...base, now: () => AT + 31 * 86_400_000 });
  assert.equal(late.ok, false);
  if (!late.ok) assert.match(late.reason, /expired/);

  const other = await forgeTdxEnvironment({ at: AT });
  const foreign = await verifyTdxQuote(quote, { ...base, now, rootCaDer: other.rootCertDer });
  assert.equal(foreign.ok, false);
  if (!foreign.ok) {
    assert.equal(foreign.reason, "PCK chain does not reach the pinned Intel SGX Root CA");
  }

  const debugQuote = forge.mintQuote(reportData, {
    tdAttributes: Uint8Array.of(1, 0, 0, 0x10, 0, 0, 0, 0),
  });
  assert.deepEqual(await verifyTdxQuote(debugQuote, { ...base, now }), {
    ok: false,
    stage: "td_policy",
    reason: "TD attributes: DEBUG is 1",
  });

  const revokedLeaf = await forgeTdxEnvironment({ at: AT, revokePckLeaf: true });
  const rl = await verifyTdxQuote(revokedLeaf.mintQuote(reportData), {
    collateral: revokedLeaf.collateral,
    rootCaDer: revokedLeaf.rootCertDer,
    now,
  });
  assert.equal(rl.ok, false);
  if (!rl.ok) assert.match(rl.reason, /PCK Certificate.* is revoked/);

  const revokedTcb = await forgeTdxEnvironment({ at: AT, tcbStatus: "Revoked" });
  assert.deepEqual(
    await verifyTdxQuote(revokedTcb.mintQuote(reportData), {
      collateral: revokedTcb.collateral,
      rootCaDer: revokedTcb.rootCertDer,
      now,
    }),
    { ok: false, stage: "tcb", reason: "TCB status is Revoked" },
  );

  const outOfDate = await forgeTdxEnvironment({ at: AT, tcbStatus: "OutOfDate" });
  const ood = await verifyTdxQuote(outOfDate.mintQuote(reportData), {
    collateral: outOfDate.collateral,
    rootCaDer: outOfDate.rootCertDer,
    now,
  });
  assert.ok(ood.ok);
  if (ood.ok) {
    assert.equal(ood.tcbStatus, "OutOfDate");
    assert.deepEqual(ood.advisoryIds, ["INTEL-SA-00000"]);
  }

  // The TCB policy can refuse OutOfDate; the default accepts it.
  const strict = await verifyTdxQuote(outOfDate.mintQuote(reportData), {
    collateral: outOfDate.collateral,
    rootCaDer: outOfDate.rootCertDer,
    now,
    tcbPolicy: { accepted: ["UpToDate", "SWHardeningNeeded"] },
  });
  assert.deepEqual(strict, {
    ok: false,
    stage: "tcb",
    reason: "TCB status OutOfDate is not accepted by the TCB policy " +
      "(accepted: UpToDate, SWHardeningNeeded)",
  });

  // A lower TDX module SVN than the TCB Info knows is NotSupported: it fails.
  const oldModule = forge.mintQuote(reportData, {
    teeTcbSvn: Uint8Array.from([1, 1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
  });
  const om = await verifyTdxQuote(oldModule, { ...base, now });
  assert.equal(om.ok, false);
  if (!om.ok) {
    assert.equal(om.stage, "tcb");
    assert.match(
      om.reason,
      /^TCB status NotSupported: TDX module SVN 1 is below every TDX_01 level/,
    );
  }
  // An unknown TDX module identity (major version 7) always fails, whatever the policy.
  const unknownModule = forge.mintQuote(reportData, {
    teeTcbSvn: Uint8Array.from([3, 7, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
  });
  const um = await verifyTdxQuote(unknownModule, { ...base, now });
  assert.equal(um.ok, false);
  if (!um.ok) {
    assert.match(um.reason, /^TCB status NotSupported: TDX module identity TDX_07 is not in/);
  }
});

Deno.test("forged quotes parse like real ones", async () => {
  const forge = await forgeTdxEnvironment({ at: AT });
  const p = parseTdxQuote(forge.mintQuote(reportData));
  assert.ok(p.ok);
  if (!p.ok) return;
  assert.equal(p.quote.version, 4);
  assert.equal(p.quote.pckChainDer.length, 3);
  assert.throws(() => forge.mintQuote(new Uint8Array(63)), /64 bytes/);
});

Deno.test("oracle: @phala/dcap-qvl also accepts the forged quote under the forged root", async () => {
  const { QuoteVerifier } = await import("@phala/dcap-qvl");
  const forge = await forgeTdxEnvironment({ at: AT });
  const verdict = QuoteVerifier.newWithRootCa(Buffer.from(forge.rootCertDer)).verify(
    forge.mintQuote(reportData),
    forge.collateralJson,
    AT / 1000,
  );
  assert.equal(verdict.status, "UpToDate");
});
