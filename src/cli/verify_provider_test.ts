import assert from "node:assert/strict";
import { runProviderVerify } from "./verify_provider.ts";

// The real recorded evidence of tests/fixtures (near-ai/, tinfoil-conformance/, tinfoil-real/),
// judged at the instants their PROVENANCE states.
const FX = new URL("../../tests/fixtures/", import.meta.url).pathname;

async function run(args: string[]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await runProviderVerify(args, {
    readFile: (p) => Deno.readFile(p),
    print: (l) => lines.push(l),
    now: () => Date.parse("2026-11-25T00:00:00Z"),
  });
  return { code, lines };
}

const line = (lines: string[], name: string) => lines.find((l) => l.split(" ")[1] === name) ?? "";

Deno.test("verify --kind near-ai: the real report at its collateral's instant", async () => {
  const { code, lines } = await run([
    "--kind=near-ai",
    `--evidence=${FX}near-ai/nearai_cloud_report_openai_gpt_oss_120b.json`,
    "--nonce=deadbeef00000000000000000000000000000000000000000000000000000001",
    `--collateral=${FX}tdx/dcap-qvl-tdx_quote_outdated_collateral.json`,
    "--at=2026-03-15T00:00:00Z",
  ]);
  // The model CVM passes every check; the gateway CVM has no recorded collateral (PROVENANCE).
  for (const n of ["tdx_quote", "report_data", "event_log", "compose_hash", "signing_address"]) {
    assert.match(line(lines, `model[0].${n}`), /^PASS/, n);
  }
  assert.match(line(lines, "gateway.tdx_quote"), /^FAIL .*collateral/);
  assert.match(line(lines, "gateway.report_data"), /^PASS/);
  assert.equal(code, 1);
  // Judged today, the model's collateral has expired.
  const today = await run([
    "--kind=near-ai",
    `--evidence=${FX}near-ai/nearai_cloud_report_openai_gpt_oss_120b.json`,
    "--nonce=deadbeef00000000000000000000000000000000000000000000000000000001",
    `--collateral=${FX}tdx/dcap-qvl-tdx_quote_outdated_collateral.json`,
  ]);
  assert.match(line(today.lines, "model[0].tdx_quote"), /^FAIL/);
});

Deno.test("verify --kind tinfoil: Tinfoil's real SEV-SNP bundle against its Sigstore release", async () => {
  const root = await Deno.makeTempFile({ suffix: ".json" });
  try {
    const input = JSON.parse(
      await Deno.readTextFile(
        `${FX}tinfoil-conformance/sigstore/001-happy-path-snp-tdx-multiplatform/input.json`,
      ),
    );
    await Deno.writeTextFile(root, atob(input.trust_root_b64));
    const args = [
      "--kind=tinfoil",
      `--evidence=${FX}tinfoil-conformance/attestation-sev/_assets/real_genoa_bundle.json`,
      `--ask-ark=${FX}sev-snp/amd-ask-ark-genoa.pem`,
      `--trusted-root=${root}`,
      "--at=2026-02-01T00:00:00Z",
    ];
    const ok = await run([...args, "--repo=tinfoilsh/confidential-model-router"]);
    assert.equal(ok.code, 0, ok.lines.join("\n"));
    assert.deepEqual(ok.lines.map((l) => l.split(" ").slice(0, 2).join(" ")), [
      "PASS tinfoil.snp_report",
      "PASS tinfoil.snp_debug",
      "PASS tinfoil.tls_binding",
      "PASS tinfoil.hpke_key",
      "PASS tinfoil.release",
      "PASS tinfoil.measurement",
      "RESULT: all",
    ]);
    assert.equal(ok.lines.at(-1), "RESULT: all 6 checks passed");
    const other = await run([...args, "--repo=tinfoilsh/other"]);
    assert.equal(other.code, 1);
    assert.match(other.lines.at(-1)!, /^RESULT: [1-9]\d* of \d+ checks failed$/);
    assert.match(line(other.lines, "tinfoil.release"), /WORKFLOW_REPOSITORY_MISMATCH/);
  } finally {
    await Deno.remove(root);
  }
});

Deno.test("verify --kind: usage errors exit 2", async () => {
  assert.equal((await run(["--kind=nope", "--evidence=x"])).code, 2);
  assert.equal((await run(["--kind=near-ai"])).code, 2);
  assert.equal((await run(["--bogus"])).code, 2);
});
