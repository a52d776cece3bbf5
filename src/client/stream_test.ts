import assert from "node:assert/strict";
import { isFinalEvent, verifiedStream } from "./stream.ts";

const enc = new TextEncoder();

function source(chunks: string[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const x of chunks) c.enqueue(enc.encode(x));
      c.close();
    },
  });
}

Deno.test("isFinalEvent: the terminators of OpenAI, Anthropic and Responses streams", () => {
  assert.ok(isFinalEvent("data: [DONE]"));
  assert.ok(isFinalEvent("event: message_stop\ndata: {}"));
  assert.ok(isFinalEvent("event: response.completed\ndata: {}"));
  assert.ok(isFinalEvent("event: error\ndata: {}"));
  assert.ok(!isFinalEvent('data: {"choices":[]}'));
  assert.ok(!isFinalEvent("event: message_delta\ndata: {}"));
});

Deno.test("verifiedStream: events flow, the final one waits for the verdict over the exact wire bytes", async () => {
  const wire = ['data: {"a":1}\n\n', 'data: {"a":2}\n\nda', "ta: [DONE]\n\n"];
  let verifiedWith = "";
  const out = verifiedStream(source(wire), {
    open: null,
    verify: (w) => {
      verifiedWith = new TextDecoder().decode(w);
      return Promise.resolve("ok");
    },
    beforeFinal: () => ": verdict\n\n",
  });
  const reader = out.getReader();
  const first = new TextDecoder().decode((await reader.read()).value);
  assert.equal(first, 'data: {"a":1}\n\n');
  assert.equal(verifiedWith, "", "not verified before the source ended");
  let rest = "";
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    rest += new TextDecoder().decode(r.value);
  }
  assert.equal(verifiedWith, wire.join(""));
  assert.equal(rest, 'data: {"a":2}\n\n: verdict\n\ndata: [DONE]\n\n');
});

Deno.test("verifiedStream: a failed verdict errors the stream instead of its final event, or replaces it", async () => {
  const failing = () => Promise.reject(new Error("bad receipt"));
  const text = async (s: ReadableStream<Uint8Array>) => {
    let t = "";
    for await (const c of s) t += new TextDecoder().decode(c);
    return t;
  };
  await assert.rejects(
    text(
      verifiedStream(source(['data: {"a":1}\n\ndata: [DONE]\n\n']), {
        open: null,
        verify: failing,
      }),
    ),
    /bad receipt/,
  );
  const replaced = await text(
    verifiedStream(source(['data: {"a":1}\n\ndata: [DONE]\n\n']), {
      open: null,
      verify: failing,
      onFailure: () => 'data: {"error":{}}\n\n',
    }),
  );
  assert.equal(replaced, 'data: {"a":1}\n\ndata: {"error":{}}\n\n');
});
