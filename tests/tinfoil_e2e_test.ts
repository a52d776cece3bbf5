/**
 * Tinfoil upstreams end to end (issue #26): a loopback TLS enclave serving
 * Tinfoil's attestation bundle (SEV-SNP report from the forged AMD root,
 * binding its own TLS key and an HPKE key; Tinfoil's real Sigstore release
 * bundle) is verified by the production wiring — the release verified
 * offline against the configured Sigstore trusted root, the enclave's
 * MEASUREMENT equal to the release's — and serves the real OpenAI SDK. An
 * enclave running another measurement, binding another TLS key, signed by
 * another repository, or outside the operator's measurement policy gets no
 * prompt.
 */
import tls from "node:tls";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { forgeSnpEnvironment } from "./support/snp_forge.ts";
import { forgeTdxEnvironment } from "./support/tdx_forge.ts";
import { makeTestCa } from "./support/tls_servers.ts";
import {
  startTinfoilUpstream,
  TINFOIL_RELEASE,
  type TinfoilUpstream,
  type TinfoilUpstreamOptions,
} from "./support/tinfoil_upstream.ts";
import { productionAttesters } from "../src/sessions/attesters.ts";
import { snpTrustFromConfig } from "../src/verify/sev_snp/trust.ts";
import { parseConfig } from "../src/config/schema.ts";
import { policySigner } from "../src/sessions/policy/testing.ts";
import type { PolicyEntry } from "../src/sessions/policy/document.ts";
import { jsonOf, type Receipt, type SessionDocument, verifiedEvent } from "./support/wire.ts";

const forge = await forgeSnpEnvironment();
const tdxForge = await forgeTdxEnvironment();
const ca = await makeTestCa();
const signer = policySigner("ops");

async function start(
  up: Partial<TinfoilUpstreamOptions> = {},
  o: { repo?: string; policy?: PolicyEntry[] } = {},
): Promise<{ gw: TestGateway; tf: TinfoilUpstream }> {
  const tf = await startTinfoilUpstream({ forge, ca, ...up });
  const file = parseConfig(JSON.stringify({
    listen: { base: { hostname: "127.0.0.1", port: 0 } },
    store: { path: ":memory:" },
    trust: {
      sev_snp: { roots: [{ product: "Genoa", ask_ark_pem: forge.askArkPem }], vcek_dir: "/none" },
      measurement_policy_keys: [signer.key],
    },
    providers: [{
      name: "tinfoil",
      base_url: `${tf.url}/v1`,
      zdr: true,
      confidential: {
        verifier: "tinfoil",
        tls_ca_pem: tf.caPem,
        tinfoil: {
          repo: o.repo ?? TINFOIL_RELEASE.repo,
          trusted_root_json: TINFOIL_RELEASE.trustedRootJson,
        },
      },
    }],
  }));
  const trust = snpTrustFromConfig(file.trust.sev_snp!, {
    vcekFiles: [],
    fetch: () => Promise.reject(new Error("no KDS in this test")),
  });
  if (!trust.ok) throw new Error(trust.reason);
  const attesters = productionAttesters(file, {
    now: Date.now,
    randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
    tlsConnect: tls.connect,
    collateral: tdxForge.source,
    rootCaDer: tdxForge.rootCertDer,
    sevSnp: trust.trust,
  });
  if (o.policy) {
    assert.ok(attesters.policies.install("tinfoil", signer.policy("tinfoil", 1, o.policy)).ok);
  }
  const gw = await startTestGateway({
    configure: (c) => {
      c.providers.push({ ...file.providers[0], priority: 10 });
      c.models.push({
        ...c.models[0],
        id: "tinfoil/model",
        aliases: [],
        routes: [{ provider: "tinfoil", model: "demo-chat" }],
      });
    },
    attesters,
  });
  return { gw, tf };
}

const get = async <T>(gw: TestGateway, path: string) =>
  await jsonOf<T>(
    await fetch(`${gw.baseURL}${path}`, { headers: { authorization: `Bearer ${gw.apiKey}` } }),
  );

