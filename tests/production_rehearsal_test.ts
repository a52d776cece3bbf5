/**
 * Production rehearsal (#20 "Done means"): the gateway started with `deno.json`'s
 * own `start` task command line and a production configuration: TLS on the `tee`
 * listener; a TLS confidential upstream verified through the dstack flow (TDX
 * quote under the forged test root, collateral from `trust.collateral_dir`);
 * a plain upstream; a failing confidential upstream (its quote binds another
 * TLS key); an operator-pinned upstream (a session without hardware evidence).
 * Everything is checked over HTTP(S) with the real SDKs, then SIGTERM.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { forgeTdxEnvironment } from "./support/tdx_forge.ts";
import { startDstackUpstream } from "./support/dstack_upstream.ts";
import { issueServerCert, makeTestCa } from "./support/tls_servers.ts";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { asRecord, events, fetchReport, type Json } from "./support/receipt_check.ts";
import { verifyReceipt } from "../src/verify/receipt.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const TASKS = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)).tasks;
/** The exact command lines of `deno task start` and `deno task keys` (after `deno`). */
const START: string[] = TASKS.start.split(" ").slice(1);
const KEYS: string[] = TASKS.keys.split(" ").slice(1);
const SECRET = "rehearsal secret prompt 7f3a";
// The operator token (GATEWAY_ADMIN_TOKEN): /healthz detail is for operators only.
const OPERATOR_TOKEN = "rehearsal-operator-token-" + "c0ffee".repeat(6);

function model(id: string, routes: { provider: string; model: string }[]) {
  return {
    id,
    name: id,
    created: 1,
    context_length: 8192,
    max_output_length: 1024,
    input_modalities: ["text"],
    output_modalities: ["text"],
    pricing: { prompt: 0.000001, completion: 0.000002 },
    supported_parameters: ["max_tokens", "temperature"],
    routes,
  };
}

async function lines(stream: ReadableStream<Uint8Array>, sink: string[], on?: (l: string) => void) {
  let buf = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      sink.push(buf.slice(0, i));
      on?.(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  }
}

