/**
 * Local verification of NVIDIA GPU evidence (pure: every input and the
 * clock come in as parameters; never throws). Per GPU, in order: parse the
 * SPDM evidence, nonce binding, device chain to the pinned root, FWID,
 * SPDM signature, device-chain OCSP, driver and VBIOS RIMs (signature,
 * chain, version), RIM-chain OCSP, measurements. Each check ends "pass",
 * "fail" (the evidence is wrong) or "unavailable" (collateral missing, so
 * nothing can be concluded). Each artefact is judged at its own time
 * (`GpuTimes`), as OCSP answers and RIM signers have short windows.
 */
import "reflect-metadata";
import type { X509Certificate } from "@peculiar/x509";
import { bytesEqual, bytesToHex } from "../../aci/mod.ts";
import { type Checked, errorText } from "../x509/verify_result.ts";
import type { GpuCollateralSource } from "./collateral.ts";
import {
  commonName,
  type GpuArch,
  leafFwid,
  verifyDeviceChain,
  verifySpdmSignature,
} from "./device.ts";
import { compareMeasurements } from "./measurements.ts";
import { checkOcspResponse } from "./ocsp.ts";
import type { GpuEvidenceItem } from "./payload.ts";
import { type VerifiedRim, verifyRim } from "./rim.ts";
import { driverVersion, OPAQUE, opaqueText, parseSpdmEvidence, vbiosVersion } from "./spdm.ts";

const MODES: Record<number, string> = { 0: "SPT", 1: "MPT", 2: "PPCIE" };

export type GpuCheckName =
  | "evidence"
  | "nonce"
  | "cert_chain"
  | "fwid"
  | "spdm_signature"
  | "device_ocsp"
  | "driver_rim"
  | "vbios_rim"
  | "rim_ocsp"
  | "measurements";

export interface GpuCheck {
  name: GpuCheckName;
  status: "pass" | "fail" | "unavailable";
  detail: string;
}

/** Verification times (epoch ms) per artefact; production passes "now" for all. */
export interface GpuTimes {
  /** Device chain validity. */
  device: number;
  deviceOcsp: number;
  /** RIM chain validity. */
  rim: number;
  rimOcsp: number;
}

export interface GpuVerifyInput {
  gpus: readonly GpuEvidenceItem[];
  /** The nonce this verification round sent (32 bytes). */
  nonce: Uint8Array;
  deviceRootDer: Uint8Array;
  rimRootDer: Uint8Array;
  collateral: GpuCollateralSource;
  times: GpuTimes;
}

export interface GpuResult {
  arch: GpuArch;
  driverVersion: string | null;
  vbiosVersion: string | null;
  /** CN of the BROM certificate (chain[1]), e.g. "GH100 A01 GSP BROM". */
  hwmodel: string | null;
  /** Device OCSP summary: "good", "revoked (reason)", "unavailable", … */
  ocsp: string;
  /** The same for the RIM chains. */
  rimOcsp: string;
  /** Confidential-computing mode from FEATURE_FLAG (SPT, MPT, PPCIE), null when absent. */
  mode: string | null;
  checks: GpuCheck[];
}

export interface GpuVerdict {
  /** pass: every check of every GPU passed; fail: one failed; unverifiable: none failed, some unavailable. */
  status: "pass" | "fail" | "unverifiable";
  gpus: GpuResult[];
  /** The first check that failed (or was unavailable), with its GPU index. */
  failing?: { gpu: number; check: GpuCheckName; detail: string };
}

