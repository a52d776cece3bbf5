/**
 * The verifying `fetch`: pass it to the `openai` or `@anthropic-ai/sdk`
 * client (or an AI SDK provider) and every request is made only to an
 * attested gateway the caller's policy accepts, over a connection whose TLS
 * key is the attested one, E2EE-sealed when the gateway offers it, and every
 * answer is returned only once its receipt verified (streams: before their
 * final event). Any failure is an {@link AciVerificationError}.
 */
import { allPassed, type Check, check } from "../verify/checks.ts";
import type { QuoteCheck } from "../verify/evidence.ts";
import { isRecord } from "../verify/json_shape.ts";
import { verifyReceipt } from "../verify/receipt.ts";
import { E2EE_ENDPOINTS, type E2eeEndpoint } from "../e2ee/fields.ts";
import { attest, type AttestedGateway } from "./attest.ts";
import { e2eeApplied, openResponse, type SealedRequest, sealRequestBody } from "./e2ee.ts";
import { AciVerificationError, failedText } from "./errors.ts";
import { CheckpointCache, fetchInclusionProof, inclusionCheck } from "./inclusion.ts";
import { type ClientPolicy, type ClientPolicyInput, parsePolicy } from "./policy.ts";
import { hardwareQuoteCheck, type QuoteTrust } from "./quote_check.ts";
import { verifiedStream } from "./stream.ts";
import { fetchTransport, type Transport } from "./transport.ts";
import { randomBytes } from "./random.ts";

export interface VerifyingFetchOptions {
  /** The gateway's API base, e.g. `https://gateway.example/v1`. */
  baseURL: string;
  policy?: ClientPolicyInput;
  /** How the gateway is reached (default: the runtime's fetch, which cannot pin TLS). */
  transport?: Transport;
  /** Trust material for hardware quotes (collateral fetched with `fetch` when not given). */
  quoteTrust?: Partial<QuoteTrust>;
  /** Replaces the hardware quote check entirely. */
  quoteCheck?: QuoteCheck;
  /** Called with each answer's verdict (the proxy's audit file). */
  onVerdict?: (v: Verdict) => void;
  /**
   * How a stream ends (the proxy): text put before the held final event once
   * verified, and the text that replaces it on a failure (null: error the stream).
   */
  streamEnd?: {
    verified(v: Verdict, endpoint: string): string;
    failed(e: AciVerificationError, endpoint: string): string | null;
  };
  now?: () => number;
  randomBytes?: (n: number) => Uint8Array;
  sleep?: (ms: number) => Promise<void>;
}

/** What was verified for one answer (or, with a deferred inclusion verdict, for its log entry). */
export interface Verdict {
  endpoint: string;
  receiptId: string | null;
  /** "inclusion": the deferred log-inclusion verdict of an answer already delivered. */
  phase: "answer" | "inclusion";
  ok: boolean;
  /** Short names of the checks that passed (the `x-aci-verified` value). */
  verified: string[];
  checks: Check[];
  error?: AciVerificationError;
}

export type VerifyingFetch =
  & ((input: string | URL | Request, init?: RequestInit) => Promise<Response>)
  & {
    /** Attests now (otherwise done before the first request); resolves with the attested report. */
    attest(): Promise<AttestedGateway>;
    /** The current attestation, if any. */
    current(): AttestedGateway | null;
    /**
     * Waits for every deferred inclusion check started so far (policy `inclusion_verdict:
     * "deferred"`): resolves with their verdicts, or rejects with the first failure's
     * {@link AciVerificationError} (`inclusion_failed`). Nothing deferred: resolves at once.
     */
    settle(): Promise<Verdict[]>;
    /**
     * Whether each connection's TLS key is checked against the attested keyset
     * (false in a browser, whose fetch hides the peer certificate: E2EE is then required).
     */
    readonly tlsPinning: boolean;
    close(): void;
  };

/** Endpoints whose answers carry a receipt the client checks. */
const RECEIPTED = new Set([
  "/chat/completions",
  "/completions",
  "/embeddings",
  "/messages",
  "/responses",
]);

const AUTH_HEADERS = ["authorization", "x-api-key", "api-key"];

/** Deferred inclusion checks in flight at most (each holds one receipt and its poll). */
const MAX_DEFERRED = 256;

