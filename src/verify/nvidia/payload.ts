/**
 * GPU evidence as upstreams serve it, narrowed from untrusted JSON: the
 * NRAS request format (`{nonce, arch, evidence_list:[{certificate,
 * evidence, arch}]}`, as dstack/NEAR `nvidia_payload`, itself often a JSON
 * string) and the NVIDIA SDK's nvattest array (`[{arch, certificate,
 * evidence, nonce}]`). `certificate` is base64 of the PEM chain (or PEM);
 * `evidence` is base64 (or hex) of request ‖ response.
 */
import { type Checked, fail } from "../x509/verify_result.ts";
import type { GpuArch } from "./device.ts";

/** One GPU's evidence. */
export interface GpuEvidenceItem {
  arch: GpuArch;
  certificatePem: string;
  evidence: Uint8Array;
}

export interface GpuPayload {
  /** The nonce the payload claims (informational: the verifier uses its own). */
  nonce: string | null;
  gpus: GpuEvidenceItem[];
}

/** At most this many GPUs in one payload (a node has 8; NVLink domains more, still bounded). */
const MAX_GPUS = 64;

function archOf(v: unknown): GpuArch | null {
  if (typeof v !== "string") return null;
  const a = v.toUpperCase();
  return a === "HOPPER" || a === "BLACKWELL" ? a : null;
}

function decodeBase64(s: string): Uint8Array | null {
  try {
    return Uint8Array.from(atob(s.replace(/\s+/g, "")), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

function decodeEvidence(s: string): Uint8Array | null {
  const t = s.trim();
  if (/^([0-9a-fA-F]{2})+$/.test(t)) {
    return Uint8Array.from(t.match(/../g)!, (h) => parseInt(h, 16));
  }
  return decodeBase64(t);
}

function decodeChain(s: string): string | null {
  if (s.includes("-----BEGIN CERTIFICATE-----")) return s;
  const raw = decodeBase64(s);
  if (!raw) return null;
  const text = new TextDecoder().decode(raw);
  return text.includes("-----BEGIN CERTIFICATE-----") ? text : null;
}

/** Parses a payload (object, array or JSON text); never throws. */
export function parseGpuPayload(input: unknown): Checked<{ payload: GpuPayload }> {
  let v = input;
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch {
      return fail("GPU payload is not JSON");
    }
  }
  let list: unknown;
  let nonce: string | null = null;
  let defaultArch: GpuArch | null = null;
  if (Array.isArray(v)) {
    list = v;
  } else if (typeof v === "object" && v !== null) {
    const o = v as Record<string, unknown>;
    list = o["evidence_list"];
    nonce = typeof o["nonce"] === "string" ? o["nonce"] : null;
    defaultArch = archOf(o["arch"]);
  } else {
    return fail("GPU payload is not an object");
  }
  if (!Array.isArray(list) || list.length === 0) return fail("GPU payload has no evidence_list");
  if (list.length > MAX_GPUS) return fail(`GPU payload lists more than ${MAX_GPUS} GPUs`);
  const gpus: GpuEvidenceItem[] = [];
  for (let i = 0; i < list.length; i++) {
    const e = list[i];
    if (typeof e !== "object" || e === null) return fail(`GPU ${i}: not an object`);
    const r = e as Record<string, unknown>;
    const arch = archOf(r["arch"]) ?? defaultArch;
    if (!arch) {
      return fail(`GPU ${i}: architecture ${JSON.stringify(r["arch"])} is not HOPPER or BLACKWELL`);
    }
    const cert = typeof r["certificate"] === "string" ? decodeChain(r["certificate"]) : null;
    if (!cert) return fail(`GPU ${i}: certificate is not a (base64) PEM chain`);
    const ev = typeof r["evidence"] === "string" ? decodeEvidence(r["evidence"]) : null;
    if (!ev) return fail(`GPU ${i}: evidence is not base64 or hex`);
    if (nonce === null && typeof r["nonce"] === "string") nonce = r["nonce"];
    gpus.push({ arch, certificatePem: cert, evidence: ev });
  }
  return { ok: true, payload: { nonce, gpus } };
}
