/**
 * `task verify --report` for a gateway running in an SEV-SNP VM: the report's
 * evidence is a raw SNP report (tee_type `sev_snp`) whose REPORT_DATA slot
 * binds the keyset and nonce; the command verifies it through the VCEK chain
 * to a pinned ARK (forged test roots here, with the VCEK from `--vcek` or a
 * KDS), and `--at` judges the whole report at the recorded instant.
 */
import assert from "node:assert/strict";
import { runVerify, type VerifyDeps } from "../src/cli/verify.ts";
import { generateWorkloadKeys } from "../src/aci/signer.ts";
import { makeReport } from "../src/verify/dev_report_fixture.ts";
import { defaultGpuDeps } from "../src/verify/nvidia/deps.ts";
import { localVcekSource } from "../src/verify/sev_snp/vcek_source.ts";
import { forgeSnpEnvironment, type SnpForge } from "./support/snp_forge.ts";

const NONCE = "cd".repeat(32);
const AT = Date.parse("2026-06-01T00:00:00Z");
const DAY = 86_400_000;

function deps(forge: SnpForge, files: Record<string, Uint8Array>, lines: string[]): VerifyDeps {
  return {
    fetch: () => Promise.reject(new Error("offline")),
    readFile: (p) => files[p] ? Promise.resolve(files[p]) : Promise.reject(new Error("no file")),
    print: (l) => lines.push(l),
    randomBytes: (n) => new Uint8Array(n),
    // "Now" is two years after the VCEK expired: only --at can judge the report.
    now: () => AT + 730 * DAY,
    trust: {
      tdxSource: { get: () => Promise.reject(new Error("no TDX collateral")) },
      snpRoots: [{ product: "Genoa", askDer: forge.askDer, arkDer: forge.arkDer }],
      snpVcek: localVcekSource([forge.vcekDer]),
      gpu: defaultGpuDeps(),
    },
  };
}

Deno.test("verify --report: an SEV-SNP gateway's report verifies through its VCEK chain, at --at", async () => {
  const forge = await forgeSnpEnvironment({ at: AT, product: "Genoa", vcekDays: 365 });
  const { report } = makeReport(generateWorkloadKeys(), NONCE, {
    teeType: "sev_snp",
    quote: (slot) => forge.mintReport(slot),
  });
  const files = { "report.json": new TextEncoder().encode(JSON.stringify(report)) };
  const args = ["--report", "report.json", "--nonce", NONCE];

  const lines: string[] = [];
  assert.equal(
    await runVerify([...args, "--at", "2026-06-02T00:00:00Z"], deps(forge, files, lines)),
    0,
    lines.join("\n"),
  );
  assert.ok(
    lines.some((l) =>
      /^PASS report\.hardware_evidence — SEV-SNP report v3: SEV-SNP report v3 signed by a VCEK chained to the pinned Genoa ARK$/
        .test(l)
    ),
    lines.join("\n"),
  );

  // Judged now, the VCEK has expired: the hardware check fails, precisely.
  const late: string[] = [];
  assert.equal(await runVerify(args, deps(forge, files, late)), 1);
  assert.ok(
    late.some((l) => /^FAIL report\.hardware_evidence — .*"SEV-VCEK" expired/.test(l)),
    late.join("\n"),
  );

  // Another chip's report (the forge's other VCEK is not for it) fails at the VCEK lookup.
  const other = await forgeSnpEnvironment({
    at: AT,
    product: "Genoa",
    chipId: new Uint8Array(64).fill(7),
  });
  const { report: foreign } = makeReport(generateWorkloadKeys(), NONCE, {
    teeType: "sev_snp",
    quote: (slot) => other.mintReport(slot),
  });
  const f2 = { "report.json": new TextEncoder().encode(JSON.stringify(foreign)) };
  const miss: string[] = [];
  assert.equal(
    await runVerify([...args, "--at", "2026-06-02T00:00:00Z"], deps(forge, f2, miss)),
    1,
  );
  assert.ok(
    miss.some((l) =>
      /^FAIL report\.hardware_evidence — .*no VCEK in the VCEK directory matches/.test(l)
    ),
    miss.join("\n"),
  );
});
