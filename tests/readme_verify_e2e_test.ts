/**
 * Every `task verify` example in README.md runs as written (#20 item 10),
 * after the README's own curl example, from a directory other than the
 * repository root: inside the repository, and outside it with `--config`.
 * Only the port differs (tests never bind 8787). Relative paths must resolve
 * against where the command was run, and the API key must not appear on the
 * command line `deno task` echoes.
 */
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { ROOT } from "./support/task_line.ts";

const README_ALL = await Deno.readTextFile(`${ROOT}README.md`);
// The "Transparency log" section's commands need its own earlier steps (the bundle's curl) and
// show a FAIL on purpose (`--at 2031`): tests/readme_tlog_e2e_test.ts runs that section.
const TLOG_START = README_ALL.indexOf("## Transparency log");
const TLOG_END = README_ALL.indexOf("\n## ", TLOG_START + 3);
const README = TLOG_START < 0
  ? README_ALL
  : README_ALL.slice(0, TLOG_START) + (TLOG_END < 0 ? "" : README_ALL.slice(TLOG_END));
const SH_BLOCKS = [...README.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
const CURL_BLOCK = SH_BLOCKS.find((b) => b.includes("> request.json"));
const VERIFY_BLOCKS = SH_BLOCKS.filter((b) => /task verify/.test(b));

async function runExamples(cwd: string, origin: string, key: string, outside: boolean) {
  const blocks = VERIFY_BLOCKS.map((b) =>
    outside ? b.replaceAll("task verify", `task --config ${ROOT}deno.json verify`) : b
  );
  const script = [
    "set -u",
    CURL_BLOCK!,
    ...blocks.map((b, i) => `${b}\necho "README-EXAMPLE ${i} EXIT $?"`),
  ].join("\n").replaceAll("http://127.0.0.1:8787", origin);
  const out = await new Deno.Command("bash", {
    args: ["-c", script],
    cwd,
    env: { KEY: key, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(120_000),
  }).output();
  return {
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

Deno.test("README: every task verify example passes as written, from another directory", async () => {
  assert.ok(CURL_BLOCK, "the README's curl example");
  assert.ok(VERIFY_BLOCKS.length >= 3, "the README's task verify examples");
  for (const b of VERIFY_BLOCKS) {
    assert.doesNotMatch(b.replace(/#.*$/gm, ""), /--api-key\b(?!-file)/);
  }
  const gw = await startTestGateway();
  const inside = await Deno.makeTempDir({ dir: `${ROOT}.data`, prefix: "readme-verify-" })
    .catch(async () => {
      await Deno.mkdir(`${ROOT}.data`, { recursive: true });
      return await Deno.makeTempDir({ dir: `${ROOT}.data`, prefix: "readme-verify-" });
    });
  const outside = await Deno.makeTempDir({ prefix: "readme-verify-" });
  try {
    for (const [cwd, isOutside] of [[inside, false], [outside, true]] as const) {
      const { stdout, stderr } = await runExamples(cwd, gw.url, gw.apiKey, isOutside);
      const where = `${isOutside ? "outside" : "inside"} the repository:\n${stdout}\n${stderr}`;
      for (let i = 0; i < VERIFY_BLOCKS.length; i++) {
        assert.match(stdout, new RegExp(`README-EXAMPLE ${i} EXIT 0\\b`), where);
      }
      assert.doesNotMatch(stdout, /^FAIL /m, where);
      assert.match(stdout, /^PASS receipt\.request_body_hash/m, where);
      assert.match(stdout, /^PASS receipt\.response_body_hash/m, where);
      // The archived-keyset example: fetched without a nonce, and said so.
      assert.match(stdout, /^NOTE archived report/m, where);
      assert.ok(!`${stdout}\n${stderr}`.includes(gw.apiKey), "the key is never echoed");
    }
  } finally {
    await gw.close();
    await Deno.remove(inside, { recursive: true });
    await Deno.remove(outside, { recursive: true });
  }
});
