/**
 * E2EE v2 end to end: the unmodified `openai` SDK through src/e2ee/client.ts
 * against the real gateway, behind a recording proxy standing in for the
 * load balancer outside the TEE; every answer is also decrypted here with
 * the independent implementation in tests/support/e2ee_independent.ts, and
 * receipts are checked against the restored request and the wire bytes.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { startRecordingProxy } from "./support/recording_proxy.ts";
import {
  fetchReport,
  independentFailures,
  keysetOf,
  onlyEvent,
  sseJson,
  text,
  waitForReceipt,
} from "./support/receipt_check.ts";
import * as indep from "./support/e2ee_independent.ts";
import { createE2eeFetch, type E2eeExchange } from "../src/e2ee/client.ts";

const MARKER = "PLAINTEXT-MARKER-7f3a";

async function e2eeClient(
  baseURL: string,
  apiKey: string,
  opts: { algo?: string; contentArrays?: "whole" | "parts"; clearTools?: boolean } = {},
) {
  const exchanges: E2eeExchange[] = [];
  const e2ee = await createE2eeFetch({
    baseURL,
    allowDevEvidence: true,
    algo: opts.algo as "x25519-aes-256-gcm-hkdf-sha256" | undefined,
    contentArrays: opts.contentArrays,
    clearTools: opts.clearTools,
    onExchange: (x) => exchanges.push(x),
  });
  const client = new OpenAI({ baseURL, apiKey, fetch: e2ee, maxRetries: 0 });
  return { client, exchanges, e2ee };
}

/** Receipt + independent decryption of every generated field the wire carried. */
async function checkExchange(
  gw: TestGateway,
  x: E2eeExchange,
  streamed: boolean,
): Promise<string[]> {
  const wire = await x.wireResponse;
  assert.ok(x.receiptId);
  const receipt = await waitForReceipt(gw.url, x.receiptId!, gw.apiKey);
  const { report } = await fetchReport(gw.url);
  assert.deepEqual(
    independentFailures(receipt, keysetOf(report), {
      request: x.restoredRequest,
      response: wire,
    }),
    [],
  );
  assert.equal(receipt.model, x.context.model);
  const docs = streamed ? sseJson(wire) : [JSON.parse(text(wire))];
  const sk = indep.unhex(x.context.client_private_key);
  const plain: string[] = [];
  for (const d of docs as Record<string, unknown>[]) {
    const id = typeof d.id === "string" ? d.id : "";
    const fields: [string, string][] = [];
    for (const c of (d.choices ?? []) as Record<string, unknown>[]) {
      const holder = (streamed ? c.delta : c.message) as Record<string, unknown> | undefined;
      for (const k of ["content", "reasoning", "reasoning_content"]) {
        const v = holder?.[k];
        if (typeof v === "string") {
          fields.push([`choices.${c.index}.${streamed ? "delta" : "message"}.${k}`, v]);
        }
      }
      if (typeof c.text === "string") fields.push([`choices.${c.index}.text`, c.text]);
    }
    for (const e of (d.data ?? []) as Record<string, unknown>[]) {
      fields.push([`data.${e.index}.embedding`, e.embedding as string]);
    }
    for (const [field, v] of fields) {
      const ad = indep.aad("response", { ...x.context, ts: x.context.timestamp, id, field });
      plain.push(await indep.decrypt(x.context.algo, sk, v, ad));
    }
  }
  return plain;
}

