/**
 * `deno task start` on a machine like a TEE guest (#20 item 1): the exact
 * command line of deno.json's `start` task, with `quote_provider` auto/dev/
 * configfs. Deno 2.9 refuses any path under /sys without --allow-all, which
 * used to make `auto` die even with dev quotes allowed; the configfs-tsm case
 * runs against a FUSE imitation that behaves like the kernel interface.
 */
import assert from "node:assert/strict";
import canonicalize from "canonicalize";
import { createHash } from "node:crypto";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { baseConfig, writeConfig } from "./support/process.ts";
import { runToEnd, spawnListening, taskArgs } from "./support/task_line.ts";
import { mountFuseTsm } from "./support/configfs_fuse.ts";

const START = await taskArgs("start");
const unhex = (s: string) => Uint8Array.from(s.match(/../g)!.map((h) => parseInt(h, 16)));
const sha256 = (b: Uint8Array | string) => createHash("sha256").update(b).digest();

async function configWith(identity: Record<string, unknown>, dir: string): Promise<string> {
  const up = `http://127.0.0.1:9`; // never called: these tests only start and read reports
  return await writeConfig(dir, {
    ...baseConfig({ upstreamUrl: up, storePath: `${dir}/gw.kv` }),
    identity,
  });
}

Deno.test("start task: auto + allow_dev_quotes on a machine without configfs-tsm serves dev quotes", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const cfg = await configWith({ quote_provider: "auto", allow_dev_quotes: true }, dir);
    const gw = await spawnListening(Deno.execPath(), [...START, "--config", cfg]);
    try {
      const r = await fetch(`${gw.url}/v1/aci/attestation`);
      assert.equal(r.status, 200);
      assert.equal((await r.json()).attestation.tee_type, "dev-insecure-no-tee");
    } finally {
      assert.equal((await gw.stop()).code, 0);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start task: auto without allow_dev_quotes, and dev without it, exit non-zero with one line", async () => {
  const dir = await Deno.makeTempDir();
  try {
    for (const mode of ["auto", "dev"]) {
      const cfg = await configWith({ quote_provider: mode }, dir);
      const out = await runToEnd(Deno.execPath(), [...START, "--config", cfg]);
      assert.equal(out.code, 2, out.stderr.join("\n"));
      assert.equal(out.stderr.length, 1, out.stderr.join("\n"));
      assert.match(out.stderr[0], /allow_dev_quotes: true/);
      if (mode === "auto") assert.match(out.stderr[0], /\/sys\/kernel\/config\/tsm\/report/);
      assert.doesNotMatch(out.stderr[0], /\bat .*:\d+:\d+/); // no stack
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start task: configfs-tsm (FUSE imitation) serves real-format TDX quotes binding the statement", async () => {
  const dir = await Deno.makeTempDir();
  const mount = `${dir}/tsm-report`;
  await Deno.mkdir(mount);
  const fuse = await mountFuseTsm(mount, "tdx_guest");
  try {
    const upstream = await startDemoUpstream({ name: "plain" });
    for (const mode of ["auto", "configfs"]) {
      const cfg = await writeConfig(dir, {
        ...baseConfig({ upstreamUrl: upstream.url, storePath: `${dir}/gw-${mode}.kv` }),
        identity: { quote_provider: mode, configfs_root: mount },
      });
      const gw = await spawnListening(Deno.execPath(), [...START, "--config", cfg]);
      try {
        const nonce = "ab".repeat(32);
        const r = await fetch(`${gw.url}/v1/aci/attestation?nonce=${nonce}`);
        const report = await r.json();
        assert.equal(r.status, 200, JSON.stringify(report));
        assert.equal(report.attestation.tee_type, "tdx");
        assert.equal(report.attestation.evidence.hardware, true);
        const digest = "sha256:" +
          sha256(canonicalize(report.attestation.workload_keyset)!).toString("hex");
        const rd = sha256(
          `{"keyset_digest":"${digest}","nonce":"${nonce}","purpose":"aci.report_data.v1"}`,
        );
        const quote = unhex(report.attestation.evidence.quote);
        const view = new DataView(quote.buffer);
        assert.equal(view.getUint16(0, true), 4); // TDX quote v4
        assert.equal(view.getUint32(4, true), 0x81); // TEE type TDX
        assert.deepEqual(quote.subarray(568, 600), new Uint8Array(rd));
        assert.deepEqual(quote.subarray(600, 632), new Uint8Array(32));
        assert.ok(!gw.stderr.some((l) => /no TEE in use/.test(l)), gw.stderr.join("\n"));
      } finally {
        assert.equal((await gw.stop()).code, 0);
      }
    }
    await upstream.close();
  } finally {
    await fuse.unmount();
    await Deno.remove(dir, { recursive: true });
  }
});
