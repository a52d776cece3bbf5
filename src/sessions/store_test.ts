import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createSessionStore, sessionIdOf } from "./store.ts";
import type { SessionDocument } from "./types.ts";

const doc: SessionDocument = {
  api_version: "aci/1",
  upstream_name: "u",
  endpoint: "https://127.0.0.1:1",
  verifier_id: "pinned-spki/1",
  established_at: 1,
  expires_at: 2,
  channel_binding: [{ type: "tls_spki_sha256", origin: "https://127.0.0.1:1", spki_sha256: "a" }],
  claims: {
    tee_attested: { status: "unknown" },
    tcb_up_to_date: { status: "unknown" },
    os_known_good: { status: "unknown" },
    serving_software_known_good: { status: "unknown" },
    gpu_attested: { status: "unknown" },
    model_weights_provenance: { status: "unknown" },
  },
  evidence: { digest: "sha256:00", data: "data:application/json;base64," },
};

Deno.test("sessionIdOf: hex(sha256(JCS(doc))), independent of member order", () => {
  // JCS of this document, written out by hand (members sorted, no spaces).
  const jcs = '{"api_version":"aci/1","channel_binding":[{"origin":"https://127.0.0.1:1",' +
    '"spki_sha256":"a","type":"tls_spki_sha256"}],"claims":{"gpu_attested":{"status":"unknown"},' +
    '"model_weights_provenance":{"status":"unknown"},"os_known_good":{"status":"unknown"},' +
    '"serving_software_known_good":{"status":"unknown"},"tcb_up_to_date":{"status":"unknown"},' +
    '"tee_attested":{"status":"unknown"}},"endpoint":"https://127.0.0.1:1",' +
    '"established_at":1,"evidence":{"data":"data:application/json;base64,","digest":"sha256:00"},' +
    '"expires_at":2,"upstream_name":"u","verifier_id":"pinned-spki/1"}';
  assert.equal(sessionIdOf(doc), createHash("sha256").update(jcs).digest("hex"));
  const reordered = Object.fromEntries(Object.entries(doc).reverse()) as unknown as SessionDocument;
  assert.equal(sessionIdOf(reordered), sessionIdOf(doc));
  assert.notEqual(sessionIdOf({ ...doc, expires_at: 3 }), sessionIdOf(doc));
});

Deno.test("listCurrent: a stopped replica's current sessions are not listed", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const now = () => 1_000;
    const live = new Set(["alive"]);
    const store = createSessionStore(kv, {
      now,
      receiptRetentionMs: 1000,
      replicas: { self: "me", live: () => Promise.resolve(new Set(live)) },
    });
    const docs = ["alive", "gone", "me"].map((r) => ({ ...doc, upstream_name: r, expires_at: 9 }));
    for (const [i, r] of ["alive", "gone", "me"].entries()) {
      const id = await store.put(docs[i]);
      await store.setCurrent(r, r, id, 9_000);
    }
    const listed = (await store.listCurrent({})).map((s) => s.upstream_name).sort();
    assert.deepEqual(listed, ["alive", "me"], "own replica counts as live before it announces");
    live.add("gone");
    assert.equal((await store.listCurrent({})).length, 3);
  } finally {
    kv.close();
  }
});