/** Verifies every GPU; never throws. */
export async function verifyGpuEvidence(input: GpuVerifyInput): Promise<GpuVerdict> {
  const gpus: GpuResult[] = [];
  if (input.gpus.length === 0) {
    return {
      status: "fail",
      gpus,
      failing: { gpu: 0, check: "evidence", detail: "the evidence list is empty" },
    };
  }
  // GPUs of one node share their RIMs: each distinct RIM document is verified once per call.
  const rimMemo = new Map<string, Promise<Checked<VerifiedRim>>>();
  const rimOnce = (xml: string, label: string) => {
    const key = `${label}\n${xml}`;
    let p = rimMemo.get(key);
    if (!p) rimMemo.set(key, p = verifyRim(xml, input.rimRootDer, input.times.rim, label));
    return p;
  };
  for (const item of input.gpus) {
    try {
      gpus.push(await verifyOne(item, input, rimOnce));
    } catch (e) {
      gpus.push({
        arch: item.arch,
        driverVersion: null,
        vbiosVersion: null,
        hwmodel: null,
        ocsp: "unavailable",
        rimOcsp: "unavailable",
        mode: null,
        checks: [{ name: "evidence", status: "fail", detail: `verifier error: ${errorText(e)}` }],
      });
    }
  }
  // One machine runs one mode: single-GPU passthrough mixed with multi-GPU is refused (as nvtrust).
  const modes = new Set(gpus.map((g) => g.mode).filter((m) => m === "SPT" || m === "MPT"));
  if (modes.size > 1) {
    const i = gpus.findIndex((g) => g.mode !== gpus[0].mode);
    gpus[i].checks.push({
      name: "evidence",
      status: "fail",
      detail: "the GPUs mix single-GPU (SPT) and multi-GPU (MPT) passthrough modes",
    });
  }
  for (const want of ["fail", "unavailable"] as const) {
    for (let i = 0; i < gpus.length; i++) {
      const c = gpus[i].checks.find((c) => c.status === want);
      if (c) {
        return {
          status: want === "fail" ? "fail" : "unverifiable",
          gpus,
          failing: { gpu: i, check: c.name, detail: c.detail },
        };
      }
    }
  }
  return { status: "pass", gpus };
}

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
async function verifyOne(
  item: GpuEvidenceItem,
  input: GpuVerifyInput,
  rimOnce: (xml: string, label: string) => Promise<Checked<VerifiedRim>>,
): Promise<GpuResult> {
  const checks: GpuCheck[] = [];
  const result: GpuResult = {
    arch: item.arch,
    driverVersion: null,
    vbiosVersion: null,
    hwmodel: null,
    ocsp: "unavailable",
    rimOcsp: "unavailable",
    mode: null,
    checks,
  };
  const pass = (name: GpuCheckName, detail: string) =>
    checks.push({ name, status: "pass", detail });
  const failed = (name: GpuCheckName, detail: string) => {
    checks.push({ name, status: "fail", detail });
    return result;
  };
  const unavailable = (name: GpuCheckName, detail: string) =>
    checks.push({ name, status: "unavailable", detail });

  const parsed = parseSpdmEvidence(item.evidence);
  if (!parsed.ok) return failed("evidence", parsed.reason);
  const ev = parsed.evidence;
  result.driverVersion = driverVersion(ev);
  const flag = ev.opaque.get(OPAQUE.FEATURE_FLAG);
  result.mode = flag && flag.length >= 1 ? (MODES[flag[0]] ?? `0x${flag[0].toString(16)}`) : null;
  result.vbiosVersion = vbiosVersion(ev);
  pass(
    "evidence",
    `${ev.blocks.length} measurement blocks` +
      (ev.trailingBytes ? `; ${ev.trailingBytes} zero padding byte(s) after the signature` : ""),
  );

  if (!bytesEqual(ev.requestNonce, input.nonce)) {
    return failed(
      "nonce",
      `evidence nonce ${bytesToHex(ev.requestNonce)} is not the nonce this verification sent`,
    );
  }
  pass("nonce", "the SPDM request carries this round's nonce");

  const chain = await verifyDeviceChain(
    item.certificatePem,
    input.deviceRootDer,
    input.times.device,
  );
  if (!chain.ok) return failed("cert_chain", chain.reason);
  const [leaf] = chain.certs;
  result.hwmodel = commonName(chain.certs[1]);
  pass("cert_chain", `5 certificates to the pinned NVIDIA Device Identity CA (${result.hwmodel})`);

  const reportFwid = ev.opaque.get(OPAQUE.FWID);
  if (reportFwid) {
    const certFwid = leafFwid(leaf, item.arch);
    if (!certFwid.ok) return failed("fwid", certFwid.reason);
    if (!bytesEqual(certFwid.fwid, reportFwid)) {
      return failed("fwid", "the report's FWID differs from the one the leaf certificate carries");
    }
    pass(
      "fwid",
      `FWID matches the leaf certificate (${
        item.arch === "HOPPER" ? "Hopper" : "Blackwell DICE TcbInfo"
      } encoding)`,
    );
  } else {
    pass("fwid", "the report carries no FWID field (older firmware); nothing to compare");
  }

  const sig = await verifySpdmSignature(leaf, ev.signedMessage, ev.signature);
  if (!sig.ok) return failed("spdm_signature", sig.reason);
  pass("spdm_signature", "ECDSA P-384/SHA-384 by the leaf key over request and response");

  // Device OCSP: BROM, provisioner ICA and arch identity (the leaf alias cert and root are not covered).
  const devOcsp = await ocspOver(chain.certs, 1, 4, input.collateral, input.times.deviceOcsp);
  result.ocsp = devOcsp.summary;
  if (devOcsp.status === "fail") return failed("device_ocsp", devOcsp.detail);
  if (devOcsp.status === "unavailable") unavailable("device_ocsp", devOcsp.detail);
  else pass("device_ocsp", devOcsp.detail);

  const ids = rimIds(ev, item.arch);
  const rims: Partial<Record<"driver" | "vbios", VerifiedRim>> = {};
  for (const kind of ["driver", "vbios"] as const) {
    const name = kind === "driver" ? "driver_rim" : "vbios_rim";
    const id = ids[kind];
    const want = kind === "driver" ? result.driverVersion : result.vbiosVersion;
    if (!id || !want) {
      unavailable(name, `the report lacks the fields that name the ${kind} RIM`);
      continue;
    }
    let xml: string | null;
    try {
      xml = await input.collateral.rim(id);
    } catch (e) {
      xml = null;
      unavailable(name, `${id}: ${errorText(e).slice(0, 200)}`);
      continue;
    }
    if (xml === null) {
      unavailable(name, `${id} is not available`);
      continue;
    }
    const rim = await rimOnce(xml, `${kind} RIM ${id}`);
    if (!rim.ok) return failed(name, rim.reason);
    if (rim.version.toLowerCase() !== want.toLowerCase()) {
      return failed(name, `${id} is for version ${rim.version}, the GPU reports ${want}`);
    }
    rims[kind] = rim;
    pass(name, `${id}: signature and chain to the pinned CoRIM root valid`);
  }

  const rimChains = [rims.driver?.chain, rims.vbios?.chain].filter((c) => c !== undefined);
  if (rimChains.length === 0) {
    unavailable("rim_ocsp", "no verified RIM to check revocation for");
  } else {
    const parts = [];
    for (const c of rimChains) {
      parts.push(await ocspOver(c, 0, c.length - 1, input.collateral, input.times.rimOcsp));
    }
    const bad = parts.find((p) => p.status === "fail");
    result.rimOcsp = bad?.summary ??
      (parts.some((p) => p.status === "unavailable") ? "unavailable" : "good");
    if (bad) return failed("rim_ocsp", bad.detail);
    const missing = parts.find((p) => p.status === "unavailable");
    if (missing || rimChains.length < 2) {
      unavailable("rim_ocsp", missing?.detail ?? "only one RIM verified");
    } else pass("rim_ocsp", parts.map((p) => p.detail).join("; "));
  }

  if (!rims.driver || !rims.vbios) {
    unavailable("measurements", "reference measurements need both the driver and the VBIOS RIM");
  } else {
    const cmp = compareMeasurements(ev, rims.driver.measurements, rims.vbios.measurements);
    if (!cmp.ok) return failed("measurements", cmp.reason);
    pass(
      "measurements",
      `${cmp.compared} active reference measurements match` +
        (cmp.skipped.length ? ` (index ${cmp.skipped.join(",")} skipped: NVDEC0 disabled)` : ""),
    );
  }
  return result;
}

