import "reflect-metadata";
import assert from "node:assert/strict";
import * as x509 from "@peculiar/x509";
import { startDemoUpstream } from "./upstream.ts";

x509.cryptoProvider.set(crypto);

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY = 86_400_000;

function pem(der: ArrayBuffer, label: string): string {
  const b64 = btoa(String.fromCharCode(...new Uint8Array(der)));
  return `-----BEGIN ${label}-----\n${b64.match(/.{1,64}/g)?.join("\n")}\n-----END ${label}-----\n`;
}

/** A throwaway CA and a 127.0.0.1 server certificate it signed (test-only trust). */
async function loopbackCert(): Promise<{ caPem: string; certPem: string; keyPem: string }> {
  const now = Date.now();
  const validity = { notBefore: new Date(now - DAY), notAfter: new Date(now + DAY) };
  const caKeys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=Demo Upstream Test CA",
    ...validity,
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
    ],
  });
  const keys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: "02",
    subject: "CN=127.0.0.1",
    issuer: ca.subject,
    ...validity,
    signingKey: caKeys.privateKey,
    publicKey: keys.publicKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([{ type: "ip", value: "127.0.0.1" }]),
    ],
  });
  return {
    caPem: ca.toString("pem"),
    certPem: leaf.toString("pem"),
    keyPem: pem(await crypto.subtle.exportKey("pkcs8", keys.privateKey), "PRIVATE KEY"),
  };
}

Deno.test("tls: serves HTTPS with the given certificate and key", async () => {
  const { caPem, certPem, keyPem } = await loopbackCert();
  const u = await startDemoUpstream({ name: "tls", tls: { cert: certPem, key: keyPem } });
  const client = Deno.createHttpClient({ caCerts: [caPem] });
  try {
    assert.match(u.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(u.url + "/v1/chat/completions", {
      client,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "demo-chat", messages: [{ role: "user", content: "hi" }] }),
    });
    assert.equal(res.status, 200);
    const json: unknown = await res.json();
    assert.ok(JSON.stringify(json).includes('"content":"Echo: hi"'));
    // Without the test CA the certificate is not trusted.
    await assert.rejects(fetch(u.url + "/v1/models"));
  } finally {
    client.close();
    await u.close();
  }
});