Deno.test("E2EE chat through the openai SDK, buffered and streamed, behind a recording proxy", async () => {
  const gw = await startTestGateway();
  const proxy = startRecordingProxy(gw.url);
  try {
    const { client, exchanges } = await e2eeClient(`${proxy.url}/v1`, gw.apiKey);
    const before = gw.secure.stats.total;
    const res = await client.chat.completions.create({
      model: "demo/private",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: `hello ${MARKER}` },
      ],
      // @ts-expect-error the gateway's routing block
      provider: { aci_verified: true },
    }).withResponse();
    assert.match(res.data.choices[0].message.content ?? "", new RegExp(MARKER));
    assert.equal(res.response.headers.get("x-e2ee-applied"), "true");
    assert.equal(res.response.headers.get("x-e2ee-version"), "2");
    assert.equal(res.response.headers.get("x-e2ee-algo"), "x25519-aes-256-gcm-hkdf-sha256");
    // The upstream got the restored prompt (it echoes it) over its pinned, verified channel.
    assert.equal(gw.secure.stats.total, before + 1);
    const upstreamSaw = gw.secure.stats.lastBody as { messages: { content: unknown }[] };
    assert.deepEqual(upstreamSaw.messages.map((m) => m.content), ["be brief", `hello ${MARKER}`]);
    const buffered = await checkExchange(gw, exchanges[0], false);
    assert.ok(buffered.some((p) => p.includes(MARKER)));
    const receipt = await waitForReceipt(gw.url, exchanges[0].receiptId!, gw.apiKey);
    assert.equal(onlyEvent(receipt, "upstream.verified").result, "verified");

    const stream = await client.chat.completions.create({
      model: "demo/private",
      stream: true,
      messages: [{ role: "user", content: `stream ${MARKER} please` }],
    });
    let streamed = "";
    for await (const c of stream) streamed += c.choices[0]?.delta?.content ?? "";
    assert.match(streamed, new RegExp(MARKER));
    const pieces = await checkExchange(gw, exchanges[1], true);
    assert.equal(pieces.join(""), streamed);
    assert.ok(pieces.length > 2, "each streamed chunk carries its own ciphertext");

    // The load balancer saw ciphertext only, in both directions.
    const seen = await Promise.all(
      proxy.exchanges.map(async (e) => text(e.request) + text(await e.response)),
    );
    assert.ok(proxy.exchanges.some((e) => e.path === "/v1/chat/completions"));
    for (const s of seen) assert.ok(!s.includes(MARKER), "plaintext marker crossed the proxy");
    assert.ok(!JSON.stringify(gw.logs).includes(MARKER), "plaintext in the gateway's log");
  } finally {
    await proxy.close();
    await gw.close();
  }
});

Deno.test("E2EE completions and embeddings (float and base64) through the SDK, secp256k1 suite", async () => {
  const gw = await startTestGateway();
  const proxy = startRecordingProxy(gw.url);
  try {
    const { client, exchanges } = await e2eeClient(`${proxy.url}/v1`, gw.apiKey, {
      algo: "secp256k1-aes-256-gcm-hkdf-sha256",
    });
    const c = await client.completions.create({ model: "demo/echo", prompt: `say ${MARKER}` });
    assert.match(c.choices[0].text, new RegExp(MARKER));
    assert.ok((await checkExchange(gw, exchanges[0], false)).some((p) => p.includes(MARKER)));
    const cs = await client.completions.create({
      model: "demo/echo",
      prompt: [`one ${MARKER}`],
      stream: true,
    });
    let ctext = "";
    for await (const ch of cs) ctext += ch.choices[0]?.text ?? "";
    assert.match(ctext, new RegExp(MARKER));
    assert.equal((await checkExchange(gw, exchanges[1], true)).join(""), ctext);

    const plainClient = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey });
    for (const encoding of ["float", "base64"] as const) {
      const input = [`embed ${MARKER}`, "second input"];
      const e = await client.embeddings.create({
        model: "demo/embed-small",
        input,
        encoding_format: encoding,
      });
      const reference = await plainClient.embeddings.create({
        model: "demo/embed-small",
        input,
        encoding_format: encoding,
      });
      assert.equal(e.data.length, 2);
      assert.deepEqual(e.data.map((d) => d.embedding), reference.data.map((d) => d.embedding));
      const x = exchanges[exchanges.length - 1];
      const fields = await checkExchange(gw, x, false);
      assert.deepEqual(fields.map((f) => JSON.parse(f)), reference.data.map((d) => d.embedding));
    }
    // The SDK's default: it asks for base64 and decodes it itself, after the client decrypted it.
    const defaultEncoding = await client.embeddings.create({
      model: "demo/embed-small",
      input: MARKER,
    });
    const plainDefault = await plainClient.embeddings.create({
      model: "demo/embed-small",
      input: MARKER,
    });
    assert.deepEqual(
      Array.from(defaultEncoding.data[0].embedding),
      Array.from(plainDefault.data[0].embedding),
    );
    assert.ok(defaultEncoding.data[0].embedding.length > 0);
    for (const e of proxy.exchanges) {
      assert.ok(!(text(e.request) + text(await e.response)).includes(MARKER));
    }
  } finally {
    await proxy.close();
    await gw.close();
  }
});

