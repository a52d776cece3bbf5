import assert from "node:assert/strict";
import { createUpstreamClient, socketConnector } from "./upstream_client.ts";
import { issueServerCert, makeCa } from "../demo/certs.ts";
import type { UpstreamFetch } from "./forward.ts";

/** A loopback upstream that echoes the request body and counts TCP connections. */
function echoServer() {
  let connections = 0;
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen() {},
  }, async (req) => {
    return new Response(await req.arrayBuffer(), {
      headers: { "content-type": "application/json", "x-method": req.method },
    });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    get connections() {
      return connections;
    },
    countConnection: () => connections++,
    close: () => server.shutdown(),
  };
}

Deno.test("upstream client: http1 sends through the injected connector and reuses the connection", async () => {
  const up = echoServer();
  const never: UpstreamFetch = () => Promise.reject(new Error("fetch must not be used"));
  const client = createUpstreamClient("http1", {
    connect: async ({ hostname, port, tls }) => {
      assert.equal(tls, false);
      up.countConnection();
      return await Deno.connect({ hostname, port });
    },
    fetch: never,
    now: () => performance.now(),
  });
  try {
    for (const text of ['{"a":1}', '{"b":2}']) {
      const res = await client.fetch(`${up.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: new TextEncoder().encode(text),
        signal: new AbortController().signal,
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("x-method"), "POST");
      assert.equal(await res.text(), text);
    }
    assert.equal(up.connections, 1, "the second request reuses the kept-alive connection");
    // Only bytes or text go upstream; anything else is refused before a socket opens.
    await assert.rejects(
      client.fetch(up.url, {
        method: "POST",
        body: new Blob(["x"]),
        signal: new AbortController().signal,
      }),
      TypeError,
    );
    assert.equal(up.connections, 1);
  } finally {
    client.close();
    await up.close();
  }
});

Deno.test("upstream client: fetch is passed through unchanged", async () => {
  const calls: string[] = [];
  const f: UpstreamFetch = (url) => {
    calls.push(url);
    return Promise.resolve(new Response("ok"));
  };
  const client = createUpstreamClient("fetch", {
    connect: () => Promise.reject(new Error("no sockets here")),
    fetch: f,
    now: () => 0,
  });
  const res = await client.fetch("http://upstream.invalid/x", {
    signal: new AbortController().signal,
  });
  assert.equal(await res.text(), "ok");
  assert.deepEqual(calls, ["http://upstream.invalid/x"]);
  client.close();
});

Deno.test("socket connector: TLS over a no-delay TCP socket, the certificate checked", async () => {
  const now = Date.now();
  const ca = await makeCa({ now });
  const cert = await issueServerCert(ca, { hosts: ["localhost"], now });
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: cert.certPem,
    key: cert.keyPem,
    onListen() {},
  }, () => new Response("secure"));
  const port = server.addr.port;
  const net = { connect: Deno.connect, startTls: Deno.startTls };
  const client = createUpstreamClient("http1", {
    connect: socketConnector(net, { caCerts: [ca.certPem] }),
    fetch: () => Promise.reject(new Error("unused")),
    now: () => performance.now(),
  });
  // Without the test CA the same server is refused: the chain is really checked.
  const strict = createUpstreamClient("http1", {
    connect: socketConnector(net),
    fetch: () => Promise.reject(new Error("unused")),
    now: () => performance.now(),
  });
  try {
    const res = await client.fetch(`https://localhost:${port}/`, {
      signal: new AbortController().signal,
    });
    assert.equal(await res.text(), "secure");
    await assert.rejects(
      strict.fetch(`https://localhost:${port}/`, { signal: new AbortController().signal }),
      TypeError,
    );
  } finally {
    client.close();
    strict.close();
    await server.shutdown();
  }
});
