/**
 * Names the attestation policy in the configuration is written in: the TDX
 * TCB statuses an operator may accept and the AMD SEV-SNP products. Kept in
 * the foundation so the schema and the verifiers (`verify/tdx/tcb_policy.ts`,
 * `verify/sev_snp/`) share one list.
 */

/** Every TCB status Intel publishes except `Revoked` (which, like `NotSupported`, always fails). */
export const ACCEPTABLE_TCB_STATUSES = [
  "UpToDate",
  "SWHardeningNeeded",
  "ConfigurationNeeded",
  "ConfigurationAndSWHardeningNeeded",
  "OutOfDate",
  "OutOfDateConfigurationNeeded",
  "TDRelaunchAdvised",
  "TDRelaunchAdvisedConfigurationNeeded",
] as const;

export type AcceptableTcbStatus = typeof ACCEPTABLE_TCB_STATUSES[number];

/**
 * Default: every acceptable status. Real fleets run `OutOfDate` for weeks
 * after each TCB recovery and the verifiers whose verdicts we match (Intel's
 * QVL, dcap-qvl, go-tdx-guest) report it rather than fail; the status and its
 * advisories are in every session's claims, and `tcb_up_to_date` is refuted
 * unless the status is `UpToDate`. Operators who want current platforms only
 * set `["UpToDate", "SWHardeningNeeded"]` (docs/decisions/tdx-tcb-policy.md).
 */
export const DEFAULT_ACCEPTED_TCB_STATUSES: readonly AcceptableTcbStatus[] =
  ACCEPTABLE_TCB_STATUSES;

/** The AMD products KDS paths and `ask_ark_<product>.pem` are named for. */
export const SNP_PRODUCTS = ["Milan", "Genoa", "Turin"] as const;

export type SnpProduct = typeof SNP_PRODUCTS[number];
