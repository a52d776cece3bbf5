/**
 * Where the VCEK that signed an SNP report comes from: a set of DER files the
 * operator placed in a directory (offline), or AMD's Key Distribution Service
 * (or a mirror of it) at `{kds}/vcek/v1/{product}/{hwid}?blSPL=…`, cached per
 * URL. The VCEK is only a candidate: `verifySnpReport` still chains it to the
 * pinned ARK and checks its hwID and TCB against the report.
 */
import { bytesToHex } from "../../aci/hex.ts";
import type { SnpProduct, SnpReport } from "./report.ts";
import { vcekMismatch } from "./verify_report.ts";

/** AMD's public KDS. */
export const AMD_KDS_BASE_URL = "https://kdsintf.amd.com";

/** The products AMD's KDS and `ask_ark_<product>.pem` are named for. */
export type { SnpProduct } from "./report.ts";

/** A VCEK lookup for one report under one product's roots. */
export interface VcekSource {
  /** DER of the VCEK for the report's CHIP_ID and REPORTED_TCB; rejects when there is none. */
  get(report: SnpReport, product: SnpProduct): Promise<Uint8Array>;
}

/** A fixed set of VCEKs (e.g. read from `trust.sev_snp.vcek_dir`): the one matching the report. */
export function localVcekSource(
  ders: readonly Uint8Array[],
  where = "the VCEK directory",
): VcekSource {
  return {
    get: (report, product) => {
      const match = ders.find((d) => vcekMismatch(d, report, product) === null);
      return match ? Promise.resolve(match) : Promise.reject(
        new Error(
          `no VCEK in ${where} matches CHIP_ID ${
            bytesToHex(report.chipId).slice(0, 16)
          }… at the report's REPORTED_TCB for ${product}`,
        ),
      );
    },
  };
}

/** The KDS URL of a report's VCEK (Turin: the 8-byte hwID and an fmcSPL). */
export function kdsVcekUrl(baseUrl: string, product: SnpProduct, r: SnpReport): string {
  const t = r.reportedTcb;
  const hwid = bytesToHex(product === "Turin" ? r.chipId.subarray(0, 8) : r.chipId);
  const fmc = product === "Turin" ? `fmcSPL=${t.fmc ?? 0}&` : "";
  const q = `${fmc}blSPL=${t.bootloader}&teeSPL=${t.tee}&snpSPL=${t.snp}&ucodeSPL=${t.microcode}`;
  return `${baseUrl.replace(/\/+$/, "")}/vcek/v1/${product}/${hwid}?${q}`;
}

/** Options of {@link kdsVcekSource}. */
export interface KdsOptions {
  baseUrl: string;
  fetch: (url: string) => Promise<Response>;
  /** Cached VCEKs kept (LRU-ish: oldest dropped first). Default 256. */
  maxCached?: number;
}

/** VCEKs are at most a few kB; a larger answer is not a certificate. */
const MAX_VCEK_BYTES = 16 * 1024;

/**
 * VCEKs fetched from a KDS, cached by URL (a VCEK never changes for a chip
 * and TCB, and AMD rate-limits KDS). Concurrent lookups share one request.
 */
export function kdsVcekSource(o: KdsOptions): VcekSource {
  const max = o.maxCached ?? 256;
  const cache = new Map<string, Promise<Uint8Array>>();
  const load = async (url: string): Promise<Uint8Array> => {
    const res = await o.fetch(url);
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new Error(`KDS answered HTTP ${res.status} for the VCEK`);
    }
    const der = new Uint8Array(await res.arrayBuffer());
    if (der.length === 0 || der.length > MAX_VCEK_BYTES) {
      throw new Error(`KDS answered ${der.length} bytes, not a VCEK`);
    }
    return der;
  };
  return {
    get: (report, product) => {
      const url = kdsVcekUrl(o.baseUrl, product, report);
      const hit = cache.get(url);
      if (hit) return hit;
      const p = load(url);
      cache.set(url, p);
      // Failures are not cached: the next verification asks again.
      p.catch(() => cache.delete(url));
      while (cache.size > max) cache.delete(cache.keys().next().value!);
      return p;
    },
  };
}
