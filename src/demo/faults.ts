/**
 * Fault injection for the demo upstream: the misbehaviours of real upstreams
 * (error statuses, hangs, slow or broken streams, stream-format quirks) that
 * the gateway must survive, settable at runtime for the next N requests or
 * until cleared.
 */

/** Limits a fault to some requests: the next `times` ones, and/or one request path. */
export interface FaultScope {
  /** Apply to the next `times` matching requests, then clear; absent = until cleared. */
  times?: number;
  /** Apply only to requests on this path (e.g. `/v1/chat/completions`); absent = all paths. */
  path?: string;
}

/** One injected misbehaviour. */
export type FaultKind =
  /** Answer with this status; `body` (JSON value or raw string) defaults to an OpenAI error envelope. */
  | { kind: "status"; status: number; body?: unknown; headers?: Record<string, string> }
  /** Never answer: the request stays pending until the server closes (the client may give up first). */
  | { kind: "hang" }
  /** Wait before the first byte. */
  | { kind: "delay"; ms: number }
  /** Wait between stream chunks. */
  | { kind: "token_delay"; ms: number }
  /** Abort the connection after this many stream chunks (non-streamed: after half the body). */
  | { kind: "reset_mid_stream"; afterChunks: number }
  /** End the stream cleanly without `data: [DONE]`. */
  | { kind: "no_done" }
  /** Send the usage-only chunk after the finish chunk even without `include_usage`. */
  | { kind: "usage_after_finish" }
  /** Put usage in the finish chunk instead of a separate chunk. */
  | { kind: "usage_in_finish_chunk" }
  /** Send `: PROCESSING` SSE comments before every event. */
  | { kind: "keepalive_comments" }
  /** Add `tool_calls: []` to every delta without a tool call (and to plain messages). */
  | { kind: "empty_tool_calls" };

/** A fault with its scope. */
export type Fault = FaultKind & FaultScope;

function nonNegative(ms: number, what: string): void {
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`${what} must be a finite number >= 0`);
}

/** Rejects malformed faults up front, so a test typo fails loudly instead of being clamped. */
export function validateFault(f: Fault): void {
  if (f.times !== undefined && (!Number.isInteger(f.times) || f.times <= 0)) {
    throw new RangeError("fault.times must be a positive integer");
  }
  switch (f.kind) {
    case "status":
      if (!Number.isInteger(f.status) || f.status < 200 || f.status > 599) {
        throw new RangeError("fault.status must be an HTTP status 200..599");
      }
      return;
    case "delay":
    case "token_delay":
      return nonNegative(f.ms, "fault.ms");
    case "reset_mid_stream":
      if (!Number.isInteger(f.afterChunks) || f.afterChunks < 0) {
        throw new RangeError("fault.afterChunks must be an integer >= 0");
      }
      return;
    default:
      return;
  }
}

/** Holds the current fault and counts down its uses. */
export class FaultSlot {
  #fault: Fault | null = null;
  #left = Infinity;

  /** Replaces the current fault (null clears it). */
  set(f: Fault | null): void {
    if (f !== null) validateFault(f);
    this.#fault = f;
    this.#left = f?.times ?? Infinity;
  }

  /** The fault currently set, if any. */
  get current(): Fault | null {
    return this.#fault;
  }

  /** The fault for a request on `path`, consuming one use; null when none applies. */
  take(path: string): Fault | null {
    const f = this.#fault;
    if (f === null || (f.path !== undefined && f.path !== path)) return null;
    this.#left -= 1;
    if (this.#left <= 0) this.#fault = null;
    return f;
  }
}
