import assert from "node:assert/strict";
import { collateralFromDcapQvlJson } from "../tdx/collateral.ts";
import { LocalCollateralSource } from "../tdx/collateral_source.ts";
import { hexToBytes } from "../../aci/hex.ts";
import { parseNearAiReport } from "./report.ts";
import { verifyNearAiReport } from "./verify.ts";
import { verifyNearSignature } from "./signature.ts";

// Real artifacts and the instant their PROVENANCE states (tests/fixtures/near-ai/PROVENANCE.md).
const fx = (p: string) => new URL(`../../../tests/fixtures/${p}`, import.meta.url);
const REPORT = JSON.parse(
  Deno.readTextFileSync(fx("near-ai/nearai_cloud_report_openai_gpt_oss_120b.json")),
);
const NONCE = "deadbeef00000000000000000000000000000000000000000000000000000001";
const AT = Date.parse("2026-03-15T00:00:00Z");
const col = collateralFromDcapQvlJson(
  JSON.parse(Deno.readTextFileSync(fx("tdx/dcap-qvl-tdx_quote_outdated_collateral.json"))),
);
if (!col.ok) throw new Error(col.reason);
const source = new LocalCollateralSource().set("90c06f000000", "platform", col.collateral);

function byName(checks: { name: string; ok: boolean; detail: string }[]) {
  return Object.fromEntries(checks.map((c) => [c.name, c]));
}

Deno.test("near-ai real report: the model CVM verifies at its collateral's instant", async () => {
  const parsed = parseNearAiReport(REPORT);
  assert.ok(parsed.ok);
  const v = await verifyNearAiReport(parsed.report, { nonce: NONCE, tdx: { source }, now: AT });
  const m = byName(v.models[0].checks);
  for (
    const n of [
      "signing_address",
      "nonce",
      "tdx_quote",
      "report_data",
      "event_log",
      "compose_hash",
    ]
  ) assert.ok(m[`model[0].${n}`]?.ok, `model[0].${n}: ${m[`model[0].${n}`]?.detail}`);
  assert.match(m["model[0].tdx_quote"].detail, /FMSPC 90c06f000000, TCB UpToDate/);
  assert.equal(
    v.models[0].composeHash,
    "242a62724303cc32f364da0fc92738706b0078e7587821b7ba3e75488223797b",
  );
  assert.equal(v.models[0].registers?.mrTd.slice(0, 8), "b24d3b24");
  // The gateway CVM: no recorded collateral for its FMSPC after its PCK's issue date (PROVENANCE),
  // so DCAP fails at collateral; its report data and event log still verify.
  const g = byName(v.gateway.checks);
  assert.equal(g["gateway.tdx_quote"].ok, false);
  assert.match(g["gateway.tdx_quote"].detail, /collateral/);
  assert.ok(g["gateway.report_data"].ok, g["gateway.report_data"].detail);
  assert.ok(g["gateway.event_log"].ok, g["gateway.event_log"].detail);
  assert.ok(g["gateway.compose_hash"].ok, g["gateway.compose_hash"].detail);
});

Deno.test("near-ai real report: a wrong nonce or a wrong address flips report data", async () => {
  const parsed = parseNearAiReport(REPORT);
  assert.ok(parsed.ok);
  const other = NONCE.slice(0, -1) + "2";
  const v = await verifyNearAiReport(parsed.report, { nonce: other, tdx: { source }, now: AT });
  const m = byName(v.models[0].checks);
  assert.equal(m["model[0].nonce"].ok, false);
  assert.match(m["model[0].report_data"].detail, /nonce does not match/);

  const forged = structuredClone(REPORT);
  forged.model_attestations[0].signing_address = "0x" + "11".repeat(20);
  const p2 = parseNearAiReport(forged);
  assert.ok(p2.ok);
  const v2 = await verifyNearAiReport(p2.report, { nonce: NONCE, tdx: { source }, now: AT });
  const m2 = byName(v2.models[0].checks);
  assert.match(m2["model[0].report_data"].detail, /does not carry the signing address/);
  assert.equal(m2["model[0].signing_address"].ok, false);
});

