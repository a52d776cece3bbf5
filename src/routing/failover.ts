/**
 * Failover over the router's candidates: walks only the list `select.ts`
 * produced (so every constraint holds through failover), one attempt at a
 * time (`upstream/forward.ts`), moving on after connection errors, timeouts,
 * 5xx and 429; any other answer is final. Each attempt is reported as it
 * happens to an `AttemptLog` (the receipt implements it) and to `onAttempt`
 * (the request log).
 */
import { GatewayError } from "../http/mod.ts";
import { sha256Prefixed } from "../aci/mod.ts";
import {
  type AttemptAnswer,
  type AttemptFailure,
  type BodyReadLimits,
  joinUrl,
  sendAttempt,
  type UpstreamFetch,
} from "../upstream/mod.ts";
import type { Candidate } from "./select.ts";

export interface ForwardDeps {
  /** The fetch to use for a candidate (a TLS-pinned one for verified upstreams). */
  fetchFor: (c: Candidate) => UpstreamFetch;
  /** Upstream credential for a provider (from the environment, resolved by main.ts). */
  credential: (provider: string) => string | undefined;
  now: () => number;
  /** Called when a verified upstream's channel no longer matches its session (re-verify). */
  onChannelMismatch?: (c: Candidate) => void;
  /** Bounds on a non-streamed answer's body (size, silence, total time). */
  bodyLimits: BodyReadLimits;
  /** An upstream refused the gateway's own configuration (see `isConfigRefusal`): tell the operator. */
  onConfigRefusal?: (r: ConfigRefusal) => void;
}

/** An upstream refusal that is the operator's to fix, not the client's. */
export interface ConfigRefusal {
  provider: string;
  upstreamModel: string;
  status: number;
  /** The upstream's sanitized error message. */
  detail: string;
}

/**
 * Is this upstream refusal about the gateway's configuration rather than the
 * client's request? A 404 on an inference path (wrong base URL or model name),
 * or a 400/422 saying the model does not exist. The client gets a 502; the
 * operator gets a log line (docs/decisions/upstream-config-refusals.md).
 */
