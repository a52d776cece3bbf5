/**
 * #27, the coding agent's turn: a conversation whose byte ceiling does not fit
 * the context is counted, and the same key's next turn tokenizes at most its
 * new texts (src/tokens/text_counts.ts): none when the earlier counts and the
 * new texts' bytes fit the context. Through the real gateway with the openai
 * and Anthropic SDKs; what was tokenized and what reused is read from the
 * operator's metrics, and the figures are compared with counts made afresh.
 */
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from "./support/gateway.ts";

interface Family {
  name: string;
  metrics: { labels?: Record<string, string>; value?: string }[];
}

async function counted(gw: TestGateway): Promise<{ tokenized: number; reused: number }> {
  const res = await fetch(`${gw.url}/admin/v1/metrics`, {
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
  });
  assert.equal(res.status, 200);
  const f = (parsePrometheusTextFormat(await res.text()) as Family[])
    .find((x) => x.name === "gateway_prompt_count_chars_total");
  assert.ok(f, "gateway_prompt_count_chars_total is served");
  const v = (how: string) => Number(f.metrics.find((m) => m.labels?.how === how)?.value ?? NaN);
  return { tokenized: v("tokenized"), reused: v("reused") };
}

/** Source-like text, distinct per seed: ~3.5 characters per token, as code is. */
function source(seed: number, chars: number): string {
  let s = "";
  for (let i = 0; s.length < chars; i++) {
    s +=
      `export async function load${seed}x${i}(path: string): Promise<Record<string, unknown>> {\n` +
      `  const text = await Deno.readTextFile(path + "${seed}/${i}.json");\n  return JSON.parse(text);\n}\n`;
  }
  return s.slice(0, chars);
}

const SYSTEM = source(0, 24_000);
const FILES = [source(1, 20_000), source(2, 20_000), source(3, 24_000), source(4, 4_000)];

/** Turn `n` of an agent's conversation: the system prompt and `n` tool answers. */
function conversation(n: number): OpenAI.Chat.ChatCompletionMessageParam[] {
  return [
    { role: "system", content: SYSTEM },
    ...FILES.slice(0, n).flatMap((content, i): OpenAI.Chat.ChatCompletionMessageParam[] => [
      { role: "user", content: `read file ${i}` },
      {
        role: "assistant",
        content: null,
        tool_calls: [{
          id: `call_${i}`,
          type: "function",
          function: { name: "read_file", arguments: `{"path":"f${i}.ts"}` },
        }],
      },
      { role: "tool", tool_call_id: `call_${i}`, content },
    ]),
  ];
}

const chars = (n: number) => SYSTEM.length + FILES.slice(0, n).reduce((a, f) => a + f.length, 0);

Deno.test("coding agent turns: counted once per key, the next turn tokenizes only what is new", async () => {
  const gw = await startTestGateway();
  try {
    const a = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const b = new OpenAI({ baseURL: gw.baseURL, apiKey: await gw.newKey(), maxRetries: 0 });
    const ask = (client: OpenAI, turn: number) =>
      client.chat.completions.create({
        model: "demo/echo",
        max_tokens: 256,
        messages: conversation(turn),
      });
    // 64 KB of text: its byte ceiling is past demo/echo's 32k context, so it is counted.
    assert.ok(chars(2) > 32_768);
    const start = await counted(gw);
    assert.equal((await ask(a, 2)).choices.length, 1);
    const first = await counted(gw);
    assert.equal(first.tokenized - start.tokenized, chars(2));
    assert.equal(first.reused, start.reused);

    // The next turn: its earlier texts' counts and the new answer's 24k bytes do not fit
    // the 32k context, so the new answer is tokenized (only it).
    await ask(a, 3);
    const second = await counted(gw);
    assert.equal(second.tokenized - first.tokenized, FILES[2].length);
    assert.equal(second.reused - first.reused, chars(2));

    // The turn after: the earlier counts and the new answer's 4k bytes fit: nothing tokenized.
    await ask(a, 4);
    const third = await counted(gw);
    assert.equal(third.tokenized, second.tokenized);
    assert.equal(third.reused - second.reused, chars(3));

    // Another key sending the same conversation reuses nothing of the first key's.
    await ask(b, 4);
    const other = await counted(gw);
    assert.equal(other.tokenized - third.tokenized, chars(4));
    assert.equal(other.reused, third.reused);

    // A figure reused is the figure counted afresh: count_tokens (Anthropic SDK) from
    // key a (its texts all counted before) and from a new key agree.
    const messages: Anthropic.MessageParam[] = [
      { role: "user", content: FILES[0] },
      { role: "assistant", content: "ok" },
      { role: "user", content: FILES[1] },
    ];
    const countAs = async (apiKey: string) =>
      (await new Anthropic({ baseURL: gw.url, apiKey, maxRetries: 0 }).messages.countTokens({
        model: "demo/echo",
        system: SYSTEM,
        messages,
      })).input_tokens;
    const before = await counted(gw);
    const reusedCount = await countAs(gw.apiKey);
    const mid = await counted(gw);
    assert.equal(mid.reused - before.reused, chars(2));
    assert.equal(mid.tokenized, before.tokenized);
    const freshCount = await countAs(await gw.newKey());
    const after = await counted(gw);
    assert.equal(after.tokenized - mid.tokenized, chars(2));
    assert.equal(reusedCount, freshCount);
    assert.ok(freshCount > 10_000 && freshCount < 32_768, `count ${freshCount}`);
  } finally {
    await gw.close();
  }
});
