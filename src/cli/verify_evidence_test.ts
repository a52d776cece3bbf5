import assert from "node:assert/strict";
import { runVerify, type VerifyDeps } from "./verify.ts";
import { collateralFromDcapQvlJson } from "../verify/tdx/collateral.ts";
import { defaultGpuDeps } from "../verify/nvidia/deps.ts";
import { snpRootsFromPem } from "../verify/sev_snp/trust.ts";
import { localVcekSource } from "../verify/sev_snp/vcek_source.ts";

const REAL = new URL("../../tests/fixtures/real/", import.meta.url);
const path = (p: string) => new URL(p, REAL).pathname;

function deps(lines: string[]): VerifyDeps {
  const c = collateralFromDcapQvlJson(
    JSON.parse(Deno.readTextFileSync(path("collateral/tinfoil-2026-01-12_90c06f000000.json"))),
  );
  if (!c.ok) throw new Error(c.reason);
  const collateral = c.collateral;
  const roots = snpRootsFromPem(
    Deno.readTextFileSync(path("google/go-sev-guest-ask_ark_milan.pem")) +
      Deno.readTextFileSync(path("google/go-sev-guest-ask_ark_turin_vcek.pem")),
  );
  if (!roots.ok) throw new Error(roots.reason);
  const turinVcek = Uint8Array.from(
    atob(Deno.readTextFileSync(path("tinfoil/box2_turin_vcek.b64")).trim()),
    (ch) => ch.charCodeAt(0),
  );
  return {
    fetch: () => Promise.reject(new Error("offline")),
    readFile: (p) => Deno.readFile(p),
    print: (l) => lines.push(l),
    randomBytes: (n) => new Uint8Array(n),
    now: () => Date.parse("2030-01-01T00:00:00Z"),
    trust: {
      tdxSource: { get: () => Promise.resolve(collateral) },
      snpRoots: roots.roots,
      snpVcek: localVcekSource([turinVcek]),
      gpu: defaultGpuDeps(),
    },
  };
}

Deno.test("verify --evidence --kind dstack: each check printed; --at judges at the recorded instant", async () => {
  const lines: string[] = [];
  const args = ["--evidence", path("dstack/quote-report.json"), "--kind", "dstack"];
  assert.equal(await runVerify([...args, "--at", "2026-01-20T00:00:00Z"], deps(lines)), 0);
  assert.ok(lines.includes("NOTE judged at 2026-01-20T00:00:00.000Z"));
  assert.ok(lines.some((l) => /^PASS tdx\.tcb — TCB status UpToDate/.test(l)));
  assert.ok(lines.some((l) => /^PASS dstack\.event_log — 28 events \(classic format\)/.test(l)));
  assert.equal(lines.at(-1), "RESULT: all 10 checks passed");
  // Without --at it is judged now (2030 here): the collateral has long expired.
  const late: string[] = [];
  assert.equal(await runVerify(args, deps(late)), 1);
  assert.ok(late.some((l) => /^FAIL tdx\.pck_chain — .*expired/.test(l)), late.join("\n"));
});

Deno.test("verify --evidence --kind sev-snp: a Turin v5 report with its VCEK under the Turin ARK", async () => {
  const lines: string[] = [];
  const code = await runVerify([
    "--evidence",
    path("tinfoil/box2_turin_report.b64"),
    "--kind",
    "sev-snp",
    "--at",
    "2026-09-01T00:00:00Z",
  ], deps(lines));
  assert.equal(code, 0, lines.join("\n"));
  assert.ok(lines.includes("PASS snp.reported_tcb — fmc=1 bootloader=1 tee=1 snp=4 microcode=82"));
});

Deno.test("verify --evidence: usage errors for an unknown kind, a missing kind and a bad --tcb-accept", async () => {
  for (
    const [args, want] of [
      [["--evidence", "x", "--kind", "nope"], /--kind "nope" is not one of dstack, sev-snp, tdx/],
      [["--evidence", "x"], /--evidence needs --kind/],
      [["--evidence", "x", "--kind", "tdx", "--tcb-accept", "Revoked"], /--tcb-accept: "Revoked"/],
      [["--report", "r.json", "--kind", "tdx"], /--kind applies to --evidence/],
    ] as const
  ) {
    const lines: string[] = [];
    assert.equal(await runVerify([...args], deps(lines)), 2);
    assert.match(lines[0], want);
  }
});