Deno.test("near-ai real report: without a TLS fingerprint the gateway cannot bind the channel", async () => {
  const parsed = parseNearAiReport(REPORT);
  assert.ok(parsed.ok);
  const v = await verifyNearAiReport(parsed.report, {
    nonce: NONCE,
    tdx: { source },
    now: AT,
    observedSpkiSha256: "ab".repeat(32),
    requireTlsBinding: true,
  });
  const g = byName(v.gateway.checks);
  assert.equal(g["gateway.tls_binding"].ok, false);
  assert.match(g["gateway.tls_binding"].detail, /no tls_cert_fingerprint/);
});

Deno.test("near-ai real report: a tampered event log or quote fails", async () => {
  const tampered = structuredClone(REPORT);
  tampered.model_attestations[0].event_log[5].digest = "00".repeat(48);
  const p = parseNearAiReport(tampered);
  assert.ok(p.ok);
  const v = await verifyNearAiReport(p.report, { nonce: NONCE, tdx: { source }, now: AT });
  assert.match(byName(v.models[0].checks)["model[0].event_log"].detail, /replays RTMR/);

  const q = structuredClone(REPORT);
  const quote = hexToBytes(q.model_attestations[0].intel_quote);
  quote[600] ^= 1; // inside the signed TD report body
  q.model_attestations[0].intel_quote = Array.from(quote, (b) => b.toString(16).padStart(2, "0"))
    .join("");
  const pq = parseNearAiReport(q);
  assert.ok(pq.ok);
  const vq = await verifyNearAiReport(pq.report, { nonce: NONCE, tdx: { source }, now: AT });
  assert.equal(byName(vq.models[0].checks)["model[0].tdx_quote"].ok, false);
});

Deno.test("near-ai real report: malformed shapes are refused with a reason", () => {
  assert.equal(parseNearAiReport([]).ok, false);
  assert.equal(parseNearAiReport({}).ok, false);
  const bad = structuredClone(REPORT);
  bad.model_attestations = {};
  const r = parseNearAiReport(bad);
  assert.ok(!r.ok && /model_attestations/.test(r.reason));
  // A hostile upstream cannot make the verifier run unbounded DCAP verifications.
  const many = structuredClone(REPORT);
  many.model_attestations = Array(17).fill(REPORT.model_attestations[0]);
  const m = parseNearAiReport(many);
  assert.ok(!m.ok && /at most 16/.test(m.reason));
  const alg = structuredClone(REPORT);
  alg.gateway_attestation.signing_algo = "ed25519";
  assert.equal(parseNearAiReport(alg).ok, false);
});

Deno.test("near-ai real /v1/signature example: text binds the exact bytes, EIP-191 recovers", () => {
  const dir = "near-ai/docs-chat-verification/";
  const envelope = JSON.parse(Deno.readTextFileSync(fx(dir + "signature.json")));
  const requestBody = Deno.readFileSync(fx(dir + "request.json"));
  const responseBody = Deno.readFileSync(fx(dir + "response.sse"));
  const address = "0x319f1b8BB3b723A5d098FFB67005Bdf7BB579ACa";
  const ok = verifyNearSignature(envelope, { requestBody, responseBody }, [address]);
  assert.deepEqual(ok.map((c) => [c.name, c.ok]), [
    ["signature.text", true],
    ["signature.valid", true],
    ["signature.key_attested", true],
  ]);
  // One response byte changed, or an address the session did not attest: refused.
  const changed = responseBody.slice();
  changed[10] ^= 1;
  assert.equal(
    verifyNearSignature(envelope, { requestBody, responseBody: changed }, [address])[0].ok,
    false,
  );
  assert.equal(
    verifyNearSignature(envelope, { requestBody, responseBody }, ["0x" + "22".repeat(20)])[2].ok,
    false,
  );
  const forged = { ...envelope, signing_address: "0x" + "22".repeat(20) };
  assert.equal(verifyNearSignature(forged, { requestBody, responseBody }, [])[1].ok, false);
});
