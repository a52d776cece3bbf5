import assert from "node:assert/strict";
import { createVerificationManager } from "./manager.ts";
import { createSessionStore, sessionIdOf } from "./store.ts";
import type {
  AttestationOutcome,
  AttesterDeps,
  SessionDocument,
  UpstreamAttester,
} from "./types.ts";
import type { ProviderConfig } from "../config/schema.ts";
import { sha256Hex } from "../aci/digest.ts";
import { jcs } from "../aci/jcs.ts";

const provider: ProviderConfig = {
  name: "tee",
  base_url: "https://127.0.0.1:1",
  zdr: true,
  priority: 0,
  timeout_ms: 1000,
  native_formats: [],
  confidential: {
    verifier: "pinned",
    spki_sha256: "a".repeat(64),
    allowed_mrtd: [],
    allowed_compose_hashes: [],
    session_ttl_seconds: 3600,
    reverify_margin_seconds: 300,
  },
};

function doc(now: number, ttl: number, spki = "b".repeat(64)): SessionDocument {
  const data = new TextEncoder().encode("evidence");
  return {
    api_version: "aci/1",
    upstream_name: "tee",
    endpoint: "https://127.0.0.1:1",
    verifier_id: "test/1",
    established_at: Math.floor(now / 1000),
    expires_at: Math.floor(now / 1000) + ttl,
    channel_binding: [{
      type: "tls_spki_sha256",
      origin: "https://127.0.0.1:1",
      spki_sha256: spki,
    }],
    claims: {
      tee_attested: { status: "asserted", source: "operator_asserted", reason: "test" },
      tcb_up_to_date: { status: "unknown" },
      os_known_good: { status: "unknown" },
      serving_software_known_good: { status: "unknown" },
      gpu_attested: { status: "unknown" },
      model_weights_provenance: { status: "unknown" },
    },
    evidence: {
      digest: "sha256:" + sha256Hex(data),
      data: "data:text/plain;base64," + btoa("evidence"),
    },
  };
}

function scripted(outcomes: (() => AttestationOutcome)[]): UpstreamAttester & { calls: number } {
  const v = {
    id: "test/1",
    calls: 0,
    verify() {
      const f = outcomes[Math.min(v.calls, outcomes.length - 1)];
      v.calls++;
      return Promise.resolve(f());
    },
  };
  return v;
}

const deps = {} as AttesterDeps;

Deno.test("manager: verify → session stored and current; expiry → unverified; re-verify → new id, old retrievable", async () => {
  const kv = await Deno.openKv(":memory:");
  let t = 1_800_000_000_000;
  const now = () => t;
  const store = createSessionStore(kv, { now, receiptRetentionMs: 30 * 86_400_000 });
  const verifier = scripted([
    () => ({ ok: true, document: doc(t, 100), spkiSha256: "b".repeat(64) }),
    () => ({ ok: true, document: doc(t, 100, "c".repeat(64)), spkiSha256: "c".repeat(64) }),
  ]);
  const m = createVerificationManager({
    providers: [provider],
    attesterFor: () => verifier,
    deps,
    store,
    replicaId: "r1",
    now,
    log: () => {},
  });
  try {
    assert.deepEqual(m.state("tee"), { verified: false, reason: "verification pending" });
    assert.equal(m.state("plain"), null);
    await m.start();
    const s1 = m.state("tee");
    assert.ok(s1 && s1.verified);
    const stored = await store.get(s1.sessionId);
    assert.ok(stored);
    assert.equal(sha256Hex(jcs(stored)), s1.sessionId, "the id recomputes from the document");
    assert.equal(sessionIdOf(stored), s1.sessionId);
    const listed = await store.listCurrent({});
    assert.equal(listed.length, 1);
    assert.equal(listed[0].session_id, s1.sessionId);
    assert.equal("data" in listed[0].evidence, false);

    t += 101_000; // past expires_at
    const expired = m.state("tee");
    assert.ok(expired && !expired.verified);
    const s2 = await m.verify("tee");
    assert.ok(s2.verified && s2.sessionId !== s1.sessionId);
    assert.ok(await store.get(s1.sessionId), "old session stays retrievable");
    assert.equal(s2.spkiSha256, "c".repeat(64));
  } finally {
    m.stop();
    kv.close();
  }
});

Deno.test("manager: failures are visible, never verified; invalidate drops the session and re-verifies", async () => {
  const kv = await Deno.openKv(":memory:");
  const now = () => 1_800_000_000_000;
  const store = createSessionStore(kv, { now, receiptRetentionMs: 1000 });
  const logs: Record<string, unknown>[] = [];
  const verifier = scripted([
    () => ({ ok: false, reason: "quote signature invalid" }),
    () => ({ ok: true, document: doc(now(), 100), spkiSha256: "b".repeat(64) }),
    () => ({ ok: false, reason: "TLS key changed" }),
  ]);
  const m = createVerificationManager({
    providers: [provider],
    attesterFor: () => verifier,
    deps,
    store,
    replicaId: "r1",
    now,
    log: (l) => logs.push(l),
  });
  try {
    await m.start();
    assert.deepEqual(m.state("tee"), { verified: false, reason: "quote signature invalid" });
    assert.equal(m.snapshot().tee.verified, false);
    assert.ok(logs.some((l) => l.reason === "quote signature invalid"));
    assert.ok((await m.verify("tee")).verified);
    m.invalidate("tee", "TLS key mismatch");
    const after = m.state("tee");
    assert.ok(after && !after.verified);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(verifier.calls, 3, "invalidation triggered a re-verification");
    assert.deepEqual(m.state("tee"), { verified: false, reason: "TLS key changed" });
    assert.deepEqual(await store.listCurrent({}), []);
  } finally {
    m.stop();
    kv.close();
  }
});

Deno.test("manager: require_gpu refuses a session whose gpu_attested is not hardware_proven, whatever the verifier", async () => {
  const kv = await Deno.openKv(":memory:");
  const now = () => 1_800_000_000_000;
  const store = createSessionStore(kv, { now, receiptRetentionMs: 1000 });
  const gpuDoc = (claim: SessionDocument["claims"]["gpu_attested"]) => {
    const d = doc(now(), 100);
    d.claims.gpu_attested = claim;
    return d;
  };
  const required = {
    ...provider,
    confidential: { ...provider.confidential!, require_gpu: true },
  };
  const verifier = scripted([
    () => ({ ok: true, document: gpuDoc({ status: "unknown" }), spkiSha256: "b".repeat(64) }),
    () => ({
      ok: true,
      document: gpuDoc({ status: "asserted", source: "operator_asserted", reason: "x" }),
      spkiSha256: "b".repeat(64),
    }),
    () => ({
      ok: true,
      document: gpuDoc({ status: "asserted", source: "hardware_proven", reason: "x" }),
      spkiSha256: "b".repeat(64),
    }),
  ]);
  const m = createVerificationManager({
    providers: [required],
    attesterFor: () => verifier,
    deps,
    store,
    replicaId: "r1",
    now,
    log: () => {},
  });
  try {
    const a = await m.verify("tee");
    assert.ok(
      !a.verified &&
        /GPU evidence required but the session's gpu_attested is unknown/.test(a.reason),
    );
    const b = await m.verify("tee");
    assert.ok(!b.verified, "an operator assertion is not GPU evidence");
    assert.equal((await store.listCurrent({})).length, 0);
    assert.ok((await m.verify("tee")).verified);
  } finally {
    m.stop();
    kv.close();
  }
});
