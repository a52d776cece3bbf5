/**
 * The README's "Transparency log" section, followed as an auditor would:
 * every `sh` block of it runs in one bash, in order, against a real gateway,
 * with only the port (and where `npx -y deno@2.9.6` is: this Deno, with the
 * repository's deno.json) changed; the witness it starts runs in the
 * background until its cosignature is in. Each command's expected output is
 * checked: the signed checkpoint, the tiles and entries, a consistency
 * proof, the inclusion answer, the bundle passing offline and failing at
 * `--at 2031`, the monitor's verified checkpoint, and a witness cosignature.
 */
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { ROOT } from "./support/task_line.ts";
import { waitInclusion } from "./support/tlog_check.ts";

const README = await Deno.readTextFile(`${ROOT}README.md`);
const SECTION = README.slice(
  README.indexOf("## Transparency log"),
  README.indexOf("\n## ", README.indexOf("## Transparency log") + 3),
);
const BLOCKS = [...SECTION.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);

Deno.test("README Transparency log: every command runs as written and shows what it says", async () => {
  assert.ok(BLOCKS.length >= 5, "the section's command blocks");
  const gw = await startTestGateway();
  const dir = await Deno.makeTempDir();
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const witnessPort = (probe.addr as Deno.NetAddr).port;
  probe.close();
  try {
    const res = await fetch(`${gw.baseURL}/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
      body: JSON.stringify({ model: "demo/embed-small", input: "readme" }),
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const receiptId = res.headers.get("x-receipt-id")!;
    await waitInclusion(gw.url, receiptId, gw.apiKey, 30_000);

    let script = BLOCKS.join("\n")
      .replaceAll("http://127.0.0.1:8787", gw.url)
      .replaceAll("127.0.0.1:7380", `127.0.0.1:${witnessPort}`)
      .replaceAll(
        "npx -y deno@2.9.6 task",
        `"${Deno.execPath()}" task --config "${ROOT}deno.json"`,
      );
    // The witness runs until the end of the script: in the background, waited for.
    script = script.replace(
      /(--witness-name witness\.example\/w1)\n/,
      `$1 > witness.out 2>&1 &\nuntil grep -q listening witness.out; do sleep 0.2; done\n`,
    );
    assert.match(script, /witness\.out 2>&1 &/, "the witness command was found");
    script += "\nkill %1\nwait\ncat witness.out\n";
    await Deno.writeTextFile(`${dir}/readme.sh`, script);
    const out = await new Deno.Command("bash", {
      args: [`${dir}/readme.sh`],
      cwd: dir,
      // INIT_CWD: as a shell in `dir` would have it (this test may run under npx, which sets it).
      env: { KEY: gw.apiKey, RECEIPT_ID: receiptId, NO_COLOR: "1", INIT_CWD: dir },
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(240_000),
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.doesNotMatch(text, /command not found|No such file|error: /i, text);
    for (
      const expected of [
        /^dev\.gateway\.local\/v1\/aci\/log\n\d+\n\S+=\n\n— dev\.gateway\.local\/v1\/aci\/log \S+\n/m,
        /^00000000: [0-9a-f ]{39} /m,
        /"keyset_diges/,
        /\{"proof":\["/,
        /\{"origin":"dev\.gateway\.local\/v1\/aci\/log","leaf_index":\d+,"tree_size":\d+,/,
        /RESULT: all \d+ checks passed/,
        /FAIL report\.not_after/,
        /checkpoint dev\.gateway\.local\/v1\/aci\/log size \d+ root \S+ signed by [0-9a-f]{8}/,
        /witness witness\.example\/w1 listening on http:\/\/127\.0\.0\.1:\d+; cosigner vkey witness\.example\/w1\+[0-9a-f]{8}\+\S+/,
        /^— witness\.example\/w1 [A-Za-z0-9+/]{100,}=*$/m,
      ]
    ) assert.match(text, expected, text);
    // The bundle the README saves is in the auditor's directory, not the repository.
    const bundle = JSON.parse(await Deno.readTextFile(`${dir}/receipt.aci-bundle.json`));
    assert.match(
      bundle.collateral.reports[bundle.report.workload_keyset_digest].none,
      /^development/,
    );
  } finally {
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});
