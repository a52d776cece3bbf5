/**
 * One upstream attempt: the request's bytes to one URL under its deadline,
 * then either the answer (the whole body read within its limits on demand)
 * or why it failed. Which candidate to try next is failover's decision
 * (`routing/failover.ts`); this module knows nothing of candidates or receipts.
 */
import { type BodyReadLimits, readWholeBody } from "./body_read.ts";
import { isPinMismatch } from "./pinned_tls.ts";
import { timerAfter } from "../http/mod.ts";
import { type AttemptSpan, attemptSpan } from "./trace.ts";

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

/** One attempt's request. */
export interface AttemptRequest {
  fetch: UpstreamFetch;
  url: string;
  /** Upstream credential (sent as a bearer token), if any. */
  credential: string | undefined;
  body: Uint8Array<ArrayBuffer>;
  /** Deadline for the answer's head. */
  timeoutMs: number;
  /** Connection-pool partition: the API key's digest (h1_client.ts). */
  partition?: string;
  /** The client's signal: the attempt is aborted when the client leaves. */
  signal: AbortSignal;
  /** Called once request bytes were written (at the latest when an answer came). */
  onWritten: () => void;
  /** Bounds on a non-streamed answer's body (size, silence, total time). */
  bodyLimits: BodyReadLimits;
  /** Metadata on the attempt's client span (provider, model; never content). */
  spanAttributes?: Record<string, string>;
}

/** An attempt's successful (2xx) answer. */
export interface AttemptAnswer {
  response: Response;
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

/** Why an attempt failed (`aborted`: the client left; nothing more to try). */
export interface AttemptFailure {
  kind: "timeout" | "connect" | "status" | "channel" | "aborted";
  status?: number;
  detail: string;
}

/** Sends one attempt under its client span; resolves to the answer or the failure, never rejects. */
export async function sendAttempt(r: AttemptRequest): Promise<AttemptAnswer | AttemptFailure> {
  const span = attemptSpan(r.url, r.spanAttributes ?? {});
  const out = await attempt(r, span);
  if ("response" in out) span.end(out.response.status);
  else span.end(out.status, out.kind);
  return out;
}

async function attempt(
  r: AttemptRequest,
  span: AttemptSpan,
): Promise<AttemptAnswer | AttemptFailure> {
  const signal = r.signal;
  if (signal.aborted) return { kind: "aborted", detail: "client closed the request" };
  const ctl = new AbortController();
  const onClientAbort = () => ctl.abort(signal.reason);
  signal.addEventListener("abort", onClientAbort, { once: true });
  // The body limits' deadline source (the gateway's wheel) arms the head and error-body limits too.
  const after = r.bodyLimits.after ?? timerAfter;
  let timer = after(r.timeoutMs, () => ctl.abort(new TimeoutMarker()));
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "*/*",
    // Never a coded answer: a small gzip body can inflate to gigabytes.
    "accept-encoding": "identity",
  };
  if (r.credential) headers.authorization = `Bearer ${r.credential}`;
  span.inject(headers); // W3C traceparent: the upstream's spans join the client's trace
  try {
    const res = await span.run(() =>
      r.fetch(r.url, {
        method: "POST",
        headers,
        body: r.body,
        signal: ctl.signal,
        // A redirect is an answer (3xx), never followed: following would re-send the prompt
        // to wherever the upstream points (the HTTP/1.1 client follows none either).
        redirect: "manual",
        partition: r.partition,
        onWritten: r.onWritten,
      })
    );
    r.onWritten();
    timer.cancel();
    if (res.ok) {
      return {
        response: res,
        abort: abortOf(ctl),
        readAll: wholeBodyOf(res, ctl, signal, r.bodyLimits),
      };
    }
    // A stalled error body must not hold up failover: cut it (and its connection) short.
    timer = after(ERROR_BODY_MS, () => ctl.abort(new TimeoutMarker()));
    const text = await readBounded(res, 4096);
    timer.cancel();
    return { kind: "status", status: res.status, detail: sanitizeUpstreamError(text) };
  } catch (e) {
    timer.cancel();
    if (signal.aborted) return { kind: "aborted", detail: "client closed the request" };
    const timedOut = ctl.signal.reason instanceof TimeoutMarker;
    if (timedOut) return { kind: "timeout", detail: `no response within ${r.timeoutMs} ms` };
    if (isPinMismatch(e)) {
      return { kind: "channel", detail: "upstream TLS key does not match its attested session" };
    }
    return { kind: "connect", detail: "connection failed" };
  } finally {
    signal.removeEventListener("abort", onClientAbort);
  }
}

