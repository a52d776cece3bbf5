import assert from "node:assert/strict";
import { sha256Prefixed } from "../../aci/digest.ts";
import type { AttestationOutcome, SessionDocument } from "../types.ts";
import { forgeSnpEnvironment } from "../../../tests/support/snp_forge.ts";
import { startFakeKds, startSnpUpstream } from "../../../tests/support/snp_upstream.ts";
import { makeTestCa } from "../../../tests/support/tls_servers.ts";
import { LocalCollateralSource } from "../../verify/tdx/collateral_source.ts";
import { kdsVcekSource, localVcekSource } from "../../verify/sev_snp/vcek_source.ts";
import type { SnpTrust } from "../../verify/sev_snp/trust.ts";
import { splitAskArkPem } from "../../verify/sev_snp/verify_report.ts";
import { SEV_SNP_ATTESTER_ID, sevSnpAttester, snpReportData } from "./sev_snp.ts";
import { decodeEvidence, targetFor, testDeps } from "./testing.ts";

const NOW = Date.now();
const NOW_S = Math.floor(NOW / 1000);
const forge = await forgeSnpEnvironment({ at: NOW, vcekDays: 30 });
const ca = await makeTestCa();
const collateral = new LocalCollateralSource();
const forgedTrust: SnpTrust = {
  roots: [{ product: "Milan", askDer: forge.askDer, arkDer: forge.arkDer }],
  vcek: localVcekSource([forge.vcekDer]),
};
const deps = (trust: SnpTrust | null = forgedTrust, now = NOW) =>
  testDeps(now, { collateral }, trust ?? undefined);

type Policy = Parameters<typeof targetFor>[1]["sev_snp"];
const target = (url: string, sev_snp?: Policy) =>
  targetFor(url, { verifier: "sev-snp", tls_ca_pem: ca.certPem, ...(sev_snp ? { sev_snp } : {}) });

function docOf(o: AttestationOutcome): SessionDocument {
  if (!o.ok) throw new assert.AssertionError({ message: `verification failed: ${o.reason}` });
  return o.document;
}
function reasonOf(o: AttestationOutcome): string {
  assert.equal(o.ok, false, "verification should fail");
  return o.ok ? "" : o.reason;
}

const FIX = new URL("../../../tests/fixtures/sev-snp/", import.meta.url);
const realReport = Deno.readFileSync(new URL("go-sev-guest-attestation.bin", FIX));
const realVcek = Deno.readFileSync(new URL("go-sev-guest-vcek.der", FIX));
function realRoot(product: "Milan" | "Genoa") {
  const s = splitAskArkPem(
    Deno.readTextFileSync(new URL(`amd-ask-ark-${product.toLowerCase()}.pem`, FIX)),
  );
  if (!s.ok) throw new Error(s.reason);
  return { product, askDer: s.askDer, arkDer: s.arkDer };
}

