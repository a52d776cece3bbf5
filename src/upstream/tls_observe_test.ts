import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import tls from "node:tls";
import {
  issueServerCert,
  makeTestCa,
  startCountingTlsServer,
} from "../../tests/support/tls_servers.ts";
import { spkiSha256FromPem } from "./spki.ts";
import { observeTls } from "./tls_observe.ts";

const ca = await makeTestCa();
const cert = await issueServerCert(ca);
const rogueCa = await makeTestCa({ commonName: "Rogue CA" });
const localhostOnly = await issueServerCert(ca, { hosts: ["localhost"] });

Deno.test("observeTls: reports the SPKI pin and certificate, writes no application byte", async () => {
  const server = startCountingTlsServer({ certPem: cert.certPem, keyPem: cert.keyPem });
  try {
    const obs = await observeTls(tls.connect, `https://127.0.0.1:${server.port}`, ca.certPem);
    assert.equal(obs.spkiSha256, cert.spkiSha256);
    assert.equal(obs.spkiSha256, spkiSha256FromPem(cert.certPem));
    assert.equal(
      new X509Certificate(obs.certDer).toString(),
      new X509Certificate(cert.certPem).toString(),
    );
    // Also by DNS name (SNI) and with a path on the origin.
    const byName = await observeTls(tls.connect, `https://localhost:${server.port}/v1`, ca.certPem);
    assert.equal(byName.spkiSha256, cert.spkiSha256);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(server.bytesReceived(), 0);
    assert.equal(server.connections(), 2);
  } finally {
    await server.close();
  }
});

Deno.test("observeTls: an untrusted CA fails", async () => {
  const rogue = await issueServerCert(rogueCa);
  const server = startCountingTlsServer({ certPem: rogue.certPem, keyPem: rogue.keyPem });
  try {
    await assert.rejects(
      observeTls(tls.connect, `https://127.0.0.1:${server.port}`, ca.certPem),
      /TLS handshake with https:\/\/127\.0\.0\.1:\d+ failed|not trusted/,
    );
    // Without a custom CA the system roots do not know the test CA either.
    await assert.rejects(observeTls(tls.connect, `https://127.0.0.1:${server.port}`));
    assert.equal(server.bytesReceived(), 0);
  } finally {
    await server.close();
  }
});

Deno.test("observeTls: a certificate for another host fails", async () => {
  const server = startCountingTlsServer({
    certPem: localhostOnly.certPem,
    keyPem: localhostOnly.keyPem,
  });
  try {
    await assert.rejects(observeTls(tls.connect, `https://127.0.0.1:${server.port}`, ca.certPem));
  } finally {
    await server.close();
  }
});

Deno.test("observeTls: bounded by its timeout when the server never handshakes", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    try {
      for await (const c of listener) held.push(c);
    } catch {
      // closed
    }
  })();
  try {
    const port = (listener.addr as Deno.NetAddr).port;
    const started = performance.now();
    await assert.rejects(
      observeTls(tls.connect, `https://127.0.0.1:${port}`, ca.certPem, { timeoutMs: 200 }),
      /timed out after 200 ms/,
    );
    assert.ok(performance.now() - started < 3000);
  } finally {
    listener.close();
    for (const c of held) c.close();
    await accepting;
  }
});

Deno.test("observeTls: rejects non-https origins and bad timeouts", async () => {
  await assert.rejects(observeTls(tls.connect, "http://127.0.0.1:1"), /must be https/);
  await assert.rejects(observeTls(tls.connect, "not a url"), /not a URL/);
  await assert.rejects(
    observeTls(tls.connect, "https://127.0.0.1:1", undefined, { timeoutMs: 0 }),
    /timeoutMs/,
  );
});
