/**
 * SEV-SNP upstreams end to end: a loopback TLS upstream whose SNP report
 * (signed by a forged AMD-style VCEK → ASK → ARK chain) binds its own TLS
 * key and the verifier's nonce is verified into an attested session, with
 * the trust built from a `trust.sev_snp` configuration (pinned ASK/ARK PEM,
 * VCEK from a loopback KDS); `aci_verified` routes through it with the real
 * OpenAI SDK and the receipt cites the session. An upstream whose report
 * binds another key gets no prompt.
 */
import tls from "node:tls";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { forgeSnpEnvironment, type SnpForge } from "./support/snp_forge.ts";
import { type SnpUpstream, startFakeKds, startSnpUpstream } from "./support/snp_upstream.ts";
import { makeTestCa } from "./support/tls_servers.ts";
import { productionAttesters } from "../src/sessions/attesters.ts";
import { LocalCollateralSource } from "../src/verify/tdx/collateral_source.ts";
import { snpTrustFromConfig } from "../src/verify/sev_snp/trust.ts";
import { ConfigError, type GatewayConfig, parseConfig } from "../src/config/schema.ts";

import {
  decided,
  type ErrorEnvelope,
  jsonOf,
  type Receipt,
  type SessionDocument,
  verifiedEvent,
} from "./support/wire.ts";

function addSnpProvider(c: GatewayConfig, up: SnpUpstream) {
  c.providers.push({
    name: "snp",
    base_url: `${up.url}/v1`,
    zdr: true,
    priority: 10,
    timeout_ms: 5000,
    native_formats: [],
    confidential: {
      verifier: "sev-snp",
      tls_ca_pem: up.caPem,
      allowed_mrtd: [],
      allowed_compose_hashes: [],
      session_ttl_seconds: 3600,
      reverify_margin_seconds: 300,
      sev_snp: { allowed_measurements: ["11".repeat(48)] },
    },
  });
  c.models.push({
    ...c.models[0],
    id: "snp/model",
    aliases: [],
    routes: [{ provider: "snp", model: "demo-chat" }],
  });
}

/**
 * A gateway verifying `up` with the production wiring: a configuration file's
 * `trust.sev_snp` (forged ASK/ARK PEM, the loopback KDS) → trust → verifiers.
 */
function gatewayVerifying(up: SnpUpstream, forge: SnpForge, kdsUrl: string): Promise<TestGateway> {
  const file = parseConfig(JSON.stringify({
    ...MINIMAL,
    trust: {
      sev_snp: { roots: [{ product: "Genoa", ask_ark_pem: forge.askArkPem }], kds_url: kdsUrl },
    },
    providers: [{
      name: "snp",
      base_url: `${up.url}/v1`,
      zdr: true,
      confidential: { verifier: "sev-snp", tls_ca_pem: up.caPem },
    }],
  }));
  const trust = snpTrustFromConfig(file.trust.sev_snp!, { fetch: (u) => fetch(u) });
  if (!trust.ok) throw new Error(trust.reason);
  return startTestGateway({
    configure: (c) => addSnpProvider(c, up),
    attesters: productionAttesters(file, {
      now: Date.now,
      randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
      tlsConnect: tls.connect,
      collateral: new LocalCollateralSource(),
      sevSnp: trust.trust,
    }),
  });
}

const MINIMAL = {
  listen: { base: { hostname: "127.0.0.1", port: 0 } },
  store: { path: ":memory:" },
};

async function get<T>(gw: TestGateway, path: string): Promise<{ status: number; body: T }> {
  const res = await fetch(`${gw.url}${path}`, {
    headers: { authorization: `Bearer ${gw.apiKey}` },
  });
  return { status: res.status, body: await jsonOf<T>(res) };
}

