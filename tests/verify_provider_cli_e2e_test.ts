/**
 * `task verify --kind near-ai` as an auditor runs it: `deno.json`'s own
 * `verify` task on NEAR AI's recorded report (tests/fixtures/near-ai), at the
 * instant its collateral covers. The model CVM's quote passes; the gateway
 * CVM's fails at collateral (none recorded for its FMSPC), as its PROVENANCE
 * says, and so the command exits 1.
 */
import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);

Deno.test("task verify --kind near-ai: one line per check on the recorded report, exit 1 on the stated failure", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "task",
      "--quiet",
      "verify",
      "--kind",
      "near-ai",
      "--evidence",
      "tests/fixtures/near-ai/nearai_cloud_report_openai_gpt_oss_120b.json",
      "--collateral",
      "tests/fixtures/tdx/dcap-qvl-tdx_quote_outdated_collateral.json",
      "--at",
      "2026-03-15T00:00:00Z",
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
  const line = (name: string) => lines.find((l) => l.split(" ")[1] === name) ?? "";
  assert.match(line("model[0].tdx_quote"), /^PASS .*TCB UpToDate/);
  assert.match(line("model[0].event_log"), /^PASS .*replay to RTMR0-3/);
  assert.match(line("gateway.event_log"), /^PASS/);
  assert.match(line("gateway.tdx_quote"), /^FAIL .*collateral/);
  assert.equal(out.code, 1, lines.join("\n"));
});
