/**
 * Offline re-verification of a bundled session with real evidence and real
 * collateral: dstack's recorded TDX quote and event log
 * (tests/fixtures/real/dstack/quote-report.json) with Intel PCS collateral
 * for its FMSPC (tests/fixtures/real/collateral/tinfoil-2026-01-12_90c06f000000.json),
 * chained to the real Intel root, at an instant inside the collateral's
 * window. Altered collateral, an altered digest, a later instant and a
 * session claiming other measurements all fail.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { sha256Prefixed } from "../aci/digest.ts";
import {
  archiveDigest,
  type ArchiveSources,
  archiveSources,
  type CollateralArchive,
  CollateralCollector,
} from "./collateral_archive.ts";
import { type OfflineTrust, verifySessionOffline } from "./bundle_session.ts";
import { collateralFromDcapQvlJson } from "./tdx/collateral.ts";
import { quoteCollateralKey } from "./tdx/dcap.ts";
import { quoteFromEvidence, tdxChecks } from "./kinds/tdx.ts";
import { defaultGpuDeps } from "./nvidia/deps.ts";

const REAL = new URL("../../tests/fixtures/real/", import.meta.url);
const evidence = Deno.readFileSync(new URL("dstack/quote-report.json", REAL));
const collateralJson = JSON.parse(
  Deno.readTextFileSync(new URL("collateral/tinfoil-2026-01-12_90c06f000000.json", REAL)),
);
/** Inside the collateral's window (collateral/PROVENANCE.md). */
const VERIFIED_AT = Date.parse("2026-01-20T00:00:00Z");

const gpu = defaultGpuDeps();
const TRUST: OfflineTrust = {
  snpRoots: [],
  gpuRoots: { deviceRootDer: gpu.deviceRootDer, rimRootDer: gpu.rimRootDer },
};

function archiveOf(json: unknown): CollateralArchive {
  const quote = quoteFromEvidence(evidence) as Uint8Array;
  const key = quoteCollateralKey(quote);
  const c = collateralFromDcapQvlJson(json);
  if (!key.ok || !c.ok) throw new Error("fixture");
  const col = new CollateralCollector(VERIFIED_AT);
  col.tdx(key.fmspc, key.ca, c.collateral);
  return col.archive();
}

/** A session document as the dstack-tdx verifier writes one, over the real evidence. */
async function session(archive: CollateralArchive, measurements?: Record<string, unknown>) {
  const quote = quoteFromEvidence(evidence) as Uint8Array;
  const { verified } = await tdxChecks(quote, {
    at: VERIFIED_AT,
    tdx: { source: (archiveSources(archiveOf(collateralJson)) as ArchiveSources).tdx },
    snp: { roots: [] },
    gpu,
  });
  assert.ok(verified, "the fixture verifies with its collateral");
  const h = verified.reportHex;
  return {
    api_version: "aci/1",
    upstream_name: "dstack",
    endpoint: "https://upstream.example",
    verifier_id: "dstack-tdx/1",
    established_at: Math.floor(VERIFIED_AT / 1000),
    expires_at: Math.floor(VERIFIED_AT / 1000) + 3600,
    channel_binding: [],
    claims: {
      tee_attested: { status: "asserted", source: "hardware_proven", reason: "r" },
      gpu_attested: { status: "unknown" },
      extra: {
        tdx_measurements: measurements ?? {
          mr_td: h.mrTd,
          rtmr0: h.rtmr0,
          rtmr1: h.rtmr1,
          rtmr2: h.rtmr2,
          rtmr3: h.rtmr3,
          event_log_replayed: true,
        },
        collateral: { digest: archiveDigest(archive) },
      },
    },
    evidence: {
      digest: sha256Prefixed(evidence),
      data: `data:application/json;base64,${Buffer.from(evidence).toString("base64")}`,
    },
  };
}

const failed = (cs: { ok: boolean; name: string; detail: string }[]) =>
  cs.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);

Deno.test("a session re-verifies offline with its archived real collateral", async () => {
  const archive = archiveOf(collateralJson);
  const doc = await session(archive);
  const entry = { digest: archiveDigest(archive), archive };
  const checks = await verifySessionOffline(doc, entry, TRUST);
  assert.deepEqual(failed(checks), []);
  const names = checks.map((c) => c.name);
  for (const n of ["session.collateral", "session.tdx.collateral", "session.measurements"]) {
    assert.ok(names.includes(n), `${n} in ${names}`);
  }
  assert.ok(names.includes("session.event_log"));

  // --at after the collateral's nextUpdate: the same bytes no longer verify.
  const late = await verifySessionOffline(doc, entry, {
    ...TRUST,
    at: Date.parse("2026-03-01T00:00:00Z"),
  });
  assert.match(failed(late).join("\n"), /expired/);

  // Collateral that is not the one the session commits to.
  const other = structuredClone(archive);
  other.verified_at += 1;
  const swapped = await verifySessionOffline(
    doc,
    { digest: archiveDigest(other), archive: other },
    TRUST,
  );
  assert.match(
    failed(swapped).join("\n"),
    /session\.collateral: the bundle's collateral hashes to/,
  );
  assert.match(
    failed(await verifySessionOffline(doc, { none: "x" }, TRUST)).join("\n"),
    /does not hold/,
  );

  // A session naming a TLS key and address its quote's REPORTDATA does not bind.
  const unbound = {
    ...doc,
    identity: { signing_address: "0x" + "11".repeat(20), signing_algo: "ecdsa" },
    channel_binding: [{
      type: "tls_spki_sha256",
      origin: doc.endpoint,
      spki_sha256: "22".repeat(32),
    }],
  };
  assert.match(
    failed(await verifySessionOffline(unbound, entry, TRUST)).join("\n"),
    /session\.tls_binding: the quote's REPORTDATA does not bind/,
  );

  // A session claiming other measurements than its quote's.
  const lying = await session(archive, { mr_td: "00".repeat(48) });
  assert.match(
    failed(await verifySessionOffline(lying, entry, TRUST)).join("\n"),
    /measurements differ/,
  );
});

Deno.test("altered TCB info fails its Intel signature even when the digests are made to agree", async () => {
  const tampered = structuredClone(collateralJson);
  tampered.tcb_info = tampered.tcb_info.replace(
    /"tcbEvaluationDataNumber":(\d+)/,
    (_: string, n: string) => `"tcbEvaluationDataNumber":${Number(n) + 1}`,
  );
  assert.notEqual(tampered.tcb_info, collateralJson.tcb_info);
  const archive = archiveOf(tampered);
  const doc = await session(archiveOf(collateralJson));
  doc.claims.extra.collateral.digest = archiveDigest(archive);
  const checks = await verifySessionOffline(
    doc,
    { digest: archiveDigest(archive), archive },
    TRUST,
  );
  assert.match(failed(checks).join("\n"), /session\.tdx\.collateral: .*signature/i);
});