Deno.test("sev-snp: a forged-root SNP upstream binding its TLS key and the nonce verifies", async () => {
  const up = await startSnpUpstream({ forge, ca });
  try {
    const doc = docOf(await sevSnpAttester.verify(target(up.url), deps()));
    assert.equal(doc.verifier_id, SEV_SNP_ATTESTER_ID);
    assert.equal(doc.endpoint, up.url);
    assert.deepEqual(doc.channel_binding, [
      { type: "tls_spki_sha256", origin: up.url, spki_sha256: up.spkiSha256 },
    ]);
    assert.equal(doc.established_at, NOW_S);
    assert.equal(doc.expires_at, NOW_S + 3600);
    assert.deepEqual(doc.claims.tee_attested, {
      status: "asserted",
      source: "hardware_proven",
      reason: "SEV-SNP report v2 signed by a VCEK chained to the pinned AMD ARK (Milan); " +
        "REPORT_DATA binds the observed TLS key and a fresh nonce",
    });
    // No operator policy: TCB and measurement are not judged.
    assert.deepEqual(doc.claims.tcb_up_to_date, { status: "unknown" });
    assert.deepEqual(doc.claims.os_known_good, { status: "unknown" });
    assert.deepEqual(doc.identity, { measurement: "11".repeat(48), host_data: "00".repeat(32) });
    const ev = decodeEvidence(doc);
    assert.equal(ev.mediaType, "application/octet-stream");
    assert.equal(ev.bytes.length, 1184);
    assert.equal(doc.evidence.digest, sha256Prefixed(ev.bytes));
    // The evidence is the report itself: its REPORT_DATA binds the key; its nonce half is fresh.
    const rd = ev.bytes.subarray(0x50, 0x90);
    const nonce = Array.from(rd.subarray(32), (b) => b.toString(16).padStart(2, "0")).join("");
    assert.deepEqual(rd, snpReportData(up.spkiSha256, nonce));
    const extra = doc.claims.extra?.snp_report as Record<string, unknown>;
    assert.equal(extra.product, "Milan");
    assert.equal(extra.policy, "0x30000");
    assert.deepEqual(extra.reported_tcb, forge.tcb);
    // Each verification asks with a new nonce.
    docOf(await sevSnpAttester.verify(target(up.url), deps()));
    assert.equal(up.attestationRequests(), 2);
  } finally {
    await up.close();
  }
});

Deno.test("sev-snp: TCB minimum and measurement allow-list become claims", async () => {
  const up = await startSnpUpstream({ forge, ca });
  try {
    const t = forge.tcb;
    const ok = docOf(
      await sevSnpAttester.verify(
        target(up.url, { allowed_measurements: ["11".repeat(48)], min_tcb: t }),
        deps(),
      ),
    );
    assert.equal(ok.claims.tcb_up_to_date.status, "asserted");
    assert.equal(ok.claims.os_known_good.status, "asserted");
    const low = docOf(
      await sevSnpAttester.verify(
        target(up.url, {
          allowed_measurements: ["22".repeat(48)],
          min_tcb: { ...t, snp: t.snp + 1 },
        }),
        deps(),
      ),
    );
    assert.deepEqual(low.claims.tcb_up_to_date, {
      status: "refuted",
      source: "verifier_derived",
      reason: `REPORTED_TCB bootloader=3 tee=0 snp=8 microcode=115; ` +
        `minimum bootloader=3 tee=0 snp=9 microcode=115; below in snp`,
    });
    assert.equal(low.claims.os_known_good.status, "refuted");
  } finally {
    await up.close();
  }
});

Deno.test("sev-snp: another TLS key, a stale nonce, a debug policy, another root or expiry fail", async () => {
  const other = await startSnpUpstream({ forge, ca, bindSpki: false });
  try {
    assert.match(
      reasonOf(await sevSnpAttester.verify(target(other.url), deps())),
      /^SNP REPORT_DATA does not bind the observed TLS key and the fresh nonce/,
    );
  } finally {
    await other.close();
  }
  const stale = await startSnpUpstream({
    forge,
    ca,
    fixedReport: forge.mintReport(new Uint8Array(64).fill(1)),
  });
  try {
    assert.match(
      reasonOf(await sevSnpAttester.verify(target(stale.url), deps())),
      /REPORT_DATA does not bind/,
    );
  } finally {
    await stale.close();
  }
  const debug = await startSnpUpstream({ forge, ca, mint: { policy: 0x30000n | (1n << 19n) } });
  try {
    assert.equal(
      reasonOf(await sevSnpAttester.verify(target(debug.url), deps())),
      "SNP guest policy allows debugging (POLICY bit 19): memory is not private",
    );
  } finally {
    await debug.close();
  }
  const up = await startSnpUpstream({ forge, ca });
  try {
    const stranger = await forgeSnpEnvironment({ at: NOW });
    const wrongRoot: SnpTrust = {
      roots: [{ product: "Genoa", askDer: stranger.askDer, arkDer: stranger.arkDer }],
      vcek: forgedTrust.vcek,
    };
    assert.equal(
      reasonOf(await sevSnpAttester.verify(target(up.url), deps(wrongRoot))),
      'SNP report rejected: Genoa: VCEK chain: "SEV-VCEK" is not signed by "SEV-Forged"',
    );
    assert.equal(
      reasonOf(await sevSnpAttester.verify(target(up.url), deps(null))),
      "no AMD roots are pinned (trust.sev_snp.roots)",
    );
    const noVcek: SnpTrust = { ...forgedTrust, vcek: localVcekSource([], "vceks/") };
    assert.match(
      reasonOf(await sevSnpAttester.verify(target(up.url), deps(noVcek))),
      /^SNP report rejected: Milan: no VCEK in vceks\/ matches CHIP_ID 5a5a5a5a5a5a5a5a…/,
    );
    assert.match(
      reasonOf(
        await sevSnpAttester.verify(target(up.url), deps(forgedTrust, NOW + 31 * 86_400_000)),
      ),
      /certificate "SEV-VCEK" expired/,
    );
  } finally {
    await up.close();
  }
});