Deno.test("production rehearsal: task start, TLS tee listener, dstack-verified upstream, fail-closed routing, truthful receipts, degraded health, log reasons, SIGTERM", async () => {
  const dir = await Deno.makeTempDir();
  const forge = await forgeTdxEnvironment();
  const upstreamCa = await makeTestCa({ commonName: "upstream CA" });
  const tdx = await startDstackUpstream({ forge, ca: upstreamCa, name: "tdx" });
  const broken = await startDstackUpstream({
    forge,
    ca: upstreamCa,
    name: "broken",
    bindSpki: false,
  });
  const pinnedUp = await startDstackUpstream({ forge, ca: upstreamCa, name: "pinned" });
  const plain = await startDemoUpstream({ name: "plain" });
  // The gateway's own TLS key for the tee listener.
  const gwCa = await makeTestCa({ commonName: "gateway CA" });
  const gwCert = await issueServerCert(gwCa);
  await Deno.writeTextFile(`${dir}/tee.crt`, gwCert.certPem);
  await Deno.writeTextFile(`${dir}/tee.key`, gwCert.keyPem);
  await Deno.mkdir(`${dir}/collateral`);
  await Deno.writeTextFile(
    `${dir}/collateral/${forge.fmspc}.json`,
    JSON.stringify(forge.collateralJson),
  );
  const confidential = (
    verifier: "dstack-tdx" | "pinned",
    extra: Record<string, unknown> = {},
  ) => ({
    verifier,
    tls_ca_pem: upstreamCa.certPem,
    ...extra,
  });
  const config = {
    listen: {
      base: { hostname: "127.0.0.1", port: 0 },
      tee: {
        hostname: "127.0.0.1",
        port: 0,
        tls_cert_file: `${dir}/tee.crt`,
        tls_key_file: `${dir}/tee.key`,
      },
    },
    store: { path: `${dir}/gateway.kv` },
    identity: { quote_provider: "dev", allow_dev_quotes: true },
    trust: { intel_root_ca_pem: forge.rootPem, collateral_dir: `${dir}/collateral` },
    providers: [
      {
        name: "broken",
        base_url: broken.url,
        zdr: true,
        priority: 20,
        timeout_ms: 5000,
        confidential: confidential("dstack-tdx"),
      },
      {
        name: "tdx",
        base_url: tdx.url,
        zdr: true,
        priority: 10,
        timeout_ms: 5000,
        confidential: confidential("dstack-tdx"),
      },
      {
        name: "pinned",
        base_url: pinnedUp.url,
        zdr: true,
        priority: 5,
        timeout_ms: 5000,
        confidential: confidential("pinned", { spki_sha256: pinnedUp.spkiSha256 }),
      },
      { name: "plain", base_url: plain.url, zdr: false, priority: 0, timeout_ms: 5000 },
    ],
    models: [
      model("prod/chat", [
        { provider: "broken", model: "demo-chat" },
        { provider: "tdx", model: "demo-chat" },
        { provider: "plain", model: "demo-chat" },
      ]),
      model("prod/broken-only", [{ provider: "broken", model: "demo-chat" }]),
      model("prod/pinned-only", [{ provider: "pinned", model: "demo-chat" }]),
    ],
  };
  const configPath = `${dir}/config.json`;
  await Deno.writeTextFile(configPath, JSON.stringify(config, null, 2));

  const created = await new Deno.Command(Deno.execPath(), {
    args: [...KEYS, "--config", configPath, "create", "--tier", "pro", "--credits", "10"],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(created.code, 0, new TextDecoder().decode(created.stderr));
  const apiKey = new TextDecoder().decode(created.stdout).trim().split("\n").at(-1)!;
  assert.match(apiKey, /^cgw-/);

  const child = new Deno.Command(Deno.execPath(), {
    args: [...START, "--config", configPath],
    cwd: ROOT,
    env: { NO_COLOR: "1", GATEWAY_ADMIN_TOKEN: OPERATOR_TOKEN },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stdout: string[] = [];
  const stderr: string[] = [];
  const urls: Record<string, string> = {};
  const listening = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start:\n${stderr.join("\n")}`)), 60_000);
    lines(child.stderr, stderr, (l) => {
      const m = l.match(/gateway (base|tee) listening on (https?:\/\/\S+?)\/v1/);
      if (m) urls[m[1]] = m[2];
      if (urls.base && urls.tee) {
        clearTimeout(timer);
        resolve();
      }
    }).catch(() => {});
    child.status.then((s) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited (${s.code}):\n${stderr.join("\n")}`));
    });
  });
  lines(child.stdout, stdout).catch(() => {});
  const client = Deno.createHttpClient({ caCerts: [gwCa.certPem] });
  try {
    await listening;
    assert.match(urls.tee, /^https:\/\//, "the tee listener terminates TLS");
    const teeFetch: typeof fetch = (input, init) => fetch(input, { ...init, client });
    const openai = new OpenAI({
      baseURL: `${urls.tee}/v1`,
      apiKey,
      maxRetries: 0,
      fetch: teeFetch,
    });
    const post = async (body: Record<string, unknown>) => {
      const res = await teeFetch(`${urls.tee}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ messages: [{ role: "user", content: SECRET }], ...body }),
      });
      const bytes = new Uint8Array(await res.arrayBuffer());
      return { status: res.status, bytes, receiptId: res.headers.get("x-receipt-id") };
    };
    const receipt = async (id: string | null): Promise<Json> => {
      assert.ok(id);
      const res = await teeFetch(`${urls.tee}/v1/aci/receipts/${id}`, {
        headers: { authorization: `Bearer ${apiKey}` },
      });
      assert.equal(res.status, 200);
      return asRecord(await res.json());
    };
    const { report } = await fetchReport(urls.base);
    const keyset = asRecord(asRecord(report.attestation).workload_keyset);
    // `serve.workers` is "auto" (the core count): each worker is an attested replica with its
    // own keyset, and the kernel spreads connections between them, so a receipt may cite
    // another worker's keyset than the report fetched above. An auditor then fetches that
    // keyset's archived report, as here.
    const reportFor = async (r: Json): Promise<Json> => {
      const cited = r.workload_keyset_digest;
      if (cited === asRecord(report.attestation).workload_keyset_digest) return report;
      const res = await fetch(
        `${urls.base}/v1/aci/attestation?workload_keyset_digest=${String(cited)}`,
      );
      assert.equal(res.status, 200);
      return asRecord(await res.json());
    };
    assert.ok(
      JSON.stringify(keyset).includes(gwCert.spkiSha256),
      "the keyset lists the tee listener's TLS key",
    );

    // /healthz: degraded in public; with the operator token it names the failing
    // confidential upstream (and only it).
    const open = asRecord(await (await teeFetch(`${urls.tee}/healthz`)).json());
    assert.deepEqual(open, { status: "degraded" });
    const health = asRecord(
      await (await teeFetch(`${urls.tee}/healthz`, {
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
      })).json(),
    );
    assert.equal(health.status, "degraded");
    assert.deepEqual(health.unverified_upstreams, ["broken"]);

    // The catalog lists as TEE only what a verified upstream serves.
    const tee = await openai.models.list({ query: { tee: "true" } });
    const teeIds = tee.data.map((x) => x.id).sort();
    assert.deepEqual(teeIds, ["prod/chat", "prod/pinned-only"]);

    // aci_verified: through the hardware-proven dstack session only.
    const v = await post({ model: "prod/chat", provider: { aci_verified: true } });
    assert.equal(v.status, 200);
    const vr = await receipt(v.receiptId);
    const ve = events(vr).filter((e) => e.type === "upstream.verified");
    assert.equal(ve.length, 1);
    assert.equal(ve[0].result, "verified");
    assert.equal(ve[0].tee_attested, "hardware_proven");
    const session = asRecord(
      await (await teeFetch(`${urls.tee}/v1/aci/sessions/${ve[0].session_id}`, {
        headers: { authorization: `Bearer ${apiKey}` },
      })).json(),
    );
    assert.equal(session.verifier_id, "dstack-tdx/1");
    assert.equal(session.upstream_name, "tdx");
    const body = new TextEncoder().encode(
      JSON.stringify({
        messages: [{ role: "user", content: SECRET }],
        model: "prod/chat",
        provider: { aci_verified: true },
      }),
    );
    const strict = verifyReceipt(vr, {
      report: await reportFor(vr),
      requestBody: body,
      responseBody: v.bytes,
      requireVerifiedUpstream: true,
    });
    assert.deepEqual(strict.filter((c) => !c.ok), []);
    assert.equal(tdx.demo.stats.total, 1);

    // The pinned session (operator-asserted, no hardware evidence) never satisfies aci_verified…
    const pinnedAci = await post({ model: "prod/pinned-only", provider: { aci_verified: true } });
    assert.equal(pinnedAci.status, 503);
    assert.equal(pinnedUp.demo.stats.total, 0);
    // …but serves a request that does not demand it, and the receipt says which kind it was.
    const pinnedPlain = await post({ model: "prod/pinned-only" });
    assert.equal(pinnedPlain.status, 200);
    const pe = events(await receipt(pinnedPlain.receiptId)).find((e) =>
      e.type === "upstream.verified"
    )!;
    assert.equal(pe.tee_attested, "not_hardware_proven");

    // Fail closed: the unverified confidential upstream receives nothing, whatever the request.
    const refused = await post({ model: "prod/broken-only" });
    assert.equal(refused.status, 503);
    const refusedBody = JSON.parse(new TextDecoder().decode(refused.bytes));
    assert.equal(refusedBody.error.code, "upstream_verification_failed");
    const rr = await receipt(refused.receiptId);
    assert.ok(!events(rr).some((e) => e.type === "request.forwarded"));
    assert.ok(events(rr).some((e) => e.type === "request.refused"));
    const unconstrained = await openai.chat.completions.create({
      model: "prod/chat",
      messages: [{ role: "user", content: SECRET }],
    });
    assert.ok(unconstrained.choices[0].message.content);
    assert.equal(broken.demo.stats.total, 0, "not one prompt reached the unverified upstream");
    assert.equal(tdx.demo.stats.total, 2, "the verified upstream is preferred");

    // Failover from the verified upstream to the plain one: the receipt tells the truth.
    tdx.demo.setFault({ kind: "status", status: 500 });
    const over = await post({ model: "prod/chat" });
    assert.equal(over.status, 200);
    assert.equal(plain.stats.total, 1);
    const or = await receipt(over.receiptId);
    const oe = events(or);
    const verified = oe.filter((e) => e.type === "upstream.verified");
    assert.deepEqual(verified.map((e) => e.attempt), [1]);
    assert.deepEqual(
      oe.filter((e) => e.type === "route.served").map((e) => [e.target_route_id, e.attempt]),
      [["plain:demo-chat", 2]],
    );
    const overChecks = verifyReceipt(or, {
      report: await reportFor(or),
      requireVerifiedUpstream: true,
    });
    assert.equal(
      overChecks.find((c) => c.name === "receipt.upstream_verified")?.ok,
      false,
      "a verifier demanding verified serving rejects the plain provider's answer",
    );
    // With aci_verified the same failure never reaches the plain provider.
    const noFallback = await post({ model: "prod/chat", provider: { aci_verified: true } });
    assert.equal(noFallback.status, 502);
    assert.equal(plain.stats.total, 1);
    tdx.demo.setFault(null);

    // Log lines: key id, receipt id, error code, providers and reasons; never a prompt or key.
    // Lines are written in batches and read through a pipe: wait for the last request's.
    const until = Date.now() + 10_000;
    while (!stdout.some((l) => l.includes(String(noFallback.receiptId))) && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const logs = stdout.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
    const line = (id: string | null) => logs.find((l) => l.receipt_id === id);
    const l503 = line(refused.receiptId);
    assert.ok(l503, "the 503 is logged with its receipt id");
    assert.equal(l503.error_code, "upstream_verification_failed");
    assert.match(String(l503.key_id), /^key_[0-9a-f]{12}$/);
    // Authenticated requests other than inference name their key too (receipt fetches here).
    const fetched = logs.find((l) => l.route === "/v1/aci/receipts/:id" && l.status === 200);
    assert.ok(fetched, "the receipt fetches are logged");
    assert.equal(fetched.key_id, l503.key_id, "a receipt fetch names the key that made it");
    const l502 = line(noFallback.receiptId);
    assert.equal(l502.status, 502);
    assert.equal(l502.error_code, "upstream_error");
    assert.deepEqual(l502.attempts, [{ provider: "tdx", outcome: "status_500" }]);
    assert.deepEqual(line(over.receiptId).attempts, [
      { provider: "tdx", outcome: "status_500" },
      { provider: "plain", outcome: "served" },
    ]);
    assert.ok(
      logs.some((l) => l.msg === "upstream verification failed" && l.upstream === "broken"),
      "the failing upstream's verification failure is logged with its reason",
    );
    assert.ok(!logs.some((l) => l.route === "/healthz"), "health polls are not request lines");
    const everything = stdout.join("\n") + stderr.join("\n");
    assert.ok(!everything.includes(SECRET), "no prompt in the logs");
    assert.ok(!everything.includes(apiKey), "no API key in the logs");
  } finally {
    try {
      child.kill("SIGTERM");
    } catch {
      // already gone
    }
    const status = await child.status;
    client.close();
    await Promise.all([tdx.close(), broken.close(), pinnedUp.close(), plain.close()]);
    await Deno.remove(dir, { recursive: true });
    assert.equal(status.code, 0, `SIGTERM exit code\n${stderr.slice(-5).join("\n")}`);
  }
});
