/** Routing's front door: candidate selection and failover. */

export {
  type CacheSalter,
  createCacheSalter,
  refuseClientSalt,
  saltDigest,
  withSalt,
} from "./cache_salt.ts";
export {
  type AttemptFailureKind,
  type AttemptLog,
  type AttemptRecord,
  forward,
  type ForwardDeps,
  type ForwardPlan,
  type ForwardResult,
} from "./failover.ts";
export { createFetchFor } from "./fetch_for.ts";
export { parseRouting } from "./provider_block.ts";
export {
  type Candidate,
  selectCandidates,
  type TeeAttested,
  type VerificationState,
} from "./select.ts";
