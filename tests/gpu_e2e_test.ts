/**
 * GPU evidence end to end: the loopback dstack upstream serves a report
 * whose `nvidia_payload` is the real Hopper evidence (vector FULL), and the
 * gateway's nonce source is set to that evidence's nonce, so the TDX quote
 * and the GPU evidence answer the same round. The session says
 * `gpu_attested: hardware_proven`; with `require_gpu` a tampered payload
 * fails verification and no prompt reaches the upstream, constrained or not.
 */
import tls from "node:tls";
import assert from "node:assert/strict";
import { addDstackTdxProvider } from "./support/route_config.ts";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { forgeTdxEnvironment, type TdxForge } from "./support/tdx_forge.ts";
import { type DstackUpstream, startDstackUpstream } from "./support/dstack_upstream.ts";
import { makeTestCa } from "./support/tls_servers.ts";
import { startDemoUpstream } from "../src/demo/upstream.ts";
import { baseConfig, spawnGateway, writeConfig } from "./support/process.ts";
import { attesterFor, createAttesterDeps } from "../src/sessions/attesters/mod.ts";
import { defaultGpuDeps } from "../src/verify/nvidia/deps.ts";
import {
  collateralWith,
  fixturePath,
  FULL_RIMS,
  FULL_TIMES,
  fullNrasPayload,
  hexToBytes,
  vector,
} from "./support/nvidia_fixtures.ts";

import {
  decided,
  type ErrorEnvelope,
  eventTypes,
  extraClaim,
  jsonOf,
  type Receipt,
  type SessionDocument,
  verifiedEvent,
} from "./support/wire.ts";
const FULL = vector("hopper-550.90.07-FULL");

function gateway(up: DstackUpstream, forge: TdxForge, requireGpu: boolean): Promise<TestGateway> {
  const nonce = hexToBytes(FULL.nonce);
  return startTestGateway({
    configure: (c) => {
      addDstackTdxProvider(c, up.url, up.caPem, { requireGpu });
    },
    attesters: {
      attesterFor: (p) => attesterFor(p.confidential!.verifier),
      deps: createAttesterDeps({
        tlsConnect: tls.connect,
        now: Date.now,
        tdx: { collateral: forge.source, rootCaDer: forge.rootCertDer },
        // The nonce source, set to the recorded evidence's nonce (real GPUs answer any nonce).
        randomBytes: (n) => n === 32 ? nonce.slice() : crypto.getRandomValues(new Uint8Array(n)),
        // Recorded collateral from the fixtures; each artefact at its pinned time.
        gpu: defaultGpuDeps({ collateral: collateralWith(FULL_RIMS), times: () => FULL_TIMES }),
      }),
    },
  });
}

async function chat(gw: TestGateway, provider?: unknown) {
  const res = await fetch(`${gw.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${gw.apiKey}` },
    body: JSON.stringify({
      model: "tee/model",
      messages: [{ role: "user", content: "top secret prompt" }],
      ...(provider ? { provider } : {}),
    }),
  });
  return {
    status: res.status,
    receiptId: res.headers.get("x-receipt-id"),
    body: await jsonOf<ErrorEnvelope>(res),
  };
}

const ROOT = new URL("..", import.meta.url).pathname;
const COLLATERAL = fixturePath("google__go-nvattest-tools/testing/testdata");
/** `deno task verify` as deno.json defines it, without the leading `deno`. */
const VERIFY_TASK: string[] = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)).tasks.verify
  .split(/\s+/).slice(1);

/** Runs `main.ts verify --session` as `task verify` does, offline with the fixture collateral. */
async function verifyCli(session: string, at: string, rimAt?: string) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      ...VERIFY_TASK,
      "--session",
      session,
      "--collateral",
      COLLATERAL,
      "--at",
      at,
      ...(rimAt ? ["--rim-at", rimAt] : []),
    ],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: "null",
  }).output();
  return { code: out.code, lines: new TextDecoder().decode(out.stdout).trim().split("\n") };
}

