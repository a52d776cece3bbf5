import assert from "node:assert/strict";
import tls from "node:tls";
import { X509Certificate } from "node:crypto";
import {
  issueServerCert,
  makeTestCa,
  startCountingTlsServer,
  type TestRequest,
} from "./tls_servers.ts";

const ca = await makeTestCa();
const cert = await issueServerCert(ca);

function connect(port: number): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: "127.0.0.1", port, ca: ca.certPem });
    s.once("secureConnect", () => resolve(s));
    s.once("error", reject);
  });
}

function readUntil(s: tls.TLSSocket, marker: string): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    const onData = (d: Uint8Array) => {
      text += new TextDecoder().decode(d);
      if (text.includes(marker)) {
        s.off("data", onData);
        resolve(text);
      }
    };
    s.on("data", onData);
  });
}

const settle = () => new Promise((r) => setTimeout(r, 100));

Deno.test("issued certificates chain to the CA and name the loopback hosts", () => {
  const leaf = new X509Certificate(cert.certPem);
  const root = new X509Certificate(ca.certPem);
  assert.ok(leaf.checkIssued(root));
  assert.ok(leaf.verify(root.publicKey));
  assert.ok(root.ca);
  assert.equal(leaf.ca, false);
  assert.equal(leaf.checkIP("127.0.0.1"), "127.0.0.1");
  assert.equal(leaf.checkHost("localhost"), "localhost");
  assert.match(cert.keyPem, /^-----BEGIN PRIVATE KEY-----\n/);
});

Deno.test("counts application bytes; a write issued before the handshake still arrives", async () => {
  const server = startCountingTlsServer(cert);
  try {
    // Negative control for pinning: a client that writes before checking the
    // peer (the pitfall) does leak its bytes, and the counter sees them.
    const s = tls.connect({ host: "127.0.0.1", port: server.port, ca: ca.certPem });
    s.write("early bytes");
    await new Promise<void>((r) => s.once("secureConnect", () => r()));
    s.destroy();
    await settle();
    assert.equal(server.bytesReceived(), "early bytes".length);
    assert.equal(server.connections(), 1);
    assert.equal(server.requests(), 0);
  } finally {
    await server.close();
  }
});

Deno.test("answers keep-alive requests, Content-Length and chunked, on one connection", async () => {
  const seen: TestRequest[] = [];
  const server = startCountingTlsServer({
    ...cert,
    respond: (req) => {
      seen.push(req);
      return req.path === "/chunked"
        ? {
          body: (async function* () {
            yield "ab";
            yield new TextEncoder().encode("cd");
          })(),
        }
        : { status: 202, headers: { "x-a": "1" }, body: new TextDecoder().decode(req.body) };
    },
  });
  const s = await connect(server.port);
  try {
    const first = readUntil(s, "hello");
    s.write("POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    const r1 = await first;
    assert.match(r1, /^HTTP\/1\.1 202 /);
    assert.match(r1, /x-a: 1\r\n/);
    assert.match(r1, /content-length: 5\r\n/);

    const second = readUntil(s, "0\r\n\r\n");
    s.write(
      "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n",
    );
    const r2 = await second;
    assert.match(r2, /transfer-encoding: chunked\r\n\r\n2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n$/);

    assert.equal(server.requests(), 2);
    assert.equal(server.connections(), 1);
    assert.deepEqual(seen.map((r) => [r.method, r.path, r.connection]), [
      ["POST", "/plain", 1],
      ["POST", "/chunked", 1],
    ]);
    assert.equal(new TextDecoder().decode(seen[1]!.body), "xyz");
  } finally {
    s.destroy();
    await server.close();
  }
});

Deno.test("close() does not hang on a response parked on a gate", async () => {
  const server = startCountingTlsServer({
    ...cert,
    respond: () => ({
      body: (async function* () {
        yield "x";
        await new Promise(() => {});
      })(),
    }),
  });
  const s = await connect(server.port);
  const got = readUntil(s, "1\r\nx\r\n");
  s.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  await got;
  await server.close();
  s.destroy();
});
