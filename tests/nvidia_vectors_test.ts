/**
 * Every vector of tests/fixtures/nvidia/vectors.json through the local GPU
 * verifier, with its expected verdict: the complete Hopper set passes every
 * check at its pinned times; the 2023 set passes with its own RIMs (no
 * revocation data); the negatives fail with the named reason; Blackwell
 * passes chain, signature, FWID and nonce and reports measurements as
 * unverifiable. Also an independent WebCrypto check of the SPDM signature
 * (not through the module under test).
 */
import assert from "node:assert/strict";
import "reflect-metadata";
import { X509Certificate as NodeX509 } from "node:crypto";
import { type GpuTimes, type GpuVerdict, verifyGpuEvidence } from "../src/verify/nvidia/verify.ts";
import { type GpuEvidenceItem, parseGpuPayload } from "../src/verify/nvidia/payload.ts";
import { verifyRim } from "../src/verify/nvidia/rim.ts";
import { compareMeasurements } from "../src/verify/nvidia/measurements.ts";
import { parseSpdmEvidence } from "../src/verify/nvidia/spdm.ts";
import { verifyDeviceChain } from "../src/verify/nvidia/device.ts";
import { StaticGpuCollateral } from "../src/verify/nvidia/collateral.ts";
import { pemCertificatesToDer } from "../src/verify/x509/pem.ts";
import {
  collateralWith,
  fixturePath,
  FULL_RIMS,
  FULL_TIMES,
  gpuItem,
  hexEvidence,
  hexToBytes,
  must,
  readFixtureBytes,
  readFixtureText,
  ROOTS,
  vector,
  vectors,
} from "./support/nvidia_fixtures.ts";

const at = (iso: string): GpuTimes => {
  const t = Date.parse(iso);
  return { device: t, deviceOcsp: t, rim: t, rimOcsp: t };
};
const EMPTY = new StaticGpuCollateral();

function run(
  gpus: GpuEvidenceItem[],
  nonceHex: string,
  collateral = EMPTY as StaticGpuCollateral,
  times: GpuTimes = at("2025-08-21T12:00:00Z"),
  rimRootDer = ROOTS.rim,
): Promise<GpuVerdict> {
  return verifyGpuEvidence({
    gpus,
    nonce: hexToBytes(nonceHex),
    deviceRootDer: ROOTS.device,
    rimRootDer,
    collateral,
    times,
  });
}

function statusOf(v: GpuVerdict, gpu = 0): Record<string, string> {
  return Object.fromEntries(v.gpus[gpu].checks.map((c) => [c.name, c.status]));
}

const CRYPTO_PASS = {
  evidence: "pass",
  nonce: "pass",
  cert_chain: "pass",
  fwid: "pass",
  spdm_signature: "pass",
};

function itemOf(id: string): GpuEvidenceItem {
  const v = vector(id);
  return gpuItem(v.evidence, must(v, "cert_chain"), v.arch);
}