/** Whether a 400 says the E2EE key is not (any longer) the gateway's. */
async function keyMismatch(res: Response): Promise<boolean> {
  const body = await res.clone().json().catch(() => null);
  return isRecord(body) && isRecord(body["error"]) &&
    body["error"]["type"] === "e2ee_model_key_mismatch";
}

function isLoopback(host: string): boolean {
  return host === "localhost" || /^127\./.test(host) || host === "[::1]";
}

async function requestParts(input: string | URL | Request, init: RequestInit = {}) {
  if (input instanceof Request) {
    const body = input.body ? new Uint8Array(await input.arrayBuffer()) : undefined;
    return {
      url: new URL(input.url),
      method: input.method,
      headers: new Headers(input.headers),
      body,
      signal: input.signal,
    };
  }
  const b = init.body;
  let body: Uint8Array<ArrayBuffer> | undefined;
  if (typeof b === "string") body = new TextEncoder().encode(b);
  else if (b instanceof Uint8Array) body = new Uint8Array(b);
  else if (b instanceof ArrayBuffer) body = new Uint8Array(b.slice(0));
  else if (b !== undefined && b !== null) {
    body = new Uint8Array(await new Response(b).arrayBuffer());
  }
  return {
    url: new URL(input),
    method: (init.method ?? "GET").toUpperCase(),
    headers: new Headers(init.headers),
    body,
    signal: init.signal ?? undefined,
  };
}

