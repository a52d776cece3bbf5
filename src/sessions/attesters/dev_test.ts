import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { sha256Prefixed } from "../../aci/digest.ts";
import { generateWorkloadKeys } from "../../aci/signer.ts";
import { devAttestationRoutes } from "../../demo/dev_attestation.ts";
import { startDemoUpstream } from "../../demo/upstream.ts";
import { forgeTdxEnvironment } from "../../../tests/support/tdx_forge.ts";
import { issueServerCert, makeTestCa } from "../../../tests/support/tls_servers.ts";
import { startDstackUpstream } from "../../../tests/support/dstack_upstream.ts";
import { LocalCollateralSource } from "../../verify/tdx/collateral_source.ts";
import { DEV_ATTESTER_ID, devAttester } from "./dev.ts";
import { decodeEvidence, targetFor, testDeps } from "./testing.ts";

const NOW = Date.now();
const NOW_S = Math.floor(NOW / 1000);
const ca = await makeTestCa();
const deps = testDeps(NOW, { collateral: new LocalCollateralSource() });

async function withDevUpstream(
  bindSpki: "own" | "other",
  fn: (url: string, spki: string, address: string) => Promise<void>,
): Promise<void> {
  const cert = await issueServerCert(ca);
  const keys = generateWorkloadKeys();
  const spki = bindSpki === "own"
    ? cert.spkiSha256
    : createHash("sha256").update("another key").digest("hex");
  const u = await startDemoUpstream({
    name: "dev-secure",
    tls: { cert: cert.certPem, key: cert.keyPem },
    extraRoutes: devAttestationRoutes({
      signingAddress: keys.ethereumAddress,
      addressBytes: keys.ethereumAddressBytes,
      spkiSha256: spki,
      randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
    }),
  });
  try {
    await fn(u.url, cert.spkiSha256, keys.ethereumAddress);
  } finally {
    await u.close();
  }
}

Deno.test("dev: the dev upstream verifies with honest claims", async () => {
  await withDevUpstream("own", async (url, spki, address) => {
    const o = await devAttester.verify(
      targetFor(url + "/v1", { verifier: "dev", tls_ca_pem: ca.certPem }),
      deps,
    );
    if (!o.ok) throw new Error(o.reason);
    const doc = o.document;
    assert.equal(o.spkiSha256, spki);
    assert.equal(doc.verifier_id, DEV_ATTESTER_ID);
    assert.equal(doc.endpoint, url);
    assert.equal(doc.established_at, NOW_S);
    assert.equal(doc.expires_at, NOW_S + 3600);
    assert.deepEqual(doc.identity, { signing_address: address, signing_algo: "ecdsa" });
    assert.deepEqual(doc.channel_binding, [{
      type: "tls_spki_sha256",
      origin: url,
      spki_sha256: spki,
    }]);
    assert.deepEqual(doc.claims.tee_attested, {
      status: "refuted",
      source: "verifier_derived",
      reason: "development evidence: no TEE",
    });
    for (
      const k of [
        "tcb_up_to_date",
        "os_known_good",
        "serving_software_known_good",
        "gpu_attested",
        "model_weights_provenance",
      ] as const
    ) {
      assert.deepEqual(doc.claims[k], { status: "unknown" });
    }
    const dev = doc.claims.extra?.development;
    assert.equal(dev?.status, "asserted");
    assert.equal(dev?.source, "verifier_derived");
    const ev = decodeEvidence(doc);
    assert.equal(doc.evidence.digest, sha256Prefixed(ev.bytes));
    assert.equal(JSON.parse(new TextDecoder().decode(ev.bytes)).info.development, true);
  });
});

Deno.test("dev: a report binding another TLS key fails", async () => {
  await withDevUpstream("other", async (url) => {
    const o = await devAttester.verify(
      targetFor(url, { verifier: "dev", tls_ca_pem: ca.certPem }),
      deps,
    );
    assert.equal(o.ok, false);
    assert.match(o.ok ? "" : o.reason, /does not bind the signing address and TLS key/);
  });
});

Deno.test("dev: a hardware-looking report is refused", async () => {
  const forge = await forgeTdxEnvironment({ at: NOW });
  const u = await startDstackUpstream({ forge, ca });
  try {
    const o = await devAttester.verify(
      targetFor(u.url, { verifier: "dev", tls_ca_pem: ca.certPem }),
      deps,
    );
    assert.equal(o.ok, false);
    assert.match(o.ok ? "" : o.reason, /hardware-looking quote/);
  } finally {
    await u.close();
  }
});
