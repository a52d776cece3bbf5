import assert from "node:assert/strict";
import type { ChatModel } from "../catalog/catalog.ts";
import type { ChatRequest } from "../formats/chat/types.ts";
import type { ModelConfig } from "../config/schema.ts";
import { GatewayError } from "../http/errors.ts";
import {
  chatTokenCeilingOf,
  estimateChatTokens,
  parseChatRequest,
} from "../formats/chat/request.ts";
import { chatPromptTokens, defaultOutputOf, parsedTextBytes } from "./prompt_tokens.ts";
import { parseJsonDocument } from "../http/body.ts";
import { Buffer } from "node:buffer";
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

Deno.test("a long body's texts are measured from what its parse noted, to the same ceiling (#27)", () => {
  const long = code.repeat(4) + "é → 😀\n";
  const parts = [{ type: "text", text: long }, { type: "text", text: "short" }];
  const raw = parseJsonDocument(
    new TextEncoder().encode(JSON.stringify({
      model: "t/m",
      messages: [{ role: "system", content: "be brief" }, { role: "user", content: long }, {
        role: "user",
        content: parts,
      }],
    })),
  ).value;
  const request = parseChatRequest(raw).chat;
  const known = parsedTextBytes(raw)!;
  const msgs = request.messages as { content: string | { text: string }[] }[];
  // The validated request holds the parse's own strings, and their lengths were noted.
  assert.equal(known(msgs[1].content as string, 1), Buffer.byteLength(long));
  assert.equal(
    known((msgs[2].content as { text: string }[])[0].text, 2, 0),
    Buffer.byteLength(long),
  );
  assert.equal(known("be brief", 0), undefined);
  assert.equal(known(long, 0), undefined); // not the string at that place
  const m = model(10_000_000);
  const withKnown = chatPromptTokens(
    request,
    m,
    "t/m",
    undefined,
    "messages",
    1024,
    undefined,
    known,
  );
  const plain = chatPromptTokens(request, m, "t/m", undefined, "messages", 1024);
  assert.equal(withKnown.bounded, true);
  assert.equal(withKnown.reserve, plain.reserve);
  assert.equal(withKnown.reserve, chatTokenCeilingOf(request.messages, undefined));
});
