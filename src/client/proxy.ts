/**
 * The local verifying proxy: an OpenAI- and Anthropic-compatible handler for
 * a loopback server, so anything that takes a base URL (curl, Python SDKs,
 * coding agents through OPENAI_BASE_URL / ANTHROPIC_BASE_URL) gets the same
 * verification as the library: it forwards the caller's own API key through
 * the verifying fetch, streams as events arrive, puts its verdict on a stream
 * before the final event (an SSE comment), ends a stream that fails its
 * check with an error event instead of `[DONE]`, adds `x-aci-verified` to
 * every answer, and reports each verdict for the audit file (no bodies).
 */
import { AciVerificationError } from "./errors.ts";
import type { Verdict, VerifyingFetch, VerifyingFetchOptions } from "./verifying_fetch.ts";

/** One audit line: ids, verdicts and check names only. */
export interface AuditRecord {
  at: number;
  endpoint: string;
  receipt_id: string | null;
  /** "inclusion": a deferred log-inclusion verdict, after the answer's own line. */
  phase: "answer" | "inclusion";
  ok: boolean;
  verified: string[];
  error?: string;
  failed_checks?: string[];
}

export interface ProxyOptions {
  /** The gateway's API base, e.g. `https://gateway.example/v1`. */
  gateway: string;
  /** Builds the verifying fetch (node.ts `verifyingFetch` with the pinned transport). */
  makeFetch: (
    o: Pick<VerifyingFetchOptions, "baseURL" | "onVerdict" | "streamEnd">,
  ) => VerifyingFetch;
  audit: (r: AuditRecord) => void;
  now: () => number;
}

const FORWARDED = [
  "authorization",
  "x-api-key",
  "api-key",
  "anthropic-version",
  "anthropic-beta",
  "content-type",
  "accept",
  "openai-organization",
  "openai-project",
  "x-upstream-verification",
];

const anthropicPath = (endpoint: string) => endpoint.startsWith("/messages");

function errorBody(endpoint: string, e: AciVerificationError | Error): string {
  const code = e instanceof AciVerificationError ? e.code : "gateway_unreachable";
  const message = `verifying proxy refused the answer: ${e.message}`;
  return JSON.stringify(
    anthropicPath(endpoint)
      ? { type: "error", error: { type: "aci_verification_failed", message } }
      : { error: { message, type: "aci_verification_failed", code, param: null } },
  );
}

/** SSE that ends a failed stream: the SDKs raise it as an API error. */
function errorEvent(endpoint: string, e: AciVerificationError): string {
  const body = errorBody(endpoint, e);
  return anthropicPath(endpoint) ? `event: error\ndata: ${body}\n\n` : `data: ${body}\n\n`;
}

export interface VerifyingProxy {
  handler(req: Request): Promise<Response>;
  /** Waits for the deferred inclusion verdicts still due (each is audited as it arrives). */
  settle(): Promise<void>;
  close(): void;
}

export function createVerifyingProxy(o: ProxyOptions): VerifyingProxy {
  const base = o.gateway.replace(/\/+$/, "");
  const record = (v: Verdict) =>
    o.audit({
      at: Math.floor(o.now() / 1000),
      endpoint: v.endpoint,
      receipt_id: v.receiptId,
      phase: v.phase,
      ok: v.ok,
      verified: v.verified,
      ...(v.error
        ? {
          error: v.error.code,
          failed_checks: v.error.checks.filter((c) => !c.ok).map((c) => c.name),
        }
        : {}),
    });
  const f = o.makeFetch({
    baseURL: base,
    onVerdict: record,
    streamEnd: {
      verified: (v) => `: aci-verified receipt=${v.receiptId} checks=${v.verified.join(",")}\n\n`,
      failed: (e, endpoint) => errorEvent(endpoint, e),
    },
  });
  const handler = async (req: Request): Promise<Response> => {
    const url = new URL(req.url);
    // Clients are configured with `http://127.0.0.1:PORT/v1` (OpenAI) or without /v1 (Anthropic).
    const endpoint = url.pathname.replace(/^\/v1(?=\/|$)/, "");
    const headers = new Headers();
    for (const h of FORWARDED) {
      const v = req.headers.get(h);
      if (v !== null) headers.set(h, v);
    }
    const body = req.method === "GET" || req.method === "HEAD"
      ? undefined
      : new Uint8Array(await req.arrayBuffer());
    try {
      const res = await f(`${base}${endpoint}${url.search}`, {
        method: req.method,
        headers,
        body,
        signal: req.signal,
      });
      const out = new Headers(res.headers);
      for (const h of ["content-length", "transfer-encoding", "connection", "keep-alive"]) {
        out.delete(h);
      }
      if (!out.has("x-aci-verified")) out.set("x-aci-verified", "none: not a receipted answer");
      return new Response(res.body, {
        status: res.status,
        statusText: res.statusText,
        headers: out,
      });
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      if (!(err instanceof AciVerificationError)) {
        o.audit({
          at: Math.floor(o.now() / 1000),
          endpoint,
          receipt_id: null,
          phase: "answer",
          ok: false,
          verified: [],
          error: "gateway_unreachable",
        });
      }
      return new Response(errorBody(endpoint, err), {
        status: 502,
        // The SDKs would otherwise retry a refusal that will not change.
        headers: {
          "content-type": "application/json",
          "x-should-retry": "false",
          "x-aci-verified": "refused",
        },
      });
    }
  };
  return {
    handler,
    // A failed verdict is already in the audit file: settling only waits for the last ones.
    settle: () => f.settle().then(() => {}, () => {}),
    close: () => f.close(),
  };
}
