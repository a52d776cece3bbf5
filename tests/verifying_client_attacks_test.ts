/**
 * Attacks the verifying client must catch, each a bounded loopback test with
 * the real `openai` SDK: a TLS man in the middle with another key (refused
 * before any prompt byte), one flipped byte in a body or a stream chunk, a
 * report from a different keyset than the receipts, development evidence
 * without the opt-in, and receipts missing from (or badly proven in) the
 * transparency log when inclusion is required.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { issueServerCert, makeTestCa } from "./support/tls_servers.ts";
import { receivedText, startTamperingProxy, startTlsMitm } from "./support/tampering_proxy.ts";
import { startTlogGateway } from "./support/tlog_gateway.ts";
import { AciVerificationError, type Verdict, verifyingFetch } from "../src/client/node.ts";

const MARKER = "SECRET-PROMPT-4c1d";

async function refusal(p: Promise<unknown>): Promise<AciVerificationError> {
  try {
    await p;
  } catch (e) {
    for (let x: unknown = e, i = 0; x instanceof Error && i < 5; x = x.cause, i++) {
      if (x instanceof AciVerificationError) return x;
    }
    throw e;
  }
  assert.fail("the request was not refused");
}

function sdk(baseURL: string, apiKey: string, f: typeof fetch) {
  return new OpenAI({ baseURL, apiKey, fetch: f, maxRetries: 0 });
}

Deno.test("attack: a TLS man in the middle with another key sees no prompt byte", async () => {
  const ca = await makeTestCa();
  const gw = await startTestGateway({ tls: await issueServerCert(ca) });
  const mitm = startTlsMitm(Number(new URL(gw.url).port), await issueServerCert(ca), ca.certPem);
  const f = verifyingFetch({ baseURL: `${mitm.url}/v1`, policy: { allow_dev_evidence: true } });
  try {
    const e = await refusal(
      sdk(`${mitm.url}/v1`, gw.apiKey, f).chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: MARKER }],
      }),
    );
    assert.equal(e.code, "tls_pin_mismatch");
    const seen = receivedText(mitm);
    assert.ok(seen.includes("GET /v1/aci/attestation"), "the report was fetched through it");
    assert.ok(!seen.includes(MARKER) && !seen.includes("POST") && !seen.includes(gw.apiKey));
  } finally {
    f.close();
    await mitm.close();
    await gw.close();
  }
});

for (const stream of [false, true]) {
  Deno.test(`attack: one flipped byte in ${stream ? "a stream chunk" : "a response body"} fails the receipt check`, async () => {
    const gw = await startTestGateway();
    const proxy = startTamperingProxy(gw.url, { flip: { chunk: 0 } });
    const verdicts: Verdict[] = [];
    const f = verifyingFetch({
      baseURL: `${proxy.url}/v1`,
      policy: { allow_dev_evidence: true, e2ee: "off" },
      onVerdict: (v) => verdicts.push(v),
    });
    try {
      const client = sdk(`${proxy.url}/v1`, gw.apiKey, f);
      const body = {
        model: "demo/echo",
        messages: [{
          role: "user" as const,
          content: "a long enough prompt to stream in several chunks",
        }],
      };
      let delivered = 0;
      const e = await refusal((async () => {
        if (!stream) return await client.chat.completions.create(body);
        for await (const _ of await client.chat.completions.create({ ...body, stream: true })) {
          delivered++;
        }
        return null;
      })());
      assert.equal(e.code, "receipt_invalid");
      assert.ok(e.checks.some((c) => c.name === "receipt.response_body_hash" && !c.ok));
      assert.ok(e.receiptId?.startsWith("rcpt-"));
      if (stream) assert.ok(delivered > 0, "events flowed before the verdict");
      if (stream) assert.deepEqual(proxy.flips, [true]);
      assert.equal(verdicts.length, 1);
      assert.equal(verdicts[0].ok, false);
    } finally {
      f.close();
      await proxy.close();
      await gw.close();
    }
  });
}

Deno.test("attack: a stream cut short and ended cleanly is refused, not passed off as whole", async () => {
  const gw = await startTestGateway();
  // Tokens paced as a model's: the cut lands mid-answer.
  gw.plain.setFault({ kind: "token_delay", ms: 30 });
  gw.secure.setFault({ kind: "token_delay", ms: 30 });
  const proxy = startTamperingProxy(gw.url, { cut: 3 });
  const f = verifyingFetch({
    baseURL: `${proxy.url}/v1`,
    policy: { allow_dev_evidence: true, e2ee: "off" },
  });
  try {
    const client = sdk(`${proxy.url}/v1`, gw.apiKey, f);
    const e = await refusal((async () => {
      const s = await client.chat.completions.create({
        model: "demo/echo",
        stream: true,
        messages: [{ role: "user", content: "one two three four five six seven eight nine ten" }],
      });
      for await (const _ of s) { /* read to the (early) end */ }
    })());
    assert.equal(e.code, "receipt_invalid");
    assert.ok(e.checks.some((c) => c.name === "receipt.delivered_whole" && !c.ok), e.message);
  } finally {
    f.close();
    await proxy.close();
    await gw.close();
  }
});

