import assert from "node:assert/strict";
import net from "node:net";
import { bodySourceOf, H1_READ_BUFFER_BYTES, H1_SSE_READ_BUFFER_BYTES } from "./h1_client.ts";
import {
  dec,
  deferred,
  newClient,
  ok,
  rawServer,
  rejectsTypeError,
  scriptedServer,
  within,
} from "../../tests/support/h1_servers.ts";

Deno.test("chunked bodies: extensions, trailers, split writes; the connection is reused", async () => {
  const parts = [
    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5",
    ";ext=1\r\nhel",
    "lo\r",
    '\n6 ; a="b"\r\n world\r\nA\r\n',
    "0123456789\r\n0\r\nx-trailer: 1\r\n",
    "x-other: 2\r\n\r",
    "\n",
  ];
  const server = rawServer(async (p) => {
    for (let r = await p.request(); r !== null; r = await p.request()) {
      if (r.path === "/split") {
        for (const part of parts) {
          await p.send(part);
          await new Promise((res) => setTimeout(res, 2)); // separate reads on the client
        }
      } else {
        await p.send(
          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0000\r\n\r\n",
        );
      }
    }
  });
  const { client, targets } = newClient({}, server.port);
  try {
    const r = await client.fetch(`${server.base}/split`, {});
    assert.equal(await r.text(), "hello world0123456789");
    assert.equal(r.headers.get("x-trailer"), null);
    const r2 = await client.fetch(`${server.base}/one`, {});
    assert.equal(await r2.text(), "abc");
    assert.equal(targets.length, 1);
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("streaming is pull-driven: the first SSE event arrives before the server finishes", async () => {
  const firstSeen = deferred();
  const server = rawServer(async (p) => {
    await p.request();
    await p.send(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" +
        "transfer-encoding: chunked\r\n\r\n",
    );
    await p.send("d\r\ndata: first\n\n\r\n");
    await firstSeen.promise; // nothing more until the client has the first event
    await p.send("e\r\ndata: second\n\n\r\n0\r\n\r\n");
    await p.request();
  });
  const { client } = newClient({}, server.port);
  try {
    const res = await client.fetch(`${server.base}/sse`, { method: "POST", body: "{}" });
    const reader = res.body!.getReader();
    const first = await within(reader.read(), "first event");
    assert.equal(dec.decode(first.value), "data: first\n\n");
    firstSeen.resolve();
    const second = await within(reader.read(), "second event");
    assert.equal(dec.decode(second.value), "data: second\n\n");
    assert.equal((await reader.read()).done, true);
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });

    // Large bodies come in copies of at most one 4 KiB buffer.
    const body = "y".repeat(50_000);
    const big = scriptedServer({ "/big": ok(body) });
    const c2 = newClient({}, big.port).client;
    try {
      const r = await c2.fetch(`${big.base}/big`, {});
      let total = 0;
      for await (const chunk of r.body!) {
        assert.ok(chunk.length <= 4096, `chunk of ${chunk.length}`);
        total += chunk.length;
      }
      assert.equal(total, body.length);
    } finally {
      c2.close();
      await big.close();
    }
  } finally {
    firstSeen.resolve();
    client.close();
    await server.close();
  }
});

Deno.test("a body read through its source: bytes sent with the head, the end, reuse, abort", async () => {
  const aborted = deferred();
  const server = rawServer(async (p) => {
    await p.request();
    // The first event arrives in the same write as the head.
    await p.send(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" +
        "transfer-encoding: chunked\r\n\r\nd\r\ndata: first\n\n\r\n",
    );
    await p.send("e\r\ndata: second\n\n\r\n0\r\n\r\n");
    await p.request(); // the same connection serves the next request
    await p.send(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" +
        "transfer-encoding: chunked\r\n\r\n",
    );
    await aborted.promise; // then silence: the client aborts mid-body
  });
  const { client } = newClient({}, server.port);
  try {
    const res = await client.fetch(`${server.base}/sse`, { method: "POST", body: "{}" });
    assert.equal(bodySourceOf(new Response("x")), undefined, "only this client's bodies");
    const src = bodySourceOf(res)!;
    let text = "";
    for (let b = await src.read(); b !== null; b = await src.read()) text += dec.decode(b);
    assert.equal(text, "data: first\n\ndata: second\n\n");
    assert.equal(await src.read(), null, "stays ended");
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });

    const ctl = new AbortController();
    const res2 = await client.fetch(`${server.base}/sse`, {
      method: "POST",
      body: "{}",
      signal: ctl.signal,
    });
    const pending = bodySourceOf(res2)!.read();
    const reason = new Error("client left");
    ctl.abort(reason);
    await assert.rejects(within(pending, "aborted read"), (e) => e === reason);
    assert.deepEqual(client.stats(), { open: 0, idle: 0 }, "an aborted connection is closed");
  } finally {
    aborted.resolve();
    client.close();
    await server.close();
  }
});