Deno.test("an SEV-SNP upstream is verified into a session and serves aci_verified requests", async () => {
  const forge = await forgeSnpEnvironment();
  const ca = await makeTestCa();
  const kds = startFakeKds(forge.vcekDer);
  const up = await startSnpUpstream({ forge, ca });
  const gw = await gatewayVerifying(up, forge, kds.url);
  try {
    const state = gw.gateway.ctx.verification("snp");
    assert.ok(state?.verified, JSON.stringify(state));
    assert.equal(kds.requests.length, 1);
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey });
    const { data, response } = await client.chat.completions.create({
      model: "snp/model",
      messages: [{ role: "user", content: "a confidential prompt" }],
      // @ts-expect-error: the gateway's routing block
      provider: { aci_verified: true },
    }).withResponse();
    assert.ok(data.choices[0].message.content);
    assert.equal(up.demo.stats.total, 1);
    const receipt = (await get<Receipt>(
      gw,
      `/v1/aci/receipts/${response.headers.get("x-receipt-id")}`,
    )).body;
    const ev = verifiedEvent(receipt);
    assert.equal(ev.required, true);
    const doc = (await get<SessionDocument>(gw, `/v1/aci/sessions/${ev.session_id}`)).body;
    assert.equal(doc.verifier_id, "sev-snp/1");
    const tee = decided(doc.claims.tee_attested);
    assert.equal(tee.source, "hardware_proven");
    assert.match(tee.reason ?? "", /pinned AMD ARK \(Genoa\)/);
    assert.equal(doc.claims.os_known_good.status, "asserted");
    assert.deepEqual(doc.channel_binding, [
      { type: "tls_spki_sha256", origin: up.url, spki_sha256: up.spkiSha256 },
    ]);
    // Re-verification asks the upstream again (fresh nonce) but not the KDS (cached VCEK).
    const again = await gw.gateway.manager!.verify("snp");
    assert.ok(again.verified && again.sessionId !== ev.session_id);
    assert.equal(up.attestationRequests(), 2);
    assert.equal(kds.requests.length, 1);
  } finally {
    await gw.close();
    await up.close();
    await kds.close();
  }
});

Deno.test("an SNP report binding another TLS key: 503, no prompt sent", async () => {
  const forge = await forgeSnpEnvironment();
  const ca = await makeTestCa();
  const kds = startFakeKds(forge.vcekDer);
  const up = await startSnpUpstream({ forge, ca, bindSpki: false });
  const gw = await gatewayVerifying(up, forge, kds.url);
  try {
    const state = gw.gateway.ctx.verification("snp");
    assert.ok(state && !state.verified);
    assert.match(state.reason, /REPORT_DATA does not bind the observed TLS key/);
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
      body: JSON.stringify({
        model: "snp/model",
        messages: [{ role: "user", content: "x" }],
        provider: { aci_verified: true },
      }),
    });
    assert.equal(res.status, 503);
    assert.equal((await jsonOf<ErrorEnvelope>(res)).error.code, "upstream_verification_failed");
    assert.equal(up.demo.stats.total, 0, "no prompt reached the unbound upstream");
  } finally {
    await gw.close();
    await up.close();
    await kds.close();
  }
});

Deno.test("config: a sev-snp provider needs trust.sev_snp; a bad ASK/ARK PEM is refused", () => {
  const base = {
    ...MINIMAL,
    providers: [{
      name: "snp",
      base_url: "https://snp.example/v1",
      zdr: true,
      confidential: { verifier: "sev-snp" },
    }],
  };
  assert.throws(
    () => parseConfig(JSON.stringify(base)),
    (e: unknown) =>
      e instanceof ConfigError && /providers\.0\.confidential\.verifier/.test(e.message) &&
      /trust\.sev_snp/.test(e.message),
  );
  const ok = parseConfig(JSON.stringify({
    ...base,
    trust: { sev_snp: { roots: [{ product: "Milan", ask_ark_pem: "not a pem" }] } },
  }));
  const t = snpTrustFromConfig(ok.trust.sev_snp!, { fetch: () => Promise.reject(new Error()) });
  assert.deepEqual(t, {
    ok: false,
    reason: "roots[0].ask_ark_pem: expected ASK and ARK certificates, found 0",
  });
});
