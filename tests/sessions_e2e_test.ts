/**
 * Verified upstreams end to end: a loopback TLS upstream whose (forged, test-root)
 * TDX quote binds its signing address and TLS key is verified into an attested
 * session; `aci_verified` / `aci_session_ids` are served through it and the
 * receipt cites the session; a server with another key at the same origin gets
 * no prompt; verification failure refuses before any prompt is sent.
 */
import tls from "node:tls";
import assert from "node:assert/strict";
import canonicalize from "canonicalize";
import { createHash } from "node:crypto";
import { addDstackTdxProvider } from "./support/route_config.ts";
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from "./support/gateway.ts";
import { forgeTdxEnvironment, type TdxForge } from "./support/tdx_forge.ts";
import { startDstackUpstream } from "./support/dstack_upstream.ts";
import { issueServerCert, makeTestCa, startCountingTlsServer } from "./support/tls_servers.ts";
import { attesterFor, createAttesterDeps } from "../src/sessions/attesters/mod.ts";

import {
  decided,
  type ErrorEnvelope,
  eventTypes,
  type HealthDetail,
  jsonOf,
  type ModelList,
  type ModelObject,
  type Receipt,
  type SessionDocument,
  type SessionListEntry,
  verifiedEvent,
} from "./support/wire.ts";
const sha256hex = (s: string) => createHash("sha256").update(s).digest("hex");

/** A gateway with the TEE provider at `up`, verified with the real verifiers under the forge's root. */
function gatewayVerifying(
  up: { url: string; caPem: string },
  forge: TdxForge,
): Promise<TestGateway> {
  return startTestGateway({
    configure: (c) => addDstackTdxProvider(c, up.url, up.caPem),
    attesters: {
      attesterFor: (p) => attesterFor(p.confidential!.verifier),
      deps: createAttesterDeps({
        tlsConnect: tls.connect,
        randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
        now: Date.now,
        tdx: { collateral: forge.source, rootCaDer: forge.rootCertDer },
      }),
    },
  });
}

async function chat(gw: TestGateway, provider: unknown, model = "tee/model") {
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
    body: JSON.stringify({
      model,
      messages: [{ role: "user", content: "top secret prompt" }],
      provider,
    }),
  });
  const receiptId = res.headers.get("x-receipt-id");
  // Only a refusal's body is read: its error envelope.
  if (res.ok) await res.body?.cancel();
  const error = res.ok ? null : (await jsonOf<ErrorEnvelope>(res)).error;
  return { status: res.status, receiptId, error };
}

async function get<T>(
  gw: TestGateway,
  path: string,
  key: string | null = gw.apiKey,
): Promise<{ status: number; body: T }> {
  const res = await fetch(`${gw.url}${path}`, {
    headers: key ? { authorization: `Bearer ${key}` } : {},
  });
  return { status: res.status, body: await jsonOf<T>(res) };
}

/** `GET /v1/aci/sessions`: current sessions, without evidence data. */
interface SessionList {
  api_version: "aci/1";
  sessions: SessionListEntry[];
}

