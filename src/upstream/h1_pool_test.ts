import assert from "node:assert/strict";
import {
  newClient,
  ok,
  rawServer,
  scriptedServer,
  until,
  withServe,
} from "../../tests/support/h1_servers.ts";

Deno.test("no reuse after connection: close, HTTP/1.0, EOF framing, TE+CL or a cancelled body", async () => {
  const server = scriptedServer({
    "/ka": ok("ka"),
    "/close": ok("c", "connection: close\r\n"),
    "/h10": "HTTP/1.0 200 OK\r\ncontent-length: 3\r\n\r\nh10",
    "/h10ka": "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 3\r\n\r\nh10",
    "/h10te": "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n" +
      "2\r\nte\r\n0\r\n\r\n",
    "/eof": "HTTP/1.1 200 OK\r\n\r\nuntil eof",
    "/tecl": "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n" +
      "2\r\nte\r\n0\r\n\r\n",
    // A body that stalls after its first bytes: a cancelled reader leaves it half-read.
    "/stall": "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nabc",
  }, ["/eof"]);
  const { client, targets } = newClient({}, server.port);
  const get = async (path: string) =>
    await (await client.fetch(`${server.base}${path}`, {})).text();
  try {
    const steps: [string, string, number][] = [
      // path, body, connects after the *next* request to /ka
      ["/close", "c", 2],
      ["/h10", "h10", 3],
      ["/h10ka", "h10", 3],
      ["/eof", "until eof", 4],
      ["/tecl", "te", 5],
      ["/h10te", "te", 6],
    ];
    assert.equal(await get("/ka"), "ka");
    for (const [path, body, connects] of steps) {
      assert.equal(await get(path), body, path);
      assert.equal(await get("/ka"), "ka");
      assert.equal(targets.length, connects, `after ${path}`);
    }
    const tecl = await client.fetch(`${server.base}/tecl`, {});
    assert.equal(tecl.headers.get("content-length"), null, "transfer-encoding wins");
    await tecl.text();

    const cancelled = await client.fetch(`${server.base}/stall`, {});
    const reader = cancelled.body!.getReader();
    await reader.read();
    await reader.cancel();
    assert.deepEqual(client.stats(), { open: 0, idle: 0 }, "a cancelled body closes at once");
    assert.equal(await get("/ka"), "ka");
    assert.equal(targets.length, 8);
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("a pooled connection the server closed is dropped; the next request reconnects", async () => {
  const server = rawServer(async (p) => {
    for (let r = await p.request(); r !== null; r = await p.request()) {
      await p.send(ok("x"));
      if (r.path === "/x") return;
      // Bytes nobody asked for, sent while the connection sits in the pool.
      await new Promise((res) => setTimeout(res, 10));
      await p.send(ok("unsolicited"));
    }
  });
  const { client, targets } = newClient({}, server.port);
  try {
    // The server closes after answering, without saying `connection: close`.
    assert.equal(await (await client.fetch(`${server.base}/x`, {})).text(), "x");
    await until(() => client.stats().idle === 0, "idle connection dropped");
    assert.deepEqual(client.stats(), { open: 0, idle: 0 });
    assert.equal(await (await client.fetch(`${server.base}/x`, {})).text(), "x");
    assert.equal(targets.length, 2);

    assert.equal(await (await client.fetch(`${server.base}/junk`, {})).text(), "x");
    await until(() => client.stats().open === 0, "connection with stray bytes dropped");
    assert.equal(await (await client.fetch(`${server.base}/x`, {})).text(), "x");
    assert.equal(targets.length, 4);
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("idle timeout and maxIdlePerOrigin bound the pool", async () => {
  let clock = 0;
  const server = scriptedServer({ "/x": ok("x") });
  const { client, targets } = newClient(
    { now: () => clock, idleTimeoutMs: 1000, maxIdlePerOrigin: 1 },
    server.port,
  );
  try {
    const get = async () => await (await client.fetch(`${server.base}/x`, {})).text();
    await get();
    clock += 1000;
    await get(); // exactly the timeout: still reused
    assert.equal(targets.length, 1);
    clock += 1001;
    await get();
    assert.equal(targets.length, 2, "a connection idle past the timeout is not reused");
    assert.deepEqual(client.stats(), { open: 1, idle: 1 });

    const [a, b] = await Promise.all([
      client.fetch(`${server.base}/x`, {}),
      client.fetch(`${server.base}/x`, {}),
    ]);
    await a.text();
    await b.text();
    assert.equal(targets.length, 3);
    assert.deepEqual(client.stats(), { open: 1, idle: 1 }, "one idle connection per origin");
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("connections are reused only within a partition (one API key's requests)", async () => {
  const ports: number[] = [];
  await withServe((_req, info) => {
    ports.push((info.remoteAddr as Deno.NetAddr).port);
    return new Response("ok");
  }, async (base, client) => {
    for (const partition of ["a", "b", "a", "b", undefined, undefined]) {
      const res = await client.fetch(`${base}/x`, { method: "POST", body: "x", partition });
      assert.equal(await res.text(), "ok");
    }
    assert.equal(new Set(ports).size, 3);
    assert.equal(ports[0], ports[2], "partition a reuses its own connection");
    assert.equal(ports[1], ports[3], "partition b reuses its own connection");
    assert.notEqual(ports[0], ports[1]);
    assert.equal(ports[4], ports[5]);
    assert.ok(ports[4] !== ports[0] && ports[4] !== ports[1]);
    assert.deepEqual(client.stats(), { open: 3, idle: 3 });
  });
});
