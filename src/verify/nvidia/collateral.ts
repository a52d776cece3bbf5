/**
 * Where RIMs and OCSP responses come from. `StaticGpuCollateral` holds what
 * the caller loaded (a collateral directory, offline); `RemoteGpuCollateral`
 * asks NVIDIA's RIM service and OCSP responder (URLs configurable) through
 * an injected fetch and caches OCSP answers until their `nextUpdate` and
 * RIMs for a bounded time (NVIDIA re-issues VBIOS RIMs under the same id).
 * Sources never judge what they return: the verifier checks everything.
 */
import "reflect-metadata";
import type { X509Certificate } from "@peculiar/x509";
import { concatBytes, ownBytes } from "../../aci/mod.ts";
import { buildOcspRequest, certIdKey, certIdOf, responseCertIdKeys } from "./ocsp.ts";
import { AsnConvert } from "@peculiar/asn1-schema";
import { BasicOCSPResponse, OCSPResponse } from "@peculiar/asn1-ocsp";

const NVIDIA_RIM_SERVICE_URL = "https://rim.attestation.nvidia.com";
const NVIDIA_OCSP_URL = "https://ocsp.ndis.nvidia.com/";

/** Supplies collateral; null when it has none (the check is then "unavailable"). */
export interface GpuCollateralSource {
  /** The RIM XML for an id such as `NV_GPU_DRIVER_GH100_550.90.07`. */
  rim(id: string): Promise<string | null>;
  /** A DER OCSPResponse covering `cert` (issued by `issuer`). */
  ocsp(cert: X509Certificate, issuer: X509Certificate): Promise<Uint8Array | null>;
}

/** RIMs by id and OCSP responses matched by the CertIDs they answer for. */
export class StaticGpuCollateral implements GpuCollateralSource {
  #rims = new Map<string, string>();
  #ocsp = new Map<string, Uint8Array>();

  /** Adds a RIM under its id (the file name without `.xml`/`.swidtag`). */
  addRim(id: string, xml: string): this {
    this.#rims.set(id, xml);
    return this;
  }

  /** Adds an OCSP response (DER, or base64 of DER as NVIDIA tools store them); false when unusable. */
  addOcsp(bytes: Uint8Array): boolean {
    const der = looksLikeDer(bytes) ? bytes : fromBase64(new TextDecoder().decode(bytes));
    if (!der) return false;
    const keys = responseCertIdKeys(der);
    for (const k of keys) this.#ocsp.set(k, der);
    return keys.length > 0;
  }

