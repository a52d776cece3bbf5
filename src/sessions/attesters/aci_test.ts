import tls from "node:tls";
import assert from "node:assert/strict";
import { sha256Prefixed } from "../../aci/digest.ts";
import { devQuote } from "../../aci/dev_quote.ts";
import { bytesToHex } from "../../aci/hex.ts";
import { keysetDigest } from "../../aci/keyset.ts";
import { buildKeyset, generateWorkloadKeys } from "../../aci/signer.ts";
import { reportData, reportDataSlot } from "../../aci/statement.ts";
import { startDemoUpstream } from "../../demo/upstream.ts";
import type { AttestationOutcome, SessionDocument } from "../types.ts";
import { forgeTdxEnvironment } from "../../../tests/support/tdx_forge.ts";
import { issueServerCert, makeTestCa } from "../../../tests/support/tls_servers.ts";
import { ACI_ATTESTER_ID, aciAttester } from "./aci.ts";
import { decodeEvidence, targetFor, testDeps } from "./testing.ts";
import { createAttesterDeps } from "./mod.ts";
import { defaultGpuDeps } from "../../verify/nvidia/deps.ts";
import {
  collateralWith,
  FULL_RIMS,
  FULL_TIMES,
  fullNrasPayload,
  hexToBytes,
  vector,
} from "../../../tests/support/nvidia_fixtures.ts";

const NOW = Date.now();
const NOW_S = Math.floor(NOW / 1000);
const forge = await forgeTdxEnvironment({ at: NOW });
const ca = await makeTestCa();
const deps = testDeps(NOW, { collateral: forge.source, rootCaDer: forge.rootCertDer });

interface AciServerOptions {
  /** List the server's own SPKI in the keyset (default true). */
  listSpki?: boolean;
  notAfter?: number;
  /** Serve a DEV quote instead of a forged TDX quote. */
  dev?: boolean;
  /** Ignore the request nonce and bind this one. */
  fixedNonce?: string;
  /** GPU evidence in `evidence.nvidia_payload` (NRAS request JSON text). */
  nvidiaPayload?: string;
}

/** A loopback ACI service: serves `/v1/aci/attestation` for its keyset, quoted by the forge. */
async function withAciServer(
  o: AciServerOptions,
  fn: (url: string, spki: string) => Promise<void>,
): Promise<void> {
  const cert = await issueServerCert(ca);
  const keys = generateWorkloadKeys();
  const keyset = buildKeyset({
    keys,
    subject: "aci-upstream",
    notAfter: o.notAfter ?? NOW_S + 86_400,
    tlsSpkiSha256s: (o.listSpki ?? true) ? [cert.spkiSha256] : ["ab".repeat(32)],
  });
  const digest = keysetDigest(keyset);
  const u = await startDemoUpstream({
    name: "aci",
    tls: { cert: cert.certPem, key: cert.keyPem },
    extraRoutes: (req) => {
      const url = new URL(req.url);
      if (url.pathname !== "/v1/aci/attestation") return null;
      const nonce = o.fixedNonce ?? url.searchParams.get("nonce");
      const rd = reportData(digest, nonce);
      const slot = reportDataSlot(rd);
      const quote = o.dev ? devQuote(slot) : forge.mintQuote(slot);
      const entry = {
        tee_type: o.dev ? "dev" : "tdx",
        workload_keyset: keyset,
        workload_keyset_digest: digest,
        report_data: bytesToHex(rd),
        source_provenance: null,
        evidence: {
          quote: bytesToHex(quote),
          provider: "forge",
          hardware: !o.dev,
          ...(o.nvidiaPayload ? { nvidia_payload: o.nvidiaPayload } : {}),
        },
      };
      const body = {
        api_version: "aci/1",
        workload_keyset_digest: digest,
        attestation: entry,
        service_capabilities: {},
        all_attestations: [entry],
      };
      return new Response(JSON.stringify(body, null, 2), {
        headers: { "content-type": "application/json" },
      });
    },
  });
  try {
    await fn(u.url, cert.spkiSha256);
  } finally {
    await u.close();
  }
}

function docOf(o: AttestationOutcome): SessionDocument {
  if (!o.ok) throw new assert.AssertionError({ message: `verification failed: ${o.reason}` });
  return o.document;
}

function reasonOf(o: AttestationOutcome): string {
  assert.equal(o.ok, false, "verification should fail");
  return o.ok ? "" : o.reason;
}

const target = (url: string) => targetFor(url, { verifier: "aci", tls_ca_pem: ca.certPem });

