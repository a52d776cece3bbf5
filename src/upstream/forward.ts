/**
 * Sending a request upstream with failover. Walks only the candidate list the
 * router produced (so every constraint holds through failover), moving on for
 * connection errors, timeouts, 5xx and 429; any other answer is final.
 */
import { GatewayError } from "../http/errors.ts";
import type { Candidate } from "../routing/select.ts";
import type { ReceiptRecorder } from "../receipts/recorder.ts";
import { sha256Prefixed } from "../aci/digest.ts";
import { type BodyReadLimits, readWholeBody } from "./body_read.ts";
import { isPinMismatch } from "./pinned_tls.ts";

export type UpstreamFetch = (
  url: string,
  init: RequestInit & {
    signal: AbortSignal;
    /** Kept-alive connections are shared only within a partition (the API key's digest). */
    partition?: string;
    /** Called once request bytes were written to the upstream connection. */
    onWritten?: () => void;
  },
) => Promise<Response>;

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
}

export interface ForwardPlan {
  candidates: Candidate[];
  path: (c: Candidate) => string;
  /** Builds the exact bytes sent to this candidate. */
  body: (c: Candidate) => Uint8Array<ArrayBuffer>;
  /** Whether the client demanded verified serving (for the receipt's `upstream.verified.required`). */
  verificationRequired: boolean;
  modelId: string;
  receivedHash: string;
  /** Connection-pool partition: the API key's digest (h1_client.ts). */
  partition?: string;
  signal: AbortSignal;
  /** Told of every attempt as it ends (the request log's providers and reasons; never content). */
  onAttempt?: (a: AttemptRecord) => void;
}

/** One upstream attempt, for the request log. */
export interface AttemptRecord {
  attempt: number;
  provider: string;
  /** `served`, or why the attempt failed: `status_<code>`, `timeout`, `connect`, `channel`. */
  outcome: string;
}

export interface ForwardResult {
  response: Response;
  candidate: Candidate;
  attempts: number;
  /** Aborts the upstream request (client disconnect, idle timeout). */
  abort: (reason?: unknown) => void;
  /**
   * The whole (non-streamed) body within `bodyLimits`; the upstream request is aborted if
   * the client leaves meanwhile. Rejects with a GatewayError.
   */
  readAll: () => Promise<Uint8Array<ArrayBuffer>>;
}

/** Longest wait for an error answer's (bounded) body: failover must not wait on it. */
const ERROR_BODY_MS = 2_000;

export interface AttemptFailure {
  kind: "timeout" | "connect" | "status" | "channel";
  status?: number;
  detail: string;
}

export async function forward(
  plan: ForwardPlan,
  deps: ForwardDeps,
  rec: ReceiptRecorder,
): Promise<ForwardResult> {
  let last: AttemptFailure | null = null;
  let lastBody = "";
  let attempts = 0;
  for (const c of plan.candidates) {
    if (plan.signal.aborted) break;
    attempts++;
    const bytes = plan.body(c);
    const hash = sha256Prefixed(bytes);
    rec.event({ type: "route.selected", target_route_id: c.routeId, attempt: attempts });
    recordVerification(rec, c, plan, attempts);
    // `request.forwarded` only once bytes reached the connection (ACI: absent when the
    // prompt was never sent, e.g. a pin mismatch); a transport without the hook (fetch)
    // proves it by answering.
    let written = false;
    const onWritten = () => {
      if (written) return;
      written = true;
      rec.event({ type: "request.forwarded", body_hash: hash });
      if (hash !== plan.receivedHash) rec.event({ type: "transparency.request_modified" });
    };

    const ctl = new AbortController();
    const onClientAbort = () => ctl.abort(plan.signal.reason);
    plan.signal.addEventListener("abort", onClientAbort, { once: true });
    let timer = setTimeout(() => ctl.abort(new TimeoutMarker()), c.provider.timeout_ms);
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "*/*",
      // Never a coded answer: a small gzip body can inflate to gigabytes.
      "accept-encoding": "identity",
    };
    const cred = deps.credential(c.provider.name);
    if (cred) headers.authorization = `Bearer ${cred}`;
    try {
      const res = await deps.fetchFor(c)(joinUrl(c.provider.base_url, plan.path(c)), {
        method: "POST",
        headers,
        body: bytes,
        signal: ctl.signal,
        partition: plan.partition,
        onWritten,
      });
      onWritten();
      clearTimeout(timer);
      if (res.ok) {
        // The served attempt, named once: every other attempt in the log failed.
        rec.event({ type: "route.served", target_route_id: c.routeId, attempt: attempts });
        plan.onAttempt?.({ attempt: attempts, provider: c.provider.name, outcome: "served" });
        return {
          response: res,
          candidate: c,
          attempts,
          abort: abortOf(ctl),
          readAll: wholeBodyOf(res, ctl, plan.signal, deps.bodyLimits),
        };
      }
      // A stalled error body must not hold up failover: cut it (and its connection) short.
      timer = setTimeout(() => ctl.abort(new TimeoutMarker()), ERROR_BODY_MS);
      const text = await readBounded(res, 4096);
      clearTimeout(timer);
      last = { kind: "status", status: res.status, detail: sanitizeUpstreamError(text) };
      lastBody = last.detail;
      rec.event({
        type: "upstream.attempt_failed",
        target_route_id: c.routeId,
        attempt: attempts,
        status: res.status,
      });
      plan.onAttempt?.({
        attempt: attempts,
        provider: c.provider.name,
        outcome: `status_${res.status}`,
      });
      if (!(res.status >= 500 || res.status === 429)) break;
    } catch (e) {
      clearTimeout(timer);
      if (plan.signal.aborted) break;
      const timedOut = ctl.signal.reason instanceof TimeoutMarker;
      const channel = isPinMismatch(e);
      if (channel) deps.onChannelMismatch?.(c);
      last = {
        kind: timedOut ? "timeout" : channel ? "channel" : "connect",
        detail: timedOut
          ? `no response within ${c.provider.timeout_ms} ms`
          : channel
          ? "upstream TLS key does not match its attested session"
          : "connection failed",
      };
      rec.event({
        type: "upstream.attempt_failed",
        target_route_id: c.routeId,
        attempt: attempts,
        reason: last.kind,
      });
      plan.onAttempt?.({ attempt: attempts, provider: c.provider.name, outcome: last.kind });
    } finally {
      plan.signal.removeEventListener("abort", onClientAbort);
    }
  }
  if (plan.signal.aborted) throw new GatewayError("invalid_request", "client closed the request");
  throw failureToError(last, lastBody, attempts);
}

