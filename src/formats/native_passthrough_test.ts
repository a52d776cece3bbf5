import assert from "node:assert/strict";
import {
  nativeBody,
  nativeMessagesPassthrough,
  nativeResponsesPassthrough,
} from "./native_passthrough.ts";

Deno.test("nativeBody: the candidate's model, no provider block, defaults only where absent", () => {
  const body = { model: "alias", provider: { order: ["p"] }, input: "hi", max_output_tokens: 5 };
  assert.deepEqual(
    JSON.parse(JSON.stringify(nativeBody(body, "upstream-m", { max_output_tokens: 9 }))),
    { model: "upstream-m", input: "hi", max_output_tokens: 5 },
  );
  assert.deepEqual(
    JSON.parse(
      JSON.stringify(nativeBody({ model: "a", input: "x" }, "u", { max_output_tokens: 9 })),
    ),
    { model: "u", input: "x", max_output_tokens: 9 },
  );
});

Deno.test("native passthrough: an upstream's type never writes a frame of its own", () => {
  for (const t of [nativeMessagesPassthrough("m"), nativeResponsesPassthrough("m")]) {
    const injected = t.chunk(
      { type: 'message_start\ndata: {"type":"injected"}\n\nevent: x' } as never,
    );
    assert.equal(injected.split("\n\n").filter((f) => f !== "").length, 1, injected);
    assert.ok(injected.startsWith("event: message\ndata: "), injected);
    assert.ok(t.chunk({ sequence_number: 1 } as never).startsWith("event: message\n"));
    // A plain name passes as before; the upstream's own event line wins.
    assert.ok(
      t.chunk({ type: "content_block_stop" } as never).startsWith("event: content_block_stop\n"),
    );
    assert.ok(t.chunk({ type: "x" } as never, "ping").startsWith("event: ping\n"));
  }
});
