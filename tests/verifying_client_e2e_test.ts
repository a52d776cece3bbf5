/**
 * The verifying client library (src/client/) end to end: the real `openai`
 * and `@anthropic-ai/sdk` clients with `fetch: verifyingFetch(…)`, against the
 * real gateway terminating TLS with the key its keyset lists: chat (whole,
 * streamed, tools), completions, embeddings, messages and responses, with
 * E2EE on (auto) and off, each answer's receipt checked by the library.
 */
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { issueServerCert, makeTestCa } from "./support/tls_servers.ts";
import {
  AciVerificationError,
  createVerifyingFetch,
  fetchTransport,
  nodeTransport,
  type Verdict,
  verifyingFetch,
} from "../src/client/node.ts";
import { startSwitchRelay } from "./support/tampering_proxy.ts";

async function tlsGateway(): Promise<TestGateway> {
  const cert = await issueServerCert(await makeTestCa());
  return await startTestGateway({ tls: cert });
}

function clientFor(gw: TestGateway, e2ee: "auto" | "off") {
  const verdicts: Verdict[] = [];
  const handshakes: string[] = [];
  const f = verifyingFetch({
    baseURL: gw.baseURL,
    policy: { allow_dev_evidence: true, e2ee },
    onVerdict: (v) => verdicts.push(v),
  });
  return { f, verdicts, handshakes };
}

for (const e2ee of ["auto", "off"] as const) {
  Deno.test(`verifying client (e2ee ${e2ee}): openai chat, stream, tools, completions, embeddings, responses`, async () => {
    const gw = await tlsGateway();
    const { f, verdicts } = clientFor(gw, e2ee);
    try {
      const client = new OpenAI({
        baseURL: gw.baseURL,
        apiKey: gw.apiKey,
        fetch: f,
        maxRetries: 0,
      });
      const chat = await client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "hello verified world" }],
      }).withResponse();
      assert.match(chat.data.choices[0].message.content ?? "", /hello verified world/);
      const verified = chat.response.headers.get("x-aci-verified") ?? "";
      for (
        const c of [
          "attestation",
          "measurement",
          "tls-pin",
          "receipt-signature",
          "body-hashes",
          "log-inclusion",
        ]
      ) {
        assert.ok(verified.split(",").includes(c), `${c} in ${verified}`);
      }
      assert.equal(verified.split(",").includes("e2ee"), e2ee === "auto");

      const stream = await client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "stream me please" }],
        stream: true,
      });
      let streamed = "";
      for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
      assert.match(streamed, /stream me please/);

      const tools = await client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "call the weather tool" }],
        tools: [{
          type: "function",
          function: { name: "get_weather", parameters: { type: "object", properties: {} } },
        }],
      });
      assert.ok(tools.choices[0].message);

      const comp = await client.completions.create({ model: "demo/echo", prompt: "complete this" });
      assert.match(comp.choices[0].text, /complete this/);

      const emb = await client.embeddings.create({ model: "demo/embed-small", input: ["a", "b"] });
      assert.equal(emb.data.length, 2);

      const resp = await client.responses.create({ model: "demo/echo", input: "respond please" });
      assert.match(resp.output_text, /respond please/);

      const rs = await client.responses.create({
        model: "demo/echo",
        input: "stream a response",
        stream: true,
      });
      let rtext = "";
      for await (const ev of rs) if (ev.type === "response.output_text.delta") rtext += ev.delta;
      assert.match(rtext, /stream a response/);

      assert.equal(verdicts.length, 7);
      assert.ok(
        verdicts.every((v) => v.ok && v.receiptId !== null),
        JSON.stringify(verdicts.map((v) => v.endpoint)),
      );
      const e2eeCount = verdicts.filter((v) => v.verified.includes("e2ee")).length;
      assert.equal(e2eeCount, e2ee === "auto" ? 5 : 0);
    } finally {
      f.close();
      await gw.close();
    }
  });
}

Deno.test("verifying client: @anthropic-ai/sdk messages, whole and streamed", async () => {
  const gw = await tlsGateway();
  const { f, verdicts } = clientFor(gw, "auto");
  try {
    const client = new Anthropic({ baseURL: gw.url, apiKey: gw.apiKey, fetch: f, maxRetries: 0 });
    const msg = await client.messages.create({
      model: "demo/echo",
      max_tokens: 64,
      messages: [{ role: "user", content: "hello anthropic" }],
    });
    assert.equal(msg.content[0].type, "text");
    const stream = client.messages.stream({
      model: "demo/echo",
      max_tokens: 64,
      messages: [{ role: "user", content: "stream anthropic" }],
    });
    const final = await stream.finalMessage();
    assert.ok(final.content.length > 0);
    assert.equal(verdicts.length, 2);
    assert.ok(verdicts.every((v) => v.ok && v.endpoint === "/messages"));
  } finally {
    f.close();
    await gw.close();
  }
});

