/**
 * The evidence bundle carries the collateral each quote's check consumed,
 * and `task verify --bundle` re-verifies with it and nothing else. A dstack
 * TDX upstream serving the real Hopper GPU evidence (tests/fixtures/nvidia,
 * vector FULL) is verified with the real NVIDIA RIMs and OCSP answers, each
 * judged at its pinned time, and TDX collateral of the forged Intel-style
 * root (a live upstream must bind a fresh nonce and its TLS key, which no
 * recorded real quote does; the real-quote + real-collateral case is
 * src/verify/bundle_session_test.ts). The receipt's bundle then verifies
 * with the gateway stopped and the verifier run WITHOUT network permission;
 * `--at` judges it at another instant; altered collateral fails; the
 * gateway's own development quote says why it has no collateral. No prompt,
 * body or key is in the bundle.
 */
import tls from "node:tls";
import assert from "node:assert/strict";
import { addDstackTdxProvider } from "./support/route_config.ts";
import { startTestGateway } from "./support/gateway.ts";
import { forgeTdxEnvironment } from "./support/tdx_forge.ts";
import { startDstackUpstream } from "./support/dstack_upstream.ts";
import { makeTestCa } from "./support/tls_servers.ts";
import { waitInclusion } from "./support/tlog_check.ts";
import { runToEnd } from "./support/task_line.ts";
import { attesterFor, createAttesterDeps } from "../src/sessions/attesters/mod.ts";
import { defaultGpuDeps } from "../src/verify/nvidia/deps.ts";
import { archiveDigest } from "../src/verify/collateral_archive.ts";
import { verifyBundle } from "../src/verify/bundle.ts";
import { kdsVcekSource } from "../src/verify/sev_snp/vcek_source.ts";
import { LocalCollateralSource } from "../src/verify/tdx/collateral_source.ts";
import { forgeSnpEnvironment } from "./support/snp_forge.ts";
import { startFakeKds, startSnpUpstream } from "./support/snp_upstream.ts";
import { Buffer } from "node:buffer";
import {
  collateralWith,
  FULL_RIMS,
  FULL_TIMES,
  fullNrasPayload,
  hexToBytes,
  vector,
} from "./support/nvidia_fixtures.ts";
import { jsonOf, type SessionDocument, verifiedEvent } from "./support/wire.ts";
import type { Receipt } from "./support/wire.ts";

const FULL = vector("hopper-550.90.07-FULL");
const PROMPT = "top secret prompt 7f3a";

/** `task verify` without --allow-net: any fetch would be refused. */
async function verifyOffline(args: string[]) {
  const out = await runToEnd(Deno.execPath(), [
    "run",
    "--no-prompt",
    "--allow-read",
    "--allow-env=INIT_CWD,GATEWAY_API_KEY",
    "main.ts",
    "verify",
    ...args,
  ], { timeoutMs: 120_000 });
  return { code: out.code, text: [...out.stdout, ...out.stderr].join("\n") };
}

