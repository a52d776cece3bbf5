/**
 * The provider shapes of issue #26 end to end, production-style: a loopback
 * TLS upstream serving evidence in the provider's exact shape (forged test
 * roots where a real key is needed), the real gateway verifying it with the
 * production verifiers, the real OpenAI SDK routing `aci_verified` through
 * it, and — when the provider's TCB policy rejects the platform — no session
 * and no prompt byte sent.
 *
 * - dstack ≥ 0.6: the guest agent's event log as JSON text, RTMR3 runtime
 *   events with `"digest": ""` (derived from the payload when replayed).
 * - AMD Turin: an SEV-SNP report v5 with Turin's CPUID, TCB_VERSION layout
 *   (FMC first) and 8-byte hwID, its VCEK (FMC SPL extension) from a KDS at
 *   the Turin path, under a `Turin` root.
 */
import tls from "node:tls";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { addDstackTdxProvider } from "./support/route_config.ts";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { forgeTdxEnvironment, type TdxForge } from "./support/tdx_forge.ts";
import { type DstackUpstream, startDstackUpstream } from "./support/dstack_upstream.ts";
import { forgeSnpEnvironment, type SnpForge } from "./support/snp_forge.ts";
import { startFakeKds, startSnpUpstream } from "./support/snp_upstream.ts";
import { makeTestCa } from "./support/tls_servers.ts";
import { attesterFor, createAttesterDeps } from "../src/sessions/attesters/mod.ts";
import { productionAttesters } from "../src/sessions/attesters.ts";
import { LocalCollateralSource } from "../src/verify/tdx/collateral_source.ts";
import { snpTrustFromConfig } from "../src/verify/sev_snp/trust.ts";
import { type GatewayConfig, parseConfig } from "../src/config/schema.ts";
import type { AcceptableTcbStatus } from "../src/config/attestation_names.ts";
import {
  type ErrorEnvelope,
  jsonOf,
  type Receipt,
  type SessionDocument,
  verifiedEvent,
} from "./support/wire.ts";

async function get<T>(gw: TestGateway, path: string): Promise<T> {
  const res = await fetch(`${gw.url}${path}`, {
    headers: { authorization: `Bearer ${gw.apiKey}` },
  });
  assert.equal(res.status, 200, path);
  return await jsonOf<T>(res);
}

/** One aci_verified chat with the real SDK; the session document it was served under. */
async function verifiedChat(gw: TestGateway, model: string): Promise<SessionDocument> {
  const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
  const { data, response } = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "a confidential prompt" }],
    // @ts-expect-error: the gateway's routing block
    provider: { aci_verified: true },
  }).withResponse();
  assert.ok(data.choices[0].message.content);
  const receipt = await get<Receipt>(
    gw,
    `/v1/aci/receipts/${response.headers.get("x-receipt-id")}`,
  );
  const ev = verifiedEvent(receipt);
  assert.equal(ev.required, true);
  return await get<SessionDocument>(gw, `/v1/aci/sessions/${ev.session_id}`);
}

/** An aci_verified request that must be refused before anything is forwarded. */
async function refusedChat(gw: TestGateway, model: string): Promise<void> {
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
    body: JSON.stringify({
      model,
      messages: [{ role: "user", content: "a confidential prompt" }],
      provider: { aci_verified: true },
    }),
  });
  assert.equal(res.status, 503);
  assert.equal((await jsonOf<ErrorEnvelope>(res)).error.code, "upstream_verification_failed");
}

// ---- dstack 0.6 ------------------------------------------------------------------------------

