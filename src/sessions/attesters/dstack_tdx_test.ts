import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { sha256Prefixed } from "../../aci/digest.ts";
import type { AttestationOutcome, SessionDocument } from "../types.ts";
import { forgeTdxEnvironment } from "../../../tests/support/tdx_forge.ts";
import { makeTestCa } from "../../../tests/support/tls_servers.ts";
import {
  DEFAULT_COMPOSE_HASH,
  type DstackUpstreamOptions,
  startDstackUpstream,
} from "../../../tests/support/dstack_upstream.ts";
import { DSTACK_TDX_ATTESTER_ID, dstackTdxAttester } from "./dstack_tdx.ts";
import { decodeEvidence, targetFor, testDeps } from "./testing.ts";

const NOW = Date.now();
const NOW_S = Math.floor(NOW / 1000);
const forge = await forgeTdxEnvironment({ at: NOW });
const otherForge = await forgeTdxEnvironment({ at: NOW });
const ca = await makeTestCa();
const deps = testDeps(NOW, { collateral: forge.source, rootCaDer: forge.rootCertDer });
const MRTD = "7d".repeat(48); // the forge's default MRTD

type Conf = Parameters<typeof targetFor>[1];

async function run(
  upstream: Partial<DstackUpstreamOptions>,
  conf: Partial<Conf> = {},
  opts: { deps?: typeof deps; baseSuffix?: string } = {},
): Promise<{ outcome: AttestationOutcome; spki: string; url: string; attestations: number }> {
  const u = await startDstackUpstream({ forge, ca, ...upstream });
  try {
    const target = targetFor(u.url + (opts.baseSuffix ?? ""), {
      verifier: "dstack-tdx",
      tls_ca_pem: ca.certPem,
      ...conf,
    });
    const outcome = await dstackTdxAttester.verify(target, opts.deps ?? deps);
    return { outcome, spki: u.spkiSha256, url: u.url, attestations: u.attestationRequests() };
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

Deno.test("dstack-tdx: a good upstream gives a session with exactly the truthful claims", async () => {
  const { outcome, spki, url, attestations } = await run({});
  const doc = docOf(outcome);
  assert.equal(outcome.ok && outcome.spkiSha256, spki);
  assert.equal(attestations, 1);
  assert.equal(doc.api_version, "aci/1");
  assert.equal(doc.verifier_id, DSTACK_TDX_ATTESTER_ID);
  assert.equal(doc.upstream_name, "secure");
  assert.equal(doc.endpoint, url);
  assert.equal(doc.established_at, NOW_S);
  assert.equal(doc.expires_at, NOW_S + 3600);
  assert.deepEqual(doc.channel_binding, [{
    type: "tls_spki_sha256",
    origin: url,
    spki_sha256: spki,
  }]);
  assert.equal(doc.identity?.signing_algo, "ecdsa");
  assert.match(String(doc.identity?.signing_address), /^0x[0-9a-fA-F]{40}$/);

  const c = doc.claims;
  assert.equal(c.tee_attested.status, "asserted");
  assert.equal(c.tee_attested.status === "asserted" && c.tee_attested.source, "hardware_proven");
  assert.deepEqual(c.tcb_up_to_date, {
    status: "asserted",
    source: "verifier_derived",
    reason: "TDX TCB status UpToDate; advisories: none",
  });
  assert.deepEqual(c.os_known_good, { status: "unknown" });
  assert.deepEqual(c.serving_software_known_good, { status: "unknown" });
  assert.deepEqual(c.gpu_attested, { status: "unknown" });
  assert.deepEqual(c.model_weights_provenance, { status: "unknown" });
  assert.deepEqual(c.extra?.tcb_status, {
    status: "asserted",
    source: "verifier_derived",
    reason: "UpToDate; advisories: none",
  });
  const m = c.extra?.tdx_measurements as Record<string, unknown>;
  assert.equal(m.compose_hash, DEFAULT_COMPOSE_HASH);
  assert.equal(m.mr_td, MRTD);
  assert.equal(m.event_log_replayed, true);

  // The evidence is the exact report the upstream served, and its digest is over those bytes.
  const ev = decodeEvidence(doc);
  assert.equal(ev.mediaType, "application/json");
  assert.equal(doc.evidence.digest, sha256Prefixed(ev.bytes));
  const served = JSON.parse(new TextDecoder().decode(ev.bytes));
  assert.equal(served.signing_address, doc.identity?.signing_address);
  assert.match(served.request_nonce, /^[0-9a-f]{64}$/);
});

Deno.test("dstack-tdx: base URLs with or without /v1 reach the same endpoint", async () => {
  for (const suffix of ["/v1", "/v1/", "/"]) {
    const { outcome, attestations } = await run({}, {}, { baseSuffix: suffix });
    assert.ok(outcome.ok, `suffix ${suffix}: ${outcome.ok ? "" : outcome.reason}`);
    assert.equal(attestations, 1);
  }
});

Deno.test("dstack-tdx: a quote binding another TLS key fails", async () => {
  const { outcome } = await run({ bindSpki: false });
  assert.match(
    reasonOf(outcome),
    /report data \(v2\) does not bind the signing address and TLS key/,
  );
});

Deno.test("dstack-tdx: the v1 layout is rejected because it does not bind TLS", async () => {
  const { outcome } = await run({ layout: "v1" });
  assert.match(reasonOf(outcome), /v1 layout/);
});

Deno.test("dstack-tdx: a quote under another root fails", async () => {
  const other = testDeps(NOW, { collateral: forge.source, rootCaDer: otherForge.rootCertDer });
  assert.match(
    reasonOf((await run({}, {}, { deps: other })).outcome),
    /TDX quote rejected at pck_chain/,
  );
  // The real Intel root (the default) does not accept a forged quote either.
  const intel = testDeps(NOW, { collateral: forge.source });
  assert.match(reasonOf((await run({}, {}, { deps: intel })).outcome), /TDX quote rejected/);
});

Deno.test("dstack-tdx: an event log that does not replay to the quoted RTMRs fails", async () => {
  const { outcome } = await run({ eventLog: "tampered" });
  assert.match(reasonOf(outcome), /event log: event log replays RTMR3 to [0-9a-f]+, quote has/);
});

Deno.test("dstack-tdx: compose-hash and MRTD allow-lists assert or refute", async () => {
  const listed = docOf(
    (await run({}, { allowed_compose_hashes: [DEFAULT_COMPOSE_HASH], allowed_mrtd: [MRTD] }))
      .outcome,
  );
  assert.equal(listed.claims.serving_software_known_good.status, "asserted");
  assert.equal(listed.claims.os_known_good.status, "asserted");
  const other = createHash("sha256").update("x").digest("hex");
  const unlisted = docOf(
    (await run({}, { allowed_compose_hashes: [other], allowed_mrtd: ["00".repeat(48)] })).outcome,
  );
  assert.deepEqual(unlisted.claims.serving_software_known_good, {
    status: "refuted",
    source: "verifier_derived",
    reason: `compose hash ${DEFAULT_COMPOSE_HASH} is not in the operator allow-list`,
  });
  assert.equal(unlisted.claims.os_known_good.status, "refuted");
  // Without an event log the compose hash is not established: unknown, or refuted under a list.
  const noLog = docOf((await run({ eventLog: "none" })).outcome);
  assert.deepEqual(noLog.claims.serving_software_known_good, { status: "unknown" });
  const noLogListed = docOf(
    (await run({ eventLog: "none" }, { allowed_compose_hashes: [DEFAULT_COMPOSE_HASH] })).outcome,
  );
  assert.equal(noLogListed.claims.serving_software_known_good.status, "refuted");
});

Deno.test("dstack-tdx: expiry is bounded by the collateral's validity", async () => {
  const doc = docOf((await run({}, { session_ttl_seconds: 90 * 86_400 })).outcome);
  // The forge's collateral is valid for 30 days after NOW.
  assert.equal(doc.expires_at, Math.floor((NOW + 30 * 86_400_000) / 1000));
});

Deno.test("dstack-tdx: an out-of-date TCB is verified but refutes tcb_up_to_date", async () => {
  const stale = await forgeTdxEnvironment({ at: NOW, tcbStatus: "OutOfDate" });
  const u = await startDstackUpstream({ forge: stale, ca });
  try {
    const o = await dstackTdxAttester.verify(
      targetFor(u.url, { verifier: "dstack-tdx", tls_ca_pem: ca.certPem }),
      testDeps(NOW, { collateral: stale.source, rootCaDer: stale.rootCertDer }),
    );
    const doc = docOf(o);
    assert.equal(doc.claims.tcb_up_to_date.status, "refuted");
    assert.match(JSON.stringify(doc.claims.extra?.tcb_status), /OutOfDate/);
    assert.equal(doc.claims.tee_attested.status, "asserted");
  } finally {
    await u.close();
  }
});

Deno.test("dstack-tdx: TLS failures and missing configuration fail without throwing", async () => {
  const rogueCa = await makeTestCa({ commonName: "Rogue" });
  const { outcome } = await run({}, { tls_ca_pem: rogueCa.certPem });
  assert.match(reasonOf(outcome), /verifier error: TLS handshake/);
  const plain = targetFor("http://127.0.0.1:1", { verifier: "dstack-tdx" });
  assert.match(reasonOf(await dstackTdxAttester.verify(plain, deps)), /https/);
  const noConf = { ...plain, provider: { ...plain.provider, confidential: undefined } };
  assert.match(reasonOf(await dstackTdxAttester.verify(noConf, deps)), /no confidential/);
});
