/**
 * The benchmark's confidential upstream: the same mock (mock_upstream.ts)
 * behind real TLS with its own key (issued by a throwaway CA), plus the
 * development attestation endpoint binding that key. The gateway verifies it
 * into a session with the `pinned` verifier (operator-pinned key: a production
 * configuration refuses the `dev` verifier) and reaches it over SPKI-pinned
 * TLS: the verified confidential path. It counts the TLS connections it accepted
 * (each one a full handshake): `GET /stats` → `{"connections": n}`.
 *
 * Run as a process: `deno run -A bench/mock_upstream_tls.ts <json-out>`;
 * writes `{"caPem", "spkiSha256"}` (its CA certificate, its key's pin) there and prints
 * `mock-tls listening on https://HOST:PORT` on stderr.
 */
import { createMockHandler } from "./mock_upstream.ts";
import { issueServerCert, makeCa } from "../src/demo/certs.ts";
import { devAttestationRoutes } from "../src/demo/dev_attestation.ts";
import { generateWorkloadKeys } from "../src/aci/signer.ts";
import { randomBytes } from "node:crypto";

if (import.meta.main) {
  const out = Deno.args[0];
  if (!out) throw new Error("usage: mock_upstream_tls.ts <json-out>");
  const ca = await makeCa({ now: Date.now(), commonName: "bench confidential upstream CA" });
  const leaf = await issueServerCert(ca, { now: Date.now(), hosts: ["127.0.0.1", "localhost"] });
  const keys = generateWorkloadKeys();
  const attestation = devAttestationRoutes({
    signingAddress: keys.ethereumAddress,
    addressBytes: keys.ethereumAddressBytes,
    spkiSha256: leaf.spkiSha256,
    randomBytes: (n) => new Uint8Array(randomBytes(n)),
  });
  const mock = createMockHandler();
  // A TLS connection is one client port for its whole life: distinct ports = handshakes.
  const clientPorts = new Set<number>();
  await Deno.writeTextFile(
    out,
    JSON.stringify({ caPem: ca.certPem, spkiSha256: leaf.spkiSha256 }),
  );
  Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: leaf.certPem,
    key: leaf.keyPem,
    onListen: ({ hostname, port }) =>
      console.error(`mock-tls listening on https://${hostname}:${port}`),
  }, (req, info) => {
    clientPorts.add((info.remoteAddr as Deno.NetAddr).port);
    if (new URL(req.url).pathname === "/stats") {
      return Response.json({ connections: clientPorts.size });
    }
    return attestation(req) ?? mock(req);
  });
}
