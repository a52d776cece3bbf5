/**
 * Binds a session to the collateral its verification consumed: the archive's
 * content address goes into the document (`claims.extra.collateral`), so the
 * session id — which the transparency log holds — commits to the exact
 * collateral an offline check must use. A verification that used none
 * (development, pinned keys) is left as it is.
 */
import type { SessionDocument } from "./types.ts";
import { archiveDigest, archiveIsEmpty, type CollateralArchive } from "../verify/mod.ts";

export function withCollateral(
  doc: SessionDocument,
  archive: CollateralArchive,
): { doc: SessionDocument; collateral?: CollateralArchive } {
  if (archiveIsEmpty(archive)) return { doc };
  const summary = {
    digest: archiveDigest(archive),
    tdx: archive.tdx?.length ?? 0,
    sev_snp_vceks: archive.sev_snp?.length ?? 0,
    gpu_rims: archive.gpu?.rims.length ?? 0,
    gpu_ocsp: archive.gpu?.ocsp.length ?? 0,
  };
  return {
    doc: { ...doc, claims: { ...doc.claims, extra: { ...doc.claims.extra, collateral: summary } } },
    collateral: archive,
  };
}
