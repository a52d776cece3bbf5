/**
 * The SEV-SNP trust an upstream verifier needs: the operator-pinned AMD roots
 * (ASK + ARK per product) and where VCEKs come from, built from the
 * `trust.sev_snp` configuration. File and network access are passed in.
 */
import { splitAskArkPem } from "./verify_report.ts";
import {
  AMD_KDS_BASE_URL,
  kdsVcekSource,
  localVcekSource,
  type SnpProduct,
  type VcekSource,
} from "./vcek_source.ts";

/** A pinned product root: AMD's ASK and ARK (DER). */
export interface SnpRoot {
  product: SnpProduct;
  askDer: Uint8Array;
  arkDer: Uint8Array;
}

/** Roots to chain VCEKs to, and the VCEK source. */
export interface SnpTrust {
  roots: SnpRoot[];
  vcek: VcekSource;
}

/** The `trust.sev_snp` configuration block. */
export interface SnpTrustConfig {
  roots: { product: SnpProduct; ask_ark_pem: string }[];
  vcek_dir?: string;
  kds_url?: string;
}

/**
 * Builds the trust, or returns the reason the configuration is unusable.
 * `vcekFiles` are the DER files of `vcek_dir` when it is set (else the KDS is used).
 */
export function snpTrustFromConfig(
  cfg: SnpTrustConfig,
  io: { vcekFiles?: Uint8Array[]; fetch: (url: string) => Promise<Response> },
): { ok: true; trust: SnpTrust } | { ok: false; reason: string } {
  const roots: SnpRoot[] = [];
  for (const [i, r] of cfg.roots.entries()) {
    const split = splitAskArkPem(r.ask_ark_pem);
    if (!split.ok) return { ok: false, reason: `roots[${i}].ask_ark_pem: ${split.reason}` };
    roots.push({ product: r.product, askDer: split.askDer, arkDer: split.arkDer });
  }
  const vcek = cfg.vcek_dir !== undefined
    ? localVcekSource(io.vcekFiles ?? [], cfg.vcek_dir)
    : kdsVcekSource({ baseUrl: cfg.kds_url ?? AMD_KDS_BASE_URL, fetch: io.fetch });
  return { ok: true, trust: { roots, vcek } };
}