Deno.test("a forged-root TDX upstream is verified into a session; aci constraints route through it", async () => {
  const forge = await forgeTdxEnvironment();
  const ca = await makeTestCa();
  const up = await startDstackUpstream({ forge, ca });
  const gw = await gatewayVerifying(up, forge);
  try {
    const state = gw.gateway.ctx.verification("tdx");
    assert.ok(state?.verified, JSON.stringify(state));
    const r = await chat(gw, { aci_verified: true });
    assert.equal(r.status, 200);
    assert.equal(up.demo.stats.total, 1);

    // The receipt cites the session, and the session recomputes to its id.
    const receipt = (await get<Receipt>(gw, `/v1/aci/receipts/${r.receiptId}`)).body;
    const ev = verifiedEvent(receipt);
    assert.equal(ev.required, true);
    assert.equal(ev.model_id, "tee/model");
    const doc = (await get<SessionDocument>(gw, `/v1/aci/sessions/${ev.session_id}`)).body;
    assert.equal(sha256hex(canonicalize(doc)!), ev.session_id);
    assert.equal(doc.api_version, "aci/1");
    assert.equal(doc.upstream_name, "tdx");
    assert.equal(doc.verifier_id, "dstack-tdx/1");
    assert.deepEqual(doc.claims.tee_attested.status, "asserted");
    assert.equal(decided(doc.claims.tee_attested).source, "hardware_proven");
    assert.equal(doc.claims.gpu_attested.status, "unknown");
    assert.deepEqual(doc.channel_binding, [{
      type: "tls_spki_sha256",
      origin: up.url,
      spki_sha256: up.spkiSha256,
    }]);
    const data = Uint8Array.from(atob(doc.evidence.data.split(",")[1]), (c) => c.charCodeAt(0));
    assert.equal(doc.evidence.digest, "sha256:" + createHash("sha256").update(data).digest("hex"));

    // The list: current sessions, with ids and without evidence data.
    const list = (await get<SessionList>(gw, "/v1/aci/sessions?model=tee/model")).body;
    assert.equal(list.api_version, "aci/1");
    assert.equal(list.sessions.length, 1);
    assert.equal(list.sessions[0].session_id, ev.session_id);
    assert.ok(!("data" in list.sessions[0].evidence));
    assert.equal(
      (await get<SessionList>(gw, "/v1/aci/sessions?upstream_name=plain")).body.sessions.length,
      0,
    );

    // Pinning to a session: the listed id serves; another id is refused before anything is sent.
    assert.equal((await chat(gw, { aci_session_ids: [ev.session_id] })).status, 200);
    const refused = await chat(gw, { aci_session_ids: ["0".repeat(64)] });
    assert.equal(refused.status, 503);
    assert.equal(refused.error?.type, "session_not_accepted");
    assert.equal(up.demo.stats.total, 2);
    // Combined with zdr (the TEE provider is ZDR) and through the waiver header: still the verified one.
    assert.equal((await chat(gw, { aci_verified: true, zdr: true })).status, 200);

    // Access rules and validation of the session endpoints.
    assert.equal((await get(gw, `/v1/aci/sessions/${ev.session_id}`, null)).status, 401);
    assert.equal((await get(gw, "/v1/aci/sessions", null)).status, 401);
    assert.equal((await get(gw, "/v1/aci/sessions/not-hex")).status, 400);
    assert.equal((await get(gw, `/v1/aci/sessions/${"1".repeat(64)}`)).status, 404);

    // Re-verification gives a new session id; the old one stays retrievable.
    const again = await gw.gateway.manager!.verify("tdx");
    assert.ok(again.verified && again.sessionId !== ev.session_id);
    assert.equal((await get(gw, `/v1/aci/sessions/${ev.session_id}`)).status, 200);
    const health = (await get<HealthDetail>(gw, "/healthz", TEST_ADMIN_TOKEN)).body;
    assert.equal(health.upstreams.tdx.verified, true);
  } finally {
    await gw.close();
    await up.close();
  }
});

Deno.test("a server with another TLS key at the verified origin never receives the prompt", async () => {
  const forge = await forgeTdxEnvironment();
  const ca = await makeTestCa();
  const up = await startDstackUpstream({ forge, ca });
  const gw = await gatewayVerifying(up, forge);
  const port = Number(new URL(up.url).port);
  let impostor: Awaited<ReturnType<typeof startCountingTlsServer>> | null = null;
  try {
    assert.ok(gw.gateway.ctx.verification("tdx")?.verified);
    await up.close();
    // Same CA, same origin, different key: a valid certificate, but not the attested one.
    const other = await issueServerCert(ca, {});
    const seen: string[] = [];
    impostor = startCountingTlsServer({
      certPem: other.certPem,
      keyPem: other.keyPem,
      port,
      respond: (req) => {
        seen.push(req.path + " " + new TextDecoder().decode(req.body));
        return { status: 404, body: "no" };
      },
    });
    const r = await chat(gw, { aci_verified: true });
    assert.equal(r.status, 503);
    assert.equal(r.error?.type, "upstream_verification_failed");
    assert.ok(r.receiptId);
    // Re-verification may probe the impostor (and fail), but no inference request ever reaches it.
    assert.ok(
      !seen.some((s) => s.startsWith("/v1/chat/completions")),
      "no inference request reached the impostor",
    );
    assert.ok(
      !seen.some((s) => s.includes("top secret prompt")),
      "the prompt never reached the impostor",
    );
    // The session was dropped; the gateway re-verifies (against the impostor, which fails).
    assert.equal(gw.gateway.ctx.verification("tdx")?.verified, false);
    const receipt = (await get<Receipt>(gw, `/v1/aci/receipts/${r.receiptId}`)).body;
    const types = eventTypes(receipt);
    assert.ok(types.includes("upstream.attempt_failed"), types.join(","));
    // #20 item 5: no request byte was written, so the receipt claims no forwarding.
    assert.ok(!types.includes("request.forwarded"), types.join(","));
    assert.ok(types.includes("request.refused"), types.join(","));
  } finally {
    await gw.close();
    await impostor?.close();
  }
});

