/**
 * The verifying client as an npm package under Node: `deno task client-npm`
 * builds the tarball (ESM + types), a scratch Node project installs it with
 * the real `openai` SDK (from the npm registry, or copied from Deno's npm
 * cache when offline), and a Node script drives the real gateway over TLS:
 * a chat answer and a stream verified with the pin checked by node:tls, and a
 * TLS man in the middle refused with the typed error before any prompt byte.
 */
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { issueServerCert, makeTestCa } from "./support/tls_servers.ts";
import { receivedText, startTlsMitm } from "./support/tampering_proxy.ts";
import { ROOT, taskArgs } from "./support/task_line.ts";

const OPENAI_VERSION = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`)).imports.openai
  .replace("npm:openai@", "");

async function run(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}) {
  const out = await new Deno.Command(cmd, {
    args,
    cwd,
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(300_000),
  }).output();
  return {
    ok: out.success,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

/** openai from the registry, else from Deno's npm cache (it has no dependencies). */
async function installOpenai(dir: string): Promise<void> {
  const r = await run("npm", [
    "install",
    "--no-audit",
    "--no-fund",
    "--prefer-offline",
    `openai@${OPENAI_VERSION}`,
  ], dir);
  if (r.ok) return;
  const cache = `${
    Deno.env.get("HOME")
  }/.cache/deno/npm/registry.npmjs.org/openai/${OPENAI_VERSION}`;
  await Deno.mkdir(`${dir}/node_modules`, { recursive: true });
  const cp = await run("cp", ["-r", cache, `${dir}/node_modules/openai`], dir);
  assert.ok(
    cp.ok,
    `openai neither from the registry (${r.stderr}) nor from the cache (${cp.stderr})`,
  );
}

const SCRIPT = `
import OpenAI from "openai";
import { verifyingFetch, AciVerificationError } from "aci-verifying-client";
const out = {};
const policy = { allow_dev_evidence: true };
const f = verifyingFetch({ baseURL: process.env.GW, policy, onVerdict: (v) => (out.verdicts ??= []).push(v.verified) });
const client = new OpenAI({ baseURL: process.env.GW, apiKey: process.env.KEY, fetch: f, maxRetries: 0 });
const chat = await client.chat.completions.create({ model: "demo/echo", messages: [{ role: "user", content: "hello from node" }] }).withResponse();
out.chat = chat.data.choices[0].message.content;
out.header = chat.response.headers.get("x-aci-verified");
let text = "";
for await (const c of await client.chat.completions.create({ model: "demo/echo", stream: true, messages: [{ role: "user", content: "node stream" }] })) text += c.choices[0]?.delta?.content ?? "";
out.stream = text;
f.close();
const m = verifyingFetch({ baseURL: process.env.MITM, policy });
try {
  await new OpenAI({ baseURL: process.env.MITM, apiKey: process.env.KEY, fetch: m, maxRetries: 0 }).chat.completions.create({ model: "demo/echo", messages: [{ role: "user", content: "SECRET-NODE-PROMPT" }] });
  out.mitm = "not refused";
} catch (e) {
  let x = e;
  while (x && !(x instanceof AciVerificationError)) x = x.cause;
  out.mitm = x ? x.code : String(e);
}
m.close();
console.log(JSON.stringify(out));
`;

Deno.test("npm package: built by the deno.json task, installed in a Node project, driven by openai under Node", async () => {
  const build = await run(Deno.execPath(), await taskArgs("client-npm"), ROOT);
  assert.ok(build.ok, build.stderr);
  const tarball = build.stdout.trim().split("\n").at(-1)!;
  assert.match(tarball, /aci-verifying-client-[\d.]+\.tgz$/);
  const dir = await Deno.makeTempDir();
  const ca = await makeTestCa();
  const gw = await startTestGateway({ tls: await issueServerCert(ca) });
  const mitm = startTlsMitm(Number(new URL(gw.url).port), await issueServerCert(ca), ca.certPem);
  try {
    await Deno.writeTextFile(
      `${dir}/package.json`,
      JSON.stringify({ name: "scratch", private: true, type: "module" }),
    );
    await installOpenai(dir);
    const inst = await run(
      "npm",
      ["install", "--offline", "--no-audit", "--no-fund", tarball],
      dir,
    );
    assert.ok(inst.ok, inst.stderr);
    const types = await Deno.readTextFile(`${dir}/node_modules/aci-verifying-client/index.d.ts`);
    assert.match(types, /export declare function verifyingFetch\(/);
    assert.doesNotMatch(types, /from "\.{1,2}\//);
    await Deno.writeTextFile(`${dir}/main.mjs`, SCRIPT);
    const r = await run("node", ["main.mjs"], dir, {
      GW: gw.baseURL,
      MITM: `${mitm.url}/v1`,
      KEY: gw.apiKey,
      PATH: Deno.env.get("PATH")!,
    });
    assert.ok(r.ok, r.stderr);
    const out = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    assert.match(out.chat, /hello from node/);
    assert.match(out.stream, /node stream/);
    for (const c of ["tls-pin", "e2ee", "receipt-signature", "body-hashes"]) {
      assert.ok(out.header.includes(c), out.header);
    }
    assert.equal(out.verdicts.length, 2);
    assert.equal(out.mitm, "tls_pin_mismatch");
    assert.ok(!receivedText(mitm).includes("SECRET-NODE-PROMPT"));
  } finally {
    await mitm.close();
    await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});