Deno.test("vector hopper-550.90.07-FULL: every check passes at its pinned times", async () => {
  const v = vector("hopper-550.90.07-FULL");
  const verdict = await run([itemOf(v.id)], v.nonce, collateralWith(FULL_RIMS), FULL_TIMES);
  assert.equal(verdict.status, "pass", JSON.stringify(verdict.failing));
  assert.deepEqual(statusOf(verdict), {
    ...CRYPTO_PASS,
    device_ocsp: "pass",
    driver_rim: "pass",
    vbios_rim: "pass",
    rim_ocsp: "pass",
    measurements: "pass",
  });
  const g = verdict.gpus[0];
  assert.equal(g.driverVersion, must(v, "driver_version"));
  assert.equal(g.vbiosVersion, must(v, "vbios_version"));
  assert.equal(g.hwmodel, "GH100 A01 GSP BROM");
  assert.equal(g.ocsp, "good");
  assert.equal(g.rimOcsp, "good");
  const m = g.checks.find((c) => c.name === "measurements")!;
  assert.match(m.detail, /^32 active reference measurements match \(index 35 skipped/);
  // The binary copy of the same evidence and the alternative chain file verify the same way.
  const alt: GpuEvidenceItem = {
    arch: "HOPPER",
    evidence: readFixtureBytes(must(v, "evidence_alt")),
    certificatePem: readFixtureText(must(v, "cert_chain_alt")),
  };
  assert.equal((await run([alt], v.nonce, collateralWith(FULL_RIMS), FULL_TIMES)).status, "pass");
});

Deno.test("vector FULL: a foreign nonce fails exactly the nonce check", async () => {
  const v = vector("hopper-550.90.07-FULL");
  const verdict = await run([itemOf(v.id)], "00".repeat(32), collateralWith(FULL_RIMS), FULL_TIMES);
  assert.equal(verdict.status, "fail");
  assert.equal(verdict.failing?.check, "nonce");
  assert.deepEqual(verdict.gpus[0].checks.map((c) => c.status), ["pass", "fail"]);
});

Deno.test("vector FULL: each artefact at its own time; one shared time leaves OCSP stale", async () => {
  const v = vector("hopper-550.90.07-FULL");
  // At the RIM window, the device OCSP answers (Aug 2025) are past nextUpdate.
  const shared = await run(
    [itemOf(v.id)],
    v.nonce,
    collateralWith(FULL_RIMS),
    at("2025-10-24T12:00:00Z"),
  );
  assert.equal(shared.status, "unverifiable");
  assert.equal(shared.failing?.check, "device_ocsp");
  assert.match(shared.failing!.detail, /stale \(nextUpdate 2025-08-22/);
  assert.equal(shared.gpus[0].ocsp, "unavailable");
  // Today the RIM signer certificates have expired: a RIM failure, never a pass.
  const today = await run(
    [itemOf(v.id)],
    v.nonce,
    collateralWith(FULL_RIMS),
    at("2026-11-24T00:00:00Z"),
  );
  assert.equal(today.status, "fail");
  assert.equal(today.failing?.check, "driver_rim");
  assert.match(today.failing!.detail, /expired/);
  // Without collateral: crypto passes, the rest is unavailable (not refuted).
  const bare = await run([itemOf(v.id)], v.nonce);
  assert.equal(bare.status, "unverifiable");
  assert.deepEqual(statusOf(bare), {
    ...CRYPTO_PASS,
    device_ocsp: "unavailable",
    driver_rim: "unavailable",
    vbios_rim: "unavailable",
    rim_ocsp: "unavailable",
    measurements: "unavailable",
  });
});

Deno.test("vector hopper-545.00-2023: passes with its own RIMs; no revocation data", async () => {
  const v = vector("hopper-545.00-2023-FULL-no-OCSP");
  const c = collateralWith({
    "NV_GPU_DRIVER_GH100_545.00": must(v, "driver_rim"),
    "NV_GPU_VBIOS_1010_0200_882_96005E0001": must(v, "vbios_rim"),
  }, false);
  const verdict = await run([itemOf(v.id)], v.nonce, c, at("2024-06-01T00:00:00Z"));
  assert.deepEqual(statusOf(verdict), {
    ...CRYPTO_PASS,
    device_ocsp: "unavailable",
    driver_rim: "pass",
    vbios_rim: "pass",
    rim_ocsp: "unavailable",
    measurements: "pass",
  });
  assert.equal(verdict.status, "unverifiable");
  assert.match(verdict.gpus[0].checks.find((x) => x.name === "fwid")!.detail, /no FWID/);
  assert.match(verdict.gpus[0].checks.find((x) => x.name === "measurements")!.detail, /^32 /);
  // Its RIM leaf certificates expired in June 2025.
  const later = await run([itemOf(v.id)], v.nonce, c, at("2025-07-01T00:00:00Z"));
  assert.equal(later.failing?.check, "driver_rim");
  assert.match(later.failing!.detail, /expired/);
});

Deno.test("vector hopper-580.95.05-coco: the trailing byte is handled; VBIOS 2023 RIM differs at index 9", async () => {
  const v = vector("hopper-580.95.05-coco");
  const c = collateralWith(
    { "NV_GPU_VBIOS_1010_0200_882_960074001A": must(v, "vbios_rim") },
    false,
  );
  const verdict = await run([itemOf(v.id)], v.nonce, c, at("2024-06-01T00:00:00Z"));
  assert.deepEqual(statusOf(verdict), {
    ...CRYPTO_PASS,
    device_ocsp: "unavailable",
    driver_rim: "unavailable",
    vbios_rim: "pass",
    rim_ocsp: "unavailable",
    measurements: "unavailable",
  });
  assert.match(verdict.gpus[0].checks[0].detail, /1 zero padding byte/);
  const ev = parseSpdmEvidence(hexEvidence(v.evidence));
  assert.ok(ev.ok);
  const rim = await verifyRim(
    readFixtureText(must(v, "vbios_rim")),
    ROOTS.rim,
    Date.parse("2024-06-01"),
    "vbios",
  );
  assert.ok(rim.ok);
  const cmp = compareMeasurements(ev.evidence, [], rim.measurements);
  assert.ok(!cmp.ok);
  assert.match(cmp.reason, /^1 of 12 measurements differ: index 9 \(runtime 059b32/);
  // A non-zero byte after the signature is refused.
  const bad = hexEvidence(v.evidence);
  bad[bad.length - 1] = 1;
  const r = await run([{ ...itemOf(v.id), evidence: bad }], v.nonce);
  assert.equal(r.failing?.check, "evidence");
  assert.match(r.failing!.detail, /non-zero bytes follow the signature/);
});

Deno.test("vector hopper-580.159.03: crypto passes; the 2023 VBIOS RIM differs at index 9 only", async () => {
  const v = vector("hopper-580.159.03");
  const c = collateralWith(
    { "NV_GPU_VBIOS_1010_0205_862_9600740020": must(v, "vbios_rim") },
    false,
  );
  const verdict = await run([itemOf(v.id)], v.nonce, c, at("2024-06-01T00:00:00Z"));
  assert.deepEqual({ ...statusOf(verdict) }, {
    ...CRYPTO_PASS,
    device_ocsp: "unavailable",
    driver_rim: "unavailable",
    vbios_rim: "pass",
    rim_ocsp: "unavailable",
    measurements: "unavailable",
  });
  assert.equal(verdict.gpus[0].driverVersion, "580.159.03");
  assert.equal(verdict.gpus[0].vbiosVersion, "96.00.74.00.20");
  const ev = parseSpdmEvidence(hexEvidence(v.evidence));
  assert.ok(ev.ok);
  // The NVIDIA SDK's golden parse of this report is the oracle for the parser.
  const golden = JSON.parse(readFixtureText(must(v, "golden_parse")));
  assert.equal(ev.evidence.blocks.length, golden.NumberOfBlocks);
  for (const b of ev.evidence.blocks) {
    const g = golden.MeasurementRecord.MeasurementBlocks[String(b.index)];
    assert.equal(
      "0x" + [...b.value].map((x) => x.toString(16).padStart(2, "0")).join(""),
      g.DMTFSpecMeasurementValue,
    );
  }
  assert.equal(
    "0x" + [...ev.evidence.signature].map((x) => x.toString(16).padStart(2, "0")).join(""),
    golden.Signature,
  );
  const rim = await verifyRim(
    readFixtureText(must(v, "vbios_rim")),
    ROOTS.rim,
    Date.parse("2024-06-01"),
    "vbios",
  );
  assert.ok(rim.ok);
  const cmp = compareMeasurements(ev.evidence, [], rim.measurements);
  assert.ok(!cmp.ok);
  assert.match(cmp.reason, /^1 of 12 measurements differ: index 9 /);
});

Deno.test("vector hopper-535.86.09-mismatch: the edited driver RIM is refused on its digest; re-issued VBIOS RIM mismatches", async () => {
  const v = vector("hopper-535.86.09-mismatch");
  const c = collateralWith({
    "NV_GPU_DRIVER_GH100_535.86.09": must(v, "driver_rim"),
    "NV_GPU_VBIOS_1010_0200_882_96005E0001": must(v, "vbios_rim"),
  }, false);
  const verdict = await run([itemOf(v.id)], v.nonce, c, at("2025-10-24T12:00:00Z"));
  assert.equal(verdict.status, "fail");
  assert.equal(verdict.failing?.check, "driver_rim");
  assert.match(verdict.failing!.detail, /Reference digest does not match/);
  const ev = parseSpdmEvidence(hexEvidence(v.evidence));
  assert.ok(ev.ok);
  const reissued = await verifyRim(
    readFixtureText(must(v, "vbios_rim")),
    ROOTS.rim,
    Date.parse("2025-10-24T12:00:00Z"),
    "v",
  );
  assert.ok(reissued.ok);
  const cmp = compareMeasurements(ev.evidence, [], reissued.measurements);
  assert.ok(!cmp.ok && /index 9 \(runtime 7f3e93/.test(cmp.reason));
  // The 2023 PROD RIM (its signer expired in 2025) matches all 12 VBIOS measurements.
  const prod = await verifyRim(
    readFixtureText(must(v, "vbios_rim_alt")),
    ROOTS.rim,
    Date.parse("2024-06-01"),
    "v",
  );
  assert.ok(prod.ok);
  const all = compareMeasurements(ev.evidence, [], prod.measurements);
  assert.ok(all.ok && all.compared === 12);
});

Deno.test("vector hopper-570.124.03-expired-driver-rim: expired signer, and edited content", async () => {
  const v = vector("hopper-570.124.03-expired-driver-rim");
  const c = collateralWith({
    "NV_GPU_DRIVER_GH100_570.124.03": must(v, "driver_rim"),
    "NV_GPU_VBIOS_1010_0205_862_96005E0004": must(v, "vbios_rim"),
  }, false);
  const expired = await run([itemOf(v.id)], v.nonce, c, at("2025-03-01T00:00:00Z"));
  assert.deepEqual(
    Object.entries(statusOf(expired)).slice(0, 5),
    Object.entries(CRYPTO_PASS),
  );
  assert.equal(expired.failing?.check, "driver_rim");
  assert.match(expired.failing!.detail, /"RIM L4 Signer" expired \(notAfter 2025-01-02/);
  const inWindow = await verifyRim(
    readFixtureText(must(v, "driver_rim")),
    ROOTS.rim,
    Date.parse("2025-01-01T12:00:00Z"),
    "d",
  );
  assert.ok(!inWindow.ok && /Reference digest does not match/.test(inWindow.reason));
});

Deno.test("vector hopper-invalid-signature: report from another GPU fails FWID and signature", async () => {
  const v = vector("hopper-invalid-signature");
  const verdict = await run([itemOf(v.id)], v.nonce);
  assert.equal(verdict.status, "fail");
  assert.equal(verdict.failing?.check, "fwid");
  // The signature is invalid as well (checked on its own).
  const ev = parseSpdmEvidence(hexEvidence(v.evidence));
  assert.ok(ev.ok);
  const chain = await verifyDeviceChain(
    readFixtureText(must(v, "cert_chain")),
    ROOTS.device,
    Date.now(),
  );
  assert.ok(chain.ok);
  const { verifySpdmSignature } = await import("../src/verify/nvidia/device.ts");
  const sig = await verifySpdmSignature(
    chain.certs[0],
    ev.evidence.signedMessage,
    ev.evidence.signature,
  );
  assert.ok(!sig.ok && /does not verify/.test(sig.reason));
});

Deno.test("vector blackwell-575.32: chain, signature, DICE FWID and nonce pass; measurements unverifiable", async () => {
  const v = vector("blackwell-575.32");
  const verdict = await run([itemOf(v.id)], v.nonce);
  assert.deepEqual(statusOf(verdict), {
    ...CRYPTO_PASS,
    device_ocsp: "unavailable",
    driver_rim: "unavailable",
    vbios_rim: "unavailable",
    rim_ocsp: "unavailable",
    measurements: "unavailable",
  });
  assert.equal(verdict.status, "unverifiable");
  assert.match(verdict.gpus[0].checks.find((c) => c.name === "fwid")!.detail, /DICE TcbInfo/);
  assert.equal(verdict.gpus[0].hwmodel, "GB100 A01 GSP BROM");
  assert.equal(verdict.gpus[0].driverVersion, must(v, "driver_version"));
  assert.equal(verdict.gpus[0].vbiosVersion, must(v, "vbios_version"));
  // The Hopper rule (last 48 bytes) on a Blackwell leaf gives a wrong FWID.
  const asHopper = await run([{ ...itemOf(v.id), arch: "HOPPER" }], v.nonce);
  assert.equal(asHopper.failing?.check, "fwid");
});

/** The pickled report and chains of go-nvattest-tools: objects, or their text with single quotes. */
type Pickled<T> = T | string;
interface GoNvattestDoc {
  gpus: {
    Arch?: string;
    AttestationReport: Pickled<{ "py/b64": string }>;
    CertificateChains: Pickled<{ GpuAttestationCertificateChain: { pem: string }[] }>;
  }[];
}

function unpickle<T>(v: Pickled<T>): T {
  return typeof v === "string" ? JSON.parse(v.replaceAll("'", '"')) as T : v;
}

/** Google go-nvattest-tools JSON: `{gpus:[{Arch?, AttestationReport:{'py/b64'}, CertificateChains}]}`. */
function goNvattestItems(rel: string, arch: "HOPPER" | "BLACKWELL"): GpuEvidenceItem[] {
  const doc = JSON.parse(readFixtureText(rel)) as GoNvattestDoc;
  return doc.gpus.map((g) => {
    const report = unpickle(g.AttestationReport);
    const chains = unpickle(g.CertificateChains);
    const pem = chains.GpuAttestationCertificateChain.map((c) => atob(c.pem)).join("");
    return {
      arch,
      certificatePem: pem,
      evidence: Uint8Array.from(atob(report["py/b64"]), (c) => c.charCodeAt(0)),
    };
  });
}

for (
  const [id, arch] of [["blackwell-mpt-8gpu-590.48.01", "BLACKWELL"], [
    "hopper-ppcie-8gpu-570.124.06",
    "HOPPER",
  ]] as const
) {
  Deno.test(`vector ${id}: all 8 GPUs pass chain, signature, FWID and nonce`, async () => {
    const v = vector(id);
    const items = goNvattestItems(v.evidence, arch);
    assert.equal(items.length, 8);
    const verdict = await run(items, v.nonce);
    assert.equal(verdict.gpus.length, 8);
    for (let i = 0; i < 8; i++) {
      assert.deepEqual(
        Object.fromEntries(Object.entries(statusOf(verdict, i)).slice(0, 5)),
        CRYPTO_PASS,
        `GPU ${i}`,
      );
    }
    assert.equal(verdict.status, "unverifiable");
  });
}

for (const id of ["hopper-590.12-nvattest-json", "hopper-570.86.10-cert-hold"]) {
  Deno.test(`vector ${id}: nvattest JSON evidence passes the crypto checks`, async () => {
    const v = vector(id);
    const files = [v.evidence, ...[v.evidence_alt ?? []].flat()];
    let total = 0;
    for (const f of files) {
      const p = parseGpuPayload(readFixtureText(f));
      assert.ok(p.ok, f);
      const verdict = await run(p.payload.gpus, v.nonce);
      for (let i = 0; i < verdict.gpus.length; i++) {
        assert.deepEqual(
          Object.fromEntries(Object.entries(statusOf(verdict, i)).slice(0, 5)),
          CRYPTO_PASS,
          `${f} GPU ${i}`,
        );
      }
      total += verdict.gpus.length;
    }
    assert.equal(total, id.includes("590") ? 6 : 1);
  });
}

Deno.test("negative device chains are rejected", async () => {
  const full = vector("hopper-550.90.07-FULL");
  for (const n of vectors().negative_cert_chains) {
    const item = {
      arch: "HOPPER" as const,
      evidence: hexEvidence(full.evidence),
      certificatePem: readFixtureText(n.path),
    };
    const nonce = n.path.includes("go-nvtrust")
      ? vector("hopper-545.00-2023-FULL-no-OCSP").nonce
      : full.nonce;
    const ev = n.path.includes("go-nvtrust")
      ? hexEvidence(vector("hopper-545.00-2023-FULL-no-OCSP").evidence)
      : item.evidence;
    const verdict = await run([{ ...item, evidence: ev }], nonce);
    assert.equal(verdict.failing?.check, "cert_chain", n.path);
    assert.match(verdict.failing!.detail, /device chain has \d certificates, expected 5/);
  }
  // Five certificates but out of order: a precise signature reason.
  const certs = pemCertificatesToDer(readFixtureText(must(full, "cert_chain")));
  const bw = pemCertificatesToDer(readFixtureText(must(vector("blackwell-575.32"), "cert_chain")));
  const mixed = [certs[0], certs[1], bw[2], certs[3], certs[4]]
    .map((d) =>
      `-----BEGIN CERTIFICATE-----\n${btoa(String.fromCharCode(...d))}\n-----END CERTIFICATE-----\n`
    )
    .join("");
  const r = await verifyDeviceChain(mixed, ROOTS.device, Date.now());
  assert.ok(!r.ok);
  assert.match(
    r.reason,
    /"GH100 A01 GSP BROM" is not signed by "NVIDIA GB100 Provisioner ICA 00000"/,
  );
});

Deno.test("negative RIMs fail with the named reason", async () => {
  const t = Date.parse("2025-10-24T12:00:00Z");
  const byPath = Object.fromEntries(
    vectors().negative_rims.map((n) => [n.path.split("/").pop(), n.path]),
  );
  const sig = await verifyRim(
    readFixtureText(byPath["incorrect_signature_driver_rim.xml"]),
    ROOTS.rim,
    t,
    "d",
  );
  assert.ok(!sig.ok && /SignatureValue does not verify/.test(sig.reason), JSON.stringify(sig));
  const chain = await verifyRim(
    readFixtureText(byPath["incorrect_cert_chain_driver_rim.xml"]),
    ROOTS.rim,
    t,
    "d",
  );
  assert.ok(
    !chain.ok && /does not reach the pinned NVIDIA CoRIM signing Root CA/.test(chain.reason),
  );
  const wrongRoot = pemCertificatesToDer(readFixtureText(byPath["incorrect_rim_root.crt"]))[0];
  const good = readFixtureText(FULL_RIMS["NV_GPU_DRIVER_GH100_550.90.07"]);
  assert.ok((await verifyRim(good, ROOTS.rim, t, "d")).ok);
  const other = await verifyRim(good, wrongRoot, t, "d");
  assert.ok(!other.ok && /does not reach the pinned/.test(other.reason));
  for (
    const [name, when] of [
      ["NV_GPU_DRIVER_GH100_535.86.09_measurement_mismatch.xml", "2025-10-24T12:00:00Z"],
      ["NV_GPU_DRIVER_GH100_570.124.03_expired.xml", "2025-01-01T12:00:00Z"],
    ]
  ) {
    const r = await verifyRim(readFixtureText(byPath[name]), ROOTS.rim, Date.parse(when), "d");
    assert.ok(!r.ok && /Reference digest does not match/.test(r.reason), name);
  }
  // The spare genuine driver RIM verifies (no matching evidence exists).
  const spare = readFixtureText(
    "NVIDIA__attestation-sdk/nv-attestation-sdk-cpp/unit-tests/testdata/NV_GPU_DRIVER_GH100_550.144.03.xml",
  );
  const s = await verifyRim(spare, ROOTS.rim, t, "d");
  assert.ok(s.ok && s.version === "550.144.03" && s.measurements.length === 21);
});

Deno.test("multi-GPU: one bad GPU fails the whole set and is named", async () => {
  const full = vector("hopper-550.90.07-FULL");
  const bad = vector("hopper-invalid-signature");
  const verdict = await run(
    [itemOf(full.id), itemOf(bad.id)],
    full.nonce,
    collateralWith(FULL_RIMS),
    FULL_TIMES,
  );
  assert.equal(verdict.status, "fail");
  assert.equal(verdict.failing?.gpu, 1);
  assert.equal(verdict.gpus.length, 2);
  assert.equal((await run([], full.nonce)).failing?.check, "evidence");
});

Deno.test("multi-GPU: single-GPU (SPT) and multi-GPU (MPT) passthrough evidence cannot be mixed", async () => {
  const sdk = vector("hopper-580.159.03"); // SPT
  const mpt = goNvattestItems(vector("blackwell-mpt-8gpu-590.48.01").evidence, "BLACKWELL");
  const spt = await run([itemOf(sdk.id)], sdk.nonce);
  assert.equal(spt.gpus[0].mode, "SPT");
  const mixed = await run([itemOf(sdk.id), mpt[0]], sdk.nonce);
  assert.equal(mixed.gpus[1].mode, "MPT");
  const c = mixed.gpus[1].checks.find((x) => /mix single-GPU/.test(x.detail));
  assert.equal(c?.status, "fail");
  assert.equal(mixed.status, "fail");
});

Deno.test("independent WebCrypto check of the SPDM signature (not through the module)", async () => {
  const subtle = crypto.subtle;
  const leafKey = (chainRel: string) => {
    const pem = readFixtureText(chainRel).split("-----END CERTIFICATE-----")[0] +
      "-----END CERTIFICATE-----\n";
    const spki = new NodeX509(pem).publicKey.export({ type: "spki", format: "der" });
    return subtle.importKey(
      "spki",
      new Uint8Array(spki),
      { name: "ECDSA", namedCurve: "P-384" },
      false,
      ["verify"],
    );
  };
  const verify = (key: CryptoKey, sig: Uint8Array, msg: Uint8Array) =>
    subtle.verify(
      { name: "ECDSA", hash: "SHA-384" },
      key,
      new Uint8Array(sig),
      new Uint8Array(msg),
    );
  // FULL: the signature is the last 96 bytes, over everything before it.
  const full = vector("hopper-550.90.07-FULL");
  const e = hexEvidence(full.evidence);
  const key = await leafKey(must(full, "cert_chain"));
  assert.equal(await verify(key, e.slice(-96), e.slice(0, -96)), true);
  const flipped = e.slice();
  flipped[100] ^= 1;
  assert.equal(await verify(key, flipped.slice(-96), flipped.slice(0, -96)), false);
  // The trustee capture: "last 96 bytes" fails because of the trailing byte; without it, it verifies.
  const coco = vector("hopper-580.95.05-coco");
  const c = hexEvidence(coco.evidence);
  const ckey = await leafKey(must(coco, "cert_chain"));
  assert.equal(c[c.length - 1], 0);
  assert.equal(await verify(ckey, c.slice(-96), c.slice(0, -96)), false);
  assert.equal(await verify(ckey, c.slice(-97, -1), c.slice(0, -97)), true);
  // And the module agrees on both.
  assert.equal((await run([itemOf(coco.id)], coco.nonce)).gpus[0].checks[4].status, "pass");
});

Deno.test("the copied fixtures are byte for byte the shared originals (SHA256SUMS)", async () => {
  const lines = readFixtureText("SHA256SUMS").trim().split("\n");
  assert.ok(lines.length >= 50);
  for (const line of lines) {
    const [hash, path] = line.split(/\s+/);
    const digest = new Uint8Array(
      await crypto.subtle.digest("SHA-256", new Uint8Array(readFixtureBytes(path))),
    );
    assert.equal([...digest].map((b) => b.toString(16).padStart(2, "0")).join(""), hash, path);
  }
  // Nothing unlisted sits beside them.
  const listed = lines.map((l) => l.split(/\s+/)[1]).sort();
  const present: string[] = [];
  const walk = (rel: string) => {
    for (const e of Deno.readDirSync(fixturePath(rel || "."))) {
      const p = `${rel}${e.name}`;
      if (e.isDirectory) walk(`${p}/`);
      else if (p !== "PROVENANCE.md" && p !== "SHA256SUMS") present.push(p);
    }
  };
  walk("");
  assert.deepEqual(present.sort(), listed);
});

Deno.test("the built-in NVIDIA roots are the fixtures' pinned roots (vectors.json fingerprints)", async () => {
  const { NVIDIA_DEVICE_ROOT_PEM, NVIDIA_RIM_ROOT_PEM } = await import(
    "../src/verify/nvidia/roots.ts"
  );
  const anchors = vectors() as unknown as Record<
    string,
    Record<string, { sha256_fingerprint: string }>
  >;
  for (
    const [pem, fixture, fp] of [
      [NVIDIA_DEVICE_ROOT_PEM, ROOTS.device, anchors.trust_anchors.device_root.sha256_fingerprint],
      [NVIDIA_RIM_ROOT_PEM, ROOTS.rim, anchors.trust_anchors.rim_root.sha256_fingerprint],
    ] as const
  ) {
    const der = pemCertificatesToDer(pem)[0];
    assert.deepEqual(der, fixture);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(der)));
    assert.equal([...digest].map((b) => b.toString(16).padStart(2, "0")).join(""), fp);
  }
});
