import assert from "node:assert/strict";
import tls from "node:tls";
import { createUpstreamTransport, type UpstreamTransport } from "./transport.ts";
import { socketConnector } from "./socket_connector.ts";
import { PinMismatchError } from "./pinned_tls.ts";
import { createH1Client } from "./h1_client.ts";
import { issueServerCert, makeCa } from "../demo/certs.ts";
import {
  issueServerCert as issueTestCert,
  makeTestCa,
  startCountingTlsServer,
  type TestRequest,
} from "../../tests/support/tls_servers.ts";
import type { UpstreamFetch } from "./forward.ts";

const net = { connect: Deno.connect, startTls: Deno.startTls };
const never: UpstreamFetch = () => Promise.reject(new Error("fetch must not be used"));

function transport(
  extra: Partial<Parameters<typeof createUpstreamTransport>[0]> = {},
): UpstreamTransport {
  return createUpstreamTransport({
    choice: "http1",
    net,
    tlsConnect: tls.connect,
    fetch: never,
    now: () => performance.now(),
    ...extra,
  });
}

/** A loopback upstream that echoes the request body and counts TCP connections. */
function echoServer() {
  const ports = new Set<number>();
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen() {},
  }, async (req, info) => {
    ports.add((info.remoteAddr as Deno.NetAddr).port);
    return new Response(await req.arrayBuffer(), {
      headers: { "content-type": "application/json", "x-method": req.method },
    });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    connections: () => ports.size,
    close: () => server.shutdown(),
  };
}

const signal = () => new AbortController().signal;

Deno.test("transport: plain requests go through the HTTP/1.1 client and reuse the connection", async () => {
  const up = echoServer();
  const t = transport();
  try {
    for (const text of ['{"a":1}', '{"b":2}']) {
      let written = 0;
      const res = await t.fetch(`${up.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: new TextEncoder().encode(text),
        signal: signal(),
        onWritten: () => written++,
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("x-method"), "POST");
      assert.equal(await res.text(), text);
      assert.equal(written, 1, "onWritten once the request bytes were written");
    }
    assert.equal(up.connections(), 1, "the second request reuses the kept-alive connection");
    // Only bytes or text go upstream; anything else is refused before a socket opens.
    await assert.rejects(
      t.fetch(up.url, { method: "POST", body: new Blob(["x"]), signal: signal() }),
      TypeError,
    );
    assert.equal(up.connections(), 1);
  } finally {
    t.close();
    await up.close();
  }
});

Deno.test("transport: choice fetch sends plain requests through fetch only", async () => {
  const calls: string[] = [];
  const t = transport({
    choice: "fetch",
    fetch: (url) => {
      calls.push(url);
      return Promise.resolve(new Response("ok"));
    },
  });
  const res = await t.fetch("http://upstream.invalid/x", { signal: signal() });
  assert.equal(await res.text(), "ok");
  assert.deepEqual(calls, ["http://upstream.invalid/x"]);
  t.close();
});

Deno.test("socket connector and withCa: TLS checked against the runtime roots or the given CA", async () => {
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
  const url = `https://localhost:${server.addr.port}/`;
  const t = transport();
  const direct = createH1Client({
    connect: socketConnector(net, { caCerts: [ca.certPem] }),
    now: () => performance.now(),
  });
  try {
    assert.equal(await (await t.withCa(ca.certPem)(url, { signal: signal() })).text(), "secure");
    assert.equal(await (await direct.fetch(url, {})).text(), "secure");
    // Without the test CA the same server is refused: the chain is really checked.
    await assert.rejects(t.fetch(url, { signal: signal() }), TypeError);
  } finally {
    t.close();
    direct.close();
    await server.shutdown();
  }
});

const testCa = await makeTestCa();
const good = await issueTestCert(testCa);
const other = await issueTestCert(testCa);
const echo = (req: TestRequest) => ({ status: 200, body: `${req.connection}` });

Deno.test("pinned: kept alive (one handshake for many requests), per key, dropped on invalidation", async () => {
  const server = startCountingTlsServer({ ...good, respond: echo });
  let handshakes = 0;
  const t = transport({ onPinnedHandshake: () => handshakes++ });
  const base = `https://127.0.0.1:${server.port}/`;
  const pin = { provider: "tee", spkiSha256: good.spkiSha256, ca: testCa.certPem };
  try {
    for (let i = 0; i < 5; i++) {
      const res = await t.pinned(pin)(base, { method: "POST", body: "x", signal: signal() });
      assert.equal(await res.text(), "1");
    }
    assert.equal(handshakes, 1, "steady state: no handshake per request");
    assert.equal(server.connections(), 1);
    // Another API key (partition) does not share the connection.
    await (await t.pinned(pin)(base, { method: "POST", partition: "k2", signal: signal() })).text();
    assert.equal(handshakes, 2);
    // The session is invalidated: pooled pinned connections are closed, the next one is new.
    t.dropPinned("tee");
    const res = await t.pinned(pin)(base, { method: "POST", body: "x", signal: signal() });
    assert.equal(await res.text(), "3");
    assert.equal(handshakes, 3);
    assert.equal(server.requests(), 7);
  } finally {
    t.close();
    await server.close();
  }
});

Deno.test("pinned: a mismatch writes nothing and never calls onWritten", async () => {
  const server = startCountingTlsServer({ ...other, respond: echo });
  const t = transport();
  let mismatches = 0;
  let written = 0;
  try {
    const f = t.pinned({
      provider: "tee",
      spkiSha256: good.spkiSha256,
      ca: testCa.certPem,
      onMismatch: () => mismatches++,
    });
    await assert.rejects(
      f(`https://127.0.0.1:${server.port}/`, {
        method: "POST",
        body: "prompt",
        signal: signal(),
        onWritten: () => written++,
      }),
      PinMismatchError,
    );
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(server.bytesReceived(), 0);
    assert.equal(written, 0);
    assert.equal(mismatches, 1);
  } finally {
    t.close();
    await server.close();
  }
});