Deno.test("bundle: a verified session's collateral (TDX, real GPU RIMs + OCSP) re-verifies offline", async () => {
  const dir = await Deno.makeTempDir();
  const forge = await forgeTdxEnvironment();
  const up = await startDstackUpstream({
    forge,
    ca: await makeTestCa(),
    nvidiaPayload: JSON.stringify(fullNrasPayload()),
  });
  const nonce = hexToBytes(FULL.nonce);
  const gw = await startTestGateway({
    configure: (c) => addDstackTdxProvider(c, up.url, up.caPem, { requireGpu: true }),
    attesters: {
      attesterFor: (p) => attesterFor(p.confidential!.verifier),
      deps: createAttesterDeps({
        tlsConnect: tls.connect,
        now: Date.now,
        tdx: { collateral: forge.source, rootCaDer: forge.rootCertDer },
        // The recorded evidence's nonce (real GPUs answer any nonce).
        randomBytes: (n) => n === 32 ? nonce.slice() : crypto.getRandomValues(new Uint8Array(n)),
        gpu: defaultGpuDeps({ collateral: collateralWith(FULL_RIMS), times: () => FULL_TIMES }),
      }),
    },
  });
  let stopped = false;
  try {
    assert.ok(gw.gateway.ctx.verification("tdx")?.verified);
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
      body: JSON.stringify({
        model: "tee/model",
        messages: [{ role: "user", content: PROMPT }],
        provider: { aci_verified: true },
      }),
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const id = res.headers.get("x-receipt-id")!;
    const get = async <T>(path: string) =>
      await jsonOf<T>(
        await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${gw.apiKey}` } }),
      );
    const receipt = await get<Receipt>(`/v1/aci/receipts/${id}`);
    const sessionId = verifiedEvent(receipt).session_id;
    // The session commits to the collateral its verification consumed.
    const doc = await get<SessionDocument>(`/v1/aci/sessions/${sessionId}`);
    const bound = doc.claims.extra?.collateral as Record<string, unknown>;
    assert.match(String(bound.digest), /^sha256:[0-9a-f]{64}$/);
    assert.equal(bound.tdx, 1);
    assert.equal(bound.gpu_rims, 2);
    assert.ok(Number(bound.gpu_ocsp) >= 2, JSON.stringify(bound));

    await waitInclusion(gw.url, id, gw.apiKey, 30_000);
    const bundleRes = await fetch(`${gw.url}/v1/aci/receipts/${id}/bundle`, {
      headers: { authorization: `Bearer ${gw.apiKey}` },
    });
    assert.equal(bundleRes.status, 200);
    const text = await bundleRes.text();
    assert.ok(!text.includes(PROMPT), "no prompt in the bundle");
    assert.ok(!text.includes(gw.apiKey), "no API key in the bundle");
    const bundle = JSON.parse(text);
    const archived = bundle.collateral.sessions[sessionId];
    assert.equal(archived.digest, bound.digest);
    assert.equal(archived.archive.tdx[0].fmspc, forge.fmspc.toLowerCase());
    assert.deepEqual(
      archived.archive.gpu.rims.map((r: { id: string }) => r.id).sort(),
      Object.keys(FULL_RIMS).sort(),
    );
    assert.deepEqual(archived.archive.gpu.times, FULL_TIMES);
    const own = bundle.collateral.reports[receipt.workload_keyset_digest];
    assert.match(own.none, /^development evidence: no TEE signed this quote/);

    await gw.close();
    stopped = true;
    await up.close();
    const file = `${dir}/bundle.json`;
    const root = `${dir}/root.pem`;
    await Deno.writeTextFile(file, text);
    await Deno.writeTextFile(root, forge.rootPem);

    const ok = await verifyOffline(["--bundle", file, "--allow-dev", "--tdx-root", root]);
    assert.equal(ok.code, 0, ok.text);
    for (
      const line of [
        /PASS bundle\.report_collateral — keyset sha256:\S+: no collateral, as the gateway says: development evidence/,
        /PASS session\.collateral — the archived collateral hashes to sha256:[0-9a-f]{64}, the digest the session document commits to/,
        /PASS session\.tdx\.collateral/,
        /PASS session\.measurements/,
        /PASS session\.tls_binding — the quote's REPORTDATA binds the session's signing address and TLS key/,
        /PASS session\.gpu\[0\]\.driver_rim/,
        /PASS session\.gpu\[0\]\.rim_ocsp/,
        /PASS session\.gpu\[0\]\.device_ocsp/,
        /PASS session\.gpu\.claim/,
        /PASS log\.inclusion/,
      ]
    ) assert.match(ok.text, line);

    // Only the pinned root is trusted: with Intel's real root the forged chain fails.
    const realRoot = await verifyOffline(["--bundle", file, "--allow-dev"]);
    assert.equal(realRoot.code, 1);
    assert.match(realRoot.text, /FAIL session\.tdx\./);

    // --at: the same bytes judged years later (collateral, OCSP and certificates lapsed).
    const late = await verifyOffline([
      "--bundle",
      file,
      "--allow-dev",
      "--tdx-root",
      root,
      "--at",
      "2040-01-01T00:00:00Z",
    ]);
    assert.equal(late.code, 1);
    assert.match(late.text, /FAIL session\.tdx\.\S+ — .*expired/);
    assert.match(late.text, /FAIL session\.gpu\[0\]\./);

    // Altered collateral: one byte of a RIM.
    const altered = JSON.parse(text);
    const rim = altered.collateral.sessions[sessionId].archive.gpu.rims[0];
    rim.xml = rim.xml.replace("<", "< ");
    await Deno.writeTextFile(file, JSON.stringify(altered));
    const bad = await verifyOffline(["--bundle", file, "--allow-dev", "--tdx-root", root]);
    assert.equal(bad.code, 1);
    assert.match(bad.text, /FAIL session\.collateral — the bundle's collateral hashes to/);
    // …and its digest rewritten to match: the session document (logged by id) still names the old.
    altered.collateral.sessions[sessionId].digest = "sha256:" + "0".repeat(64);
    await Deno.writeTextFile(file, JSON.stringify(altered));
    assert.equal(
      (await verifyOffline(["--bundle", file, "--allow-dev", "--tdx-root", root])).code,
      1,
    );
  } finally {
    if (!stopped) {
      await gw.close();
      await up.close();
    }
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("bundle: the gateway's own TDX quote carries its collateral; the report re-verifies offline", async () => {
  const dir = await Deno.makeTempDir();
  const forge = await forgeTdxEnvironment();
  const fetched: string[] = [];
  const gw = await startTestGateway({
    // The gateway's own quotes: TDX, minted under the forged root over the statement's slot.
    quotes: {
      name: "forged-tdx",
      hardware: true,
      getQuote: (rd) =>
        Promise.resolve({ tee_type: "tdx", provider: "test", quote: forge.mintQuote(rd) }),
    },
    attesters: {
      attesterFor: (p) => attesterFor(p.confidential!.verifier),
      deps: createAttesterDeps({
        tlsConnect: tls.connect,
        now: Date.now,
        // The gateway's configured collateral source, which also serves its own quote.
        tdx: {
          collateral: {
            get: (fmspc, ca) => {
              fetched.push(`${fmspc}/${ca}`);
              return forge.source.get(fmspc, ca);
            },
          },
          rootCaDer: forge.rootCertDer,
        },
        randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
      }),
    },
  });
  let stopped = false;
  try {
    const res = await fetch(`${gw.baseURL}/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
      body: JSON.stringify({ model: "demo/embed-small", input: PROMPT }),
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const id = res.headers.get("x-receipt-id")!;
    await waitInclusion(gw.url, id, gw.apiKey, 30_000);
    const bundleOf = async () => {
      const r = await fetch(`${gw.url}/v1/aci/receipts/${id}/bundle`, {
        headers: { authorization: `Bearer ${gw.apiKey}` },
      });
      assert.equal(r.status, 200);
      return await r.text();
    };
    const text = await bundleOf();
    const bundle = JSON.parse(text);
    const own = bundle.collateral.reports[bundle.report.workload_keyset_digest];
    assert.match(own.digest, /^sha256:[0-9a-f]{64}$/);
    assert.equal(own.archive.tdx[0].fmspc, forge.fmspc.toLowerCase());
    // Archived once per keyset: a second bundle carries the same bytes without asking again.
    const asked = fetched.length;
    assert.equal(
      JSON.parse(await bundleOf()).collateral.reports[bundle.report.workload_keyset_digest].digest,
      own.digest,
    );
    assert.equal(fetched.length, asked);
    assert.ok(!text.includes(PROMPT) && !text.includes(gw.apiKey));

    await gw.close();
    stopped = true;
    const file = `${dir}/bundle.json`;
    const root = `${dir}/root.pem`;
    await Deno.writeTextFile(file, text);
    await Deno.writeTextFile(root, forge.rootPem);
    // No --allow-dev: the report's quote is TDX, verified with the archived collateral.
    const ok = await verifyOffline(["--bundle", file, "--tdx-root", root]);
    assert.equal(ok.code, 0, ok.text);
    assert.match(
      ok.text,
      /PASS bundle\.report_collateral — keyset sha256:\S+: archived collateral sha256:/,
    );
    assert.match(ok.text, /PASS report\.hardware_evidence — TDX quote v4: TDX v4 quote verified/);

    // Altered TCB info with its digest made to match: Intel's (here: the pinned root's) signature fails.
    const altered = JSON.parse(text);
    const entry = altered.collateral.reports[bundle.report.workload_keyset_digest];
    entry.archive.tdx[0].collateral.tcb_info = entry.archive.tdx[0].collateral.tcb_info.replace(
      /"tcbEvaluationDataNumber":(\d+)/,
      (_: string, n: string) => `"tcbEvaluationDataNumber":${Number(n) + 1}`,
    );
    entry.digest = archiveDigest(entry.archive);
    await Deno.writeTextFile(file, JSON.stringify(altered));
    const bad = await verifyOffline(["--bundle", file, "--tdx-root", root]);
    assert.equal(bad.code, 1);
    assert.match(bad.text, /FAIL report\.hardware_evidence — .*collateral/);
  } finally {
    if (!stopped) await gw.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("bundle: an SEV-SNP session's VCEK (fetched from a KDS) is archived and re-verifies offline", async () => {
  const forge = await forgeSnpEnvironment();
  const kds = startFakeKds(forge.vcekDer);
  const up = await startSnpUpstream({ forge, ca: await makeTestCa() });
  const roots = [{ product: "Genoa" as const, askDer: forge.askDer, arkDer: forge.arkDer }];
  const gw = await startTestGateway({
    configure: (c) => {
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
        },
      });
      c.models.push({
        ...c.models[0],
        id: "snp/model",
        aliases: [],
        routes: [{ provider: "snp", model: "demo-chat" }],
      });
    },
    attesters: {
      attesterFor: (p) => attesterFor(p.confidential!.verifier),
      deps: createAttesterDeps({
        tlsConnect: tls.connect,
        now: Date.now,
        tdx: { collateral: new LocalCollateralSource() },
        sevSnp: { roots, vcek: kdsVcekSource({ baseUrl: kds.url, fetch: (u) => fetch(u) }) },
        randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
      }),
    },
  });
  try {
    assert.ok(gw.gateway.ctx.verification("snp")?.verified);
    assert.equal(kds.requests.length, 1, "the VCEK came from the KDS");
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
      body: JSON.stringify({
        model: "snp/model",
        messages: [{ role: "user", content: PROMPT }],
        provider: { aci_verified: true },
      }),
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const id = res.headers.get("x-receipt-id")!;
    await waitInclusion(gw.url, id, gw.apiKey, 30_000);
    const text = await (await fetch(`${gw.url}/v1/aci/receipts/${id}/bundle`, {
      headers: { authorization: `Bearer ${gw.apiKey}` },
    })).text();
    assert.ok(!text.includes(PROMPT) && !text.includes(gw.apiKey));
    const bundle = JSON.parse(text);
    const [sessionId] = Object.keys(bundle.sessions);
    const archived = bundle.collateral.sessions[sessionId].archive;
    assert.equal(archived.sev_snp[0].vcek, Buffer.from(forge.vcekDer).toString("hex"));
    const requestsBefore = kds.requests.length;
    await kds.close();

    const trust = {
      snpRoots: roots,
      gpuRoots: { deviceRootDer: new Uint8Array(), rimRootDer: new Uint8Array() },
      allowDevEvidence: true,
    };
    const served = bundle.receipt.served_at * 1000;
    const checks = await verifyBundle(bundle, { now: () => served, trust });
    const failedChecks = checks.filter((c) => !c.ok);
    assert.deepEqual(failedChecks, []);
    const names = checks.map((c) => c.name);
    for (
      const n of [
        "session.collateral",
        "session.snp.signature",
        "session.measurements",
        "session.tls_binding",
      ]
    ) {
      assert.ok(names.some((x) => x.startsWith(n)), `${n} in ${names.join(" ")}`);
    }
    assert.equal(kds.requests.length, requestsBefore, "nothing was fetched");
    // Without the pinned roots (the auditor pinned none), the archived ASK/ARK are not trusted.
    const unpinned = await verifyBundle(bundle, {
      now: () => served,
      trust: { ...trust, snpRoots: [] },
    });
    assert.ok(unpinned.some((c) => !c.ok && c.name.startsWith("session.snp")));
    // Judged years later the VCEK chain has lapsed.
    const late = await verifyBundle(bundle, {
      now: () => served,
      trust: { ...trust, at: Date.parse("2040-01-01T00:00:00Z") },
    });
    assert.ok(late.some((c) => !c.ok && c.name.startsWith("session.snp")));
  } finally {
    await gw.close();
    await up.close();
  }
});
