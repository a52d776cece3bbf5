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

Deno.test("strict parse: refuses exactly the bytes the fatal UTF-8 decoder refuses", () => {
  const fatal = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  const verdict = (b: Uint8Array) => {
    try {
      fatal.decode(b);
      return "ok";
    } catch {
      return "bad";
    }
  };
  const utf8Refusal = (b: Uint8Array) => {
    try {
      parseJsonBody(b);
      return "ok";
    } catch (e) {
      return /UTF-8/.test(String(e)) ? "bad" : "ok"; // refused for something else: valid UTF-8
    }
  };
  const wrap = (inner: number[]) => new Uint8Array([0x22, ...inner, 0x22]); // a JSON string
  const named: number[][] = [
    [0xc0, 0x80], // overlong NUL
    [0xe0, 0x80, 0x80], // overlong
    [0xed, 0xa0, 0x80], // a UTF-16 surrogate encoded (CESU-8)
    [0xf4, 0x90, 0x80, 0x80], // past U+10FFFF
    [0xff],
    [0xe2, 0x82], // truncated
    [0xf0, 0x9f, 0x98, 0x80], // 😀
    [0xef, 0xbb, 0xbf], // BOM inside a string
  ];
  for (const n of named) assert.equal(utf8Refusal(wrap(n)), verdict(wrap(n)), n.join(","));
  // Seeded random byte strings biased towards UTF-8 lead and continuation bytes.
  let seed = 27;
  const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const pool = [0x41, 0x80, 0xbf, 0xc2, 0xc0, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xa0, 0x9f];
  const edges = [0x7e, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfffd, 0xffff, 0x10000, 0x10ffff];
  const seen = { ok: 0, bad: 0 };
  for (let i = 0; i < 5000; i++) {
    let inner: number[];
    if (i % 2 === 0) {
      inner = Array.from(
        { length: 1 + Math.floor(next() * 6) },
        () => next() < 0.8 ? pool[Math.floor(next() * pool.length)] : Math.floor(next() * 256),
      );
    } else {
      // Valid text at the edges of each encoding length, one byte changed half the time.
      const cp = edges[Math.floor(next() * edges.length)];
      inner = [...new TextEncoder().encode(String.fromCodePoint(cp))];
      if (next() < 0.5) inner[Math.floor(next() * inner.length)] = Math.floor(next() * 256);
    }
    inner = inner.filter((b) => b !== 0x22 && b !== 0x5c && b >= 0x20);
    const b = wrap(inner);
    assert.equal(utf8Refusal(b), verdict(b), inner.map((x) => x.toString(16)).join(" "));
    seen[verdict(b)]++;
  }
  assert.ok(seen.ok > 500 && seen.bad > 500, JSON.stringify(seen));
});