Deno.test("E2EE: tool calls and structured content arrays round-trip (whole and per part)", async () => {
  const gw = await startTestGateway();
  try {
    for (const contentArrays of ["whole", "parts"] as const) {
      // Tools travel in clear: the client opts in (the nonce commits to the tool parameters).
      const { client, exchanges } = await e2eeClient(gw.baseURL, gw.apiKey, {
        contentArrays,
        clearTools: true,
      });
      const tools = [{
        type: "function" as const,
        function: {
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" } } },
        },
      }];
      const first = await client.chat.completions.create({
        model: "demo/echo",
        tools,
        messages: [{
          role: "user",
          content: [
            { type: "text", text: `please call get_weather` },
            { type: "text", text: MARKER },
          ],
        }],
      });
      const call = first.choices[0].message.tool_calls?.[0];
      assert.ok(call && call.type === "function" && call.function.name === "get_weather");
      const restored = JSON.parse(text(exchanges[0].restoredRequest));
      assert.ok(Array.isArray(restored.messages[0].content), "structured content restored");
      const second = await client.chat.completions.create({
        model: "demo/echo",
        tools,
        messages: [
          { role: "user", content: `please call get_weather ${MARKER}` },
          first.choices[0].message,
          { role: "tool", tool_call_id: call.id, content: '{"temp": 21}' },
          // A string that is itself a JSON array must stay a string to the model.
          { role: "user", content: "[1, 2, 3]" },
        ],
      });
      assert.equal(typeof second.choices[0].message.content, "string");
      await checkExchange(gw, exchanges[1], false);
      const upstream = gw.secure.stats.lastBody as { messages: { content: unknown }[] };
      // The array-looking string went as one text part, so it could not be restored as an array.
      assert.deepEqual(upstream.messages[3].content, [{ type: "text", text: "[1, 2, 3]" }]);
      assert.equal(upstream.messages[2].content, '{"temp": 21}');
      const image = await client.chat.completions.create({
        model: "demo/vision",
        messages: [{
          role: "user",
          content: [
            { type: "text", text: `look ${MARKER}` },
            { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          ],
        }],
      });
      assert.match(image.choices[0].message.content ?? "", /\[image\]/);
      assert.deepEqual(
        (gw.plain.stats.lastBody as { messages: { content: unknown }[] }).messages[0].content,
        [
          { type: "text", text: `look ${MARKER}` },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
        ],
      );
    }
  } finally {
    await gw.close();
  }
});

Deno.test("E2EE client refuses a key outside the verified keyset and unverifiable evidence", async () => {
  const gw = await startTestGateway();
  try {
    const stranger = indep.clientKeys(indep.X25519).pk;
    await assert.rejects(
      createE2eeFetch({ baseURL: gw.baseURL, allowDevEvidence: true, modelPublicKey: stranger }),
      /not in the verified keyset/,
    );
    await assert.rejects(createE2eeFetch({ baseURL: gw.baseURL }), /did not verify/);
    // The attested key itself is accepted, in either accepted spelling.
    const { report } = await fetchReport(gw.url);
    const listed = (keysetOf(report).e2ee_public_keys as { public_key: string }[])[1].public_key;
    const f = await createE2eeFetch({
      baseURL: gw.baseURL,
      allowDevEvidence: true,
      modelPublicKey: "0x" + listed.slice(2),
    });
    assert.equal(f.attestedKey().public_key, listed);
  } finally {
    await gw.close();
  }
});

Deno.test("task verify checks an E2EE receipt: restored request, wire bytes, each field's tag and AAD", async () => {
  const { runVerify } = await import("../src/cli/verify.ts");
  const gw = await startTestGateway();
  const dir = await Deno.makeTempDir();
  try {
    const { client, exchanges } = await e2eeClient(gw.baseURL, gw.apiKey);
    await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "verify me" }],
    });
    const stream = await client.chat.completions.create({
      model: "demo/echo",
      stream: true,
      messages: [{ role: "user", content: "verify my stream" }],
    });
    for await (const _ of stream) { /* drain */ }
    for (const [i, x] of exchanges.entries()) {
      await Deno.writeFile(`${dir}/req${i}.json`, x.restoredRequest);
      await Deno.writeFile(`${dir}/res${i}.bin`, await x.wireResponse);
      await Deno.writeTextFile(`${dir}/e2ee${i}.json`, JSON.stringify(x.context));
      await waitForReceipt(gw.url, x.receiptId!, gw.apiKey);
      const run = async (context: string, request = `${dir}/req${i}.json`) => {
        const lines: string[] = [];
        const code = await runVerify([
          "--receipt",
          `${gw.baseURL}/aci/receipts/${x.receiptId}`,
          "--report",
          `${gw.baseURL}/aci/attestation`,
          "--allow-dev",
          "--request",
          request,
          "--response",
          `${dir}/res${i}.bin`,
          "--e2ee-context",
          context,
        ], {
          fetch: globalThis.fetch,
          readFile: (p) => Deno.readFile(p),
          print: (l) => lines.push(l),
          randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
          now: Date.now,
          apiKey: gw.apiKey,
        });
        return { code, lines };
      };
      const good = await run(`${dir}/e2ee${i}.json`);
      assert.equal(good.code, 0, good.lines.join("\n"));
      assert.ok(good.lines.some((l) => /^PASS e2ee\.response_fields/.test(l)));
      assert.ok(good.lines.some((l) => /^PASS receipt\.request_body_hash/.test(l)));
      // Another timestamp (so another AAD): every field fails authentication.
      await Deno.writeTextFile(
        `${dir}/bad${i}.json`,
        JSON.stringify({ ...x.context, timestamp: x.context.timestamp + 1 }),
      );
      const bad = await run(`${dir}/bad${i}.json`);
      assert.equal(bad.code, 1);
      assert.ok(bad.lines.some((l) => /^FAIL e2ee\.response_fields/.test(l)), bad.lines.join("\n"));
      // The encrypted wire request is not what request.received binds.
      await Deno.writeTextFile(`${dir}/wire${i}.json`, "{}");
      const wrongRequest = await run(`${dir}/e2ee${i}.json`, `${dir}/wire${i}.json`);
      assert.ok(wrongRequest.lines.some((l) => /^FAIL receipt\.request_body_hash/.test(l)));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
    await gw.close();
  }
});

Deno.test("E2EE client: after a keyset rotation it attests again and resends, encrypted to the new key", async () => {
  let clock = Date.now();
  const gw = await startTestGateway({
    now: () => clock,
    configure: (c) => (c.identity.keyset_ttl_seconds = 600),
  });
  try {
    const exchanges: E2eeExchange[] = [];
    const e2ee = await createE2eeFetch({
      baseURL: gw.baseURL,
      allowDevEvidence: true,
      now: () => clock,
      onExchange: (x) => exchanges.push(x),
    });
    const client = new OpenAI({
      baseURL: gw.baseURL,
      apiKey: gw.apiKey,
      fetch: e2ee,
      maxRetries: 0,
    });
    const before = e2ee.attestedKey();
    clock += 590_000; // past the rotation margin: the gateway's next request rotates its keyset
    const res = await client.chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: `after rotation ${MARKER}` }],
    });
    assert.match(res.choices[0].message.content ?? "", new RegExp(MARKER));
    assert.notEqual(e2ee.attestedKey().public_key, before.public_key);
    assert.notEqual(e2ee.attestedKey().keysetDigest, before.keysetDigest);
    assert.equal(exchanges.length, 2, "refused once with the old key, then served");
  } finally {
    await gw.close();
  }
});
