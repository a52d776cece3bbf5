import assert from "node:assert/strict";
import { parseJsonBody, readBody } from "./body.ts";
import { GatewayError } from "./errors.ts";

const enc = new TextEncoder();

/** A request whose body arrives as `parts`, declaring `length` when given. */
function post(parts: string[], length?: string): Request {
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      const p = parts.shift();
      if (p === undefined) c.close();
      else c.enqueue(enc.encode(p));
    },
  });
  const headers: Record<string, string> = length === undefined ? {} : { "content-length": length };
  return new Request("http://gw.test/v1/chat/completions", { method: "POST", body, headers });
}

const status = async (p: Promise<unknown>) => {
  try {
    await p;
    return 0;
  } catch (e) {
    assert.ok(e instanceof GatewayError, String(e));
    return e.status;
  }
};

Deno.test("readBody: declared and undeclared lengths give the exact bytes", async () => {
  const text = '{"model":"m","messages":[]}';
  for (const length of [String(enc.encode(text).length), undefined]) {
    const got = await readBody(post([text.slice(0, 5), text.slice(5)], length), 1024);
    assert.equal(new TextDecoder().decode(got), text);
  }
  assert.equal((await readBody(new Request("http://gw.test/", { method: "POST" }), 10)).length, 0);
});

Deno.test("readBody: over the limit is 413, declared or streamed; a bad length is 400", async () => {
  assert.equal(await status(readBody(post(["x"], "2048"), 1024)), 413);
  assert.equal(await status(readBody(post(["x".repeat(600), "x".repeat(600)]), 1024)), 413);
  assert.equal(await status(readBody(post(["x"], "1e3"), 1024)), 400);
  assert.equal(await status(readBody(post(["x"], "-1"), 1024)), 400);
});

Deno.test("strict parse: strings with escaped quotes and backslash runs end where JSON says", () => {
  const dup = [
    String.raw`{"a":"x\"y","a":1}`,
    String.raw`{"a\"":1,"a\"":2}`,
    String.raw`{"k\\":"\\\\","k\\":0}`,
    String.raw`{"v":"\\\"\\","v":0}`,
  ];
  for (const d of dup) {
    assert.throws(() => parseJsonBody(enc.encode(d)), /duplicate key/, d);
  }
  const ok = [
    String.raw`{"a":"x\"y","b":"\\","c":"\\\"","d":"\"\"\\"}`,
    JSON.stringify({ long: "q".repeat(100_000) + '"\\' + "z".repeat(1000), n: 1 }),
  ];
  for (const o of ok) assert.deepEqual(parseJsonBody(enc.encode(o)), JSON.parse(o));
});
