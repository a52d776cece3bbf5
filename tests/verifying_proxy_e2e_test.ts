/**
 * `task proxy` end to end: the real command line (deno.json's `proxy` task)
 * in front of the real gateway over TLS, driven by the real `openai` and
 * `@anthropic-ai/sdk` clients as a coding agent would (base URL only): chat,
 * streaming, tools, embeddings, responses and messages with E2EE on and off;
 * the stream's verdict before its final event, a tampered stream ended by an
 * error event instead of `[DONE]`, a refused TLS key, and the audit file
 * (receipt ids and verdicts, no bodies).
 */
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { issueServerCert, makeTestCa } from "./support/tls_servers.ts";
import { receivedText, startTamperingProxy, startTlsMitm } from "./support/tampering_proxy.ts";
import { ROOT, taskArgs } from "./support/task_line.ts";

const PROXY = await taskArgs("proxy");
const MARKER = "PROXY-PROMPT-9e2b";

interface ProxyProcess {
  url: string;
  auditPath: string;
  audit(): Promise<Record<string, unknown>[]>;
  /** SIGTERM, then the audit file as the proxy left it. */
  halt(): Promise<Record<string, unknown>[]>;
  stop(): Promise<void>;
}

async function startProxy(
  gateway: string,
  policy: Record<string, unknown>,
  extra: string[] = [],
): Promise<ProxyProcess> {
  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(`${dir}/policy.json`, JSON.stringify(policy));
  const auditPath = `${dir}/audit.jsonl`;
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      ...PROXY,
      "--gateway",
      gateway,
      "--listen",
      "127.0.0.1:0",
      "--policy",
      `${dir}/policy.json`,
      "--audit",
      auditPath,
      ...extra,
    ],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const lines = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  let url: string | null = null;
  const deadline = AbortSignal.timeout(60_000);
  while (url === null && !deadline.aborted) {
    const r = await lines.read();
    if (r.done) throw new Error(`proxy exited: ${seen}`);
    seen += r.value;
    url = /on (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(seen)?.[1] ?? null;
  }
  if (url === null) throw new Error(`proxy did not start: ${seen}`);
  (async () => {
    while (!(await lines.read()).done) { /* drain */ }
  })().catch(() => {});
  const audit = async (): Promise<Record<string, unknown>[]> =>
    (await Deno.readTextFile(auditPath)).trim().split("\n").filter((l) => l).map((l) =>
      JSON.parse(l)
    );
  return {
    url,
    auditPath,
    audit,
    async halt() {
      child.kill("SIGTERM");
      await child.status;
      return await audit();
    },
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* halted already */ }
      await child.status;
      await Deno.remove(dir, { recursive: true });
    },
  };
}

async function tlsGateway(): Promise<TestGateway> {
  return await startTestGateway({ tls: await issueServerCert(await makeTestCa()) });
}

