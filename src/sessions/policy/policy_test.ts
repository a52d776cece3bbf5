import assert from "node:assert/strict";
import type { SessionDocument } from "../types.ts";
import { verifySignedPolicy } from "./document.ts";
import { matchPolicy, subjectsOf } from "./match.ts";
import { PolicyRegistry } from "./registry.ts";
import { applyMeasurementPolicy, failClosedWarnings } from "./apply.ts";
import { policySigner } from "./testing.ts";

const MRTD_A = "aa".repeat(48);
const MRTD_B = "bb".repeat(48);
const COMPOSE = "cc".repeat(32);
const NOW = 1_800_000_000;

function doc(extra: Record<string, unknown>, expiresAt = NOW + 3600): SessionDocument {
  return {
    api_version: "aci/1",
    upstream_name: "up",
    endpoint: "https://up.example",
    verifier_id: "test/1",
    established_at: NOW,
    expires_at: expiresAt,
    channel_binding: [],
    claims: {
      tee_attested: { status: "asserted", source: "hardware_proven" },
      tcb_up_to_date: { status: "unknown" },
      os_known_good: { status: "unknown" },
      serving_software_known_good: { status: "unknown" },
      gpu_attested: { status: "unknown" },
      model_weights_provenance: { status: "unknown" },
      extra: extra as SessionDocument["claims"]["extra"],
    },
    evidence: { digest: "sha256:" + "00".repeat(32), data: "data:application/json;base64," },
  };
}

const dstackDoc = (mrtd: string) =>
  doc({ tdx_measurements: { mr_td: mrtd, rtmr0: "01".repeat(48), compose_hash: COMPOSE } });

Deno.test("policy: a signature by a configured key verifies; anything else is refused", () => {
  const s = policySigner();
  const signed = s.policy("up", 1, [{ id: "r1", mrtd: MRTD_A }]);
  const ok = verifySignedPolicy(signed, [s.key]);
  assert.ok(ok.ok);
  assert.match(ok.installed.digest, /^sha256:[0-9a-f]{64}$/);
  // Another key, a changed entry, a malformed signature, an unknown field: refused.
  const unknownKey = verifySignedPolicy(signed, [policySigner("other").key]);
  assert.ok(!unknownKey.ok && /unknown key ops-test/.test(unknownKey.reason));
  const other = verifySignedPolicy(signed, [{ ...policySigner().key, key_id: "ops-test" }]);
  assert.ok(!other.ok && /does not verify/.test(other.reason));
  const tampered = structuredClone(signed) as { policy: { entries: { mrtd: string }[] } };
  tampered.policy.entries[0].mrtd = MRTD_B;
  assert.equal(verifySignedPolicy(tampered, [s.key]).ok, false);
  const unknown = verifySignedPolicy({ ...signed, extra: 1 }, [s.key]);
  assert.ok(!unknown.ok && /not a signed measurement policy/.test(unknown.reason));
  const badWindow = s.policy("up", 1, [{ id: "w", not_before: 10, not_after: 5 }]);
  assert.equal(verifySignedPolicy(badWindow, [s.key]).ok, false);
});

Deno.test("policy registry: versions only move forward; the same policy again is a no-op", () => {
  const s = policySigner();
  const reg = new PolicyRegistry([s.key]);
  const changes: string[] = [];
  reg.onChange((u) => changes.push(u));
  assert.ok(reg.install("up", s.policy("up", 2, [{ id: "a", mrtd: MRTD_A }])).ok);
  const again = reg.install("up", s.policy("up", 2, [{ id: "a", mrtd: MRTD_A }]));
  assert.ok(again.ok && !again.changed);
  const older = reg.install("up", s.policy("up", 1, [{ id: "b", mrtd: MRTD_B }]));
  assert.ok(!older.ok && /not newer/.test(older.reason));
  const wrong = reg.install("other", s.policy("up", 3, [{ id: "b", mrtd: MRTD_B }]));
  assert.ok(!wrong.ok && /is for upstream up/.test(wrong.reason));
  assert.ok(reg.install("up", s.policy("up", 3, [{ id: "b", mrtd: MRTD_B }])).ok);
  assert.deepEqual(changes, ["up", "up"]);
  assert.equal(reg.get("up")?.policy.version, 3);
  assert.deepEqual(reg.list().map((p) => [p.upstream, p.version]), [["up", 3]]);
});

Deno.test("policy match: every listed field must equal; the reason names what differs", () => {
  const policy = {
    api_version: "measurement-policy/1" as const,
    upstream: "up",
    version: 4,
    issued_at: 0,
    entries: [{ id: "rel-7", mrtd: MRTD_A, compose_hash: COMPOSE }],
  };
  const ok = matchPolicy(policy, subjectsOf(dstackDoc(MRTD_A)), NOW);
  assert.ok(ok.ok);
  assert.deepEqual(ok.matches, [{ subject: "upstream", entry: "rel-7", not_after: null }]);
  const no = matchPolicy(policy, subjectsOf(dstackDoc(MRTD_B)), NOW);
  assert.ok(!no.ok);
  assert.equal(no.reason, `upstream measurement is not in measurement policy v4: mrtd ${MRTD_B}`);
  // A field the session did not establish never matches.
  const none = matchPolicy(policy, subjectsOf(doc({})), NOW);
  assert.ok(!none.ok && /mrtd not established/.test(none.reason));
});

