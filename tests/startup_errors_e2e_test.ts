/**
 * Start-up and CLI errors are one line naming what and where, exit code 2,
 * no stack (#20 item 7), with the task's own command lines; an unset
 * `api_key_env` stops start-up naming the variable (omit it for a credential-less provider).
 */
import assert from "node:assert/strict";
import { baseConfig, writeConfig } from "./support/process.ts";
import { runToEnd, spawnListening, taskArgs } from "./support/task_line.ts";

const START = await taskArgs("start");
const VERIFY = await taskArgs("verify");
const STACK = /^\s+at |error: Uncaught|Stack backtrace/m;

function config(dir: string, extra: Record<string, unknown> = {}) {
  const base = baseConfig({ upstreamUrl: "http://127.0.0.1:9", storePath: `${dir}/gw.kv` });
  return { ...base, ...extra };
}

/** The one error line (after the dev-quote warning, which start-up prints first). */
function oneError(out: { code: number; stderr: string[] }): string {
  assert.equal(out.code, 2, out.stderr.join("\n"));
  const text = out.stderr.join("\n");
  assert.doesNotMatch(text, STACK, text);
  const lines = out.stderr.filter((l) => !l.startsWith("WARNING: no TEE in use"));
  assert.equal(lines.length, 1, text);
  return lines[0];
}

Deno.test("start task: a port in use is one line naming the listener and the address", async () => {
  const dir = await Deno.makeTempDir();
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (taken.addr as Deno.NetAddr).port;
    const cfg = await writeConfig(
      dir,
      config(dir, { listen: { base: { hostname: "127.0.0.1", port } } }),
    );
    const line = oneError(await runToEnd(Deno.execPath(), [...START, "--config", cfg]));
    assert.equal(
      line,
      `listen.base: cannot listen on 127.0.0.1:${port}: address already in use`,
    );
  } finally {
    taken.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start task: a missing TLS file is one line with the config file, the field and the file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const cert = `${dir}/missing-cert.pem`;
    const cfg = await writeConfig(
      dir,
      config(dir, {
        listen: {
          base: { hostname: "127.0.0.1", port: 0 },
          tee: { port: 0, tls_cert_file: cert, tls_key_file: `${dir}/key.pem` },
        },
      }),
    );
    const line = oneError(await runToEnd(Deno.execPath(), [...START, "--config", cfg]));
    assert.equal(line, `${cfg}: listen.tee.tls_cert_file: cannot read ${cert}: no such file`);

    const half = await writeConfig(
      dir,
      config(dir, { listen: { base: { port: 0, tls_key_file: `${dir}/key.pem` } } }),
    );
    const halfLine = oneError(await runToEnd(Deno.execPath(), [...START, "--config", half]));
    assert.equal(halfLine, `${half}: listen.base: tls_cert_file and tls_key_file go together`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("verify task: a missing --collateral file is one line naming the flag and the file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const out = await runToEnd(
      Deno.execPath(),
      [...VERIFY, "--collateral", "no-such-collateral.json", "--report", "r.json"],
      { env: { INIT_CWD: dir } },
    );
    const line = oneError(out);
    assert.equal(
      line,
      `--collateral: cannot read ${dir}/no-such-collateral.json: no such file`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("start task: an unset api_key_env stops start-up naming the variable", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const variable = "GW_TEST_UNSET_UPSTREAM_KEY";
    const cfg = config(dir);
    const cfgPath = await writeConfig(dir, {
      ...cfg,
      providers: [{
        name: "plain",
        base_url: "http://127.0.0.1:9",
        zdr: false,
        api_key_env: variable,
      }],
    });
    const line = oneError(await runToEnd(Deno.execPath(), [...START, "--config", cfgPath]));
    assert.equal(
      line,
      `${cfgPath}: providers.plain.api_key_env: the variable ${variable} is not set ` +
        "(set it, or remove api_key_env if plain takes no credential)",
    );
    const set = await spawnListening(Deno.execPath(), [...START, "--config", cfgPath], {
      env: { [variable]: "sk-test" },
    });
    try {
      assert.ok(!set.stderr.some((l) => l.includes(variable)), set.stderr.join("\n"));
    } finally {
      assert.equal((await set.stop()).code, 0);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
