import assert from "node:assert/strict";
import "reflect-metadata";
import { AsnConvert } from "@peculiar/asn1-schema";
import { OCSPRequest } from "@peculiar/asn1-ocsp";
import {
  FULL_RIMS,
  FULL_TIMES,
  fullOcspFiles,
  gpuItem,
  hexToBytes,
  must,
  readFixtureBytes,
  readFixtureText,
  ROOTS,
  vector,
} from "../../../tests/support/nvidia_fixtures.ts";
import { gpuCollateralFromFiles, RemoteGpuCollateral } from "./collateral.ts";
import { certIdKey, responseCertIdKeys } from "./ocsp.ts";
import { verifyGpuEvidence } from "./verify.ts";

const FULL = vector("hopper-550.90.07-FULL");

function b64der(rel: string): Uint8Array {
  return Uint8Array.from(atob(readFixtureText(rel).trim()), (c) => c.charCodeAt(0));
}

Deno.test("collateral dir: RIMs by file name, OCSP responses by CertID, the rest skipped", () => {
  const files = [
    ...Object.values(FULL_RIMS).map((p) => ({
      name: `rim/${p.split("/").pop()}`,
      bytes: readFixtureBytes(p),
    })),
    ...fullOcspFiles().map((p) => ({
      name: `ocsp/${p.split("/").pop()}`,
      bytes: readFixtureBytes(p),
    })),
    { name: "notes.txt", bytes: new TextEncoder().encode("hello") },
  ];
  const loaded = gpuCollateralFromFiles(files);
  assert.equal(loaded.rims, 2);
  assert.equal(loaded.ocsp, 7);
  assert.deepEqual(loaded.skipped, ["notes.txt"]);
});

/** A loopback RIM service and OCSP responder answering from the fixtures, counting requests. */
function startNvidiaServices() {
  const hits = { rim: 0, ocsp: 0 };
  const byKey = new Map<string, Uint8Array>();
  for (const f of fullOcspFiles()) {
    const der = b64der(f);
    for (const k of responseCertIdKeys(der)) byKey.set(k, der);
  }
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    if (req.method === "GET" && url.pathname.startsWith("/v1/rim/")) {
      hits.rim++;
      const id = url.pathname.slice("/v1/rim/".length) as keyof typeof FULL_RIMS;
      const path = FULL_RIMS[id];
      if (!path) return new Response("{}", { status: 404 });
      const xml = readFixtureText(path);
      return Response.json({ id, rim: btoa(xml), sha256: "" });
    }
    if (req.method === "POST" && url.pathname === "/ocsp") {
      hits.ocsp++;
      const ocspReq = AsnConvert.parse(new Uint8Array(await req.arrayBuffer()), OCSPRequest);
      const der = byKey.get(certIdKey(ocspReq.tbsRequest.requestList[0].reqCert));
      return der
        ? new Response(der.slice(), { headers: { "content-type": "application/ocsp-response" } })
        : new Response("", { status: 404 });
    }
    return new Response("", { status: 404 });
  });
  const base = `http://127.0.0.1:${server.addr.port}`;
  return { hits, base, close: () => server.shutdown() };
}

Deno.test("remote collateral: RIM service and OCSP responder, cached (RIMs for a TTL, OCSP until nextUpdate)", async () => {
  const svc = startNvidiaServices();
  let now = FULL_TIMES.device;
  const remote = new RemoteGpuCollateral({
    fetch: (input, init) => fetch(input, init),
    now: () => now,
    rimServiceUrl: svc.base,
    ocspUrl: `${svc.base}/ocsp`,
    rimTtlMs: 60_000,
  });
  try {
    const verdict = await verifyGpuEvidence({
      gpus: [gpuItem(FULL.evidence, must(FULL, "cert_chain"))],
      nonce: hexToBytes(FULL.nonce),
      deviceRootDer: ROOTS.device,
      rimRootDer: ROOTS.rim,
      collateral: remote,
      times: FULL_TIMES,
    });
    assert.equal(verdict.status, "pass", JSON.stringify(verdict.failing));
    // 3 device certificates, 2 RIM leaves, and the L3/L2 the two RIM chains share (asked once).
    assert.deepEqual(svc.hits, { rim: 2, ocsp: 7 });

    // Within the windows nothing is fetched again.
    assert.ok(await remote.rim("NV_GPU_DRIVER_GH100_550.90.07"));
    assert.equal(svc.hits.rim, 2);
    now += 61_000;
    assert.ok(await remote.rim("NV_GPU_DRIVER_GH100_550.90.07"));
    assert.equal(svc.hits.rim, 3, "a RIM is re-fetched after its TTL (VBIOS RIMs get re-issued)");
    assert.equal(await remote.rim("NV_GPU_DRIVER_GH100_999.99"), null);
    assert.equal(await remote.rim("../etc/passwd"), null, "ids are validated before any request");
    assert.equal(svc.hits.rim, 4);

    const again = await verifyGpuEvidence({
      gpus: [gpuItem(FULL.evidence, must(FULL, "cert_chain"))],
      nonce: hexToBytes(FULL.nonce),
      deviceRootDer: ROOTS.device,
      rimRootDer: ROOTS.rim,
      collateral: remote,
      times: FULL_TIMES,
    });
    assert.equal(again.status, "pass");
    assert.equal(svc.hits.ocsp, 7, "OCSP answers are reused until nextUpdate");
    now = Date.parse("2025-12-01T00:00:00Z"); // past every nextUpdate
    await verifyGpuEvidence({
      gpus: [gpuItem(FULL.evidence, must(FULL, "cert_chain"))],
      nonce: hexToBytes(FULL.nonce),
      deviceRootDer: ROOTS.device,
      rimRootDer: ROOTS.rim,
      collateral: remote,
      times: FULL_TIMES,
    });
    assert.ok(svc.hits.ocsp > 7, "stale OCSP answers are fetched again");
  } finally {
    await svc.close();
  }
});
