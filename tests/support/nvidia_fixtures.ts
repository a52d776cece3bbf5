/**
 * The NVIDIA sample data in tests/fixtures/nvidia (see PROVENANCE.md):
 * readers for its formats (hex / binary evidence, PEM chains, RIMs, base64
 * OCSP responses, vectors.json) and a collateral source loaded from it.
 */
import { StaticGpuCollateral } from "../../src/verify/nvidia/collateral.ts";
import type { GpuEvidenceItem } from "../../src/verify/nvidia/payload.ts";
import type { GpuArch } from "../../src/verify/nvidia/device.ts";
import { pemCertificatesToDer } from "../../src/verify/x509/pem.ts";

export const NVIDIA_FIXTURES = new URL("../fixtures/nvidia/", import.meta.url);

export function fixturePath(rel: string): string {
  return new URL(rel, NVIDIA_FIXTURES).pathname;
}

export function readFixtureText(rel: string): string {
  return Deno.readTextFileSync(fixturePath(rel));
}

export function readFixtureBytes(rel: string): Uint8Array {
  return Deno.readFileSync(fixturePath(rel));
}

/** Evidence bytes from a hex text file. */
export function hexEvidence(rel: string): Uint8Array {
  const t = readFixtureText(rel).trim();
  return Uint8Array.from(t.match(/../g)!, (h) => parseInt(h, 16));
}

export function hexToBytes(hex: string): Uint8Array {
  return Uint8Array.from(hex.match(/../g)!, (h) => parseInt(h, 16));
}

export const ROOTS = {
  device: pemCertificatesToDer(
    readFixtureText(
      "NVIDIA__nvtrust/guest_tools/gpu_verifiers/local_gpu_verifier/src/verifier/certs/verifier_device_root.pem",
    ),
  )[0],
  rim: pemCertificatesToDer(
    readFixtureText(
      "NVIDIA__nvtrust/guest_tools/gpu_verifiers/local_gpu_verifier/src/verifier/certs/verifier_RIM_root.pem",
    ),
  )[0],
};

/** One entry of `vectors.json` (see its `_note`): fixture paths are relative to fixtures/nvidia. */
export interface Vector {
  id: string;
  arch: GpuArch;
  evidence: string;
  evidence_format: string;
  /** One more evidence file, or several. */
  evidence_alt?: string | string[];
  nonce: string;
  nonce_note?: string;
  cert_chain?: string;
  cert_chain_alt?: string;
  driver_version?: string;
  vbios_version?: string;
  project?: string;
  project_sku?: string;
  chip_sku?: string;
  driver_rim?: string;
  vbios_rim?: string;
  vbios_rim_alt?: string;
  golden_parse?: string;
  golden_request_parse?: string;
  /** OCSP response files by certificate, plus their `encoding` and `nonce_extension`. */
  ocsp?: Record<string, string | boolean>;
  /** The verification time (ISO 8601) per artefact. */
  verify_at?: { device_ocsp: string; rim_certs_and_rim_ocsp: string; rims?: string };
  /** What verifying it must give, per check ("pass", "fail…", or a boolean match). */
  expect: Record<string, string | boolean>;
}

/** The string fields of a vector that some vectors lack. */
type OptionalText = Exclude<
  { [K in keyof Vector]-?: Vector[K] extends string | undefined ? K : never }[keyof Vector],
  undefined
>;

/** A field the test needs `v` to have (a missing one fails here, never reads "undefined"). */
export function must(v: Vector, field: OptionalText | "evidence_alt"): string {
  const x = v[field];
  if (typeof x !== "string") throw new Error(`vector ${v.id} has no single ${field}`);
  return x;
}

/** A negative certificate-chain or RIM file and what verifying it must give. */
export interface NegativeVector {
  path: string;
  what?: string;
  expect: string;
}

export function vectors(): {
  vectors: Vector[];
  negative_cert_chains: NegativeVector[];
  negative_rims: NegativeVector[];
} {
  return JSON.parse(readFixtureText("vectors.json"));
}

export function vector(id: string): Vector {
  const v = vectors().vectors.find((x) => x.id === id);
  if (!v) throw new Error(`no vector ${id}`);
  return v;
}

/** One GPU item from a hex evidence file and a PEM chain file. */
export function gpuItem(
  evidenceRel: string,
  chainRel: string,
  arch: GpuArch = "HOPPER",
): GpuEvidenceItem {
  return { arch, certificatePem: readFixtureText(chainRel), evidence: hexEvidence(evidenceRel) };
}

/** Base64 text of each OCSP file in the FULL vector. */
export function fullOcspFiles(): string[] {
  return Object.entries(vector("hopper-550.90.07-FULL").ocsp ?? {})
    .filter(([k]) => k !== "encoding" && k !== "nonce_extension")
    .map(([k, p]) => {
      if (typeof p !== "string") throw new Error(`ocsp.${k} is not a file`);
      return p;
    });
}

/** A collateral source holding the given RIMs (by id) and the FULL vector's OCSP responses. */
export function collateralWith(rims: Record<string, string>, withOcsp = true): StaticGpuCollateral {
  const c = new StaticGpuCollateral();
  for (const [id, rel] of Object.entries(rims)) c.addRim(id, readFixtureText(rel));
  if (withOcsp) { for (const f of fullOcspFiles()) c.addOcsp(readFixtureBytes(f)); }
  return c;
}

/** Pinned times of the FULL vector: device artefacts in the device OCSP window, RIM ones in the RIM OCSP window. */
export const FULL_TIMES = {
  device: Date.parse("2025-08-21T12:00:00Z"),
  deviceOcsp: Date.parse("2025-08-21T12:00:00Z"),
  rim: Date.parse("2025-10-24T12:00:00Z"),
  rimOcsp: Date.parse("2025-10-24T12:00:00Z"),
};

export const FULL_RIMS = {
  "NV_GPU_DRIVER_GH100_550.90.07":
    "google__go-nvattest-tools/testing/testdata/rim/NV_GPU_DRIVER_GH100_550.90.07.xml",
  "NV_GPU_VBIOS_1010_0200_882_96009F0001":
    "google__go-nvattest-tools/testing/testdata/rim/NV_GPU_VBIOS_1010_0200_882_96009F0001.xml",
};

/** The FULL vector's GPU as an NRAS payload object (base64 PEM chain, base64 evidence). */
export function fullNrasPayload(): {
  nonce: string;
  arch: GpuArch;
  evidence_list: Record<string, string>[];
} {
  const v = vector("hopper-550.90.07-FULL");
  const b64 = (b: Uint8Array) => btoa(String.fromCharCode(...b));
  return {
    nonce: v.nonce,
    arch: "HOPPER",
    evidence_list: [{
      certificate: btoa(readFixtureText(must(v, "cert_chain"))),
      evidence: b64(hexEvidence(v.evidence)),
      arch: "HOPPER",
    }],
  };
}
