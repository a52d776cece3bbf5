/**
 * An admitted request's `Admission`: its rate-limit headers, and the blind
 * writes that settle it against the actual usage, handed out once.
 */
import type { KvWrite } from "../store/mod.ts";
import { creditSettlementWrites } from "./credits.ts";
import { holdClosedWrites, holdRateClosedWrites } from "./holds.ts";
import type { KeyRecord } from "../keys/mod.ts";
import { tokenSettlementWrites } from "./rate_limit.ts";
import { type Admission, type AdmissionEstimate, validateActual } from "./admission_types.ts";

/**
 * The admission of `est` for `key`. `settlement` returns its writes on the
 * first call only, so settling one admission twice cannot double-debit; with
 * `holdInstance` they also close the request's hold (holds.ts), and, for a
 * request taken from a quota lease (`fromLease`), its share of the lease's
 * requests and tokens in the ledger: from then on the key figures count it as
 * used rather than as held by the lease (two sums, coalesced per commit).
 */
export function makeAdmission(
  key: KeyRecord,
  est: AdmissionEstimate,
  headers: Record<string, string>,
  holdInstance: string | undefined,
  fromLease = false,
): Admission {
  let settled = false;
  return {
    headers,
    settlement(actual): KvWrite[] {
      validateActual(actual);
      if (settled) return [];
      settled = true;
      return [
        ...(holdInstance === undefined ? [] : [
          ...holdClosedWrites(holdInstance, key.key_id, est.costNano),
          ...(fromLease ? holdRateClosedWrites(holdInstance, key.key_id, 1, est.tokens) : []),
        ]),
        ...creditSettlementWrites(key.key_id, est.costNano, actual),
        ...tokenSettlementWrites(
          key.key_id,
          est.tokens,
          actual.promptTokens + actual.completionTokens,
        ),
      ];
    },
  };
}
