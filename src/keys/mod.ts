/**
 * Keys' front door: who a key is (its record, digest and tier, creating,
 * listing and revoking it, authenticating a bearer) and where every account
 * row lives in KV (the layout admission and key administration share).
 */

export {
  type AccountState,
  balanceKey,
  creditRefundKey,
  debtKey,
  keyRecordKey,
  parseState,
  reqRefundKey,
  stateKey,
  tokOverKey,
  tokRefundKey,
  u64,
  USAGE_FIELDS,
  USAGE_PENDING_PREFIX,
  type UsageField,
  usageKey,
  usagePendingKey,
} from "./kv_layout.ts";
export {
  authenticate,
  type Authenticator,
  createAuthenticator,
  createKey,
  getKey,
  isKeyId,
  isTier,
  type KeyRecord,
  listKeys,
  parseKeyRecord,
  revokeKey,
  type Tier,
  TIERS,
} from "./keys.ts";
