/**
 * NEAR AI Cloud upstreams end to end (issue #26): a loopback TLS upstream
 * serving NEAR's exact `/v1/attestation/report` shape (gateway + model CVMs,
 * quotes from the forged Intel root) is verified by the production wiring
 * into a session whose claims name the measurement policy version and the
 * entry each CVM matched; the real OpenAI SDK gets answers through it.
 * A policy installed at runtime through the admin API that drops the
 * model's measurement ends the session at once and no prompt byte reaches
 * the upstream; a staged rollout shows on /healthz and in the metrics before
 * the old entry closes; an unbound TLS key fails closed.
 */
import tls from "node:tls";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from "./support/gateway.ts";
import { forgeTdxEnvironment } from "./support/tdx_forge.ts";
import { makeTestCa } from "./support/tls_servers.ts";
import {
  NEAR_GATEWAY_MRTD,
  NEAR_MODEL_MRTD,
  type NearAiUpstream,
  type NearAiUpstreamOptions,
  startNearAiUpstream,
} from "./support/near_ai_upstream.ts";
import { productionAttesters } from "../src/sessions/attesters.ts";
import { parseConfig } from "../src/config/schema.ts";
import { policySigner } from "../src/sessions/policy/testing.ts";
import type { PolicyEntry } from "../src/sessions/policy/document.ts";
import { type ErrorEnvelope, jsonOf, type SessionDocument, verifiedEvent } from "./support/wire.ts";
import type { Receipt } from "./support/wire.ts";

const forge = await forgeTdxEnvironment();
const ca = await makeTestCa();
const signer = policySigner("ops-2026");
const MODEL = "openai/gpt-oss-120b";
const OTHER_MRTD = "c3".repeat(48);
const ENTRIES: PolicyEntry[] = [
  { id: "cloud-api-1", subject: "gateway", mrtd: NEAR_GATEWAY_MRTD },
  { id: "vllm-0.5.5", subject: "model", mrtd: NEAR_MODEL_MRTD },
];

async function start(
  up: Partial<NearAiUpstreamOptions> = {},
  entries: PolicyEntry[] | null = ENTRIES,
): Promise<{ gw: TestGateway; near: NearAiUpstream }> {
  const near = await startNearAiUpstream({ forge, ca, model: MODEL, ...up });
  const confidential = {
    verifier: "near-ai" as const,
    tls_ca_pem: near.caPem,
    near_ai: { model: MODEL },
    measurement_policy: { required: true, warn_before_seconds: 7200 },
  };
  const file = parseConfig(JSON.stringify({
    listen: { base: { hostname: "127.0.0.1", port: 0 } },
    store: { path: ":memory:" },
    trust: { measurement_policy_keys: [signer.key] },
    providers: [{ name: "near", base_url: `${near.url}/v1`, zdr: true, confidential }],
  }));
  const attesters = productionAttesters(file, {
    now: Date.now,
    randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
    tlsConnect: tls.connect,
    collateral: forge.source,
    rootCaDer: forge.rootCertDer,
  });
  if (entries) {
    const r = attesters.policies.install("near", signer.policy("near", 1, entries));
    assert.ok(r.ok);
  }
  const gw = await startTestGateway({
    configure: (c) => {
      c.providers.push({ ...file.providers[0], priority: 10 });
      c.models.push({
        ...c.models[0],
        id: "near/gpt-oss",
        aliases: [],
        routes: [{ provider: "near", model: "demo-chat" }],
      });
    },
    attesters,
  });
  return { gw, near };
}

/** Chat requests that reached the upstream (its NEAR shim signs non-streamed ones). */
const prompts = (near: NearAiUpstream) => near.demo.stats.total + near.chats();

