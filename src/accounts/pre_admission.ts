/**
 * The rate check made before a request's body is read (#15): once admission
 * has refused a key because it has no requests left in its window
 * (`X-RateLimit-Remaining: 0`), further requests of that key are refused
 * with the same 429 until admission's own `Retry-After` has passed, without
 * reading or parsing their bodies. It only repeats admission's verdict, for
 * no longer than admission said it holds, so it never refuses a request
 * admission would have admitted; admission stays the one decision
 * (src/accounts/admission.ts), and a replica that has not seen the refusal
 * yet simply reads one more body.
 *
 * Refusals for tokens per minute or credits are not repeated: a smaller
 * request, a settlement or a top-up can change them at any moment.
 */
import { GatewayError } from "../http/errors.ts";
import type { KeyRecord } from "./keys.ts";

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

  constructor(private readonly now: () => number) {}

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

  /** Learns from an error of the request path; remembers only a refusal for requests per minute. */
  note(key: KeyRecord, err: GatewayError): void {
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