/** Made outside `forward`, whose scope holds the plan (and its prompt). */
function wholeBodyOf(
  res: Response,
  ctl: AbortController,
  clientSignal: AbortSignal,
  limits: BodyReadLimits,
): () => Promise<Uint8Array<ArrayBuffer>> {
  return () => readWholeBody(res.body, limits, (r) => ctl.abort(r), clientSignal);
}

/** Only the controller: a closure of `forward` would keep the plan (and its prompt) alive. */
function abortOf(ctl: AbortController): (reason?: unknown) => void {
  return (reason) => ctl.abort(reason);
}

/** The `upstream.verified` event of one attempt (`attempt` ties it to its `route.selected`). */
function recordVerification(
  rec: ReceiptRecorder,
  c: Candidate,
  plan: ForwardPlan,
  attempt: number,
): void {
  const v = c.verification;
  if (!v) return;
  if (v.verified) {
    rec.event({
      type: "upstream.verified",
      model_id: plan.modelId,
      result: "verified",
      required: plan.verificationRequired,
      session_id: v.sessionId,
      tee_attested: v.teeAttested,
      attempt,
    });
  } else {
    rec.event({
      type: "upstream.verified",
      model_id: plan.modelId,
      result: "failed",
      required: plan.verificationRequired,
      reason: v.reason,
      upstream_name: c.provider.name,
      attempt,
    });
  }
}

class TimeoutMarker extends Error {
  constructor() {
    super("upstream timeout");
  }
}

function failureToError(
  last: AttemptFailure | null,
  detail: string,
  attempts: number,
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
    case "connect":
      return new GatewayError("upstream_error", `upstream unreachable (${tried})`);
    case "status": {
      const s = last.status ?? 502;
      const msg = `upstream answered ${s}${detail ? `: ${detail}` : ""}`;
      if (s === 429 || s === 503) return new GatewayError("unavailable", `${msg} (${tried})`);
      if (s >= 500 || s === 401 || s === 403) {
        return new GatewayError("upstream_error", `${msg} (${tried})`);
      }
      return new GatewayError("invalid_request", `upstream rejected the request: ${msg}`);
    }
  }
}

export function joinUrl(base: string, path: string): string {
  const b = base.endsWith("/") ? base.slice(0, -1) : base;
  // A base URL ending in /v1 and a path starting with /v1 must not double up.
  if (b.endsWith("/v1") && path.startsWith("/v1/")) return b + path.slice(3);
  return b + path;
}

/** Read at most `max` bytes of an error body, then drop the connection's remainder. */
export async function readBounded(res: Response, max: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  try {
    while (n < max) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      n += value.byteLength;
    }
  } catch {
    // a broken error body is still an error; the status says enough
  } finally {
    reader.cancel().catch(() => {});
  }
  const all = new Uint8Array(Math.min(n, max));
  let off = 0;
  for (const p of parts) {
    const take = Math.min(p.byteLength, all.byteLength - off);
    all.set(p.subarray(0, take), off);
    off += take;
    if (off >= all.byteLength) break;
  }
  return new TextDecoder().decode(all);
}

/**
 * An upstream's error text, made safe to show: only the `error.message` of a
 * JSON envelope, quoted fragments (which may echo prompt text) removed,
 * control characters stripped, length bounded.
 */
export function sanitizeUpstreamError(text: string): string {
  let msg = "";
  try {
    const j = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof j.error === "string") msg = j.error;
    else if (j.error && typeof j.error.message === "string") msg = j.error.message;
    else if (typeof j.message === "string") msg = j.message;
  } catch {
    return "";
  }
  return msg
    .replace(/"[^"]*"|'[^']*'|`[^`]*`/g, "…")
    .replace(/\p{Cc}/gu, " ")
    .slice(0, 200)
    .trim();
}