async function chat(gw: TestGateway): Promise<Response> {
  return await fetch(`${gw.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
    body: JSON.stringify({
      model: "near/gpt-oss",
      messages: [{ role: "user", content: "a confidential prompt" }],
      provider: { aci_verified: true },
    }),
  });
}

async function admin(gw: TestGateway, method: string, path: string, body?: unknown) {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
      ...(body ? { "content-type": "application/json" } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await jsonOf<Record<string, unknown>>(res) };
}

Deno.test("near-ai: verified under the policy; the OpenAI SDK is served; claims name version and entries", async () => {
  const { gw, near } = await start();
  try {
    const state = gw.gateway.ctx.verification("near");
    assert.ok(state?.verified, JSON.stringify(state));
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey });
    const { data, response } = await client.chat.completions.create({
      model: "near/gpt-oss",
      messages: [{ role: "user", content: "a confidential prompt" }],
      // @ts-expect-error: the gateway's routing block
      provider: { aci_verified: true },
    }).withResponse();
    assert.ok(data.choices[0].message.content);
    assert.equal(prompts(near), 1);
    const receipt = await jsonOf<Receipt>(
      await fetch(`${gw.baseURL}/aci/receipts/${response.headers.get("x-receipt-id")}`, {
        headers: { authorization: `Bearer ${gw.apiKey}` },
      }),
    );
    const ev = verifiedEvent(receipt);
    const doc = await jsonOf<SessionDocument>(
      await fetch(`${gw.baseURL}/aci/sessions/${ev.session_id}`, {
        headers: { authorization: `Bearer ${gw.apiKey}` },
      }),
    );
    assert.equal(doc.verifier_id, "near-ai/1");
    assert.equal(doc.claims.tee_attested.status, "asserted");
    assert.deepEqual(doc.channel_binding, [
      { type: "tls_spki_sha256", origin: near.url, spki_sha256: near.spkiSha256 },
    ]);
    assert.equal(doc.identity?.signing_address, near.gatewayAddress);
    assert.deepEqual(doc.identity?.model_signing_addresses, [near.modelAddress]);
    const mp = doc.claims.extra?.measurement_policy as Record<string, unknown>;
    assert.equal(mp.version, 1);
    assert.equal(mp.key_id, "ops-2026");
    assert.deepEqual(mp.matches, [
      { subject: "gateway", entry: "cloud-api-1", not_after: null },
      { subject: "model[0]", entry: "vllm-0.5.5", not_after: null },
    ]);
    const subjects = doc.claims.extra?.measured_subjects as Record<string, Record<string, unknown>>;
    assert.equal(subjects.gateway.mrtd, NEAR_GATEWAY_MRTD);
    assert.equal(subjects["model[0]"].mrtd, NEAR_MODEL_MRTD);
    assert.match(String(subjects["model[0]"].compose_hash), /^[0-9a-f]{64}$/);
  } finally {
    await gw.close();
    await near.close();
  }
});

Deno.test("near-ai: a runtime policy dropping the model's measurement ends the session; no prompt sent", async () => {
  const { gw, near } = await start();
  try {
    assert.ok(gw.gateway.ctx.verification("near")?.verified);
    const v2 = signer.policy("near", 2, [ENTRIES[0], { ...ENTRIES[1], mrtd: OTHER_MRTD }]);
    const put = await admin(gw, "PUT", "/admin/v1/measurement-policies/near", v2);
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.version, 2);
    const state = gw.gateway.ctx.verification("near");
    assert.ok(state && !state.verified);
    assert.match(state.reason, /model\[0\] measurement is not in measurement policy v2: mrtd b2b2/);
    const res = await chat(gw);
    assert.equal(res.status, 503);
    assert.equal((await jsonOf<ErrorEnvelope>(res)).error.code, "upstream_verification_failed");
    assert.equal(prompts(near), 0, "no prompt reached the upstream");
    // An older version, a forged signature or another upstream's policy is refused (400).
    assert.equal(
      (await admin(
        gw,
        "PUT",
        "/admin/v1/measurement-policies/near",
        signer.policy("near", 1, ENTRIES),
      )).status,
      400,
    );
    const forged = policySigner("ops-2026").policy("near", 9, ENTRIES);
    const bad = await admin(gw, "PUT", "/admin/v1/measurement-policies/near", forged);
    assert.equal(bad.status, 400);
    assert.match(JSON.stringify(bad.body), /does not verify/);
    assert.equal((await admin(gw, "PUT", "/admin/v1/measurement-policies/nope", v2)).status, 404);
    // A body past the policy bound is refused unread (413), not buffered.
    const huge = await fetch(`${gw.url}/admin/v1/measurement-policies/near`, {
      method: "PUT",
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, "content-type": "application/json" },
      body: "[" + "0,".repeat(600_000) + "0]",
    });
    assert.equal(huge.status, 413);
    await huge.body?.cancel();
    const list = await admin(gw, "GET", "/admin/v1/measurement-policies");
    assert.deepEqual((list.body.data as { version: number }[]).map((p) => p.version), [2]);
  } finally {
    await gw.close();
    await near.close();
  }
});

Deno.test("near-ai: a staged rollout accepts old and new, and warns before the old entry closes", async () => {
  const { gw, near } = await start();
  try {
    const closes = Math.floor(Date.now() / 1000) + 3600;
    const v2 = signer.policy("near", 2, [
      ENTRIES[0],
      { ...ENTRIES[1], id: "vllm-0.5.5", not_after: closes },
      { ...ENTRIES[1], id: "vllm-0.6.0", mrtd: OTHER_MRTD },
    ]);
    assert.equal((await admin(gw, "PUT", "/admin/v1/measurement-policies/near", v2)).status, 200);
    const state = await gw.gateway.manager!.verify("near");
    assert.ok(state.verified, JSON.stringify(state));
    // Shown before it happens: /healthz (operator view), the metric and the log.
    const health = await fetch(`${gw.url}/healthz`, {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    const detail = await jsonOf<Record<string, unknown>>(health);
    assert.deepEqual(detail.fail_closed_soon, ["near"]);
    const near0 = (detail.upstreams as Record<string, { warnings: { kind: string; at: number }[] }>)
      .near;
    assert.deepEqual(near0.warnings.map((w) => [w.kind, w.at]), [[
      "measurement_leaving_policy",
      closes,
    ]]);
    const metrics = await (await fetch(`${gw.url}/admin/v1/metrics`, {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    })).text();
    const m = /gateway_upstream_fail_closed_in_seconds\{provider="near"\} ([0-9.]+)/.exec(metrics);
    assert.ok(m && Number(m[1]) > 3500 && Number(m[1]) <= 3600, metrics.slice(0, 200));
    assert.ok(gw.logs.some((l) => l.msg === "upstream will fail closed" && l.upstream === "near"));
    // The upstream rolls out the new release: verified under the new entry, no warning left.
    near.setModelMrtd(OTHER_MRTD);
    assert.ok((await gw.gateway.manager!.verify("near")).verified);
    const snap = gw.gateway.manager!.snapshot().near;
    assert.ok(snap.verified);
    assert.equal(snap.warnings, undefined);
    assert.equal(prompts(near), 0);
    assert.equal((await chat(gw)).status, 200);
    assert.equal(prompts(near), 1);
  } finally {
    await gw.close();
    await near.close();
  }
});

Deno.test("near-ai: a report that does not bind this TLS key, or no policy, fails closed", async () => {
  for (
    const [up, entries, why] of [
      [{ tls: "other" }, ENTRIES, /gateway\.tls_fingerprint: is [0-9a-f]+, observed/],
      [
        { tls: "absent" },
        ENTRIES,
        /gateway\.tls_binding: the report carries no tls_cert_fingerprint/,
      ],
      [{}, null, /requires a measurement policy and none is installed/],
    ] as const
  ) {
    const { gw, near } = await start(
      up as Partial<NearAiUpstreamOptions>,
      entries as PolicyEntry[] | null,
    );
    try {
      const state = gw.gateway.ctx.verification("near");
      assert.ok(state && !state.verified);
      assert.match(state.reason, why);
      assert.equal((await chat(gw)).status, 503);
      assert.equal(prompts(near), 0, "no prompt byte sent");
    } finally {
      await gw.close();
      await near.close();
    }
  }
});

Deno.test("near-ai: every answer's /v1/signature is checked; a bad one ends the session", async () => {
  const { gw, near } = await start();
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    for (let i = 0; i < 2; i++) {
      await client.chat.completions.create({
        model: "near/gpt-oss",
        messages: [{ role: "user", content: `prompt ${i}` }],
      });
    }
    const sigs = gw.gateway.answerSignatures!;
    await sigs.idle();
    assert.deepEqual(sigs.stats(), { verified: 2, failed: 0, unavailable: 0, skipped: 0 });
    assert.equal(near.signatureRequests(), 2);
    assert.ok(gw.gateway.ctx.verification("near")?.verified);
  } finally {
    await gw.close();
    await near.close();
  }
  for (const mode of ["wrong-key", "tampered"] as const) {
    const { gw, near } = await start({ signatures: mode });
    try {
      assert.equal((await chat(gw)).status, 200);
      const sigs = gw.gateway.answerSignatures!;
      await sigs.idle();
      assert.equal(sigs.stats().failed, 1, mode);
      const state = gw.gateway.ctx.verification("near");
      assert.ok(state && !state.verified, mode);
      assert.match(
        state.reason,
        mode === "wrong-key" ? /signature\.key_attested/ : /signature\.text/,
      );
      assert.ok(gw.logs.some((l) => l.msg === "upstream session invalidated"));
      // The re-verification passes (the quotes are fine), so the upstream serves again; but
      // between the failure and that, no prompt reached it.
      assert.equal(prompts(near), 1);
    } finally {
      await gw.close();
      await near.close();
    }
  }
});