/** Made outside `sendAttempt`, whose scope holds the request (and its prompt). */
function wholeBodyOf(
  res: Response,
  ctl: AbortController,
  clientSignal: AbortSignal,
  limits: BodyReadLimits,
): () => Promise<Uint8Array<ArrayBuffer>> {
  return () => readWholeBody(res.body, limits, (r) => ctl.abort(r), clientSignal);
}

/** Only the controller: a closure of `sendAttempt` would keep the request (and its prompt) alive. */
function abortOf(ctl: AbortController): (reason?: unknown) => void {
  return (reason) => ctl.abort(reason);
}

class TimeoutMarker extends Error {
  constructor() {
    super("upstream timeout");
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
 * Known upstream error shapes (OpenAI, vLLM, SGLang, TGI, Anthropic), each as
 * the fixed phrase the client is shown. The upstream's own text never passes:
 * an error message may quote or paraphrase the prompt (with or without quotes),
 * so it only selects a phrase. First match wins; unknown shapes show nothing.
 */
const KNOWN_ERRORS: readonly { code?: RegExp; message: RegExp; phrase: string }[] = [
  {
    code: /^context_length_exceeded$/,
    message:
      /maximum context length|context (length|window)|too many (input )?tokens|prompt is too long|input length/i,
    phrase: "the prompt and output exceed the upstream model's context length",
  },
  {
    code: /^(rate_limit_exceeded|rate_limit_error)$/,
    message: /rate.?limit|too many requests/i,
    phrase: "the upstream's rate limit was reached",
  },
  {
    code: /^(overloaded_error|server_overloaded|service_unavailable)$/,
    message: /overloaded|over capacity|server is busy|temporarily unavailable/i,
    phrase: "the upstream is overloaded",
  },
  {
    code: /^(model_not_found|not_found_error)$/,
    message: /model\b.{0,120}\b(not found|does not exist|is not available|unknown)/i,
    phrase: "the upstream does not serve this model",
  },
  {
    code: /^(invalid_api_key|authentication_error|permission_error|insufficient_quota)$/,
    message: /api key|unauthori[sz]ed|authenticat|permission|quota/i,
    phrase: "the upstream refused the gateway's credential",
  },
  {
    code: /^(content_filter|content_policy_violation)$/,
    message: /content (policy|filter|management)|safety system/i,
    phrase: "the upstream's content policy refused the request",
  },
  {
    code: /^$/,
    message:
      /max_tokens|max_completion_tokens|max_new_tokens|maximum number of (output|completion) tokens/i,
    phrase: "the upstream refused the output limit",
  },
];

/**
 * An upstream's error body as a phrase safe to show: the fixed phrase of a
 * known error shape (matched on `error.code`/`error.type`, then on the
 * message), else "". Never any of the upstream's own text.
 */
export function sanitizeUpstreamError(text: string): string {
  let codes: string[] = [];
  let msg = "";
  try {
    const j = JSON.parse(text) as {
      error?: { message?: unknown; code?: unknown; type?: unknown } | string;
      message?: unknown;
    };
    if (typeof j.error === "string") msg = j.error;
    else if (j.error && typeof j.error === "object") {
      if (typeof j.error.message === "string") msg = j.error.message;
      codes = [j.error.code, j.error.type].filter((c): c is string => typeof c === "string");
    } else if (typeof j.message === "string") msg = j.message;
  } catch {
    return "";
  }
  for (const k of KNOWN_ERRORS) if (k.code && codes.some((c) => k.code!.test(c))) return k.phrase;
  // Bounded: the patterns are linear, the message is cut to 1 KiB.
  const head = msg.slice(0, 1024);
  for (const k of KNOWN_ERRORS) if (k.message.test(head)) return k.phrase;
  return "";
}
