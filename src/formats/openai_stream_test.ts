import assert from "node:assert/strict";
import { createOpenAiStreamPassthrough, OBFUSCATION_BUCKET } from "./openai_stream.ts";

const chunk = (extra: Record<string, unknown>) =>
  ({
    id: "c",
    object: "chat.completion.chunk",
    created: 1,
    model: "up",
    choices: [{ index: 0, delta: { content: "hé" }, finish_reason: null }],
    ...extra,
  }) as never;

Deno.test("passthrough: a null system_fingerprint is dropped from chunks, a string kept", () => {
  const t = createOpenAiStreamPassthrough({ model: "m", clientWantsUsage: false });
  const a = JSON.parse(t.chunk(chunk({ system_fingerprint: null })).slice(6));
  assert.ok(!("system_fingerprint" in a));
  const b = JSON.parse(t.chunk(chunk({ system_fingerprint: "fp_1" })).slice(6));
  assert.equal(b.system_fingerprint, "fp_1");
  assert.equal(b.model, "m");
});

Deno.test("passthrough: obfuscated frames are whole buckets in bytes (multi-byte text too)", () => {
  const t = createOpenAiStreamPassthrough({ model: "m", clientWantsUsage: true, obfuscate: true });
  for (const text of ["", "a", "hé", "x".repeat(200), "日本語テキスト"]) {
    const frame = t.chunk(chunk({
      choices: [{ index: 0, delta: { content: text }, finish_reason: null }],
    }));
    assert.equal(new TextEncoder().encode(frame).byteLength % OBFUSCATION_BUCKET, 0, text);
    assert.equal(JSON.parse(frame.slice(6)).choices[0].delta.content, text);
  }
  const plain = createOpenAiStreamPassthrough({ model: "m", clientWantsUsage: false });
  assert.ok(!plain.chunk(chunk({})).includes("obfuscation"));
});