Deno.test("policy match: subjects (NEAR gateway and models), SNP and GPU versions", () => {
  const policy = {
    api_version: "measurement-policy/1" as const,
    upstream: "near",
    version: 1,
    issued_at: 0,
    entries: [
      { id: "gw", subject: "gateway", mrtd: MRTD_A },
      { id: "model", subject: "model", mrtd: MRTD_B, gpu_driver_versions: ["570.172.08"] },
    ],
  };
  const subjects = {
    gateway: { mrtd: MRTD_A },
    "model[0]": { mrtd: MRTD_B, gpu_driver_versions: ["570.172.08", "570.172.08"] },
  };
  const ok = matchPolicy(policy, subjectsOf(doc({ measured_subjects: subjects })), NOW);
  assert.ok(ok.ok);
  assert.deepEqual(ok.matches.map((m) => m.entry), ["gw", "model"]);
  const oldDriver = {
    ...subjects,
    "model[0]": { mrtd: MRTD_B, gpu_driver_versions: ["535.1"] },
  };
  const no = matchPolicy(policy, subjectsOf(doc({ measured_subjects: oldDriver })), NOW);
  assert.ok(!no.ok && /model\[0\].*GPU driver version 535\.1/.test(no.reason));
  const snp = subjectsOf(doc({ snp_report: { measurement: MRTD_A, host_data: COMPOSE } }));
  assert.equal(snp[0].snp_measurement, MRTD_A);
  assert.equal(snp[0].snp_host_data, COMPOSE);
});

Deno.test("staged rollout: old and new releases overlap for a stated window, then only the new", () => {
  const policy = {
    api_version: "measurement-policy/1" as const,
    upstream: "up",
    version: 2,
    issued_at: 0,
    entries: [
      { id: "old", mrtd: MRTD_A, not_after: NOW + 3 * 86_400 },
      { id: "new", mrtd: MRTD_B, not_before: NOW - 60 },
    ],
  };
  const old = matchPolicy(policy, subjectsOf(dstackDoc(MRTD_A)), NOW);
  assert.ok(old.ok && old.leavesAt === NOW + 3 * 86_400);
  assert.ok(matchPolicy(policy, subjectsOf(dstackDoc(MRTD_B)), NOW).ok);
  const after = matchPolicy(policy, subjectsOf(dstackDoc(MRTD_A)), NOW + 3 * 86_400);
  assert.ok(!after.ok && /entry old has closed/.test(after.reason));
  const before = matchPolicy(policy, subjectsOf(dstackDoc(MRTD_B)), NOW - 120);
  assert.ok(!before.ok && /entry new opens later/.test(before.reason));
});

Deno.test("apply: the claims name the version and entry; expiry stops where the entry closes", () => {
  const s = policySigner();
  const v = verifySignedPolicy(
    s.policy("up", 5, [{ id: "old", mrtd: MRTD_A, not_after: NOW + 600 }]),
    [s.key],
  );
  assert.ok(v.ok);
  const a = applyMeasurementPolicy(dstackDoc(MRTD_A), v.installed, false, NOW);
  assert.ok(a.ok);
  assert.equal(a.document.expires_at, NOW + 600);
  const mp = a.document.claims.extra?.measurement_policy as Record<string, unknown>;
  assert.equal(mp.version, 5);
  assert.equal(mp.digest, v.installed.digest);
  assert.deepEqual(mp.matches, [{ subject: "upstream", entry: "old", not_after: NOW + 600 }]);
  assert.deepEqual(a.document.claims.serving_software_known_good, { status: "unknown" });
  // Warned a day ahead: the entry closes in 10 minutes.
  const w = failClosedWarnings(a.document, a.leavesAt, NOW, 86_400);
  assert.deepEqual(w.map((x) => [x.kind, x.at]), [["measurement_leaving_policy", NOW + 600]]);
  assert.deepEqual(failClosedWarnings(a.document, a.leavesAt, NOW, 60), []);
  // Refused measurement; a required policy that is missing; no policy and not required.
  assert.equal(applyMeasurementPolicy(dstackDoc(MRTD_B), v.installed, false, NOW).ok, false);
  assert.equal(applyMeasurementPolicy(dstackDoc(MRTD_B), undefined, true, NOW).ok, false);
  assert.ok(applyMeasurementPolicy(dstackDoc(MRTD_B), undefined, false, NOW).ok);
  // Evidence expiring soon is a warning too.
  const ev = doc({ evidence_validity: { tdx_collateral: NOW + 100 } });
  assert.deepEqual(failClosedWarnings(ev, null, NOW, 3600).map((x) => x.kind), [
    "evidence_expiring",
  ]);
});
