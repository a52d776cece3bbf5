import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { sha256Prefixed } from "../../aci/digest.ts";
import { spkiSha256FromCertDer } from "../../upstream/spki.ts";
import {
  issueServerCert,
  makeTestCa,
  startCountingTlsServer,
} from "../../../tests/support/tls_servers.ts";
import { PINNED_ATTESTER_ID, pinnedAttester } from "./pinned.ts";
import { decodeEvidence, targetFor, testDeps } from "./testing.ts";
import { LocalCollateralSource } from "../../verify/tdx/collateral_source.ts";

const NOW = Date.now();
const ca = await makeTestCa();
const cert = await issueServerCert(ca);
const deps = testDeps(NOW, { collateral: new LocalCollateralSource() });

Deno.test("pinned: a matching key gives an operator-asserted session, never hardware-proven", async () => {
  const server = startCountingTlsServer({ certPem: cert.certPem, keyPem: cert.keyPem });
  try {
    const url = `https://127.0.0.1:${server.port}`;
    const o = await pinnedAttester.verify(
      targetFor(url, { verifier: "pinned", spki_sha256: cert.spkiSha256, tls_ca_pem: ca.certPem }),
      deps,
    );
    if (!o.ok) throw new Error(o.reason);
    const doc = o.document;
    assert.equal(doc.verifier_id, PINNED_ATTESTER_ID);
    assert.equal(doc.identity, undefined);
    assert.equal(doc.expires_at - doc.established_at, 3600);
    assert.deepEqual(doc.channel_binding, [
      { type: "tls_spki_sha256", origin: url, spki_sha256: cert.spkiSha256 },
    ]);
    assert.equal(doc.claims.tee_attested.status, "asserted");
    assert.equal(
      doc.claims.tee_attested.status === "asserted" && doc.claims.tee_attested.source,
      "operator_asserted",
    );
    assert.match(JSON.stringify(doc.claims.tee_attested), /operator/);
    for (const k of ["tcb_up_to_date", "os_known_good", "gpu_attested"] as const) {
      assert.deepEqual(doc.claims[k], { status: "unknown" });
    }
    assert.ok(!JSON.stringify(doc.claims).includes("hardware_proven"));
    const ev = decodeEvidence(doc);
    assert.equal(ev.mediaType, "application/pkix-cert");
    assert.equal(doc.evidence.digest, sha256Prefixed(ev.bytes));
    assert.equal(spkiSha256FromCertDer(ev.bytes), cert.spkiSha256);
    assert.equal(
      new X509Certificate(ev.bytes).toString(),
      new X509Certificate(cert.certPem).toString(),
    );
    assert.equal(server.bytesReceived(), 0, "no application byte is sent to verify a pin");
  } finally {
    await server.close();
  }
});

Deno.test("pinned: a different key fails", async () => {
  const other = await issueServerCert(ca);
  const server = startCountingTlsServer({ certPem: other.certPem, keyPem: other.keyPem });
  try {
    const o = await pinnedAttester.verify(
      targetFor(`https://127.0.0.1:${server.port}`, {
        verifier: "pinned",
        spki_sha256: cert.spkiSha256,
        tls_ca_pem: ca.certPem,
      }),
      deps,
    );
    assert.equal(o.ok, false);
    assert.match(o.ok ? "" : o.reason, new RegExp(`observed TLS key ${other.spkiSha256}`));
    const noPin = await pinnedAttester.verify(
      targetFor(`https://127.0.0.1:${server.port}`, { verifier: "pinned" }),
      deps,
    );
    assert.match(noPin.ok ? "" : noPin.reason, /needs confidential\.spki_sha256/);
  } finally {
    await server.close();
  }
});
