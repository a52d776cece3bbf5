/**
 * The verifying fetch under the AI SDK's providers (`ai` with
 * `@ai-sdk/openai-compatible` and `@ai-sdk/anthropic`) against the real
 * gateway over TLS: generated and streamed text, each answer's receipt
 * verified (and E2EE applied on the OpenAI-compatible chat path).
 */
import { generateText, streamText } from "ai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import assert from "node:assert/strict";
import { startTestGateway } from "./support/gateway.ts";
import { issueServerCert, makeTestCa } from "./support/tls_servers.ts";
import { type Verdict, verifyingFetch } from "../src/client/node.ts";

(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;

Deno.test("verifying client under the AI SDK: openai-compatible and anthropic providers, whole and streamed", async () => {
  const gw = await startTestGateway({ tls: await issueServerCert(await makeTestCa()) });
  const verdicts: Verdict[] = [];
  const f = verifyingFetch({
    baseURL: gw.baseURL,
    policy: { allow_dev_evidence: true },
    onVerdict: (v) => verdicts.push(v),
  });
  try {
    const compat = createOpenAICompatible({
      name: "gateway",
      baseURL: gw.baseURL,
      apiKey: gw.apiKey,
      fetch: f,
    });
    const a = await generateText({ model: compat("demo/echo"), prompt: "ai sdk hello" });
    assert.match(a.text, /ai sdk hello/);
    const s = streamText({ model: compat("demo/echo"), prompt: "ai sdk stream" });
    let text = "";
    for await (const d of s.textStream) text += d;
    assert.match(text, /ai sdk stream/);

    const anthropic = createAnthropic({ baseURL: gw.baseURL, apiKey: gw.apiKey, fetch: f });
    const m = await generateText({
      model: anthropic("demo/echo"),
      prompt: "anthropic via ai sdk",
      maxOutputTokens: 64,
    });
    assert.match(m.text, /anthropic via ai sdk/);
    const ms = streamText({
      model: anthropic("demo/echo"),
      prompt: "stream it",
      maxOutputTokens: 64,
    });
    let mtext = "";
    for await (const d of ms.textStream) mtext += d;
    assert.match(mtext, /stream it/);

    assert.equal(verdicts.length, 4);
    assert.ok(verdicts.every((v) => v.ok && v.verified.includes("receipt-signature")));
    assert.ok(verdicts.slice(0, 2).every((v) => v.verified.includes("e2ee")));
  } finally {
    f.close();
    await gw.close();
  }
});
