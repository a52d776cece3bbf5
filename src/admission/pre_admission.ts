/**
 * The rate check made before a request's body is read: once admission
 * has refused a key because it has no requests left in its window
 * (`X-RateLimit-Remaining: 0`), further requests of that key are refused
 * with the same 429 until admission's own `Retry-After` has passed, without
 * reading or parsing their bodies. It only repeats admission's verdict, for
 * no longer than admission said it holds, so it never refuses a request
 * admission would have admitted; admission stays the one decision
 * (src/admission/admission.ts), and a replica that has not seen the refusal
 * yet simply reads one more body.
 *
 * Refusals for tokens per minute are not repeated: a smaller request or a
 * settlement can change them at any moment.
 *
 * Two more checks, so that work before admission (reading, parsing
 * and decrypting a body, counting its tokens) is neither free nor unthrottled:
 *
 * - A key that cannot pay for anything (no positive balance, or unpaid debt)
 *   is refused before its body is read ({@link PreAdmission.admissible}): the
 *   verdict comes from admission's own account fold (`Admitter.mayPay`),
 *   concurrent requests share one read, and a verdict is reused for at most
 *   {@link VERDICT_MS}, so a top-up is seen within that.
 * - Every request that is refused after authentication, and every request of
 *   an endpoint that is not admitted at all (`count_tokens`), is charged to a
 *   per-key bucket of this process holding the key's requests per minute; a
 *   key whose bucket is full is refused with 429 before its body is read.
 */
import { GatewayError } from "../http/mod.ts";
import type { KeyRecord } from "../keys/mod.ts";
import { limitsFor, type Tiers, WINDOW_MS } from "./rate_limit.ts";

/** How long a "can pay" or "cannot pay" verdict is reused before the account is read again. */
export const VERDICT_MS = 1_000;

/** What pre-admission needs of admission and the tiers (all optional for the 429 repeat alone). */
export interface PreAdmissionDeps {
  mayPay?: (key: KeyRecord) => Promise<boolean>;
  tiers?: Tiers;
}

interface Refused {
  /** Refuse until then (ms): never past the end admission announced. */
  until: number;
  /** When admission said to retry (ms), for the Retry-After of repeats. */
  retryAt: number;
  message: string;
  headers: Record<string, string>;
}

/** Keys remembered at most; expired entries are swept when this is reached. */
const MAX_REMEMBERED = 100_000;

export class PreAdmission {
  readonly #refused = new Map<string, Refused>();
  /** Per key: the level of its bucket of unadmitted requests, and when it was last drained. */
  readonly #unadmitted = new Map<string, { level: number; at: number }>();
  readonly #verdicts = new Map<string, { pays: boolean; at: number }>();
  readonly #deps: PreAdmissionDeps;

  constructor(private readonly now: () => number, deps: PreAdmissionDeps = {}) {
    this.#deps = deps;
  }

