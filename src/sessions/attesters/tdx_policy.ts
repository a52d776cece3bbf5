/**
 * A provider's TDX policy (`confidential.tdx`) as the offline verifier takes
 * it, and the claim that records what it judged: the TCB status, its
 * advisories, the statuses the policy accepted and whether SEPT_VE_DISABLE = 0
 * passed only by the operator's opt-in. Shared by the TDX-based verifiers.
 */
import type { ProviderConfig } from "../../config/mod.ts";
import {
  DEFAULT_ACCEPTED_TCB_STATUSES,
  type TdxTcbPolicy,
  type TdxVerified,
} from "../../verify/mod.ts";

type Confidential = NonNullable<ProviderConfig["confidential"]>;

/** The options of `verifyTdxQuote` the provider's policy sets. */
export interface TdxPolicyOptions {
  tcbPolicy: TdxTcbPolicy;
  allowSeptVeEnabled: boolean;
}

/** The provider's TDX policy, defaults filled in. */
export function tdxPolicyOf(conf: Confidential): TdxPolicyOptions {
  return {
    tcbPolicy: { accepted: conf.tdx?.accepted_tcb_statuses ?? DEFAULT_ACCEPTED_TCB_STATUSES },
    allowSeptVeEnabled: conf.tdx?.allow_sept_ve_enabled ?? false,
  };
}

/** `claims.extra.tdx_tcb`: the judged TCB, in machine-readable form. */
export function tdxTcbExtra(tdx: TdxVerified, policy: TdxPolicyOptions): Record<string, unknown> {
  return {
    status: tdx.tcbStatus,
    advisory_ids: [...tdx.advisoryIds],
    fmspc: tdx.fmspc,
    tdx_module_id: tdx.tdxModuleId,
    accepted_statuses: [...policy.tcbPolicy.accepted],
    sept_ve_disable: tdx.tdPolicy.septVeDisable,
    sept_ve_opt_in_used: tdx.tdPolicy.septVeWaived === true,
  };
}