Deno.test("attack: with e2ee required, an endpoint without E2EE is refused before a byte leaves", async () => {
  const gw = await startTestGateway();
  const proxy = startTamperingProxy(gw.url);
  const f = verifyingFetch({
    baseURL: `${proxy.url}/v1`,
    policy: { allow_dev_evidence: true, e2ee: "required" },
  });
  try {
    for (
      const [path, body] of [
        ["/v1/messages", {
          model: "demo/echo",
          max_tokens: 8,
          messages: [{ role: "user", content: MARKER }],
        }],
        ["/v1/responses", { model: "demo/echo", input: MARKER }],
        ["/v1/messages/count_tokens", {
          model: "demo/echo",
          messages: [{ role: "user", content: MARKER }],
        }],
        ["/v1/chat//completions", {
          model: "demo/echo",
          messages: [{ role: "user", content: MARKER }],
          tools: [{ type: "function", function: { name: "t", parameters: {} } }],
        }],
      ] as const
    ) {
      const e = await refusal(f(`${proxy.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      }));
      assert.equal(e.code, "e2ee_unavailable", path);
    }
    assert.ok(!proxy.seen.some((l) => l.startsWith("POST")), proxy.seen.join("\n"));
  } finally {
    f.close();
    await proxy.close();
    await gw.close();
  }
});

Deno.test("attack: a server's own x-aci-verified never reaches the app as a verdict", async () => {
  const gw = await startTestGateway();
  // Forwards everything, adding a forged verdict header to every answer.
  const forger = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const headers = new Headers(req.headers);
    headers.delete("host");
    const up = await fetch(`${gw.url}${url.pathname}${url.search}`, {
      method: req.method,
      headers,
      body: req.method === "GET" ? undefined : await req.arrayBuffer(),
    });
    const out = new Headers(up.headers);
    out.set("x-aci-verified", "attestation,hardware-quote,tls-pin");
    return new Response(up.body, { status: up.status, headers: out });
  });
  const base = `http://127.0.0.1:${forger.addr.port}`;
  const f = verifyingFetch({ baseURL: `${base}/v1`, policy: { allow_dev_evidence: true } });
  try {
    const auth = { authorization: `Bearer ${gw.apiKey}` };
    const models = await f(`${base}/v1/models`, { headers: auth });
    await models.body?.cancel();
    assert.equal(models.status, 200);
    assert.equal(models.headers.get("x-aci-verified"), null, "not verified, not said to be");
    const bad = await f(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ model: "no/such-model", messages: [{ role: "user", content: "x" }] }),
    });
    await bad.body?.cancel();
    assert.equal(bad.status, 404);
    assert.equal(bad.headers.get("x-aci-verified"), null);
  } finally {
    f.close();
    await forger.shutdown();
    await gw.close();
  }
});

Deno.test("attack: a report from a different keyset than the receipts is refused", async () => {
  const gw = await startTestGateway();
  const other = await startTestGateway();
  const proxy = startTamperingProxy(gw.url, { reportFrom: other.url });
  const f = verifyingFetch({
    baseURL: `${proxy.url}/v1`,
    policy: { allow_dev_evidence: true, e2ee: "off" },
  });
  try {
    const e = await refusal(
      sdk(`${proxy.url}/v1`, gw.apiKey, f).chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "hello" }],
      }),
    );
    assert.equal(e.code, "keyset_mismatch");
  } finally {
    f.close();
    await proxy.close();
    await other.close();
    await gw.close();
  }
});

Deno.test("attack: development evidence without the explicit opt-in is refused before any prompt", async () => {
  const gw = await startTestGateway();
  const proxy = startTamperingProxy(gw.url);
  const f = verifyingFetch({
    baseURL: `${proxy.url}/v1`,
    policy: { accept_any_measurement: true },
  });
  try {
    const e = await refusal(
      sdk(`${proxy.url}/v1`, gw.apiKey, f).chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: MARKER }],
      }),
    );
    assert.equal(e.code, "policy_refused");
    assert.ok(e.checks.some((c) => c.name === "report.hardware_evidence" && !c.ok));
    assert.deepEqual(proxy.seen, ["GET /v1/aci/attestation"]);
  } finally {
    f.close();
    await proxy.close();
    await gw.close();
  }
});

