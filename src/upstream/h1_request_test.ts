import assert from "node:assert/strict";
import { type H1Client } from "./h1_client.ts";
import {
  dec,
  newClient,
  type RawRequest,
  rejectsTypeError,
  scriptedServer,
} from "../../tests/support/h1_servers.ts";

Deno.test("request heads are exact on the wire", async () => {
  const seen: RawRequest[] = [];
  const server = scriptedServer({}, [], seen);
  const { client, targets } = newClient({}, server.port);
  try {
    const r1 = await client.fetch(`${server.base}/a/b?c=d#frag`, {
      headers: { "X-A": "1", authorization: "Bearer k" },
    });
    await r1.body?.cancel();
    await client.fetch(`${server.base}/p`, { method: "POST" });
    await client.fetch(`${server.base}/s`, {
      method: "POST",
      headers: [["accept-encoding", "IDENTITY"], ["content-length", "6"]],
      body: "héllo",
    });
    await client.fetch(`${server.base}/h`, { headers: new Headers({ host: "api.example" }) });
    await client.fetch("http://upstream.test/d", {});
    await client.fetch("https://upstream.test:8443/e", { method: "DELETE" });
    await client.fetch("http://[::1]:8080/f", {});
    const p = server.port;
    assert.deepEqual(seen.map((r) => r.head), [
      `GET /a/b?c=d HTTP/1.1\r\nhost: 127.0.0.1:${p}\r\nX-A: 1\r\nauthorization: Bearer k\r\n` +
      "accept-encoding: identity\r\n\r\n",
      `POST /p HTTP/1.1\r\nhost: 127.0.0.1:${p}\r\ncontent-length: 0\r\n` +
      "accept-encoding: identity\r\n\r\n",
      `POST /s HTTP/1.1\r\nhost: 127.0.0.1:${p}\r\naccept-encoding: IDENTITY\r\ncontent-length: 6\r\n\r\n`,
      "GET /h HTTP/1.1\r\nhost: api.example\r\naccept-encoding: identity\r\n\r\n",
      "GET /d HTTP/1.1\r\nhost: upstream.test\r\naccept-encoding: identity\r\n\r\n",
      "DELETE /e HTTP/1.1\r\nhost: upstream.test:8443\r\naccept-encoding: identity\r\n\r\n",
      "GET /f HTTP/1.1\r\nhost: [::1]:8080\r\naccept-encoding: identity\r\n\r\n",
    ]);
    assert.equal(dec.decode(seen[2].body), "héllo");
    assert.ok(seen.every((r) => !/transfer-encoding/i.test(r.head)));
    assert.deepEqual(targets.slice(1), [
      { hostname: "upstream.test", port: 80, tls: false },
      { hostname: "upstream.test", port: 8443, tls: true },
      { hostname: "::1", port: 8080, tls: false },
    ]);
    assert.equal(targets.length, 4, "one connect per origin");
  } finally {
    client.close();
    await server.close();
  }
});

Deno.test("bad URLs, methods and header injection are rejected before connecting", async () => {
  const { client, targets } = newClient({}, 9);
  try {
    const base = "http://127.0.0.1:9";
    const secret = "sk-secret-123";
    const bad: [string, Parameters<H1Client["fetch"]>[1]][] = [
      ["ftp://127.0.0.1/x", {}],
      ["file:///etc/passwd", {}],
      ["not a url", {}],
      ["http://user:pw@127.0.0.1:9/", {}],
      [base, { headers: { authorization: `Bearer ${secret}\r\nx-evil: 1` } }],
      [base, { headers: { "x-a": `${secret}\nx-evil: 1` } }],
      [base, { headers: [["x-a", `${secret}\0`]] }],
      [base, { headers: { "x-a\r\nx-evil": "1" } }],
      [base, { headers: { "bad name": "1" } }],
      [base, { headers: { "x-a": `${secret}\u0100` } }],
      [base, { headers: { "transfer-encoding": "chunked" } }],
      [base, { headers: { connection: "close" } }],
      [base, { method: "POST", headers: { "content-length": "5" }, body: "abc" }],
      [base, { method: "GET", body: "abc" }],
      [base, { method: "CONNECT" }],
      [base, { method: "GE T" }],
    ];
    for (const [url, init] of bad) await rejectsTypeError(client.fetch(url, init), secret);
    assert.equal(targets.length, 0);
    assert.deepEqual(client.stats(), { open: 0, idle: 0 });
  } finally {
    client.close();
  }
});