Deno.test("aci: an ACI upstream whose keyset lists its TLS key verifies", async () => {
  await withAciServer({}, async (url, spki) => {
    const doc = docOf(await aciAttester.verify(target(url), deps));
    assert.equal(doc.verifier_id, ACI_ATTESTER_ID);
    assert.equal(doc.endpoint, url);
    assert.deepEqual(doc.channel_binding, [{
      type: "tls_spki_sha256",
      origin: url,
      spki_sha256: spki,
    }]);
    assert.equal(doc.established_at, NOW_S);
    assert.equal(doc.expires_at, NOW_S + 3600);
    const ev = decodeEvidence(doc);
    assert.equal(doc.evidence.digest, sha256Prefixed(ev.bytes));
    const served = JSON.parse(new TextDecoder().decode(ev.bytes));
    assert.deepEqual(doc.identity, { workload_keyset_digest: served.workload_keyset_digest });
    assert.equal(doc.claims.tee_attested.status, "asserted");
    assert.equal(
      doc.claims.tee_attested.status === "asserted" && doc.claims.tee_attested.source,
      "hardware_proven",
    );
    assert.equal(doc.claims.tcb_up_to_date.status, "asserted");
    assert.deepEqual(doc.claims.serving_software_known_good, { status: "unknown" });
    assert.deepEqual(doc.claims.gpu_attested, { status: "unknown" });
    assert.deepEqual(doc.claims.model_weights_provenance, { status: "unknown" });
  });
});

Deno.test("aci: the observed TLS key must be in the attested keyset", async () => {
  await withAciServer({ listSpki: false }, async (url, spki) => {
    const reason = reasonOf(await aciAttester.verify(target(url), deps));
    assert.match(reason, new RegExp(`observed TLS key ${spki} is not in the attested keyset`));
  });
});

Deno.test("aci: session expiry is bounded by the keyset's not_after", async () => {
  await withAciServer({ notAfter: NOW_S + 600 }, async (url) => {
    assert.equal(docOf(await aciAttester.verify(target(url), deps)).expires_at, NOW_S + 600);
  });
  await withAciServer({ notAfter: NOW_S - 1 }, async (url) => {
    assert.match(reasonOf(await aciAttester.verify(target(url), deps)), /report\.not_after/);
  });
});

Deno.test("aci: a stale nonce, a DEV quote or another root fail", async () => {
  await withAciServer({ fixedNonce: "00".repeat(32) }, async (url) => {
    assert.match(reasonOf(await aciAttester.verify(target(url), deps)), /report\.report_data/);
  });
  await withAciServer({ dev: true }, async (url) => {
    assert.match(
      reasonOf(await aciAttester.verify(target(url), deps)),
      /development evidence, not hardware/,
    );
  });
  await withAciServer({}, async (url) => {
    const intelRoot = testDeps(NOW, { collateral: forge.source });
    assert.match(
      reasonOf(await aciAttester.verify(target(url), intelRoot)),
      /report\.hardware_evidence: .*TDX quote rejected at pck_chain/,
    );
  });
});

Deno.test("aci: GPU evidence in the report is verified with the same nonce; require_gpu refuses without it", async () => {
  const full = vector("hopper-550.90.07-FULL");
  const gpuDeps = createAttesterDeps({
    tlsConnect: tls.connect,
    now: () => NOW,
    tdx: { collateral: forge.source, rootCaDer: forge.rootCertDer },
    // The round's nonce is the recorded evidence's nonce (a real GPU answers any nonce).
    randomBytes: (n) => n === 32 ? hexToBytes(full.nonce) : new Uint8Array(n),
    gpu: defaultGpuDeps({ collateral: collateralWith(FULL_RIMS), times: () => FULL_TIMES }),
  });
  await withAciServer({ nvidiaPayload: JSON.stringify(fullNrasPayload()) }, async (url) => {
    const doc = docOf(await aciAttester.verify(target(url), gpuDeps));
    assert.equal(doc.claims.gpu_attested.status, "asserted");
    assert.equal(
      doc.claims.gpu_attested.status === "asserted" && doc.claims.gpu_attested.source,
      "hardware_proven",
    );
    const extra = doc.claims.extra?.gpu_evidence as Record<string, unknown>;
    assert.equal(extra.status, "pass");
    assert.equal(extra.gpu_count, 1);
    // Another round's nonce: the same evidence is refuted on exactly that check.
    const doc2 = docOf(await aciAttester.verify(target(url), deps));
    assert.equal(doc2.claims.gpu_attested.status, "refuted");
    assert.equal(
      (doc2.claims.extra?.gpu_evidence as Record<string, unknown>).failing_check,
      "nonce",
    );
  });
  await withAciServer({}, async (url) => {
    const required = targetFor(url, { verifier: "aci", tls_ca_pem: ca.certPem, require_gpu: true });
    assert.match(
      reasonOf(await aciAttester.verify(required, gpuDeps)),
      /GPU evidence required but not proven \(absent; the report carries no GPU evidence\)/,
    );
  });
});
