/**
 * Verifier dependencies that remember the collateral they hand out: one
 * verification gets its own copy, so what is archived with a session is
 * exactly what its verifier consumed (TDX collateral, VCEKs, RIMs, OCSP
 * answers, and the GPU verification times), never a later or concurrent
 * fetch.
 */
import type { AttesterDeps } from "./types.ts";
import { CollateralCollector } from "../verify/mod.ts";

export function recordingDeps(
  deps: AttesterDeps,
  nowMs: number,
): { deps: AttesterDeps; collector: CollateralCollector } {
  const c = new CollateralCollector(nowMs);
  const snp = deps.sevSnp;
  // Verifiers that take no collateral (development, pinned keys) may get deps without it.
  if (!deps.tdx || !deps.gpu) return { deps, collector: c };
  return {
    collector: c,
    deps: {
      ...deps,
      tdx: {
        ...deps.tdx,
        collateral: {
          get: async (fmspc, ca) => {
            const got = await deps.tdx.collateral.get(fmspc, ca);
            c.tdx(fmspc, ca, got);
            return got;
          },
        },
      },
      ...(snp
        ? {
          sevSnp: {
            roots: snp.roots,
            vcek: {
              get: async (report, product) => {
                const der = await snp.vcek.get(report, product);
                c.vcek(product, der, snp.roots.find((r) => r.product === product));
                return der;
              },
            },
          },
        }
        : {}),
      gpu: {
        ...deps.gpu,
        collateral: {
          rim: async (id) => {
            const xml = await deps.gpu.collateral.rim(id);
            if (xml !== null) c.rim(id, xml);
            return xml;
          },
          ocsp: async (cert, issuer) => {
            const der = await deps.gpu.collateral.ocsp(cert, issuer);
            if (der !== null) c.ocsp(der);
            return der;
          },
        },
        times: (nowMs) => {
          const t = deps.gpu.times(nowMs);
          c.gpuTimes(t);
          return t;
        },
      },
    },
  };
}