  rim(id: string): Promise<string | null> {
    return Promise.resolve(this.#rims.get(id) ?? null);
  }

  ocsp(cert: X509Certificate, issuer: X509Certificate): Promise<Uint8Array | null> {
    return Promise.resolve(this.#ocsp.get(certIdKey(certIdOf(cert, issuer))) ?? null);
  }
}

function looksLikeDer(b: Uint8Array): boolean {
  return b.length > 2 && b[0] === 0x30;
}

function fromBase64(text: string): Uint8Array | null {
  try {
    return Uint8Array.from(atob(text.replace(/\s+/g, "")), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

/** A RIM id from a collateral file name (`NV_GPU_DRIVER_GH100_550.90.07.xml`). */
function rimIdOfFileName(name: string): string | null {
  const m = name.match(/^(NV_GPU_[A-Za-z0-9_.]+?)\.(xml|swidtag)$/);
  return m ? m[1] : null;
}

export interface RemoteGpuCollateralOptions {
  fetch: typeof fetch;
  now: () => number;
  rimServiceUrl?: string;
  ocspUrl?: string;
  /** How long a fetched RIM is reused; default one hour. */
  rimTtlMs?: number;
}

/** The RIM service and OCSP responder over HTTP, with caching. */
export class RemoteGpuCollateral implements GpuCollateralSource {
  #o: Required<RemoteGpuCollateralOptions>;
  #rims = new Map<string, { xml: string; until: number }>();
  #ocsp = new Map<string, { der: Uint8Array; until: number }>();

  constructor(o: RemoteGpuCollateralOptions) {
    this.#o = {
      fetch: o.fetch,
      now: o.now,
      rimServiceUrl: o.rimServiceUrl ?? NVIDIA_RIM_SERVICE_URL,
      ocspUrl: o.ocspUrl ?? NVIDIA_OCSP_URL,
      rimTtlMs: o.rimTtlMs ?? 3_600_000,
    };
  }

  async rim(id: string): Promise<string | null> {
    if (!/^NV_GPU_[A-Za-z0-9_.]+$/.test(id)) return null;
    const hit = this.#rims.get(id);
    if (hit && this.#o.now() < hit.until) return hit.xml;
    const base = this.#o.rimServiceUrl.replace(/\/+$/, "");
    const res = await this.#o.fetch(`${base}/v1/rim/${id}`);
    if (res.status !== 200) {
      await res.body?.cancel();
      return null;
    }
    // The service answers {id, rim: base64(xml), sha256}; the XML is verified by the caller.
    const bytes = await boundedBody(res);
    if (!bytes) return null;
    let body: unknown;
    try {
      body = JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      return null;
    }
    if (typeof body !== "object" || body === null || !("rim" in body)) return null;
    const raw = typeof body.rim === "string" ? fromBase64(body.rim) : null;
    if (!raw) return null;
    const xml = new TextDecoder().decode(raw);
    this.#rims.set(id, { xml, until: this.#o.now() + this.#o.rimTtlMs });
    return xml;
  }

  async ocsp(cert: X509Certificate, issuer: X509Certificate): Promise<Uint8Array | null> {
    const key = certIdKey(certIdOf(cert, issuer));
    const hit = this.#ocsp.get(key);
    if (hit && this.#o.now() < hit.until) return hit.der;
    const res = await this.#o.fetch(this.#o.ocspUrl, {
      method: "POST",
      headers: { "content-type": "application/ocsp-request" },
      body: ownBytes(buildOcspRequest(cert, issuer)),
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      return null;
    }
    const der = await boundedBody(res);
    if (!der) return null;
    const until = nextUpdateOf(der);
    if (until !== null) this.#ocsp.set(key, { der, until });
    return der;
  }
}

/** RIMs are ~20 KB and OCSP answers ~2 KB; anything far larger is refused, not buffered. */
const MAX_COLLATERAL_BYTES = 1024 * 1024;

async function boundedBody(res: Response): Promise<Uint8Array | null> {
  if (!res.body) return null;
  const parts: Uint8Array[] = [];
  let total = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_COLLATERAL_BYTES) {
      await reader.cancel();
      return null;
    }
    parts.push(value);
  }
  return concatBytes(parts, total);
}

function nextUpdateOf(der: Uint8Array): number | null {
  try {
    const resp = AsnConvert.parse(der, OCSPResponse);
    if (!resp.responseBytes) return null;
    const basic = AsnConvert.parse(resp.responseBytes.response, BasicOCSPResponse);
    const times = basic.tbsResponseData.responses.map((r) => r.nextUpdate?.getTime());
    if (times.length === 0 || times.some((t) => t === undefined)) return null;
    return Math.min(...(times as number[]));
  } catch {
    return null;
  }
}

/** What a collateral directory yielded. */
export interface LoadedGpuCollateral {
  source: StaticGpuCollateral;
  rims: number;
  ocsp: number;
  /** Files that were neither a RIM nor a usable OCSP response. */
  skipped: string[];
}

/**
 * A collateral source from the files of a directory (the caller reads
 * them): `NV_GPU_*.xml|swidtag` are RIMs under their file name; every other
 * file is tried as an OCSP response (DER or base64 of DER).
 */
export function gpuCollateralFromFiles(
  files: readonly { name: string; bytes: Uint8Array }[],
): LoadedGpuCollateral {
  const source = new StaticGpuCollateral();
  const out: LoadedGpuCollateral = { source, rims: 0, ocsp: 0, skipped: [] };
  for (const f of files) {
    const base = f.name.split("/").pop() ?? f.name;
    const id = rimIdOfFileName(base);
    if (id) {
      source.addRim(id, new TextDecoder().decode(f.bytes));
      out.rims++;
    } else if (source.addOcsp(f.bytes)) out.ocsp++;
    else out.skipped.push(f.name);
  }
  return out;
}