Deno.test("an event stream is read through a 1 KiB buffer; the connection gets 4 KiB back after", async () => {
  const event = "data: " + "e".repeat(3000) + "\n\n";
  const body = "z".repeat(20_000);
  const firstSeen = deferred();
  const server = rawServer(async (p) => {
    await p.request();
    await p.send(
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" +
        "d\r\ndata: first\n\n\r\n",
    );
    await firstSeen.promise; // the rest only once the stream (and its buffer) is set up
    await p.send(`${event.length.toString(16)}\r\n${event}\r\n0\r\n\r\n`);
    await p.request();
    await p.send(
      "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n" +
        `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    );
    await p.request();
  });
  const { client } = newClient({}, server.port);
  try {
    const read = async (path: string, onFirst?: () => void) => {
      const r = await client.fetch(`${server.base}${path}`, {});
      const sizes: number[] = [];
      let text = "";
      for await (const chunk of r.body!) {
        if (sizes.length === 0) onFirst?.();
        sizes.push(chunk.length);
        text += dec.decode(chunk);
      }
      return { sizes, text };
    };
    const sse = await read("/sse", () => firstSeen.resolve());
    assert.equal(sse.text, "data: first\n\n" + event);
    assert.ok(sse.sizes.every((n) => n <= H1_SSE_READ_BUFFER_BYTES), `sse chunks ${sse.sizes}`);
    const big = await read("/big");
    assert.equal(big.text, body);
    assert.ok(big.sizes.some((n) => n > H1_SSE_READ_BUFFER_BYTES), `later chunks ${big.sizes}`);
    assert.ok(big.sizes.every((n) => n <= H1_READ_BUFFER_BYTES));
    assert.deepEqual(client.stats(), { open: 1, idle: 1 }, "one connection served both");
  } finally {
    firstSeen.resolve();
    client.close();
    await server.close();
  }
});

Deno.test("a reset mid-body errors the body stream", async () => {
  // Deno's own sockets close gracefully (FIN); node:net can send a real RST.
  const gotHead = deferred();
  const server = net.createServer((s) => {
    s.on("error", () => {});
    s.write("HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\npartial");
    gotHead.promise.then(() => s.resetAndDestroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  const { client } = newClient({}, port);
  try {
    const res = await client.fetch(`http://127.0.0.1:${port}/r`, {});
    const reader = res.body!.getReader();
    assert.equal(dec.decode((await reader.read()).value), "partial");
    gotHead.resolve();
    const e = await rejectsTypeError(reader.read());
    assert.match(e.message, /read failed/);
    assert.ok(e.cause instanceof Deno.errors.ConnectionReset);
    assert.deepEqual(client.stats(), { open: 0, idle: 0 });
  } finally {
    gotHead.resolve();
    client.close();
    await new Promise((r) => server.close(r));
  }
});