async function get<T>(gw: TestGateway, path: string): Promise<T> {
  const res = await fetch(`${gw.url}${path}`, {
    headers: { authorization: `Bearer ${gw.apiKey}` },
  });
  return await jsonOf<T>(res);
}

Deno.test("real Hopper evidence through the dstack upstream: gpu_attested is hardware_proven", async () => {
  const forge = await forgeTdxEnvironment();
  const up = await startDstackUpstream({
    forge,
    ca: await makeTestCa(),
    nvidiaPayload: JSON.stringify(fullNrasPayload()),
  });
  const gw = await gateway(up, forge, true);
  try {
    const state = gw.gateway.ctx.verification("tdx");
    assert.ok(state?.verified, JSON.stringify(state));
    const r = await chat(gw, { aci_verified: true });
    assert.equal(r.status, 200);
    assert.equal(up.demo.stats.total, 1);
    const receipt = await get<Receipt>(gw, `/v1/aci/receipts/${r.receiptId}`);
    const ev = verifiedEvent(receipt);
    const doc = await get<SessionDocument>(gw, `/v1/aci/sessions/${ev.session_id}`);
    const gpu = decided(doc.claims.gpu_attested);
    assert.equal(gpu.status, "asserted");
    assert.equal(gpu.source, "hardware_proven");
    assert.match(gpu.reason ?? "", /^1 HOPPER GPU\(s\)/);
    const extra = extraClaim(doc, "gpu_evidence");
    assert.equal(extra.status, "pass");
    assert.equal(extra.gpu_count, 1);
    assert.deepEqual(extra.gpus, [{
      arch: "HOPPER",
      driver_version: "550.90.07",
      vbios_version: "96.00.9F.00.01",
      hwmodel: "GH100 A01 GSP BROM",
      mode: null,
      ocsp: "good",
      rim_ocsp: "good",
    }]);
    // The session evidence is the exact report, GPU payload included.
    const data = atob(doc.evidence.data.split(",")[1]);
    assert.equal(JSON.parse(data).request_nonce, FULL.nonce);

    // `task verify --session` re-checks the stored record offline with collateral from a directory.
    const dir = await Deno.makeTempDir();
    try {
      await Deno.writeTextFile(`${dir}/session.json`, JSON.stringify(doc));
      const ok = await verifyCli(
        `${dir}/session.json`,
        "2025-08-21T12:00:00Z",
        "2025-10-24T12:00:00Z",
      );
      assert.equal(ok.code, 0, ok.lines.join("\n"));
      assert.ok(
        ok.lines.includes(
          "PASS gpu[0].measurements — pass: 32 active reference measurements match (index 35 skipped: NVDEC0 disabled)",
        ),
        ok.lines.join("\n"),
      );
      assert.match(ok.lines.at(-1)!, /^RESULT: all 13 checks passed$/);
      // One shared time: the RIM-chain OCSP answers are not yet valid, and the command says so.
      const stale = await verifyCli(`${dir}/session.json`, "2025-08-21T12:00:00Z");
      assert.equal(stale.code, 1);
      assert.ok(
        stale.lines.some((l) => l.startsWith("FAIL gpu[0].rim_ocsp — unavailable:")),
        stale.lines.join("\n"),
      );
      // A record whose evidence was edited no longer hashes to its digest.
      const edited = structuredClone(doc);
      edited.evidence.data = edited.evidence.data.slice(0, -8) + "AAAAAAA=";
      await Deno.writeTextFile(`${dir}/edited.json`, JSON.stringify(edited));
      const bad = await verifyCli(`${dir}/edited.json`, "2025-08-21T12:00:00Z");
      assert.equal(bad.code, 1);
      assert.match(bad.lines[0], /^FAIL session.evidence — /);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  } finally {
    await gw.close();
    await up.close();
  }
});

Deno.test("require_gpu: a tampered GPU payload fails verification and no prompt reaches the upstream", async () => {
  const forge = await forgeTdxEnvironment();
  const payload = fullNrasPayload();
  const ev = Uint8Array.from(atob(payload.evidence_list[0].evidence), (c) => c.charCodeAt(0));
  ev[200] ^= 0x01; // one measurement bit: the SPDM signature no longer verifies
  payload.evidence_list[0].evidence = btoa(String.fromCharCode(...ev));
  const up = await startDstackUpstream({
    forge,
    ca: await makeTestCa(),
    nvidiaPayload: JSON.stringify(payload),
  });
  const gw = await gateway(up, forge, true);
  try {
    const state = gw.gateway.ctx.verification("tdx");
    assert.ok(state && !state.verified);
    assert.match(state.reason, /GPU evidence required but not proven \(fail; spdm_signature:/);
    for (const provider of [{ aci_verified: true }, undefined]) {
      const r = await chat(gw, provider);
      assert.equal(r.status, 503, JSON.stringify(r.body));
      assert.equal(r.body.error.type, "upstream_verification_failed");
      const receipt = await get<Receipt>(gw, `/v1/aci/receipts/${r.receiptId}`);
      assert.ok(!eventTypes(receipt).includes("request.forwarded"));
    }
    assert.equal(up.demo.stats.total, 0, "no prompt reached the upstream");
  } finally {
    await gw.close();
    await up.close();
  }
});

Deno.test("without require_gpu a tampered payload refutes gpu_attested but the TDX session stands", async () => {
  const forge = await forgeTdxEnvironment();
  const payload = fullNrasPayload();
  payload.nonce = "00".repeat(32);
  const up = await startDstackUpstream({
    forge,
    ca: await makeTestCa(),
    nvidiaPayload: JSON.stringify(payload),
  });
  // Another nonce this round: the canned evidence no longer answers it.
  const gw = await startTestGateway({
    configure: (c) => {
      addDstackTdxProvider(c, up.url, up.caPem, { model: false });
    },
    attesters: {
      attesterFor: (p) => attesterFor(p.confidential!.verifier),
      deps: createAttesterDeps({
        tlsConnect: tls.connect,
        randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
        now: Date.now,
        tdx: { collateral: forge.source, rootCaDer: forge.rootCertDer },
        gpu: defaultGpuDeps({ collateral: collateralWith(FULL_RIMS), times: () => FULL_TIMES }),
      }),
    },
  });
  try {
    const state = gw.gateway.ctx.verification("tdx");
    assert.ok(state?.verified, JSON.stringify(state));
    const doc = await get<SessionDocument>(gw, `/v1/aci/sessions/${state.sessionId}`);
    const gpu = decided(doc.claims.gpu_attested);
    assert.equal(gpu.status, "refuted");
    assert.match(gpu.reason ?? "", /^GPU 0 nonce: /);
    assert.equal(extraClaim(doc, "gpu_evidence").failing_check, "nonce");
    assert.equal(decided(doc.claims.tee_attested).source, "hardware_proven");
  } finally {
    await gw.close();
    await up.close();
  }
});

Deno.test("main.ts serve: trust.nvidia.collateral_dir is loaded at start-up; a bad root stops it", async () => {
  const dir = await Deno.makeTempDir();
  const upstream = await startDemoUpstream({ name: "plain" });
  try {
    const cfg = baseConfig({ upstreamUrl: upstream.url, storePath: `${dir}/gw.kv` });
    cfg.trust = { nvidia: { collateral_dir: COLLATERAL } };
    const gw = await spawnGateway(await writeConfig(dir, cfg));
    try {
      assert.ok(
        gw.stderr.some((l) => /^GPU collateral: 2 RIMs, 7 OCSP responses from /.test(l)),
        gw.stderr.join("\n"),
      );
    } finally {
      await gw.stop();
    }
    cfg.trust = { nvidia: { device_root_pem: "not a certificate" } };
    await assert.rejects(
      spawnGateway(await writeConfig(dir, cfg)),
      /trust\.nvidia\.device_root_pem: no PEM certificate/,
    );
  } finally {
    await upstream.close();
    await Deno.remove(dir, { recursive: true });
  }
});