for (const e2ee of ["auto", "off"] as const) {
  Deno.test(`proxy (e2ee ${e2ee}): openai and anthropic SDKs by base URL only; audit file`, async () => {
    const gw = await tlsGateway();
    const proxy = await startProxy(gw.baseURL, { allow_dev_evidence: true, e2ee });
    try {
      const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: gw.apiKey, maxRetries: 0 });
      const chat = await openai.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: `hello ${MARKER}` }],
      }).withResponse();
      assert.match(chat.data.choices[0].message.content ?? "", new RegExp(MARKER));
      const verified = chat.response.headers.get("x-aci-verified") ?? "";
      assert.ok(verified.includes("tls-pin") && verified.includes("receipt-signature"), verified);
      assert.equal(verified.includes("e2ee"), e2ee === "auto");

      let text = "";
      for await (
        const c of await openai.chat.completions.create({
          model: "demo/echo",
          messages: [{ role: "user", content: "stream through the proxy" }],
          stream: true,
        })
      ) text += c.choices[0]?.delta?.content ?? "";
      assert.match(text, /stream through the proxy/);

      await openai.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "use a tool" }],
        tools: [{
          type: "function",
          function: { name: "f", parameters: { type: "object", properties: {} } },
        }],
      });
      assert.equal(
        (await openai.embeddings.create({ model: "demo/embed-small", input: "x" })).data.length,
        1,
      );
      assert.match(
        (await openai.responses.create({ model: "demo/echo", input: "resp" })).output_text,
        /resp/,
      );

      const anthropic = new Anthropic({ baseURL: proxy.url, apiKey: gw.apiKey, maxRetries: 0 });
      const msg = await anthropic.messages.create({
        model: "demo/echo",
        max_tokens: 32,
        messages: [{ role: "user", content: "hi" }],
      });
      assert.equal(msg.type, "message");
      const final = await anthropic.messages.stream({
        model: "demo/echo",
        max_tokens: 32,
        messages: [{ role: "user", content: "stream hi" }],
      }).finalMessage();
      assert.ok(final.content.length > 0);

      // Raw SSE: the verdict (an SSE comment) arrives before [DONE].
      const raw = await fetch(`${proxy.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "demo/echo",
          stream: true,
          messages: [{ role: "user", content: "raw" }],
        }),
      });
      const sse = await raw.text();
      const verdictAt = sse.indexOf(": aci-verified receipt=rcpt-");
      assert.ok(verdictAt > 0 && verdictAt < sse.indexOf("data: [DONE]"), sse.slice(-300));

      const audit = await proxy.audit();
      assert.equal(audit.length, 8);
      assert.ok(audit.every((r) => r.ok === true && typeof r.receipt_id === "string"));
      const file = await Deno.readTextFile(proxy.auditPath);
      assert.ok(!file.includes(MARKER) && !file.includes(gw.apiKey));
    } finally {
      await proxy.stop();
      await gw.close();
    }
  });
}

Deno.test("proxy (inclusion deferred): answers carry log-inclusion-deferred, the inclusion verdicts reach the audit file by shutdown", async () => {
  const gw = await tlsGateway();
  const proxy = await startProxy(gw.baseURL, {
    allow_dev_evidence: true,
    inclusion: "required",
    inclusion_verdict: "deferred",
  });
  try {
    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: gw.apiKey, maxRetries: 0 });
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const chat = await openai.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: `deferred ${i}` }],
      }).withResponse();
      const verified = (chat.response.headers.get("x-aci-verified") ?? "").split(",");
      assert.ok(verified.includes("log-inclusion-deferred"), verified.join());
      assert.ok(!verified.includes("log-inclusion"), verified.join());
      ids.push(chat.response.headers.get("x-receipt-id") ?? "");
    }
    // Shutting down waits for the verdicts still due: each answer has its inclusion line.
    const audit = await proxy.halt();
    for (const id of ids) {
      const lines = audit.filter((r) => r.receipt_id === id);
      assert.deepEqual(lines.map((r) => [r.phase, r.ok]), [["answer", true], ["inclusion", true]]);
      assert.deepEqual(lines[1].verified, ["log-inclusion"]);
    }
  } finally {
    await proxy.stop();
    await gw.close();
  }
});

Deno.test("proxy: a tampered stream ends with an error event instead of [DONE]; a tampered body is refused", async () => {
  const gw = await startTestGateway();
  const tamper = startTamperingProxy(gw.url, { flip: { chunk: 0 } });
  const proxy = await startProxy(`${tamper.url}/v1`, { allow_dev_evidence: true, e2ee: "off" });
  try {
    const headers = { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" };
    const body = {
      model: "demo/echo",
      messages: [{ role: "user" as const, content: "tamper with me" }],
    };
    const raw = await fetch(`${proxy.url}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ ...body, stream: true }),
    });
    const sse = await raw.text();
    assert.ok(!sse.includes("[DONE]"));
    assert.match(
      sse,
      /data: \{"error":\{"message":"verifying proxy refused the answer: receipt_invalid/,
    );

    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: gw.apiKey, maxRetries: 0 });
    await assert.rejects(async () => {
      for await (
        const _ of await openai.chat.completions.create({ ...body, stream: true })
      ) { /* read */ }
    }, (e: Error) => e instanceof OpenAI.APIError && /receipt_invalid/.test(e.message));
    await assert.rejects(
      openai.chat.completions.create(body),
      (e: Error) =>
        e instanceof OpenAI.APIError && e.status === 502 && /receipt_invalid/.test(e.message),
    );
    const audit = await proxy.audit();
    assert.equal(audit.length, 3);
    assert.ok(audit.every((r) => r.ok === false && r.error === "receipt_invalid"));
  } finally {
    await proxy.stop();
    await tamper.close();
    await gw.close();
  }
});