Deno.test("verifying client: a keyset rotation is attested again (fresh report) and its receipts verify", async () => {
  let clock = Date.now();
  const cert = await issueServerCert(await makeTestCa());
  const gw = await startTestGateway({
    tls: cert,
    now: () => clock,
    configure: (c) => (c.identity.keyset_ttl_seconds = 600),
  });
  const verdicts: Verdict[] = [];
  const f = verifyingFetch({
    baseURL: gw.baseURL,
    policy: { allow_dev_evidence: true },
    now: () => clock,
    onVerdict: (v) => verdicts.push(v),
  });
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, fetch: f, maxRetries: 0 });
    const body = { model: "demo/echo", messages: [{ role: "user" as const, content: "q" }] };
    await client.chat.completions.create(body);
    const before = f.current()!.digest;
    clock += 590_000; // past the rotation margin: the gateway's next request rotates its keyset
    await client.chat.completions.create(body); // E2EE to the old key: refused, attested again, resent
    const after = f.current()!.digest;
    assert.notEqual(after, before);
    await client.embeddings.create({ model: "demo/embed-small", input: "x" });
    assert.equal(verdicts.length, 3);
    assert.ok(verdicts.every((v) => v.ok && v.verified.includes("e2ee")));
    assert.ok(
      verdicts[1].checks.some((c) =>
        c.name === "receipt.keyset_digest" && c.detail.includes(after)
      ),
    );
  } finally {
    f.close();
    await gw.close();
  }
});

Deno.test("verifying client: a new TLS key behind the same address is attested before a request uses it", async () => {
  const ca = await makeTestCa();
  const a = await startTestGateway({ tls: await issueServerCert(ca) });
  const b = await startTestGateway({ tls: await issueServerCert(ca) });
  const relay = startSwitchRelay(Number(new URL(a.url).port));
  const keys: string[] = [];
  const f = verifyingFetch({
    baseURL: `${relay.url}/v1`,
    policy: { allow_dev_evidence: true },
    transport: nodeTransport({ onHandshake: (k) => keys.push(k) }),
  });
  try {
    const body = { model: "demo/echo", messages: [{ role: "user" as const, content: "q" }] };
    const first = await new OpenAI({
      baseURL: `${relay.url}/v1`,
      apiKey: a.apiKey,
      fetch: f,
      maxRetries: 0,
    })
      .chat.completions.create(body);
    assert.ok(first.choices[0].message.content);
    const digestA = f.current()!.digest;
    relay.switchTo(Number(new URL(b.url).port));
    const second = await new OpenAI({
      baseURL: `${relay.url}/v1`,
      apiKey: b.apiKey,
      fetch: f,
      maxRetries: 0,
    })
      .chat.completions.create(body);
    assert.ok(second.choices[0].message.content);
    assert.notEqual(f.current()!.digest, digestA);
    assert.ok(f.current()!.tlsKeys.has(keys.at(-1)!));
    assert.equal(new Set(keys).size, 2, "two TLS keys seen, each attested");
  } finally {
    f.close();
    await relay.close();
    await a.close();
    await b.close();
  }
});

Deno.test("verifying client without pinning (a browser's fetch): says so and insists on E2EE", async () => {
  const ca = await makeTestCa();
  const gw = await startTestGateway({ tls: await issueServerCert(ca) });
  const http = Deno.createHttpClient({ caCerts: [ca.certPem] });
  const verdicts: Verdict[] = [];
  const f = createVerifyingFetch({
    baseURL: gw.baseURL,
    // Even "off": without pinning only E2EE keeps the prompt from whoever terminates TLS.
    policy: { allow_dev_evidence: true, e2ee: "off" },
    transport: fetchTransport((i, o) => fetch(i, { ...o, client: http })),
    onVerdict: (v) => verdicts.push(v),
  });
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, fetch: f, maxRetries: 0 });
    const r = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "from a browser" }],
    });
    assert.match(r.choices[0].message.content ?? "", /from a browser/);
    assert.equal(verdicts.length, 1);
    assert.ok(verdicts[0].verified.includes("e2ee"));
    assert.ok(!verdicts[0].verified.includes("tls-pin"));
    const pin = verdicts[0].checks.find((c) => c.name === "tls.pin")!;
    assert.match(pin.detail, /impossible in this runtime/);
  } finally {
    f.close();
    http.close();
    await gw.close();
  }
});

Deno.test("verifying client: TLS ending outside the TEE (no key in the keyset) is refused when pinning", async () => {
  const ca = await makeTestCa();
  const gw = await startTestGateway({ tls: { ...(await issueServerCert(ca)), unlisted: true } });
  const f = verifyingFetch({ baseURL: gw.baseURL, policy: { allow_dev_evidence: true } });
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, fetch: f, maxRetries: 0 });
    await assert.rejects(
      client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "q" }],
      }),
      (e: Error) => {
        let x: unknown = e;
        while (x instanceof Error && !(x instanceof AciVerificationError)) x = x.cause;
        return x instanceof AciVerificationError && x.code === "tls_pin_mismatch" &&
          /lists no TLS key/.test(x.message);
      },
    );
  } finally {
    f.close();
    await gw.close();
  }
});
