/**
 * The collateral of the gateway's own quote, for evidence bundles: a TDX
 * quote's collateral (TCB info, QE identity, CRLs, issuer chains) from the
 * collateral source the gateway is configured with (PCS/PCCS or a local
 * directory), an SEV-SNP report's VCEK (with the ASK/ARK it chains to) from
 * the configured VCEK source. Archived once per keyset, at the first bundle
 * that asks, content-addressed, and never replaced: later bundles carry the
 * same bytes. Development evidence has none, and the answer says why.
 */
import { isDevQuote, jcsBytes, parseHex } from "../aci/mod.ts";
import { COLLATERAL_BLOBS, getBlob, putBlob, retryTransient } from "../store/mod.ts";
import {
  archiveDigest,
  type CollateralArchive,
  CollateralCollector,
  type CollateralSource,
  parseSnpReport,
  quoteCollateralKey,
  type SnpTrust,
} from "../verify/mod.ts";
import type { CanonicalReport } from "./reports.ts";

/** What a bundle says about a report's collateral. */
export type ReportCollateral =
  | { digest: string; archive: CollateralArchive }
  | { none: string };

const KEYSET_COLLATERAL = "keyset_collateral";

export const DEV_EVIDENCE_NO_COLLATERAL =
  "development evidence: no TEE signed this quote, so no collateral (TCB info, QE identity, " +
  "PCK chain, CRLs, VCEK) exists that could vouch for it; it proves nothing about hardware";

export interface OwnCollateralOptions {
  kv: Deno.Kv;
  now: () => number;
  /** The gateway's TDX collateral source (`trust.collateral_dir`, PCS or a PCCS). */
  tdx?: CollateralSource;
  /** The gateway's SEV-SNP roots and VCEK source (`trust.sev_snp`). */
  sevSnp?: SnpTrust;
}

export function createOwnCollateral(
  o: OwnCollateralOptions,
): (report: CanonicalReport) => Promise<ReportCollateral> {
  const gather = async (report: CanonicalReport): Promise<CollateralArchive | string> => {
    const att = report.attestation;
    const quote = parseHex(att.evidence.quote.replace(/^0x/, ""));
    if (quote === null) return "the report's quote is not hex";
    if (isDevQuote(quote)) return DEV_EVIDENCE_NO_COLLATERAL;
    const c = new CollateralCollector(o.now());
    if (att.tee_type === "tdx") {
      if (!o.tdx) return "the gateway is configured with no TDX collateral source";
      const key = quoteCollateralKey(quote);
      if (!key.ok) return `the quote: ${key.reason}`;
      c.tdx(key.fmspc, key.ca, await o.tdx.get(key.fmspc, key.ca));
    } else if (att.tee_type === "sev_snp") {
      if (!o.sevSnp) return "the gateway is configured with no SEV-SNP VCEK source";
      const parsed = parseSnpReport(quote);
      if (!parsed.ok) return `the report: ${parsed.reason}`;
      const roots = o.sevSnp.roots.filter((r) =>
        !parsed.report.product || r.product === parsed.report.product
      );
      for (const root of roots) {
        try {
          c.vcek(root.product, await o.sevSnp.vcek.get(parsed.report, root.product), root);
          break;
        } catch { /* another product's root may match */ }
      }
      if (c.archive().sev_snp === undefined) return "no VCEK for the gateway's own report";
    } else {
      return `no collateral is known for tee_type ${JSON.stringify(att.tee_type)}`;
    }
    return c.archive();
  };

  return async (report) => {
    const key = [KEYSET_COLLATERAL, report.workload_keyset_digest];
    const stored = await o.kv.get<string>(key);
    if (stored.value) {
      const bytes = await getBlob(o.kv, COLLATERAL_BLOBS, stored.value);
      if (bytes) {
        return {
          digest: stored.value,
          archive: JSON.parse(new TextDecoder().decode(bytes)) as CollateralArchive,
        };
      }
    }
    let got: CollateralArchive | string;
    try {
      got = await gather(report);
    } catch (e) {
      got = `the gateway could not obtain collateral for its own quote: ${
        e instanceof Error ? e.message : String(e)
      }`.slice(0, 300);
    }
    if (typeof got === "string") return { none: got };
    const digest = await putBlob(o.kv, COLLATERAL_BLOBS, jcsBytes(got));
    // First archive wins: the collateral closest to the keyset's time stays.
    await retryTransient(() =>
      o.kv.atomic().check({ key, versionstamp: null }).set(key, digest).commit()
    );
    const final = (await o.kv.get<string>(key)).value ?? digest;
    if (final !== digest) {
      const bytes = await getBlob(o.kv, COLLATERAL_BLOBS, final);
      if (bytes) {
        return { digest: final, archive: JSON.parse(new TextDecoder().decode(bytes)) };
      }
    }
    return { digest: archiveDigest(got), archive: got };
  };
}