/** Creates the verifying fetch; attestation happens before its first request. */
// Long as one closure over the client's state; each inner function is short.
export function createVerifyingFetch(o: VerifyingFetchOptions): VerifyingFetch {
  const baseURL = o.baseURL.replace(/\/+$/, "");
  const base = new URL(baseURL);
  if (base.protocol === "http:" && !isLoopback(base.hostname)) {
    throw new TypeError("the gateway must be reached over https (plain http only on loopback)");
  }
  const basePath = base.pathname;
  const policy: ClientPolicy = parsePolicy(o.policy ?? {});
  const transport = o.transport ?? fetchTransport();
  const now = o.now ?? Date.now;
  const random = o.randomBytes ?? randomBytes;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const quoteCheck = o.quoteCheck ?? hardwareQuoteCheck({
    fetch: o.quoteTrust?.fetch ?? ((i, x) => fetch(i, x)),
    now,
    ...o.quoteTrust,
  });
  // Without pinning (a browser) only E2EE protects the prompt from whoever terminates TLS.
  const e2eeMode = transport.pinning || base.protocol === "http:" ? policy.e2ee : "required";

  let current: AttestedGateway | null = null;
  const checkpoints = new CheckpointCache();
  /** Deferred inclusion checks in flight (bounded: past the bound an answer waits, as by default). */
  const deferred = new Set<Promise<Verdict>>();
  let settled: Verdict[] = [];
  const byDigest = new Map<string, AttestedGateway>();
  let inflight: Promise<AttestedGateway> | null = null;

  const reattest = (): Promise<AttestedGateway> => {
    inflight ??= attest({ baseURL, transport, policy, quoteCheck, now, randomBytes: random })
      .then((a) => {
        current = a;
        byDigest.set(a.digest, a);
        // Receipts cite the keyset of their moment: keep the last few, not every one.
        while (byDigest.size > 16) byDigest.delete(byDigest.keys().next().value!);
        return a;
      })
      .finally(() => (inflight = null));
    return inflight;
  };
  const attested = async (): Promise<AttestedGateway> =>
    current !== null && now() < current.validUntilMs ? current : await reattest();

  /** A new connection's key must be an attested one; an unknown key is attested again once. */
  const tlsCheck = async (spki: string): Promise<void> => {
    const a = await attested();
    if (a.tlsKeys.has(spki)) return;
    const fresh = await reattest();
    if (fresh.tlsKeys.has(spki)) return;
    if (fresh.tlsKeys.size === 0) {
      throw new AciVerificationError(
        "tls_pin_mismatch",
        "the attested keyset lists no TLS key (TLS ends outside the TEE): nothing to pin, nothing " +
          "was sent; use a transport without pinning, which insists on E2EE",
      );
    }
    throw new AciVerificationError(
      "tls_pin_mismatch",
      `the server's TLS key (SPKI sha256 ${spki}) is not in the attested keyset; nothing was sent`,
    );
  };

  const pinNote = (a: AttestedGateway): Check => {
    if (!transport.pinning) {
      return check(
        "tls.pin",
        true,
        `TLS pinning is impossible in this runtime (browser fetch hides the peer certificate): ${
          base.protocol === "http:" ? "plain http on loopback" : "relying on E2EE"
        }`,
      );
    }
    if (base.protocol === "http:") {
      return check("tls.pin", true, "plain http on loopback: no TLS to pin");
    }
    return check(
      "tls.pin",
      true,
      `every connection's key is one of ${a.tlsKeys.size} attested key(s)`,
    );
  };

  /** The attested keyset a receipt cites: the current one, or one attested again now. */
  const keysetFor = async (digest: unknown, receiptId: string): Promise<AttestedGateway> => {
    const known = typeof digest === "string" ? byDigest.get(digest) : undefined;
    if (known) return known;
    const fresh = await reattest();
    if (fresh.digest === digest) return fresh;
    throw new AciVerificationError(
      "keyset_mismatch",
      `the receipt cites keyset ${String(digest)}, the attested gateway holds ${fresh.digest}`,
      { receiptId },
    );
  };

  const checkReceipt = async (
    receiptId: string,
    endpoint: string,
    auth: Headers,
    requestBytes: Uint8Array,
    responseBytes: Uint8Array,
  ): Promise<Check[]> => {
    const url = new URL(`${baseURL}/aci/receipts/${encodeURIComponent(receiptId)}`);
    const defer = policy.inclusion_verdict === "deferred" && deferred.size < MAX_DEFERRED;
    // The proof is fetched alongside the receipt (one round trip less); checked after it.
    const proof = policy.inclusion === "off" || current?.logKey == null || defer
      ? null
      : fetchInclusionProof(receiptId, {
        baseURL,
        transport,
        tlsCheck,
        auth,
        waitMs: policy.inclusion_wait_ms,
        now,
        sleep,
      });
    proof?.catch(() => {});
    const res = await transport.send(url, { method: "GET", headers: auth }, tlsCheck);
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new AciVerificationError("receipt_missing", `the receipt answered HTTP ${res.status}`, {
        receiptId,
      });
    }
    const receipt: unknown = await res.json().catch(() => null);
    const a = await keysetFor(
      isRecord(receipt) ? receipt["workload_keyset_digest"] : null,
      receiptId,
    );
    const checks = verifyReceipt(receipt, {
      report: a.report,
      requestBody: requestBytes,
      responseBody: responseBytes,
      requireVerifiedUpstream: policy.require_verified_upstream,
    });
    if (!allPassed(checks)) {
      throw new AciVerificationError("receipt_invalid", failedText(checks), { checks, receiptId });
    }
    if (policy.inclusion === "off") return checks;
    if (a.logKey === null) {
      if (policy.inclusion === "required") {
        throw new AciVerificationError(
          "inclusion_failed",
          "the attested keyset lists no transparency-log key",
          {
            checks,
            receiptId,
          },
        );
      }
      return checks;
    }
    const logKey = a.logKey;
    const included = async (): Promise<Check> => {
      const fetched = await (proof ?? fetchInclusionProof(receiptId, {
        baseURL,
        transport,
        tlsCheck,
        auth,
        waitMs: policy.inclusion_wait_ms,
        now,
        sleep,
        patient: defer,
      }));
      return "proof" in fetched
        ? inclusionCheck(receipt, fetched.proof, logKey, checkpoints)
        : fetched;
    };
    if (defer) {
      deferInclusion(receiptId, endpoint, included);
      return [
        ...checks,
        check(
          "receipt.log_inclusion_deferred",
          true,
          "inclusion is checked after the answer (inclusion_verdict: deferred): its verdict " +
            "follows through onVerdict and settle()",
        ),
      ];
    }
    const inc = await included();
    if (!inc.ok) {
      throw new AciVerificationError("inclusion_failed", inc.detail, {
        checks: [...checks, inc],
        receiptId,
      });
    }
    return [...checks, inc];
  };

  /** Runs an answer's inclusion check after its release; the verdict goes to onVerdict and settle(). */
  const deferInclusion = (receiptId: string, endpoint: string, included: () => Promise<Check>) => {
    const job = included().catch((e): Check =>
      check("receipt.log_inclusion", false, e instanceof Error ? e.message : String(e))
    ).then((inc): Verdict => {
      const v: Verdict = inc.ok
        ? {
          endpoint,
          receiptId,
          phase: "inclusion",
          ok: true,
          verified: ["log-inclusion"],
          checks: [inc],
        }
        : {
          endpoint,
          receiptId,
          phase: "inclusion",
          ok: false,
          verified: [],
          checks: [inc],
          error: new AciVerificationError("inclusion_failed", inc.detail, {
            checks: [inc],
            receiptId,
          }),
        };
      try {
        o.onVerdict?.(v);
      } finally {
        deferred.delete(job);
        settled.push(v);
      }
      return v;
    });
    deferred.add(job);
  };

  const settle = async (): Promise<Verdict[]> => {
    await Promise.all([...deferred]);
    const done = settled;
    settled = [];
    const failed = done.find((v) => !v.ok);
    if (failed) throw failed.error;
    return done;
  };

  const shortNames = (checks: Check[], a: AttestedGateway, e2ee: boolean): string[] => {
    const names = ["attestation", a.dev ? "dev-evidence" : "hardware-quote", "measurement"];
    if (base.protocol === "https:" && transport.pinning) names.push("tls-pin");
    if (e2ee) names.push("e2ee");
    const has = (n: string) => checks.some((c) => c.name === n && c.ok);
    if (has("receipt.signature")) names.push("receipt-signature");
    if (has("receipt.request_body_hash") && has("receipt.response_body_hash")) {
      names.push("body-hashes");
    }
    if (policy.require_verified_upstream && has("receipt.upstream_verified")) {
      names.push("upstream-verified");
    }
    if (has("receipt.log_inclusion")) names.push("log-inclusion");
    if (has("receipt.log_inclusion_deferred")) names.push("log-inclusion-deferred");
    return names;
  };

  const verifyingFetch = async (
    input: string | URL | Request,
    init?: RequestInit,
  ): Promise<Response> => {
    const req = await requestParts(input, init);
    if (req.url.origin !== base.origin) {
      throw new TypeError(`the verifying fetch only talks to ${base.origin}`);
    }
    let a = await attested();
    const path = req.url.pathname.startsWith(basePath)
      ? req.url.pathname.slice(basePath.length)
      : "";
    const receipted = req.method === "POST" && RECEIPTED.has(path);
    const kind: E2eeEndpoint | undefined = E2EE_ENDPOINTS[`/v1${path}`];
    req.headers.delete("accept-encoding");
    const wantE2ee = receipted && kind !== undefined && e2eeMode !== "off" &&
      req.body !== undefined;
    const seal = (at: AttestedGateway): SealedRequest | null => {
      if (!wantE2ee) return null;
      if (typeof at.e2ee === "string") {
        if (e2eeMode === "required") throw new AciVerificationError("e2ee_unavailable", at.e2ee);
        return null;
      }
      try {
        // Best effort ("auto"): tools and tool calls travel in clear either way, so seal the rest
        // (the X-E2EE-Clear-Tools opt-in); "required" refuses them (e2ee_unavailable).
        return sealRequestBody(kind!, new TextDecoder().decode(req.body), at.e2ee, {
          random,
          now,
          clearTools: e2eeMode === "auto",
        });
      } catch (e) {
        if (e2eeMode !== "required") return null;
        throw new AciVerificationError("e2ee_unavailable", (e as Error).message, { cause: e });
      }
    };
    const send = (s: SealedRequest | null) => {
      const headers = new Headers(req.headers);
      if (s) {
        headers.set("content-type", "application/json");
        for (const [k, v] of Object.entries(s.headers)) headers.set(k, v);
      }
      const body = s ? new TextEncoder().encode(s.wire) : req.body;
      return transport.send(
        req.url,
        { method: req.method, headers, body, signal: req.signal },
        tlsCheck,
      );
    };
    let sealed = seal(a);
    let res = await send(sealed);
    if (sealed && res.status === 400 && await keyMismatch(res)) {
      // The keyset rotated under us: attest the new one (fresh nonce), seal to its key, resend once.
      await res.body?.cancel();
      a = await reattest();
      sealed = seal(a);
      res = await send(sealed);
    }
    if (!receipted || !res.ok) return res;

    const receiptId = res.headers.get("x-receipt-id");
    if (receiptId === null) {
      await res.body?.cancel();
      throw new AciVerificationError("receipt_missing", "the answer carries no x-receipt-id");
    }
    // A rotated keyset: attest the new one (fresh nonce) before trusting anything it signed.
    const served = res.headers.get("x-aci-keyset-digest");
    if (served !== null && !byDigest.has(served)) await reattest();
    if (sealed && !e2eeApplied(res.headers, sealed.ctx.algo)) {
      await res.body?.cancel();
      throw new AciVerificationError(
        "e2ee_failed",
        "the answer does not say it was encrypted to this request",
        {
          receiptId,
        },
      );
    }
    const auth = new Headers();
    for (const h of AUTH_HEADERS) {
      const v = req.headers.get(h);
      if (v !== null) auth.set(h, v);
    }
    const requestBytes = sealed ? sealed.restored : (req.body ?? new Uint8Array());
    const e2ee = sealed !== null;
    const finish = async (responseBytes: Uint8Array): Promise<Verdict> => {
      const checks = [
        ...a.checks,
        pinNote(a),
        ...await checkReceipt(receiptId, path, auth, requestBytes, responseBytes),
      ];
      const verdict: Verdict = {
        endpoint: path,
        receiptId,
        phase: "answer",
        ok: true,
        verified: shortNames(checks, a, e2ee),
        checks,
      };
      o.onVerdict?.(verdict);
      return verdict;
    };
    const fail = (e: unknown): never => {
      const err = e instanceof AciVerificationError
        ? e
        : new AciVerificationError("receipt_invalid", e instanceof Error ? e.message : String(e), {
          receiptId,
          cause: e,
        });
      o.onVerdict?.({
        endpoint: path,
        receiptId,
        phase: "answer",
        ok: false,
        verified: [],
        checks: [...err.checks],
        error: err,
      });
      throw err;
    };
    const headers = new Headers(res.headers);
    headers.delete("content-length");
    headers.delete("content-encoding");
    const open = sealed
      ? (obj: Record<string, unknown>, stream: boolean) =>
        openResponse(kind!, obj, stream, sealed!.ctx, sealed!.clientSecret)
      : null;
    if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream") && res.body) {
      const end = o.streamEnd;
      const stream = verifiedStream(res.body, {
        open: open ? (obj) => open(obj, true) : null,
        verify: async (wire) => {
          try {
            return await finish(wire);
          } catch (e) {
            return fail(e);
          }
        },
        beforeFinal: end ? (v) => end.verified(v as Verdict, path) : undefined,
        onFailure: end ? (e) => end.failed(e as AciVerificationError, path) : undefined,
      });
      // The receipt is checked at the stream's end, before its final event.
      headers.set("x-aci-verified", [...shortNames([], a, e2ee), "receipt-at-end"].join(","));
      return new Response(stream, { status: res.status, statusText: res.statusText, headers });
    }
    const wire = new Uint8Array(await res.arrayBuffer());
    let verdict: Verdict;
    try {
      verdict = await finish(wire);
    } catch (e) {
      return fail(e);
    }
    let out: Uint8Array<ArrayBuffer> = wire;
    if (open) {
      try {
        const json: unknown = JSON.parse(new TextDecoder().decode(wire));
        if (isRecord(json)) open(json, false);
        out = new TextEncoder().encode(JSON.stringify(json));
      } catch (e) {
        return fail(
          new AciVerificationError("e2ee_failed", (e as Error).message, { receiptId, cause: e }),
        );
      }
    }
    headers.set("x-aci-verified", verdict.verified.join(","));
    return new Response(out, { status: res.status, statusText: res.statusText, headers });
  };

  return Object.assign(verifyingFetch, {
    attest: () => attested(),
    current: () => current,
    tlsPinning: transport.pinning,
    settle,
    close: () => transport.close(),
  });
}
