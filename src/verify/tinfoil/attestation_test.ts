import assert from "node:assert/strict";
import { createHash, X509Certificate } from "node:crypto";
import { gzipSync } from "node:zlib";
import { hexToBytes } from "../../aci/hex.ts";
import { collateralFromDcapQvlJson } from "../tdx/collateral.ts";
import { LocalCollateralSource, verifyTdxQuoteWithSource } from "../tdx/collateral_source.ts";
import { splitAskArkPem, verifySnpReport } from "../sev_snp/verify_report.ts";
import { snpReportHex } from "../sev_snp/report.ts";
import { verifyReleaseBundle } from "../sigstore/release.ts";
import {
  matchRelease,
  parseTinfoilDocument,
  parseTinfoilEvidence,
  tinfoilBinding,
} from "./attestation.ts";

// Real Tinfoil evidence (tests/fixtures/tinfoil-real/PROVENANCE.md and
// tests/fixtures/tinfoil-conformance/PROVENANCE.md), judged at the instants they state.
const fx = (p: string) => new URL(`../../../tests/fixtures/${p}`, import.meta.url);
const json = (p: string) => JSON.parse(Deno.readTextFileSync(fx(p)));
const BUNDLE = json("tinfoil-conformance/attestation-sev/_assets/real_genoa_bundle.json");
const SIGSTORE_001 = json(
  "tinfoil-conformance/sigstore/001-happy-path-snp-tdx-multiplatform/input.json",
);
const dec = (b: string) =>
  JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(b), (c) => c.charCodeAt(0))));
const GENOA = splitAskArkPem(Deno.readTextFileSync(fx("sev-snp/amd-ask-ark-genoa.pem")));
if (!GENOA.ok) throw new Error(GENOA.reason);
const AT_SNP = Date.parse("2026-02-01T00:00:00Z");