Deno.test("inclusion: a logged receipt verifies; log_pending is waited out", async () => {
  const gw = startTlogGateway({ pendingTimes: 2 });
  const verdicts: Verdict[] = [];
  const f = verifyingFetch({
    baseURL: gw.baseURL,
    policy: { allow_dev_evidence: true, inclusion: "required" },
    onVerdict: (v) => verdicts.push(v),
  });
  try {
    const client = sdk(gw.baseURL, "sk-test", f);
    for (let i = 0; i < 3; i++) {
      const r = await client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: `q${i}` }],
      });
      assert.equal(r.choices[0].message.content, "logged answer");
    }
    assert.ok(verdicts.every((v) => v.ok && v.verified.includes("log-inclusion")));
    assert.match(
      verdicts[2].checks.find((c) => c.name === "receipt.log_inclusion")!.detail,
      /leaf 7 of the tree of size 8/,
    );
  } finally {
    f.close();
    await gw.close();
  }
});

for (
  const [label, opts] of [["missing from the log", { omitFromLog: true }], [
    "proven under another log key",
    { wrongLogKey: true },
  ]] as const
) {
  Deno.test(`attack: a receipt ${label} is refused when inclusion is required`, async () => {
    const gw = startTlogGateway(opts);
    const f = verifyingFetch({
      baseURL: gw.baseURL,
      policy: { allow_dev_evidence: true, inclusion: "required" },
    });
    try {
      const e = await refusal(
        sdk(gw.baseURL, "sk-test", f).chat.completions.create({
          model: "demo/echo",
          messages: [{ role: "user", content: "q" }],
        }),
      );
      assert.equal(e.code, "inclusion_failed");
    } finally {
      f.close();
      await gw.close();
    }
  });
}

Deno.test("inclusion: a gateway that lists no log key is refused only when inclusion is required", async () => {
  const gw = startTlogGateway({ noLogKey: true });
  const strict = verifyingFetch({
    baseURL: gw.baseURL,
    policy: { allow_dev_evidence: true, inclusion: "required" },
  });
  const lenient = verifyingFetch({ baseURL: gw.baseURL, policy: { allow_dev_evidence: true } });
  try {
    const body = { model: "demo/echo", messages: [{ role: "user" as const, content: "q" }] };
    assert.equal(
      (await refusal(sdk(gw.baseURL, "sk-test", strict).chat.completions.create(body))).code,
      "inclusion_failed",
    );
    const ok = await sdk(gw.baseURL, "sk-test", lenient).chat.completions.create(body);
    assert.equal(ok.choices[0].message.content, "logged answer");
  } finally {
    strict.close();
    lenient.close();
    await gw.close();
  }
});

Deno.test("inclusion (real gateway log): answers whole and streamed are proven in the signed log", async () => {
  const gw = await startTestGateway();
  const verdicts: Verdict[] = [];
  const f = verifyingFetch({
    baseURL: gw.baseURL,
    policy: { allow_dev_evidence: true, inclusion: "required" },
    onVerdict: (v) => verdicts.push(v),
  });
  try {
    const client = sdk(gw.baseURL, gw.apiKey, f);
    const body = { model: "demo/echo", messages: [{ role: "user" as const, content: "log me" }] };
    await client.chat.completions.create(body);
    for await (
      const _ of await client.chat.completions.create({ ...body, stream: true })
    ) { /* read */ }
    assert.equal(verdicts.length, 2);
    for (const v of verdicts) {
      assert.ok(v.ok && v.verified.includes("log-inclusion"), v.verified.join(","));
      const c = v.checks.find((x) => x.name === "receipt.log_inclusion")!;
      assert.match(c.detail, /signed by the attested log key/);
    }
  } finally {
    f.close();
    await gw.close();
  }
});

for (const mode of ["drop", "corrupt"] as const) {
  Deno.test(`attack (real gateway log): an inclusion proof ${mode === "drop" ? "withheld (receipt not in the log)" : "with one hash changed"} is refused`, async () => {
    const gw = await startTestGateway();
    const proxy = startTamperingProxy(gw.url, { inclusion: mode });
    const f = verifyingFetch({
      baseURL: `${proxy.url}/v1`,
      policy: { allow_dev_evidence: true, inclusion: "required" },
    });
    try {
      const e = await refusal(
        sdk(`${proxy.url}/v1`, gw.apiKey, f).chat.completions.create({
          model: "demo/echo",
          messages: [{ role: "user", content: "q" }],
        }),
      );
      assert.equal(e.code, "inclusion_failed");
      assert.match(e.message, mode === "drop" ? /HTTP 404/ : /is not leaf/);
    } finally {
      f.close();
      await proxy.close();
      await gw.close();
    }
  });
}
