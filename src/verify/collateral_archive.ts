/**
 * The verification collateral a check actually consumed, archived so the
 * same check can be repeated offline years later (evidence bundles, `task
 * verify --bundle`): TDX collateral (TCB info, QE identity, CRLs and their
 * issuer chains) per FMSPC, SEV-SNP VCEKs with the ASK/ARK they were chained
 * to, NVIDIA RIMs and OCSP answers with the times each GPU artefact was
 * judged at. Content-addressed: `sha256:<hex of sha256(JCS(archive))>`.
 * Nothing in it is trusted: an offline check verifies every piece again
 * against roots the auditor pins.
 */
import { Buffer } from "node:buffer";
import { bytesToHex, jcsBytes, parseHex, sha256Prefixed } from "../aci/mod.ts";
import { isRecord } from "./json_shape.ts";
import {
  collateralFromDcapQvlJson,
  collateralToDcapQvlJson,
  type DcapQvlCollateralJson,
  type TdxCollateral,
} from "./tdx/collateral.ts";
import { LocalCollateralSource, type PckCaKind } from "./tdx/collateral_source.ts";
import { StaticGpuCollateral } from "./nvidia/collateral.ts";
import type { GpuTimes } from "./nvidia/verify.ts";
import type { SnpProduct } from "./sev_snp/report.ts";
import { localVcekSource, type VcekSource } from "./sev_snp/vcek_source.ts";

const COLLATERAL_FORMAT = "aci-collateral/1";

export interface ArchivedTdx {
  fmspc: string;
  ca: PckCaKind;
  /** dcap-qvl's JSON shape (hex for binary fields). */
  collateral: DcapQvlCollateralJson;
}

export interface ArchivedVcek {
  product: SnpProduct;
  /** DER hex of the VCEK, and of the ASK and ARK it was chained to at verification. */
  vcek: string;
  ask?: string;
  ark?: string;
}

export interface CollateralArchive {
  format: typeof COLLATERAL_FORMAT;
  /** Epoch ms of the verification this collateral served. */
  verified_at: number;
  tdx?: ArchivedTdx[];
  sev_snp?: ArchivedVcek[];
  gpu?: {
    /** The instant each GPU artefact was judged at (epoch ms). */
    times: GpuTimes;
    rims: { id: string; xml: string }[];
    /** DER OCSPResponses, base64. */
    ocsp: string[];
  };
}

/** `sha256:<hex>` of the archive's JCS bytes: its content address. */
export function archiveDigest(a: CollateralArchive): string {
  return sha256Prefixed(jcsBytes(a));
}

/** True when the archive holds nothing (a verification that used no collateral). */
export function archiveIsEmpty(a: CollateralArchive): boolean {
  return !a.tdx?.length && !a.sev_snp?.length && !a.gpu;
}

/** Collects what sources hand out during one verification, deduplicated. */
export class CollateralCollector {
  #tdx = new Map<string, ArchivedTdx>();
  #vceks = new Map<string, ArchivedVcek>();
  #rims = new Map<string, string>();
  #ocsp = new Set<string>();
  #gpuTimes: GpuTimes | null = null;

  constructor(readonly verifiedAt: number) {}

  tdx(fmspc: string, ca: PckCaKind, c: TdxCollateral): void {
    this.#tdx.set(`${fmspc.toLowerCase()}/${ca}`, {
      fmspc: fmspc.toLowerCase(),
      ca,
      collateral: collateralToDcapQvlJson(c),
    });
  }

  vcek(product: SnpProduct, der: Uint8Array, root?: { askDer: Uint8Array; arkDer: Uint8Array }) {
    const vcek = bytesToHex(der);
    this.#vceks.set(vcek, {
      product,
      vcek,
      ...(root ? { ask: bytesToHex(root.askDer), ark: bytesToHex(root.arkDer) } : {}),
    });
  }

  rim(id: string, xml: string): void {
    this.#rims.set(id, xml);
  }

  ocsp(der: Uint8Array): void {
    this.#ocsp.add(Buffer.from(der).toString("base64"));
  }

  gpuTimes(t: GpuTimes): void {
    this.#gpuTimes ??= t;
  }

  archive(): CollateralArchive {
    const byKey = <T>(m: Map<string, T>) => [...m.entries()].sort(([a], [b]) => a < b ? -1 : 1);
    const a: CollateralArchive = { format: COLLATERAL_FORMAT, verified_at: this.verifiedAt };
    if (this.#tdx.size) a.tdx = byKey(this.#tdx).map(([, v]) => v);
    if (this.#vceks.size) a.sev_snp = byKey(this.#vceks).map(([, v]) => v);
    if (this.#rims.size || this.#ocsp.size) {
      a.gpu = {
        times: this.#gpuTimes ?? sameTimes(this.verifiedAt),
        rims: byKey(this.#rims).map(([id, xml]) => ({ id, xml })),
        ocsp: [...this.#ocsp].sort(),
      };
    }
    return a;
  }
}

function sameTimes(t: number): GpuTimes {
  return { device: t, deviceOcsp: t, rim: t, rimOcsp: t };
}

/** The sources an offline check reads from an archive (nothing else). */
export interface ArchiveSources {
  tdx: LocalCollateralSource;
  vcek: VcekSource;
  gpu: StaticGpuCollateral;
  gpuTimes: GpuTimes | null;
}

/**
 * Parses an archive (from an untrusted bundle); a reason string when it is
 * not one. Every item is re-verified by the caller's checks.
 */
export function archiveSources(v: unknown): ArchiveSources | string {
  if (!isRecord(v) || v.format !== COLLATERAL_FORMAT) return `not an ${COLLATERAL_FORMAT} archive`;
  const tdx = new LocalCollateralSource();
  for (const t of Array.isArray(v.tdx) ? v.tdx : []) {
    if (
      !isRecord(t) || typeof t.fmspc !== "string" || (t.ca !== "platform" && t.ca !== "processor")
    ) {
      return "a TDX collateral entry is malformed";
    }
    const c = collateralFromDcapQvlJson(t.collateral);
    if (!c.ok) return `TDX collateral for FMSPC ${t.fmspc}: ${c.reason}`;
    tdx.set(t.fmspc, t.ca, c.collateral);
  }
  const vceks: Uint8Array[] = [];
  for (const s of Array.isArray(v.sev_snp) ? v.sev_snp : []) {
    const der = isRecord(s) && typeof s.vcek === "string" ? parseHex(s.vcek) : null;
    if (der === null) return "a VCEK entry is not hex";
    vceks.push(der);
  }
  const gpu = new StaticGpuCollateral();
  let gpuTimes: GpuTimes | null = null;
  if (isRecord(v.gpu)) {
    for (const r of Array.isArray(v.gpu.rims) ? v.gpu.rims : []) {
      if (!isRecord(r) || typeof r.id !== "string" || typeof r.xml !== "string") {
        return "a RIM entry is malformed";
      }
      gpu.addRim(r.id, r.xml);
    }
    for (const o of Array.isArray(v.gpu.ocsp) ? v.gpu.ocsp : []) {
      if (typeof o !== "string" || !gpu.addOcsp(new Uint8Array(Buffer.from(o, "base64")))) {
        return "an OCSP entry is not a DER OCSP response";
      }
    }
    const t = v.gpu.times;
    if (
      isRecord(t) &&
      ["device", "deviceOcsp", "rim", "rimOcsp"].every((k) => typeof t[k] === "number")
    ) {
      gpuTimes = t as unknown as GpuTimes;
    }
  }
  return { tdx, vcek: localVcekSource(vceks, "the archived collateral"), gpu, gpuTimes };
}