export function isConfigRefusal(status: number, detail: string): boolean {
  if (status === 404) return true;
  if (status !== 400 && status !== 422) return false;
  return /\bmodel\b/i.test(detail) &&
    /does ?n[o']t (exist|serve)|not found|no such|unknown|not available|not supported|invalid model/i
      .test(detail);
}

export interface ForwardPlan {
  candidates: Candidate[];
  path: (c: Candidate) => string;
  /** Builds the exact bytes sent to this candidate. */
  body: (c: Candidate) => Uint8Array<ArrayBuffer>;
  /** `sha256:` of a body from `body` (default: hashed); lets a caller reuse a hash it has. */
  bodyHash?: (bytes: Uint8Array) => string;
  /** Whether the client demanded verified serving (for the receipt's `upstream.verified.required`). */
  verificationRequired: boolean;
  modelId: string;
  /** Connection-pool partition: the API key's digest (h1_client.ts). */
  partition?: string;
  signal: AbortSignal;
  /** Told of every attempt as it ends (the request log's providers and reasons; never content). */
  onAttempt?: (a: AttemptRecord) => void;
  /**
   * No upstream error text at all, not even a known shape's phrase: the status and a fixed
   * phrase only (E2EE requests, whose prompt must not come back in clear in any form).
   */
  withholdUpstreamText?: boolean;
}

/** Why an attempt failed, as the receipt's `upstream.attempt_failed.reason` says it. */
export type AttemptFailureKind = "timeout" | "connect" | "channel";

/**
 * What failover reports of each attempt, in order, as it happens. Defined here,
 * beside the code that reports; the receipt (`receipts/recorder.ts`) implements it.
 */
export interface AttemptLog {
  /** A candidate is about to be tried. */
  selected(c: Candidate, attempt: number, modelId: string, required: boolean): void;
  /** The attempt's bytes reached the upstream connection (`bodyHash` of what was sent). */
  forwarded(bodyHash: string): void;
  /** The attempt answered 2xx: it serves the request. */
  served(c: Candidate, attempt: number): void;
  /** The attempt failed: with an HTTP status (a number), or why without one. */
  failed(c: Candidate, attempt: number, why: number | AttemptFailureKind): void;
}

/** One upstream attempt, for the request log. */
export interface AttemptRecord {
  attempt: number;
  provider: string;
  /** `served`, or why the attempt failed: `status_<code>`, `timeout`, `connect`, `channel`. */
  outcome: string;
}

export interface ForwardResult extends AttemptAnswer {
  candidate: Candidate;
  attempts: number;
}

/** The last failure; `config`: an upstream refused the gateway's configuration. */
type LastFailure = AttemptFailure | { kind: "config"; status?: number; detail: string };

export async function forward(
  plan: ForwardPlan,
  deps: ForwardDeps,
  log: AttemptLog,
): Promise<ForwardResult> {
  let last: LastFailure | null = null;
  let attempts = 0;
  for (const c of plan.candidates) {
    if (plan.signal.aborted) break;
    attempts++;
    const bytes = plan.body(c);
    const hash = plan.bodyHash ? plan.bodyHash(bytes) : sha256Prefixed(bytes);
    log.selected(c, attempts, plan.modelId, plan.verificationRequired);
    // Forwarded only once bytes reached the connection (ACI: absent when the prompt was
    // never sent, e.g. a pin mismatch); a transport without the hook (fetch) proves it by
    // answering.
    let written = false;
    const out = await sendAttempt({
      fetch: deps.fetchFor(c),
      url: joinUrl(c.provider.base_url, plan.path(c)),
      credential: deps.credential(c.provider.name),
      body: bytes,
      timeoutMs: c.provider.timeout_ms,
      partition: plan.partition,
      signal: plan.signal,
      onWritten: () => {
        if (written) return;
        written = true;
        log.forwarded(hash);
      },
      bodyLimits: deps.bodyLimits,
      spanAttributes: {
        "gateway.upstream.provider": c.provider.name,
        "gateway.upstream.route": c.routeId,
        "gen_ai.request.model": plan.modelId,
      },
    });
    if ("response" in out) {
      // The served attempt, named once: every other attempt in the log failed.
      log.served(c, attempts);
      plan.onAttempt?.({ attempt: attempts, provider: c.provider.name, outcome: "served" });
      return {
        response: out.response,
        abort: out.abort,
        readAll: out.readAll,
        candidate: c,
        attempts,
      };
    }
    if (out.kind === "aborted") break;
    last = out;
    if (out.kind === "status") {
      log.failed(c, attempts, out.status!);
      plan.onAttempt?.({
        attempt: attempts,
        provider: c.provider.name,
        outcome: `status_${out.status}`,
      });
      if (isConfigRefusal(out.status!, out.detail)) {
        deps.onConfigRefusal?.({
          provider: c.provider.name,
          upstreamModel: c.upstreamModel,
          status: out.status!,
          // E2EE: no upstream text at all, not even in the operator's log.
          detail: plan.withholdUpstreamText === true ? "" : out.detail,
        });
        last = { kind: "config", status: out.status, detail: out.detail };
        continue;
      }
      if (!(out.status! >= 500 || out.status === 429)) break;
      continue;
    }
    if (out.kind === "channel") deps.onChannelMismatch?.(c);
    log.failed(c, attempts, out.kind);
    plan.onAttempt?.({ attempt: attempts, provider: c.provider.name, outcome: out.kind });
  }
  if (plan.signal.aborted) throw new GatewayError("invalid_request", "client closed the request");
  throw failureToError(last, attempts, plan.withholdUpstreamText === true);
}

function failureToError(
  last: LastFailure | null,
  attempts: number,
  withhold: boolean,
): GatewayError {
  const tried = `${attempts} upstream attempt${attempts === 1 ? "" : "s"}`;
  if (!last) return new GatewayError("unavailable", "no upstream could be tried");
  switch (last.kind) {
    case "timeout":
      return new GatewayError("upstream_timeout", `upstream timed out (${tried}): ${last.detail}`);
    case "channel":
      return new GatewayError(
        "upstream_verification_failed",
        `upstream channel check failed (${tried})`,
      );
    case "config":
      return new GatewayError(
        "upstream_error",
        `the upstream refused this gateway's configuration for the model (${tried}); ` +
          "the operator has been told",
      );
    case "connect":
    case "aborted":
      return new GatewayError("upstream_error", `upstream unreachable (${tried})`);
    case "status": {
      const s = last.status ?? 502;
      const detail = withhold ? "details withheld under end-to-end encryption" : last.detail;
      const msg = `upstream answered ${s}${detail ? `: ${detail}` : ""}`;
      if (s === 429 || s === 503) return new GatewayError("unavailable", `${msg} (${tried})`);
      if (s >= 500 || s === 401 || s === 403) {
        return new GatewayError("upstream_error", `${msg} (${tried})`);
      }
      return new GatewayError("invalid_request", `upstream rejected the request: ${msg}`);
    }
  }
}
