import assert from "node:assert/strict";
import { chunkReader, drainRest, upstreamBodyReader } from "./chunk_reader.ts";

/** A byte stream (as Deno's fetch bodies are) that delivers `parts` in order. */
function byteStream(parts: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    type: "bytes",
    pull(c) {
      const p = parts.shift();
      if (p) return c.enqueue(p.slice()); // enqueue transfers (detaches) what it is given
      c.close();
      c.byobRequest?.respond(0); // a pending BYOB read ends only when its request is answered
    },
  });
}

async function readAll(body: ReadableStream<Uint8Array>, bufferBytes?: number) {
  const r = chunkReader(body, bufferBytes);
  const sizes: number[] = [];
  const bytes: number[] = [];
  while (true) {
    const { done, value } = await r.read();
    if (done) break;
    sizes.push(value.byteLength);
    bytes.push(...value); // consumed before the next read reuses the buffer
  }
  return { sizes, bytes };
}

Deno.test("byte streams: chunks larger than the buffer arrive whole, in order, over several reads", async () => {
  const big = Uint8Array.from({ length: 10_000 }, (_, i) => i % 251);
  const { sizes, bytes } = await readAll(byteStream([new Uint8Array([1, 2, 3]), big]), 4096);
  assert.deepEqual(sizes, [3, 4096, 4096, 1808]);
  assert.deepEqual(bytes, [1, 2, 3, ...big]);
});

Deno.test("byte streams: one buffer is reused, never a fresh one per read", async () => {
  const r = chunkReader(byteStream([new Uint8Array([1]), new Uint8Array([2])]), 64);
  const a = await r.read();
  const backing = a.value!.buffer.byteLength;
  const b = await r.read();
  assert.equal(backing, 64);
  assert.equal(b.value!.buffer.byteLength, 64);
  assert.equal(a.value!.byteLength, 0, "the previous chunk's buffer was handed on");
});

Deno.test("fetch bodies are read through the small buffer", async () => {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response("data: x\n\n"),
  );
  try {
    const res = await fetch(`http://127.0.0.1:${server.addr.port}/`);
    const r = chunkReader(res.body!, 128);
    const first = await r.read();
    assert.equal(new TextDecoder().decode(first.value), "data: x\n\n");
    assert.equal(first.value!.buffer.byteLength, 128);
    assert.equal((await r.read()).done, true);
  } finally {
    await server.shutdown();
  }
});

Deno.test("other streams fall back to the default reader; cancel reaches the source", async () => {
  let cancelled: unknown = null;
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(new Uint8Array([7, 8]));
    },
    cancel(reason) {
      cancelled = reason;
    },
  });
  const r = chunkReader(body);
  assert.deepEqual([...(await r.read()).value!], [7, 8]);
  await r.cancel("bye");
  assert.equal(cancelled, "bye");
});

/** A default stream of `parts` (then open forever when `hang`), recording a cancel. */
function tail(parts: number, hang: boolean) {
  const seen = { cancelled: false, closed: false };
  let left = parts;
  const body = new ReadableStream<Uint8Array>({
    pull(c): Promise<void> | void {
      if (hang && left === 0) return new Promise<void>(() => {}); // never answers
      if (left > 0) {
        left--;
        c.enqueue(new Uint8Array([1]));
        return;
      }
      seen.closed = true;
      c.close();
    },
    cancel() {
      seen.cancelled = true;
    },
  }, { highWaterMark: 0 });
  return { reader: chunkReader(body), seen };
}

const until = async (pred: () => boolean) => {
  for (let i = 0; i < 200 && !pred(); i++) await new Promise((r) => setTimeout(r, 5));
};

Deno.test("drainRest: a short tail is read to its end (the connection can be reused), not cancelled", async () => {
  const { reader, seen } = tail(1, false);
  drainRest(reader, { maxReads: 4, graceMs: 1_000 });
  await until(() => seen.closed);
  assert.ok(seen.closed && !seen.cancelled);
});

Deno.test("drainRest: more than maxReads, or no end within the grace time, cancels", async () => {
  const long = tail(10, false);
  drainRest(long.reader, { maxReads: 4, graceMs: 1_000 });
  await until(() => long.seen.cancelled);
  assert.ok(long.seen.cancelled && !long.seen.closed);

  const hung = tail(0, true);
  drainRest(hung.reader, { maxReads: 4, graceMs: 30 });
  await until(() => hung.seen.cancelled);
  assert.ok(hung.seen.cancelled);
});

Deno.test("upstreamBodyReader: null without a body; any fetch Response's bytes otherwise", async () => {
  assert.equal(upstreamBodyReader(new Response(null, { status: 204 })), null);
  const r = upstreamBodyReader(new Response("hello, upstream"))!;
  let text = "";
  for (let c = await r.read(); !c.done; c = await r.read()) {
    text += new TextDecoder().decode(c.value);
  }
  assert.equal(text, "hello, upstream");
});