  /**
   * Everything decided before a body is read: the repeated 429 ({@link check}), a
   * full bucket of unadmitted requests, and a key that cannot pay (402).
   */
  async admissible(key: KeyRecord): Promise<void> {
    this.check(key);
    this.#bucketCheck(key, 0);
    const mayPay = this.#deps.mayPay;
    if (mayPay === undefined) return;
    const t = this.now();
    let v = this.#verdicts.get(key.key_id);
    if (v === undefined || t - v.at >= VERDICT_MS || t < v.at) {
      v = { pays: await mayPay(key), at: t };
      if (this.#verdicts.size >= MAX_REMEMBERED) this.#verdicts.clear();
      this.#verdicts.set(key.key_id, v);
    }
    if (!v.pays) {
      throw new GatewayError(
        "insufficient_credits",
        "Insufficient credits: add credits to this API key to continue.",
      );
    }
  }

  /** Charges one request that admission will not see (e.g. `count_tokens`); 429 when full. */
  charge(key: KeyRecord): void {
    this.check(key);
    this.#bucketCheck(key, 1);
  }

  /** Forgets `key`'s payment verdict (after a top-up in this process). */
  forgetVerdict(keyId: string): void {
    this.#verdicts.delete(keyId);
  }

  /** Throws 429 if `key`'s bucket of unadmitted requests cannot take `add` more; else adds them. */
  #bucketCheck(key: KeyRecord, add: number): void {
    const tiers = this.#deps.tiers;
    if (tiers === undefined) return;
    const rpm = limitsFor(key, tiers).rpm;
    const t = this.now();
    const b = this.#unadmitted.get(key.key_id);
    const level = b === undefined
      ? 0
      : Math.max(0, b.level - (rpm * Math.max(0, t - b.at)) / WINDOW_MS);
    if (level + Math.max(add, 1) > rpm) {
      const seconds = Math.max(1, Math.ceil(((level + 1 - rpm) * WINDOW_MS) / rpm / 1000));
      throw new GatewayError(
        "rate_limited",
        // Admission's own words: one refusal body, whichever bucket refused (shared receipts).
        `Rate limit exceeded: ${rpm} requests per minute.`,
        {
          headers: {
            "Retry-After": String(seconds),
            "X-RateLimit-Limit": String(rpm),
            "X-RateLimit-Remaining": "0",
          },
        },
      );
    }
    if (add === 0 && b === undefined) return;
    if (this.#unadmitted.size >= MAX_REMEMBERED && b === undefined) this.#unadmitted.clear();
    this.#unadmitted.set(key.key_id, { level: level + add, at: t });
  }

  /** Learns that `key` was admitted (it can pay). */
  admitted(key: KeyRecord): void {
    const v = this.#verdicts.get(key.key_id);
    if (v !== undefined && v.pays) return;
    this.#verdicts.set(key.key_id, { pays: true, at: this.now() });
  }

  /** Throws admission's 429 again while its refusal of `key` still holds. */
  check(key: KeyRecord): void {
    const r = this.#refused.get(key.key_id);
    if (r === undefined) return;
    const t = this.now();
    if (t >= r.until) {
      this.#refused.delete(key.key_id);
      return;
    }
    throw new GatewayError("rate_limited", r.message, {
      headers: {
        ...r.headers,
        "Retry-After": String(Math.max(1, Math.ceil((r.retryAt - t) / 1000))),
      },
    });
  }

  /**
   * Learns from a refusal of the request path: charges it to the key's bucket of
   * unadmitted requests (unless it was this bucket's own 429), keeps a credit
   * refusal as the payment verdict, and remembers a requests-per-minute refusal.
   */
  note(key: KeyRecord, err: GatewayError, charged = true): void {
    if (charged) {
      try {
        this.#bucketCheck(key, 1);
      } catch {
        // Already full: the refusal is not counted twice.
      }
    }
    if (err.kind === "insufficient_credits") {
      this.#verdicts.set(key.key_id, { pays: false, at: this.now() });
      return;
    }
    if (err.kind !== "rate_limited" || err.headers["X-RateLimit-Remaining"] !== "0") return;
    const seconds = Number(err.headers["Retry-After"]);
    if (!Number.isInteger(seconds) || seconds < 2) return;
    const t = this.now();
    // Retry-After is rounded up: the refusal surely holds for (seconds - 1) s.
    const until = t + (seconds - 1) * 1000;
    const prev = this.#refused.get(key.key_id);
    if (prev !== undefined && prev.until >= until) return;
    if (this.#refused.size >= MAX_REMEMBERED) this.#sweep(t);
    if (this.#refused.size >= MAX_REMEMBERED) return;
    this.#refused.set(key.key_id, {
      until,
      retryAt: t + seconds * 1000,
      message: err.message,
      headers: err.headers,
    });
  }

  #sweep(t: number): void {
    for (const [id, r] of this.#refused) if (t >= r.until) this.#refused.delete(id);
  }
}