Deno.test("verification failure: 503 with a refusal receipt, no prompt sent", async () => {
  const forge = await forgeTdxEnvironment();
  const ca = await makeTestCa();
  const up = await startDstackUpstream({ forge, ca, bindSpki: false });
  const gw = await gatewayVerifying(up, forge);
  try {
    const state = gw.gateway.ctx.verification("tdx");
    assert.ok(state && !state.verified);
    assert.match(state.reason, /report.?data|binding|SPKI|TLS/i);
    for (const headers of [{}, { "x-upstream-verification": "none" }] as Record<string, string>[]) {
      const res = await fetch(`${gw.baseURL}/chat/completions`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${gw.apiKey}`,
          ...headers,
        },
        body: JSON.stringify({
          model: "tee/model",
          messages: [{ role: "user", content: "x" }],
          provider: { aci_verified: true },
        }),
      });
      assert.equal(res.status, 503);
      const receipt =
        (await get<Receipt>(gw, `/v1/aci/receipts/${res.headers.get("x-receipt-id")}`))
          .body;
      assert.ok(!eventTypes(receipt).includes("request.forwarded"));
      await res.body?.cancel();
    }
    assert.equal(up.demo.stats.total, 0, "no prompt reached the unverified upstream");
    // Fail closed (#20 item 2): without any constraint the unverified confidential upstream
    // still receives nothing; 503 with a refusal receipt.
    for (const provider of [undefined, { zdr: true }, { aci_verified: false }]) {
      const r = await chat(gw, provider);
      assert.equal(r.status, 503, JSON.stringify(provider));
      assert.equal(r.error?.code, "upstream_verification_failed");
      assert.match(r.error?.message ?? "", /tdx/);
      const types = eventTypes((await get<Receipt>(gw, `/v1/aci/receipts/${r.receiptId}`)).body);
      assert.ok(!types.includes("request.forwarded"));
      assert.ok(types.includes("request.refused"));
    }
    assert.equal(up.demo.stats.total, 0, "no prompt byte reached the unverified upstream");
    // /healthz names it; /v1/models?tee=true does not list its model as TEE.
    // (Publicly only the status; the names are operator detail.)
    assert.deepEqual((await get<HealthDetail>(gw, "/healthz", null)).body, { status: "degraded" });
    const health = (await get<HealthDetail>(gw, "/healthz", TEST_ADMIN_TOKEN)).body;
    assert.equal(health.status, "degraded");
    assert.deepEqual(health.unverified_upstreams, ["tdx"]);
    const tee = (await get<ModelList>(gw, "/v1/models?tee=true", null)).body;
    assert.ok(!tee.data.some((m) => m.id === "tee/model"), "unverified model not is_tee");
    const all = (await get<ModelList>(gw, "/v1/models", null)).body;
    assert.equal(all.data.find((m) => m.id === "tee/model")?.is_tee, false);
    assert.equal((await get<ModelObject>(gw, "/v1/models/tee/model", null)).body.is_tee, false);
    // The demo confidential upstream (verified) is still listed as TEE.
    assert.ok(tee.data.some((m) => m.id === "demo/private"));
  } finally {
    await gw.close();
    await up.close();
  }
});

Deno.test("development mode: the demo confidential upstream is verified honestly and aci_verified works", async () => {
  const gw = await startTestGateway();
  try {
    const r = await chat(gw, { aci_verified: true }, "demo/private");
    assert.equal(r.status, 200);
    const receipt = (await get<Receipt>(gw, `/v1/aci/receipts/${r.receiptId}`)).body;
    const ev = verifiedEvent(receipt);
    const doc = (await get<SessionDocument>(gw, `/v1/aci/sessions/${ev.session_id}`)).body;
    assert.equal(doc.verifier_id, "dev-insecure/1");
    assert.equal(doc.claims.tee_attested.status, "refuted");
    assert.ok(
      !JSON.stringify(doc.claims).includes("hardware_proven"),
      "dev claims are never hardware_proven",
    );
    // Unconstrained, the confidential model prefers the verified upstream.
    gw.secure.resetStats();
    gw.plain.resetStats();
    assert.equal((await chat(gw, undefined, "demo/echo")).status, 200);
    assert.equal(gw.secure.stats.total, 1);
    // The waiver only drops the preference (plain has the higher priority).
    const waived = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${gw.apiKey}`,
        "x-upstream-verification": "none",
      },
      body: JSON.stringify({ model: "demo/echo", messages: [{ role: "user", content: "x" }] }),
    });
    assert.equal(waived.status, 200);
    await waived.body?.cancel();
    assert.equal(gw.plain.stats.total, 1);
  } finally {
    await gw.close();
  }
});