Deno.test("tinfoil real bundle: SEV-SNP report, TLS key, HPKE key and the Sigstore release agree", async () => {
  const p = parseTinfoilEvidence(BUNDLE);
  assert.ok(p.ok, p.ok ? "" : p.reason);
  const ev = p.evidence;
  assert.equal(ev.document.platform, "sev-snp");
  assert.equal(ev.document.report.length, 1184);
  const v = await verifySnpReport(ev.document.report, {
    vcekDer: ev.vcekDer!,
    askDer: GENOA.askDer,
    arkDer: GENOA.arkDer,
    now: () => AT_SNP,
  });
  assert.ok(v.ok, v.ok ? "" : v.reason);
  const hex = snpReportHex(v.report);
  // REPORT_DATA[0:32] is sha256 of the SPKI DER of the certificate the enclave serves TLS with.
  const spki = new X509Certificate(BUNDLE.enclaveCert).publicKey.export({
    type: "spki",
    format: "der",
  });
  const binding = tinfoilBinding(v.report.reportData);
  assert.ok(binding.ok);
  assert.equal(binding.tlsFingerprint, createHash("sha256").update(spki).digest("hex"));
  assert.equal(binding.hpkePublicKey.length, 64);
  // The release published through Sigstore carries this enclave's measurement as register 0.
  const policy = SIGSTORE_001.policy;
  const release = verifyReleaseBundle(BUNDLE.sigstoreBundle, dec(SIGSTORE_001.trust_root_b64), {
    repo: "tinfoilsh/confidential-model-router",
    oidcIssuer: policy.oidc_issuer,
    workflowRefPrefix: "refs/tags/",
  }, ev.releaseDigest!);
  assert.ok(release.ok, release.ok ? "" : release.reason);
  assert.equal(
    hex.measurement,
    "09ef32acf90fcfeb6206d1a46c13145cef736ebbb83f18eaff680b686232031546ff5fd39c44599699ee8734cbbeb519",
  );
  assert.ok(matchRelease("sev-snp", { snpMeasurement: hex.measurement }, release.registers).ok);
  // Another release's measurement does not match.
  const other = matchRelease("sev-snp", { snpMeasurement: "00".repeat(48) }, release.registers);
  assert.ok(!other.ok && /is not the release's/.test(other.reason));
});

Deno.test("tinfoil conformance attestation-sev: 200 accepts, 220 (signature flipped) rejects", async () => {
  for (
    const [id, accepted] of [["200-real-sev-snp-happy", true], [
      "220-signature-byte-flipped",
      false,
    ]] as const
  ) {
    const input = json(`tinfoil-conformance/attestation-sev/${id}/input.json`);
    const doc = parseTinfoilDocument({
      format: "https://tinfoil.sh/predicate/sev-snp-guest/v2",
      body: input.attestation_doc_b64,
    });
    assert.ok(doc.ok);
    const v = await verifySnpReport(doc.document.report, {
      vcekDer: Uint8Array.from(atob(input.vcek_der_b64), (c) => c.charCodeAt(0)),
      askDer: GENOA.askDer,
      arkDer: GENOA.arkDer,
      now: () => input.expiration_check_date_unix * 1000,
    });
    assert.equal(v.ok, accepted, `${id}: ${v.ok ? "accepted" : v.reason}`);
  }
});

Deno.test("tinfoil conformance ehbp-key-binding: the HPKE key is report_data[32:64]", () => {
  const happy = json("tinfoil-conformance/ehbp-key-binding/600-key-binding-happy/input.json");
  const out =
    json("tinfoil-conformance/ehbp-key-binding/600-key-binding-happy/expected.json").outputs;
  const b = tinfoilBinding(hexToBytes(happy.report_data_hex));
  assert.ok(b.ok);
  assert.equal(b.hpkePublicKey, out.attested_hpke_public_key_hex);
  assert.equal(b.tlsFingerprint, out.tls_fingerprint_hex);
  assert.equal(b.hpkePublicKey, happy.offered_hpke_public_key_hex);
  const mismatch = json("tinfoil-conformance/ehbp-key-binding/610-key-binding-mismatch/input.json");
  const m = tinfoilBinding(hexToBytes(mismatch.report_data_hex));
  assert.ok(m.ok && m.hpkePublicKey !== mismatch.offered_hpke_public_key_hex);
  const short = json("tinfoil-conformance/ehbp-key-binding/630-report-data-too-short/input.json");
  assert.equal(tinfoilBinding(hexToBytes(short.report_data_hex)).ok, false);
});

Deno.test("tinfoil real TDX document: the quote verifies with tinfoil's collateral; REPORTDATA is TLS fp ‖ HPKE", async () => {
  const doc = parseTinfoilDocument(json("tinfoil-real/verifier-tdx-guest-v2.json"));
  assert.ok(doc.ok);
  assert.equal(doc.document.platform, "tdx");
  const col = collateralFromDcapQvlJson(json("tinfoil-real/tinfoil-2026-01-12_90c06f000000.json"));
  assert.ok(col.ok);
  const source = new LocalCollateralSource().set("90c06f000000", "platform", col.collateral);
  const v = await verifyTdxQuoteWithSource(doc.document.report, {
    source,
    now: () => Date.parse("2026-01-20T00:00:00Z"),
  });
  assert.ok(v.ok, v.ok ? "" : `${v.stage}: ${v.reason}`);
  const b = tinfoilBinding(v.report.reportData);
  assert.ok(b.ok);
  assert.match(b.tlsFingerprint, /^a23b0e77/);
  assert.match(b.hpkePublicKey, /^d34fcf36/);
});

Deno.test("tinfoil documents: unknown formats, bad base64 and gzip bombs are refused", () => {
  assert.equal(
    parseTinfoilDocument({ format: "https://tinfoil.sh/predicate/sev-snp-guest/v1", body: "" }).ok,
    false,
  );
  assert.equal(
    parseTinfoilDocument({ format: "https://tinfoil.sh/predicate/tdx-guest/v2", body: "%%" }).ok,
    false,
  );
  // 1 MiB of zeros gzips to ~1 KiB; inflating it past the bound is refused, never allocated.
  const bomb = gzipSync(new Uint8Array(1024 * 1024));
  const r = parseTinfoilDocument({
    format: "https://tinfoil.sh/predicate/tdx-guest/v2",
    body: btoa(String.fromCharCode(...bomb)),
  });
  assert.ok(!r.ok && /at most/.test(r.reason));
});