Deno.test("tinfoil: the enclave's measurement is the Sigstore release's; verified and served", async () => {
  const { gw, tf } = await start({}, {
    policy: [{ id: "router-v0.0.38", snp_measurement: TINFOIL_RELEASE.snpMeasurement }],
  });
  try {
    const state = gw.gateway.ctx.verification("tinfoil");
    assert.ok(state?.verified, JSON.stringify(state));
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey });
    const { data, response } = await client.chat.completions.create({
      model: "tinfoil/model",
      messages: [{ role: "user", content: "a confidential prompt" }],
      // @ts-expect-error: the gateway's routing block
      provider: { aci_verified: true },
    }).withResponse();
    assert.ok(data.choices[0].message.content);
    assert.equal(tf.demo.stats.total, 1);
    const receipt = await get<Receipt>(gw, `/aci/receipts/${response.headers.get("x-receipt-id")}`);
    const doc = await get<SessionDocument>(
      gw,
      `/aci/sessions/${verifiedEvent(receipt).session_id}`,
    );
    assert.equal(doc.verifier_id, "tinfoil/1");
    assert.equal(doc.identity?.hpke_public_key, tf.hpkePublicKey);
    assert.equal(doc.identity?.release_digest, TINFOIL_RELEASE.digest);
    assert.deepEqual(doc.channel_binding[0], {
      type: "tls_spki_sha256",
      origin: tf.url,
      spki_sha256: tf.spkiSha256,
    });
    assert.equal(doc.channel_binding[1].type, "e2ee_public_key_sha256");
    const sw = doc.claims.serving_software_known_good;
    assert.equal(sw.status, "asserted");
    assert.match(
      sw.status === "asserted" ? sw.reason ?? "" : "",
      /signed through Sigstore by https:\/\/github\.com\/tinfoilsh\/confidential-model-router\/\.github\/workflows\/build\.yml@refs\/tags\/v0\.0\.38/,
    );
    const release = doc.claims.extra?.release as Record<string, unknown>;
    assert.equal((release.registers as string[])[0], TINFOIL_RELEASE.snpMeasurement);
    const mp = doc.claims.extra?.measurement_policy as Record<string, unknown>;
    assert.deepEqual(mp.matches, [{
      subject: "upstream",
      entry: "router-v0.0.38",
      not_after: null,
    }]);
  } finally {
    await gw.close();
    await tf.close();
  }
});

Deno.test("tinfoil: another measurement, TLS key, repository or policy: fails closed, no prompt", async () => {
  const cases: [
    Partial<TinfoilUpstreamOptions>,
    { repo?: string; policy?: PolicyEntry[] },
    RegExp,
  ][] = [
    [
      { measurement: "ab".repeat(48) },
      {},
      /SEV-SNP MEASUREMENT abab.* is not the release's 09ef32ac/,
    ],
    [{ bindSpki: false }, {}, /REPORTDATA binds TLS key [0-9a-f]+, but this connection's key is/],
    [{}, { repo: "someone/else" }, /release measurement \(WORKFLOW_REPOSITORY_MISMATCH\)/],
    [
      {},
      { policy: [{ id: "older", snp_measurement: "cd".repeat(48) }] },
      /upstream measurement is not in measurement policy v1: snp_measurement 09ef32ac/,
    ],
  ];
  for (const [up, o, why] of cases) {
    const { gw, tf } = await start(up, o);
    try {
      const state = gw.gateway.ctx.verification("tinfoil");
      assert.ok(state && !state.verified, JSON.stringify(state));
      assert.match(state.reason, why);
      const res = await fetch(`${gw.baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
        body: JSON.stringify({
          model: "tinfoil/model",
          messages: [{ role: "user", content: "x" }],
          provider: { aci_verified: true },
        }),
      });
      assert.equal(res.status, 503);
      await res.body?.cancel();
      assert.equal(tf.demo.stats.total, 0, "no prompt byte sent");
      assert.equal(tf.attestationRequests() >= 1, true);
    } finally {
      await gw.close();
      await tf.close();
    }
  }
});

Deno.test("tinfoil TDX: RTMR1/RTMR2 must be the release's; MRTD is left to the policy", async () => {
  const ok = await start({ tdx: tdxForge });
  try {
    const state = ok.gw.gateway.ctx.verification("tinfoil");
    assert.ok(state?.verified, JSON.stringify(state));
    const doc = await ok.gw.gateway.ctx.sessions.get(state.verified ? state.sessionId : "");
    assert.equal(doc?.identity?.platform, "tdx");
    const subj = (doc?.claims.extra?.measured_subjects as Record<string, Record<string, unknown>>)
      .upstream;
    assert.equal(subj.rtmr2, TINFOIL_RELEASE.rtmr2);
    assert.equal(subj.mrtd, "7d".repeat(48));
  } finally {
    await ok.gw.close();
    await ok.tf.close();
  }
  const bad = await start({ tdx: tdxForge, rtmr2: "ee".repeat(48) });
  try {
    const state = bad.gw.gateway.ctx.verification("tinfoil");
    assert.ok(state && !state.verified);
    assert.match(state.reason, /TDX RTMR2 eeee.* is not the release's ddce36c7/);
    assert.equal(bad.tf.demo.stats.total, 0);
  } finally {
    await bad.gw.close();
    await bad.tf.close();
  }
});