Deno.test("proxy: a gateway behind a TLS key outside the keyset gets no prompt", async () => {
  const ca = await makeTestCa();
  const gw = await startTestGateway({ tls: await issueServerCert(ca) });
  const mitm = startTlsMitm(Number(new URL(gw.url).port), await issueServerCert(ca), ca.certPem);
  const proxy = await startProxy(`${mitm.url}/v1`, { allow_dev_evidence: true });
  try {
    const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: gw.apiKey, maxRetries: 0 });
    await assert.rejects(
      openai.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: MARKER }],
      }),
      (e: Error) => e instanceof OpenAI.APIError && /tls_pin_mismatch/.test(e.message),
    );
    const seen = receivedText(mitm);
    assert.ok(!seen.includes(MARKER) && !seen.includes("POST") && !seen.includes(gw.apiKey));
  } finally {
    await proxy.stop();
    await mitm.close();
    await gw.close();
  }
});

Deno.test("proxy: refuses a non-loopback listen address, a missing gateway and a bad policy, in one line", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/bad.json`, JSON.stringify({ allow_dev: true }));
    for (
      const [args, want] of [
        [["--gateway", "https://gw.example/v1", "--listen", "0.0.0.0:8788"], /loopback/],
        [["--listen", "127.0.0.1:0"], /usage: npx -y deno@2\.9\.6 task proxy --gateway URL/],
        [["--gateway", "https://gw.example/v1", "--policy", `${dir}/bad.json`], /--policy: policy/],
      ] as const
    ) {
      const out = await new Deno.Command(Deno.execPath(), {
        args: [...PROXY, ...args],
        cwd: ROOT,
        env: { NO_COLOR: "1" },
        stdout: "null",
        stderr: "piped",
      }).output();
      assert.equal(out.code, 2);
      assert.match(new TextDecoder().decode(out.stderr), want);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("proxy: a tampered Anthropic stream ends with an error event instead of message_stop", async () => {
  const gw = await startTestGateway();
  const tamper = startTamperingProxy(gw.url, { flip: { chunk: 0 } });
  const proxy = await startProxy(`${tamper.url}/v1`, { allow_dev_evidence: true });
  try {
    const raw = await fetch(`${proxy.url}/v1/messages`, {
      method: "POST",
      headers: {
        "x-api-key": gw.apiKey,
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
      },
      body: JSON.stringify({
        model: "demo/echo",
        max_tokens: 32,
        stream: true,
        messages: [{ role: "user", content: "tamper with this message" }],
      }),
    });
    const sse = await raw.text();
    assert.ok(!sse.includes("event: message_stop"));
    assert.match(
      sse,
      /event: error\ndata: \{"type":"error","error":\{"type":"aci_verification_failed"/,
    );
    const anthropic = new Anthropic({ baseURL: proxy.url, apiKey: gw.apiKey, maxRetries: 0 });
    await assert.rejects(
      anthropic.messages.stream({
        model: "demo/echo",
        max_tokens: 32,
        messages: [{ role: "user", content: "tamper with this message" }],
      }).finalMessage(),
      /aci_verification_failed|receipt_invalid/,
    );
  } finally {
    await proxy.stop();
    await tamper.close();
    await gw.close();
  }
});
