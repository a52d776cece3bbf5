/**
 * Admission's front door: what a key may spend and how fast (credits, rate
 * limits, holds and quota leases, the admission decision and its settlement)
 * and the key administration built on keys and that ledger.
 */

export { CreateKeyBody, CreditBody, UpdateKeyBody } from "./admin_bodies.ts";
export { type Admission, type Admitter, createAdmitter } from "./admission.ts";
export { formatCredits, MAX_SETTLEMENT_NANO, parseCredits } from "./credits.ts";
export { devKey, type DevKeyDeps } from "./dev_key.ts";
export { FencedError, holdFenceKey, recoverHolds } from "./holds.ts";
export { type KeyAdmin, keyAdmin, KeyArgumentError } from "./key_admin.ts";
export { KeyDetailSchema, KeySummarySchema, OwnKeySchema, ownKeyView } from "./key_views.ts";
export { PreAdmission } from "./pre_admission.ts";
export { DEFAULT_TIERS, type Tiers } from "./rate_limit.ts";
export { dailyUsageWrites, dayRange } from "./usage_daily.ts";