Deno.test("sev-snp: the real go-sev-guest report chains to the real Milan ARK, then fails the binding", async () => {
  // The sample's REPORT_DATA is 0102030405…, so it cannot bind this channel: the verifier must
  // accept the real AMD chain and signature, and refuse at the binding, never earlier or later.
  // Verified as of a fixed day inside the real VCEK's validity (it expires in 2029).
  const REAL_AT = Date.parse("2024-01-01T00:00:00Z");
  const up = await startSnpUpstream({ forge, ca, fixedReport: realReport });
  try {
    const milan: SnpTrust = { roots: [realRoot("Milan")], vcek: localVcekSource([realVcek]) };
    assert.match(
      reasonOf(await sevSnpAttester.verify(target(up.url), deps(milan, REAL_AT))),
      /^SNP REPORT_DATA does not bind the observed TLS key/,
    );
    // Genoa first, Milan second: the Genoa attempt fails, the Milan one succeeds.
    const both: SnpTrust = { ...milan, roots: [realRoot("Genoa"), realRoot("Milan")] };
    assert.match(
      reasonOf(await sevSnpAttester.verify(target(up.url), deps(both, REAL_AT))),
      /^SNP REPORT_DATA does not bind/,
    );
    const genoa: SnpTrust = { ...milan, roots: [realRoot("Genoa")] };
    // The Milan VCEK names its product: it is not even tried under the Genoa root.
    assert.match(
      reasonOf(await sevSnpAttester.verify(target(up.url), deps(genoa, REAL_AT))),
      /^SNP report rejected: Genoa: no VCEK in the VCEK directory matches CHIP_ID [0-9a-f]{16}… at the report's REPORTED_TCB for Genoa$/,
    );
    // The forged VCEK names another chip: it is not picked for the real report.
    const wrongVcek: SnpTrust = { ...milan, vcek: localVcekSource([forge.vcekDer]) };
    assert.match(
      reasonOf(await sevSnpAttester.verify(target(up.url), deps(wrongVcek, REAL_AT))),
      /Milan: no VCEK in the VCEK directory matches CHIP_ID/,
    );
  } finally {
    await up.close();
  }
});

Deno.test("sev-snp: VCEKs come from the KDS by chip and TCB, fetched once and cached", async () => {
  const kds = startFakeKds(forge.vcekDer);
  const up = await startSnpUpstream({ forge, ca });
  try {
    const trust: SnpTrust = {
      roots: forgedTrust.roots,
      vcek: kdsVcekSource({ baseUrl: kds.url + "/", fetch: (u) => fetch(u) }),
    };
    docOf(await sevSnpAttester.verify(target(up.url), deps(trust)));
    docOf(await sevSnpAttester.verify(target(up.url), deps(trust)));
    const t = forge.tcb;
    assert.deepEqual(kds.requests, [
      `/vcek/v1/Milan/${"5a".repeat(64)}?blSPL=${t.bootloader}&teeSPL=${t.tee}` +
      `&snpSPL=${t.snp}&ucodeSPL=${t.microcode}`,
    ]);
  } finally {
    await up.close();
    await kds.close();
  }
});
