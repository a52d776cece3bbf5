import assert from "node:assert/strict";
import { devQuote } from "../aci/dev_quote.ts";
import { bytesEqual, hexToBytes } from "../aci/hex.ts";
import { generateWorkloadKeys } from "../aci/signer.ts";
import { type Check, check } from "./checks.ts";
import { fakeTdxQuote, makeReport } from "./dev_report_fixture.ts";
import { verifyReport } from "./report.ts";

const NONCE = "ab".repeat(32);
const keys = generateWorkloadKeys();

function byName(checks: Check[]): Record<string, Check> {
  return Object.fromEntries(checks.map((c) => [c.name, c]));
}

Deno.test("report: a dev report binds keyset and nonce, but is flagged as not hardware", async () => {
  const { report } = makeReport(keys, NONCE);
  const c = byName(await verifyReport(report, { nonce: NONCE }));
  assert.ok(c["report.api_version"].ok);
  assert.ok(c["report.workload_keyset_digest"].ok);
  assert.ok(c["report.report_data"].ok);
  assert.match(c["report.report_data"].detail, new RegExp(NONCE));
  assert.ok(c["report.quote_report_data"].ok);
  assert.equal(c["report.hardware_evidence"].ok, false);
  assert.match(c["report.hardware_evidence"].detail, /development evidence, not hardware/);
});

Deno.test("report: allowDevEvidence passes with a warning that still says 'not hardware'", async () => {
  const { report } = makeReport(keys, NONCE);
  const checks = await verifyReport(report, { nonce: NONCE, allowDevEvidence: true });
  assert.ok(checks.every((x) => x.ok));
  assert.match(byName(checks)["report.hardware_evidence"].detail, /WARNING.*not hardware/);
});

Deno.test("report: another nonce (a replay) fails report_data and the quote binding", async () => {
  const { report } = makeReport(keys, NONCE);
  const c = byName(await verifyReport(report, { nonce: "cd".repeat(32) }));
  assert.equal(c["report.report_data"].ok, false);
  assert.equal(c["report.quote_report_data"].ok, false);
  const none = byName(await verifyReport(makeReport(keys, null).report, {}));
  assert.ok(none["report.report_data"].ok);
  assert.match(none["report.report_data"].detail, /NOT fresh/);
});

Deno.test("report: a changed keyset or stated digest fails the digest check", async () => {
  const { report } = makeReport(keys, NONCE);
  const tampered = structuredClone(report) as {
    attestation: { workload_keyset: { not_after: number } };
  };
  tampered.attestation.workload_keyset.not_after += 1;
  const c = byName(await verifyReport(tampered, { nonce: NONCE }));
  assert.equal(c["report.workload_keyset_digest"].ok, false);
  assert.equal(
    c["report.report_data"].ok,
    false,
    "statement is rebuilt from the recomputed digest",
  );

  const wrongDigest = { ...report, workload_keyset_digest: "sha256:" + "00".repeat(32) };
  assert.equal(
    byName(await verifyReport(wrongDigest, { nonce: NONCE }))["report.workload_keyset_digest"].ok,
    false,
  );
});

Deno.test("report: a tampered or re-forged dev quote fails the quote binding", async () => {
  const { report } = makeReport(keys, NONCE);
  const att = report.attestation as { evidence: { quote: string } };
  const flipped = structuredClone(report);
  const q = att.evidence.quote;
  (flipped.attestation as { evidence: { quote: string } }).evidence.quote = q.slice(0, 60) +
    (q[60] === "0" ? "1" : "0") + q.slice(61);
  assert.equal(
    byName(await verifyReport(flipped, { nonce: NONCE }))["report.quote_report_data"].ok,
    false,
  );

  const forged = makeReport(keys, NONCE, { quote: () => devQuote(new Uint8Array(64)) }).report;
  const c = byName(await verifyReport(forged, { nonce: NONCE }));
  assert.equal(c["report.quote_report_data"].ok, false);
  assert.match(c["report.quote_report_data"].detail, /!= expected/);
});

Deno.test("report: TDX quotes (v4 and v5) are checked at their offsets; signature check is injected", async () => {
  for (const version of [4, 5] as const) {
    const { report } = makeReport(keys, NONCE, {
      teeType: "tdx",
      quote: (s) => fakeTdxQuote(s, version),
    });
    const unverified = byName(await verifyReport(report, { nonce: NONCE }));
    assert.ok(unverified["report.quote_report_data"].ok);
    assert.equal(unverified["report.hardware_evidence"].ok, false);
    assert.match(unverified["report.hardware_evidence"].detail, /no quote verifier/);

    let seen: Uint8Array | null = null;
    const c = byName(
      await verifyReport(report, {
        nonce: NONCE,
        quoteCheck: (_q, expected) => {
          seen = expected;
          return check("x", true, "signature chain ok (stub)");
        },
      }),
    );
    assert.ok(c["report.hardware_evidence"].ok);
    assert.match(c["report.hardware_evidence"].detail, new RegExp(`TDX quote v${version}`));
    // The injected verifier is told to expect report_data || 32 zero bytes.
    const statedRd = (report.attestation as { report_data: string }).report_data;
    assert.ok(seen !== null);
    assert.ok(bytesEqual(seen, hexToBytes(statedRd + "00".repeat(32))));
  }
  const { report } = makeReport(keys, NONCE, { teeType: "tdx", quote: (s) => fakeTdxQuote(s) });
  const thrown = byName(
    await verifyReport(report, {
      nonce: NONCE,
      quoteCheck: () => {
        throw new Error("PCK chain does not reach the Intel root");
      },
    }),
  );
  assert.equal(thrown["report.hardware_evidence"].ok, false);
  assert.match(thrown["report.hardware_evidence"].detail, /Intel root/);
});

Deno.test("report: tee_type must match the quote format; not_after needs a clock", async () => {
  const { report } = makeReport(keys, NONCE, { teeType: "sev_snp", quote: (s) => fakeTdxQuote(s) });
  const c = byName(
    await verifyReport(report, { nonce: NONCE, quoteCheck: () => check("x", true, "ok") }),
  );
  assert.equal(c["report.hardware_evidence"].ok, false);

  const fresh = makeReport(keys, NONCE, { notAfter: 1_000 }).report;
  assert.ok(
    byName(await verifyReport(fresh, { nonce: NONCE, now: () => 999_000 }))["report.not_after"].ok,
  );
  assert.equal(
    byName(await verifyReport(fresh, { nonce: NONCE, now: () => 1_000_000 }))["report.not_after"]
      .ok,
    false,
  );
  assert.equal(byName(await verifyReport(fresh, { nonce: NONCE }))["report.not_after"], undefined);
});

Deno.test("report: non-object input is a failed check, not a throw", async () => {
  const checks = await verifyReport("nope");
  assert.equal(checks.length, 1);
  assert.equal(checks[0].ok, false);
});
