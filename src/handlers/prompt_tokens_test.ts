import assert from "node:assert/strict";
import type { ChatModel } from "../catalog/catalog.ts";
import type { ChatRequest } from "../formats/chat/types.ts";
import type { ModelConfig } from "../config/schema.ts";
import { GatewayError } from "../http/errors.ts";
import { estimateChatTokens } from "../formats/chat/request.ts";
import { chatPromptTokens, defaultOutputOf } from "./prompt_tokens.ts";
import { TextCounts } from "../tokens/text_counts.ts";

const model = (contextLength: number): ChatModel => ({
  id: "t/m",
  config: { context_length: contextLength, max_output_length: 1024 } as ModelConfig,
  isTee: false,
  zdr: false,
  refusedParameters: [],
  tokenParam: "max_tokens",
  tokenizer: "o200k_base",
});
const chat = (text: string) =>
  ({ model: "t/m", messages: [{ role: "user", content: text }] }) as ChatRequest;
const code = "export function f(x: number): number {\n  return x * 2; // why\n}\n".repeat(400);

Deno.test("a prompt whose byte ceiling fits is not counted until asked (#27)", () => {
  const m = model(100_000);
  const c = chat(code);
  const p = chatPromptTokens(c, m, "t/m", undefined, "messages", defaultOutputOf(m, 1024));
  assert.equal(p.bounded, true);
  const exact = estimateChatTokens(c.messages, "o200k_base", 100_000);
  assert.ok(p.reserve >= exact, `reserve ${p.reserve} below the count ${exact}`);
  assert.equal(p.exact(), exact);
});

Deno.test("near the context the prompt is counted and checked as before (#27)", () => {
  const exact = estimateChatTokens(chat(code).messages, "o200k_base");
  // Room for the exact count and the output, not for the byte ceiling.
  const m = model(exact + 1024 + 10);
  const p = chatPromptTokens(chat(code), m, "t/m", undefined, "messages", 1024);
  assert.equal(p.bounded, false);
  assert.equal(p.reserve, exact);
  // Past the context with the output asked for: the same 400 as before.
  assert.throws(
    () => chatPromptTokens(chat(code), model(exact + 5), "t/m", 10, "messages", 1024),
    (e: unknown) => e instanceof GatewayError && /maximum context length/.test(e.message),
  );
});

Deno.test("a key's next turn: its earlier counts and the new text's bytes decide, nothing tokenized (#27)", () => {
  const counts = new TextCounts(new Uint8Array(32).fill(3));
  const old = code;
  const fresh = "const y = await load(path); // a new tool answer\n".repeat(60);
  const turn = (texts: string[]) =>
    ({
      model: "t/m",
      messages: texts.map((content) => ({ role: "user", content })),
    }) as ChatRequest;
  const exactOld = estimateChatTokens(turn([old]).messages, "o200k_base");
  // Room for the old text counted and the new one at its bytes; not for both at bytes.
  const m = model(exactOld + fresh.length + 1024 + 50);
  const first = chatPromptTokens(
    turn([old]),
    m,
    "t/m",
    undefined,
    "messages",
    1024,
    counts.scope("k"),
  );
  assert.equal(first.bounded, false);
  assert.equal(counts.totals.tokenized, old.length);

  const next = turn([old, fresh]);
  const before = { ...counts.totals };
  const p = chatPromptTokens(next, m, "t/m", undefined, "messages", 1024, counts.scope("k"));
  assert.equal(p.bounded, true);
  assert.equal(counts.totals.tokenized, before.tokenized, "nothing tokenized");
  assert.equal(counts.totals.reused - before.reused, old.length);
  const exact = estimateChatTokens(next.messages, "o200k_base");
  assert.ok(p.reserve >= exact, `reserve ${p.reserve} below the count ${exact}`);
  assert.equal(p.exact(), exact);
  // Another key knows nothing: its bytes do not fit, so it counts.
  const other = chatPromptTokens(next, m, "t/m", undefined, "messages", 1024, counts.scope("k2"));
  assert.equal(other.bounded, false);
  assert.equal(other.reserve, exact);
});