function dstackGateway(
  up: DstackUpstream,
  forge: TdxForge,
  accepted?: AcceptableTcbStatus[],
): Promise<TestGateway> {
  return startTestGateway({
    configure: (c) => {
      addDstackTdxProvider(c, up.url, up.caPem);
      const conf = c.providers.at(-1)!.confidential!;
      if (accepted) conf.tdx = { accepted_tcb_statuses: accepted, allow_sept_ve_enabled: false };
    },
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

Deno.test("dstack 0.6: a guest agent's event log (runtime digests empty) replays; aci_verified is served", async () => {
  const forge = await forgeTdxEnvironment();
  const ca = await makeTestCa();
  const up = await startDstackUpstream({ forge, ca, eventLogFormat: "0.6" });
  const gw = await dstackGateway(up, forge);
  try {
    const state = gw.gateway.ctx.verification("tdx");
    assert.ok(state?.verified, JSON.stringify(state));
    const doc = await verifiedChat(gw, "tee/model");
    assert.equal(up.demo.stats.total, 1);
    assert.equal(doc.verifier_id, "dstack-tdx/1");
    const extra = doc.claims.extra as Record<string, Record<string, unknown>>;
    assert.equal(extra.tdx_measurements.event_log_format, "0.6");
    assert.equal(extra.tdx_measurements.compose_hash, up.composeHash);
    assert.deepEqual(extra.tdx_tcb.status, "UpToDate");
    assert.deepEqual(extra.tdx_tcb.advisory_ids, []);
    assert.equal(doc.claims.tcb_up_to_date.status, "asserted");
  } finally {
    await gw.close();
    await up.close();
  }
});

Deno.test("dstack 0.6 on an OutOfDate platform: default policy serves it (claims say so); UpToDate-only refuses, no prompt sent", async () => {
  const forge = await forgeTdxEnvironment({ tcbStatus: "OutOfDate" });
  const ca = await makeTestCa();
  const up = await startDstackUpstream({ forge, ca, eventLogFormat: "0.6" });
  const lenient = await dstackGateway(up, forge);
  try {
    const doc = await verifiedChat(lenient, "tee/model");
    const extra = doc.claims.extra as Record<string, Record<string, unknown>>;
    assert.equal(extra.tdx_tcb.status, "OutOfDate");
    assert.deepEqual(extra.tdx_tcb.advisory_ids, ["INTEL-SA-00000"]);
    assert.equal(doc.claims.tcb_up_to_date.status, "refuted");
  } finally {
    await lenient.close();
  }
  const served = up.demo.stats.total;
  const strict = await dstackGateway(up, forge, ["UpToDate", "SWHardeningNeeded"]);
  try {
    const state = strict.gateway.ctx.verification("tdx");
    assert.ok(state && !state.verified);
    assert.match(
      state.reason,
      /TDX quote rejected at tcb: TCB status OutOfDate is not accepted by the TCB policy/,
    );
    await refusedChat(strict, "tee/model");
    assert.equal(up.demo.stats.total, served, "no prompt reached the OutOfDate upstream");
  } finally {
    await strict.close();
    await up.close();
  }
});

// ---- AMD Turin -------------------------------------------------------------------------------

const MINIMAL = {
  listen: { base: { hostname: "127.0.0.1", port: 0 } },
  store: { path: ":memory:" },
};

/** A gateway verifying the SNP upstream through a configuration's trust.sev_snp and policy. */
function snpGateway(
  up: { url: string; caPem: string },
  roots: { product: "Milan" | "Genoa" | "Turin"; ask_ark_pem: string }[],
  kdsUrl: string,
  policy: Record<string, unknown>,
): Promise<TestGateway> {
  const confidential = { verifier: "sev-snp", tls_ca_pem: up.caPem, sev_snp: policy };
  const file = parseConfig(JSON.stringify({
    ...MINIMAL,
    trust: { sev_snp: { roots, kds_url: kdsUrl } },
    providers: [{ name: "snp", base_url: `${up.url}/v1`, zdr: true, confidential }],
  }));
  const trust = snpTrustFromConfig(file.trust.sev_snp!, { fetch: (u) => fetch(u) });
  if (!trust.ok) throw new Error(trust.reason);
  return startTestGateway({
    configure: (c: GatewayConfig) => {
      c.providers.push({ ...file.providers[0], priority: 10, timeout_ms: 5000 });
      c.models.push({
        ...c.models[0],
        id: "snp/model",
        aliases: [],
        routes: [{ provider: "snp", model: "demo-chat" }],
      });
    },
    attesters: productionAttesters(file, {
      now: Date.now,
      randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
      tlsConnect: tls.connect,
      collateral: new LocalCollateralSource(),
      sevSnp: trust.trust,
    }),
  });
}

const turinRoots = (f: SnpForge) => [{ product: "Turin" as const, ask_ark_pem: f.askArkPem }];

Deno.test("AMD Turin: a v5 report (8-byte hwID, FMC SPL) verifies under the Turin root via the Turin KDS path", async () => {
  const forge = await forgeSnpEnvironment({ product: "Turin" });
  const ca = await makeTestCa();
  const kds = startFakeKds(forge.vcekDer);
  const up = await startSnpUpstream({ forge, ca });
  const gw = await snpGateway(up, turinRoots(forge), kds.url, {
    allowed_measurements: ["11".repeat(48)],
    min_tcb: { fmc: 1, bootloader: 1, tee: 1, snp: 4, microcode: 82 },
    require_min_tcb: true,
  });
  try {
    const state = gw.gateway.ctx.verification("snp");
    assert.ok(state?.verified, JSON.stringify(state));
    assert.deepEqual(kds.requests, [
      `/vcek/v1/Turin/${"6b".repeat(8)}?fmcSPL=1&blSPL=1&teeSPL=1&snpSPL=4&ucodeSPL=82`,
    ]);
    const doc = await verifiedChat(gw, "snp/model");
    assert.equal(up.demo.stats.total, 1);
    const snp = (doc.claims.extra as Record<string, Record<string, unknown>>).snp_report;
    assert.equal(snp.product, "Turin");
    assert.equal(snp.version, 5);
    assert.deepEqual(snp.reported_tcb, { fmc: 1, bootloader: 1, tee: 1, snp: 4, microcode: 82 });
    assert.equal(doc.claims.tcb_up_to_date.status, "asserted");
    assert.equal(doc.claims.os_known_good.status, "asserted");
  } finally {
    await gw.close();
    await up.close();
    await kds.close();
  }
});

Deno.test("AMD Turin below the required FMC SPL, or with only a Milan root pinned: no session, no prompt", async () => {
  const forge = await forgeSnpEnvironment({ product: "Turin" });
  const milan = await forgeSnpEnvironment();
  const ca = await makeTestCa();
  const kds = startFakeKds(forge.vcekDer);
  const up = await startSnpUpstream({ forge, ca });
  try {
    const low = await snpGateway(up, turinRoots(forge), kds.url, {
      min_tcb: { fmc: 2, bootloader: 1, tee: 1, snp: 4, microcode: 82 },
      require_min_tcb: true,
    });
    try {
      const state = low.gateway.ctx.verification("snp");
      assert.ok(state && !state.verified);
      assert.match(state.reason, /^SNP TCB policy: REPORTED_TCB fmc=1 .*; below in fmc$/);
      await refusedChat(low, "snp/model");
    } finally {
      await low.close();
    }
    const wrongProduct = await snpGateway(
      up,
      [{ product: "Milan", ask_ark_pem: milan.askArkPem }],
      kds.url,
      {},
    );
    try {
      const state = wrongProduct.gateway.ctx.verification("snp");
      assert.ok(state && !state.verified);
      assert.match(state.reason, /SNP report is from a Turin CPU; no Turin root is pinned/);
      await refusedChat(wrongProduct, "snp/model");
    } finally {
      await wrongProduct.close();
    }
    assert.equal(up.demo.stats.total, 0, "no prompt reached the refused Turin upstream");
  } finally {
    await up.close();
    await kds.close();
  }
});
