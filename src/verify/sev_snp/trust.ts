/**
 * The SEV-SNP trust an upstream attester needs: the operator-pinned AMD roots
 * (ASK + ARK per product) and where VCEKs come from, built from the
 * `trust.sev_snp` configuration. File and network access are passed in.
 */
import { splitAskArkPem } from "./verify_report.ts";
import { SNP_PRODUCTS } from "../../config/attestation_names.ts";
import { parseCertificate } from "../x509/cert_chain.ts";
import { pemCertificatesToDer } from "../x509/pem.ts";
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

/**
 * Pinned roots from PEM text holding one or more ASK (or ASVK) + ARK pairs, as
 * AMD serves `cert_chain` per product; the product is read from the ARK's
 * subject (`ARK-Milan`, `ARK-Genoa`, `ARK-Turin`).
 */
export function snpRootsFromPem(pem: string): { ok: true; roots: SnpRoot[] } | {
  ok: false;
  reason: string;
} {
  const ders = pemCertificatesToDer(pem);
  if (ders.length === 0 || ders.length % 2 !== 0) {
    return { ok: false, reason: `expected ASK + ARK pairs, found ${ders.length} certificates` };
  }
  const roots: SnpRoot[] = [];
  for (let i = 0; i < ders.length; i += 2) {
    const ark = parseCertificate(ders[i + 1], "ARK");
    if (!ark.ok) return ark;
    const product = SNP_PRODUCTS.find((p) => ark.cert.subject.includes(`ARK-${p}`));
    if (!product) return { ok: false, reason: `"${ark.cert.subject}" is not a known AMD ARK` };
    roots.push({ product, askDer: ders[i], arkDer: ders[i + 1] });
  }
  return { ok: true, roots };
}
