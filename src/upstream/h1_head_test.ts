import assert from "node:assert/strict";
import {
  newClient,
  ok,
  rawServer,
  rejectsTypeError,
  scriptedServer,
  withServe,
} from "../../tests/support/h1_servers.ts";

Deno.test("status text, repeated headers, interim 1xx, HEAD and 204 (raw server)", async () => {
  const server = scriptedServer({
    "/a": "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n" +
      "HTTP/1.1 202 Quite Accepted\r\nX-R: 1\r\nx-r:2\r\nset-cookie: a=1\r\n" +
      "set-cookie: b=2\r\ncontent-length: 2\r\n\r\nok",
    "/head": "HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n",
    "/204": "HTTP/1.1 204 No Content\r\n\r\n",
    "/304": "HTTP/1.1 304 Not Modified\r\ncontent-length: 10\r\n\r\n",
    "/205": "HTTP/1.1 205 Reset Content\r\ncontent-length: 0\r\n\r\n",
    // obs-text (a Latin-1 byte) is kept as that byte, as fetch does.
    "/latin": Uint8Array.from(
      "HTTP/1.1 200 OK\r\nx-latin: caf\xe9\r\ncontent-length: 0\r\n\r\n",
      (ch) => ch.charCodeAt(0),
    ),
  });
  const { client, targets } = newClient({}, server.port);
  try {
    const a = await client.fetch(`${server.base}/a`, {});
    assert.equal(a.status, 202);
    assert.equal(a.statusText, "Quite Accepted");
    assert.equal(a.headers.get("x-r"), "1, 2");
    assert.deepEqual(a.headers.getSetCookie(), ["a=1", "b=2"]);
    assert.equal(a.headers.get("link"), null, "interim headers are not merged");
    assert.equal(await a.text(), "ok");

    const head = await client.fetch(`${server.base}/head`, { method: "HEAD" });
    assert.equal(head.body, null);
    assert.equal(head.headers.get("content-length"), "1234");
    for (const s of [204, 304, 205]) {
      const r = await client.fetch(`${server.base}/${s}`, {});
      assert.equal(r.status, s);
      assert.equal(r.body, null);
    }
    const latin = await client.fetch(`${server.base}/latin`, {});
    assert.equal(latin.headers.get("x-latin"), "caf\u00e9");
    assert.equal(targets.length, 1);
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("coded answers are refused, never decoded; no coding may be asked for", async () => {
  // A gzip bomb: 1 MiB of zeros compresses to ~1 KiB; a decoder would inflate it.
  const bomb = new Uint8Array(
    await new Response(
      new Blob([new Uint8Array(1024 * 1024)]).stream().pipeThrough(new CompressionStream("gzip")),
    ).arrayBuffer(),
  );
  let served = 0;
  await withServe((req) => {
    served++;
    const coding = new URL(req.url).pathname.slice(1);
    return new Response(bomb, { headers: { "content-encoding": coding } });
  }, async (base, client) => {
    for (const coding of ["gzip", "x-gzip", "deflate", "br", "identity, gzip"]) {
      await assert.rejects(
        client.fetch(`${base}/${encodeURIComponent(coding)}`, {}),
        (e: Error) =>
          e instanceof TypeError && /content-encoding was not asked for/.test(e.message),
        coding,
      );
    }
    assert.equal(served, 5);
    assert.equal(client.stats().open, 0, "a refused answer's connection is closed");
    await assert.rejects(
      client.fetch(`${base}/gzip`, { headers: { "accept-encoding": "gzip" } }),
      /accept-encoding/,
    );
    assert.equal(served, 5, "refused before connecting");
  });
});

Deno.test("malformed responses reject with TypeErrors that quote no header values", async () => {
  const secret = "sk-leak-42";
  const headLevel: string[] = [
    "HTTP/1.1 20 OK\r\n\r\n",
    "HTTP/2.0 200 OK\r\n\r\n",
    "HTTP/1.1 200 OK\r\nbad header: x\r\n\r\n",
    `HTTP/1.1 200 OK\r\nx-a: ${secret}\x01\r\n\r\n`,
    `HTTP/1.1 200 OK\r\nx-a: 1\r\n ${secret}\r\n\r\n`,
    `HTTP/1.1 200 OK\nx-a: ${secret}\n\n`,
    "HTTP/1.1 200 OK\r\ncontent-length: 5, 6\r\n\r\nhello",
    "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
    "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n",
    "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n",
    "HTTP/1.1 600 Nope\r\ncontent-length: 0\r\n\r\n",
    "HTTP/1.1 200 OK\r\ncontent-encoding: br\r\ncontent-length: 0\r\n\r\n",
    "",
  ];
  const chunked = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
  const bodyLevel: string[] = [
    `${chunked}zz\r\n${secret}\r\n0\r\n\r\n`,
    `${chunked}+5\r\nhello\r\n0\r\n\r\n`,
    `${chunked}5\r\nhelloXX0\r\n\r\n`,
    `${chunked}5\nhello\r\n0\r\n\r\n`,
    `${chunked}5 x\r\nhello\r\n0\r\n\r\n`,
    `${chunked}fffffffffffffffff\r\n`,
    `${chunked}1;${"a".repeat(5000)}\r\nx\r\n0\r\n\r\n`,
    `${chunked}5\r\nhel`,
    "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello",
  ];
  const all = [...headLevel, ...bodyLevel];
  const server = rawServer(async (p) => {
    const r = await p.request();
    if (r) await p.send(all[Number(r.path.slice(1))]);
  });
  const { client } = newClient({}, server.port);
  try {
    for (let i = 0; i < all.length; i++) {
      const url = `${server.base}/${i}`;
      if (i < headLevel.length) {
        await rejectsTypeError(client.fetch(url, {}), secret);
      } else {
        const res = await client.fetch(url, {});
        await rejectsTypeError(res.text(), secret);
      }
      assert.deepEqual(client.stats(), { open: 0, idle: 0 }, `case ${i}`);
    }
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("response heads: large ones span reads, oversized ones are refused", async () => {
  const long = "v".repeat(10_000);
  const server = scriptedServer({
    "/long": ok("l", `x-long: ${long}\r\n`),
    "/over": ok("o", `x-over: ${"w".repeat(2000)}\r\n`),
    "/fits": ok("f", `x-fits: ${"w".repeat(900)}\r\n`),
  });
  const { client } = newClient({}, server.port);
  const small = newClient({ maxHeaderBytes: 1024 }, server.port).client;
  try {
    const r = await client.fetch(`${server.base}/long`, {});
    assert.equal(r.headers.get("x-long"), long);
    assert.equal(await r.text(), "l");
    assert.equal(await (await small.fetch(`${server.base}/fits`, {})).text(), "f");
    const e = await rejectsTypeError(small.fetch(`${server.base}/over`, {}));
    assert.match(e.message, /response head too large/);
  } finally {
    client.close();
    small.close();
    await server.close();
  }
});
