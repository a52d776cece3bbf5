/**
 * TD policy (DCAP step 8): a production TD must not be debuggable and must
 * have SEPT_VE_DISABLE set (otherwise the host can inject #VE on EPT
 * violations). Reported separately from cryptographic verification. Azure
 * TDX VMs run with SEPT_VE_DISABLE = 0 (TD partitioning): accepted only when
 * the operator opts in for that provider (docs/decisions/azure-tdx-sept-ve.md).
 */
import type { TdReport } from "./quote.ts";

/** The TD attribute bits the policy looks at, and the verdict. */
export interface TdPolicyResult {
  ok: boolean;
  debug: boolean;
  septVeDisable: boolean;
  /** True when SEPT_VE_DISABLE = 0 passed only because the operator opted in. */
  septVeWaived?: boolean;
  /** Present when `ok` is false. */
  reason?: string;
}

/** Evaluates DEBUG = 0 and SEPT_VE_DISABLE = 1 on TDATTRIBUTES (little-endian u64). */
export function checkTdPolicy(
  report: TdReport,
  opts: { allowSeptVeEnabled?: boolean } = {},
): TdPolicyResult {
  const a = report.tdAttributes;
  const debug = (a[0] & 0x01) !== 0;
  const septVeDisable = (a[3] & 0x10) !== 0;
  if (debug) return { ok: false, debug, septVeDisable, reason: "TD attributes: DEBUG is 1" };
  if (!septVeDisable) {
    if (opts.allowSeptVeEnabled) return { ok: true, debug, septVeDisable, septVeWaived: true };
    return {
      ok: false,
      debug,
      septVeDisable,
      reason: "TD attributes: SEPT_VE_DISABLE is 0",
    };
  }
  return { ok: true, debug, septVeDisable };
}
