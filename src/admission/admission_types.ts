/**
 * The contract of admission (what callers pass and get back, and what it needs
 * of the store and the group committer), and the checks on its inputs. The
 * parts of admission import these; `admission.ts` re-exports the public ones.
 */
import type { GatewayError } from "../http/mod.ts";
import type { BorrowedWrites, KvWrite } from "../store/mod.ts";
import type { KeyRecord } from "../keys/mod.ts";
import type { Tiers } from "./rate_limit.ts";

export interface AdmissionEstimate {
  /** Estimated prompt + completion tokens. */
  tokens: number;
  /** Estimated cost to reserve, nano-credits. */
  costNano: bigint;
  requestId: string;
}

export interface ActualUsage {
  promptTokens: number;
  completionTokens: number;
  costNano: bigint;
}

export interface Admission {
  /** X-RateLimit-* headers for the response. */
  headers: Record<string, string>;
  /** Blind writes settling this request (first call only; later calls return []). */
  settlement(actual: ActualUsage): KvWrite[];
}

export interface Admitter {
  admit(key: KeyRecord, est: AdmissionEstimate): Promise<Admission>;
  /**
   * Whether `key` could pay for anything now (a positive balance and no unpaid
   * debt, or a live quota lease), as admission would fold it: from the
   * account cache, else one read shared by concurrent callers.
   */
  mayPay(key: KeyRecord): Promise<boolean>;
  /** Hands back every quota lease (durably) and stops leasing. */
  close(): Promise<void>;
}

export interface AdmitterOptions {
  tiers: Tiers;
  now: () => number;
  /**
   * The group committer on the same store: admission commits take turns with
   * its commits and carry the writes queued behind them.
   */
  piggyback?: CommitLane;
  /**
   * Whether this process is the only live replica on the store (the workers of
   * one host count as one: docs/decisions/workers.md). Quota leases (see
   * leases.ts) are taken only then, and only with `piggyback` set: with
   * several replicas one's unused lease could refuse another's request.
   */
  soleReplica?: () => Promise<boolean>;
  /**
   * This process's replica id: with it, every reservation and its settlement
   * are recorded in the hold ledger (holds.ts), so a crash loses no credits.
   */
  holdInstance?: string;
  /** Most requests' worth in one lease slice (`store.lease_max_requests`). */
  leaseMaxRequests?: number;
  /** Workers of this host sharing its leases (each slice a fraction; lease_pool.ts). */
  leaseParts?: number;
  /** Monotonic milliseconds for lease lifetimes (durations, not the wall clock). */
  monotonic?: () => number;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /**
   * Distinct keys per batch. Each key costs 2 checks (KV max 100) and 5 reads
   * (one `getMany` of at most 10 keys per 2 API keys, so each key's entries
   * come from one snapshot).
   */
  maxKeysPerBatch?: number;
  /** Commit attempts per batch before giving up with 503. */
  maxAttempts?: number;
}

/** What admission needs of the group committer (see `GroupCommitter.exclusive`). */
export interface CommitLane {
  write(ops: KvWrite[]): Promise<void>;
  borrow(maxMutations: number, maxBytes: number): BorrowedWrites | null;
  exclusive<T>(f: () => Promise<T>): Promise<T>;
  laneFree(): Promise<void>;
}

/** The KV operations admission needs (lets tests inject lock errors). */
export type AdmissionKv = Pick<Deno.Kv, "getMany" | "atomic">;

/** A queued admission (or background lease renewal) waiting for its batch. */
export interface Pending {
  key: KeyRecord;
  est: AdmissionEstimate;
  /** A background lease renewal (sized on `est`), not a request: nothing is admitted. */
  renewal?: true;
  /** Renewals resolve with null. */
  resolve: (a: Admission | null) => void;
  reject: (e: unknown) => void;
}

/** What one batch attempt decided for one queued entry (null admission: a renewal). */
export type Outcome = { ok: true; admission: Admission | null } | {
  ok: false;
  error: GatewayError;
};

export function validate(est: AdmissionEstimate): void {
  if (!Number.isSafeInteger(est.tokens) || est.tokens < 0) {
    throw new RangeError("estimated tokens must be a non-negative integer");
  }
  if (est.costNano < 0n) throw new RangeError("estimated cost must be non-negative");
  if (est.requestId === "") throw new RangeError("requestId is required");
}

export function validateActual(a: ActualUsage): void {
  for (const n of [a.promptTokens, a.completionTokens]) {
    if (!Number.isSafeInteger(n) || n < 0) {
      throw new RangeError("token counts must be non-negative integers");
    }
  }
  if (a.costNano < 0n) throw new RangeError("actual cost must be non-negative");
}