/** The RIM ids NVIDIA's RIM service names for this GPU's driver and VBIOS. */
function rimIds(
  ev: Parameters<typeof driverVersion>[0],
  arch: GpuArch,
): { driver: string | null; vbios: string | null } {
  const drv = driverVersion(ev);
  const vb = vbiosVersion(ev);
  const chip = opaqueText(ev, OPAQUE.CHIP_INFO);
  const project = opaqueText(ev, OPAQUE.PROJECT);
  const projectSku = opaqueText(ev, OPAQUE.PROJECT_SKU);
  const chipSku = opaqueText(ev, OPAQUE.CHIP_SKU);
  const driver = drv === null
    ? null
    : arch === "HOPPER"
    ? `NV_GPU_DRIVER_GH100_${drv}`
    : chip
    ? `NV_GPU_CC_DRIVER_${chip}_${drv}`
    : null;
  const vbios = vb && project && projectSku && chipSku
    ? `NV_GPU_VBIOS_${project}_${projectSku}_${chipSku}_${vb.replaceAll(".", "")}`.toUpperCase()
    : null;
  return { driver, vbios };
}

interface OcspSummary {
  status: "pass" | "fail" | "unavailable";
  detail: string;
  summary: string;
}

/** OCSP for certs[from..to) (each issued by the next) at `atMs`. */
async function ocspOver(
  certs: X509Certificate[],
  from: number,
  to: number,
  source: GpuCollateralSource,
  atMs: number,
): Promise<OcspSummary> {
  const good: string[] = [];
  for (let i = from; i < to; i++) {
    const cert = certs[i];
    const name = commonName(cert);
    let der: Uint8Array | null;
    try {
      der = await source.ocsp(cert, certs[i + 1]);
    } catch (e) {
      der = null;
      void e;
    }
    if (!der) {
      return {
        status: "unavailable",
        detail: `no OCSP response for "${name}"`,
        summary: "unavailable",
      };
    }
    const v = await checkOcspResponse(der, cert, certs[i + 1], atMs);
    if (!v.ok) return { status: "unavailable", detail: v.reason, summary: "unavailable" };
    if (v.verdict.status === "revoked") {
      const r = v.verdict.revocationReason ?? "unspecified";
      return { status: "fail", detail: `"${name}" is revoked (${r})`, summary: `revoked (${r})` };
    }
    if (v.verdict.status !== "good") {
      return { status: "fail", detail: `OCSP status of "${name}" is unknown`, summary: "unknown" };
    }
    good.push(name);
  }
  return {
    status: "pass",
    detail: `OCSP good for ${good.map((n) => `"${n}"`).join(", ")}`,
    summary: "good",
  };
}
