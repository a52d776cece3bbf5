/**
 * The verifying `fetch`: pass it to the `openai` or `@anthropic-ai/sdk`
 * client (or an AI SDK provider) and every request is made only to an
 * attested gateway the caller's policy accepts, over a connection whose TLS
 * key is the attested one, E2EE-sealed when the gateway offers it, and every
 * answer is returned only once its receipt verified (streams: before their
 * final event). Any failure is an {@link AciVerificationError}.
 */
import type { Check } from "../verify/checks.ts";
import { check } from "../verify/checks.ts";
import type { QuoteCheck } from "../verify/evidence.ts";
import { isRecord } from "../verify/json_shape.ts";
import { E2EE_ENDPOINTS, type E2eeEndpoint } from "../e2ee/fields.ts";
import type { AttestedGateway } from "./attest.ts";
import { AttestedKeysets } from "./attested_keysets.ts";
import { e2eeApplied, openResponse, type SealedRequest, sealRequestBody } from "./e2ee.ts";
import { AciVerificationError } from "./errors.ts";
import { type ClientPolicy, type ClientPolicyInput, parsePolicy } from "./policy.ts";
import { hardwareQuoteCheck, type QuoteTrust } from "./quote_check.ts";
import { ReceiptChecker } from "./receipt_checker.ts";
import { verifiedStream } from "./stream.ts";
import { fetchTransport, type Transport } from "./transport.ts";
import { randomBytes } from "./random.ts";
import type { Verdict } from "./verdict.ts";

export type { Verdict } from "./verdict.ts";

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

/** One request as the caller gave it. */
type RequestParts = Awaited<ReturnType<typeof requestParts>>;

/** A receipted answer's request, as the receipt check needs it. */
interface Exchange {
  path: string;
  kind: E2eeEndpoint | undefined;
  a: AttestedGateway;
  sealed: SealedRequest | null;
  receiptId: string;
  auth: Headers;
  requestBytes: Uint8Array;
}

/** Creates the verifying fetch; attestation happens before its first request. */
export function createVerifyingFetch(o: VerifyingFetchOptions): VerifyingFetch {
  const c = new VerifyingClient(o);
  return Object.assign(
    (input: string | URL | Request, init?: RequestInit) => c.fetch(input, init),
    {
      attest: () => c.keysets.attested(),
      current: () => c.keysets.current(),
      tlsPinning: c.transport.pinning,
      settle: () => c.receipts.settle(),
      close: () => c.transport.close(),
    },
  );
}

/** The client's state (policy, keysets, receipts in flight) and one method per step of a request. */
class VerifyingClient {
  readonly transport: Transport;
  readonly keysets: AttestedKeysets;
  readonly receipts: ReceiptChecker;
  #o: VerifyingFetchOptions;
  #base: URL;
  #policy: ClientPolicy;
  #now: () => number;
  #random: (n: number) => Uint8Array;
  #e2eeMode: ClientPolicy["e2ee"];

  constructor(o: VerifyingFetchOptions) {
    const baseURL = o.baseURL.replace(/\/+$/, "");
    const base = new URL(baseURL);
    if (base.protocol === "http:" && !isLoopback(base.hostname)) {
      throw new TypeError("the gateway must be reached over https (plain http only on loopback)");
    }
    this.#o = o;
    this.#base = base;
    const policy = this.#policy = parsePolicy(o.policy ?? {});
    const transport = this.transport = o.transport ?? fetchTransport();
    const now = this.#now = o.now ?? Date.now;
    const random = this.#random = o.randomBytes ?? randomBytes;
    const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
    const quoteCheck = o.quoteCheck ?? hardwareQuoteCheck({
      fetch: o.quoteTrust?.fetch ?? ((i, x) => fetch(i, x)),
      now,
      ...o.quoteTrust,
    });
    // Without pinning (a browser) only E2EE protects the prompt from whoever terminates TLS.
    this.#e2eeMode = transport.pinning || base.protocol === "http:" ? policy.e2ee : "required";
    this.keysets = new AttestedKeysets({
      baseURL,
      transport,
      policy,
      quoteCheck,
      now,
      randomBytes: random,
    });
    this.receipts = new ReceiptChecker({
      baseURL,
      transport,
      policy,
      keysets: this.keysets,
      now,
      sleep,
      onVerdict: o.onVerdict,
    });
  }

  async fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    const req = await requestParts(input, init);
    if (req.url.origin !== this.#base.origin) {
      throw new TypeError(`the verifying fetch only talks to ${this.#base.origin}`);
    }
    let a = await this.keysets.attested();
    const basePath = this.#base.pathname;
    // As the gateway routes it: repeated and trailing slashes do not make another endpoint
    // (else `/chat//completions` would travel unsealed and unverified).
    const pathname = req.url.pathname.replace(/\/{2,}/g, "/").replace(/(.)\/+$/, "$1");
    const path = pathname.startsWith(basePath) ? pathname.slice(basePath.length) : "";
    const receipted = req.method === "POST" && RECEIPTED.has(path);
    const kind: E2eeEndpoint | undefined = E2EE_ENDPOINTS[`/v1${path}`];
    req.headers.delete("accept-encoding");
    // "required": nothing with a body leaves in clear, whatever its endpoint (the Anthropic and
    // Responses formats and count_tokens have no E2EE: refused, not sent unsealed).
    if (
      this.#e2eeMode === "required" && req.body !== undefined && req.body.length > 0 &&
      (kind === undefined || !receipted)
    ) {
      throw new AciVerificationError(
        "e2ee_unavailable",
        `${path || pathname} has no E2EE: with e2ee "required" it is not sent`,
      );
    }
    const sealKind = receipted && this.#e2eeMode !== "off" && req.body !== undefined
      ? kind
      : undefined;
    let sealed = this.#seal(req, sealKind, a);
    let res = await this.#send(req, sealed);
    if (sealed && res.status === 400 && await keyMismatch(res)) {
      // The keyset rotated under us: attest the new one (fresh nonce), seal to its key, resend once.
      await res.body?.cancel();
      a = await this.keysets.reattest();
      sealed = this.#seal(req, sealKind, a);
      res = await this.#send(req, sealed);
    }
    // Not verified here, so not said to be by anyone: a server's own `x-aci-verified` is dropped.
    if (!receipted || !res.ok) return withoutVerdict(res);

    const receiptId = res.headers.get("x-receipt-id");
    if (receiptId === null) {
      await res.body?.cancel();
      throw new AciVerificationError("receipt_missing", "the answer carries no x-receipt-id");
    }
    // A rotated keyset: attest the new one (fresh nonce) before trusting anything it signed.
    const served = res.headers.get("x-aci-keyset-digest");
    if (served !== null && !this.keysets.knows(served)) await this.keysets.reattest();
    if (sealed && !e2eeApplied(res.headers, sealed.ctx.algo)) {
      await res.body?.cancel();
      throw new AciVerificationError(
        "e2ee_failed",
        "the answer does not say it was encrypted to this request",
        { receiptId },
      );
    }
    const auth = new Headers();
    for (const h of AUTH_HEADERS) {
      const v = req.headers.get(h);
      if (v !== null) auth.set(h, v);
    }
    const requestBytes = sealed ? sealed.restored : (req.body ?? new Uint8Array());
    return this.#answer(res, { path, kind, a, sealed, receiptId, auth, requestBytes });
  }

  /** The request body sealed to the gateway's key, or null to send it in clear. */
  #seal(
    req: RequestParts,
    kind: E2eeEndpoint | undefined,
    at: AttestedGateway,
  ): SealedRequest | null {
    if (kind === undefined) return null;
    const mode = this.#e2eeMode;
    if (typeof at.e2ee === "string") {
      if (mode === "required") throw new AciVerificationError("e2ee_unavailable", at.e2ee);
      return null;
    }
    try {
      // Best effort ("auto"): tools and tool calls travel in clear either way, so seal the rest
      // (the X-E2EE-Clear-Tools opt-in); "required" refuses them (e2ee_unavailable).
      return sealRequestBody(kind, new TextDecoder().decode(req.body), at.e2ee, {
        random: this.#random,
        now: this.#now,
        clearTools: mode === "auto",
      });
    } catch (e) {
      if (mode !== "required") return null;
      throw new AciVerificationError("e2ee_unavailable", (e as Error).message, { cause: e });
    }
  }

  #send(req: RequestParts, s: SealedRequest | null): Promise<Response> {
    const headers = new Headers(req.headers);
    if (s) {
      headers.set("content-type", "application/json");
      for (const [k, v] of Object.entries(s.headers)) headers.set(k, v);
    }
    const body = s ? new TextEncoder().encode(s.wire) : req.body;
    return this.transport.send(
      req.url,
      { method: req.method, headers, body, signal: req.signal },
      this.keysets.tlsCheck,
    );
  }

  /** A receipted answer, released once its receipt verified (a stream: before its final event). */
  async #answer(res: Response, x: Exchange): Promise<Response> {
    const headers = new Headers(res.headers);
    headers.delete("content-length");
    headers.delete("content-encoding");
    const { sealed, kind } = x;
    const open = sealed
      ? (obj: Record<string, unknown>, stream: boolean) =>
        openResponse(kind!, obj, stream, sealed.ctx, sealed.clientSecret)
      : null;
    if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream") && res.body) {
      const end = this.#o.streamEnd;
      const stream = verifiedStream(res.body, {
        open: open ? (obj) => open(obj, true) : null,
        verify: async (wire) => {
          try {
            return await this.#verdict(x, wire);
          } catch (e) {
            return this.#fail(x, e);
          }
        },
        beforeFinal: end ? (v) => end.verified(v as Verdict, x.path) : undefined,
        onFailure: end ? (e) => end.failed(e as AciVerificationError, x.path) : undefined,
      });
      // The receipt is checked at the stream's end, before its final event.
      headers.set(
        "x-aci-verified",
        [...this.#shortNames([], x.a, sealed !== null), "receipt-at-end"].join(","),
      );
      return new Response(stream, { status: res.status, statusText: res.statusText, headers });
    }
    const wire = new Uint8Array(await res.arrayBuffer());
    let verdict: Verdict;
    try {
      verdict = await this.#verdict(x, wire);
    } catch (e) {
      return this.#fail(x, e);
    }
    let out: Uint8Array<ArrayBuffer> = wire;
    if (open) {
      try {
        const json: unknown = JSON.parse(new TextDecoder().decode(wire));
        if (isRecord(json)) open(json, false);
        out = new TextEncoder().encode(JSON.stringify(json));
      } catch (e) {
        return this.#fail(
          x,
          new AciVerificationError("e2ee_failed", (e as Error).message, {
            receiptId: x.receiptId,
            cause: e,
          }),
        );
      }
    }
    headers.set("x-aci-verified", verdict.verified.join(","));
    return new Response(out, { status: res.status, statusText: res.statusText, headers });
  }

  /** The answer's verdict once its receipt verified against the wire bytes. */
  async #verdict(x: Exchange, responseBytes: Uint8Array): Promise<Verdict> {
    const checks = [
      ...x.a.checks,
      this.#pinNote(x.a),
      ...await this.receipts.check({
        receiptId: x.receiptId,
        endpoint: x.path,
        auth: x.auth,
        requestBytes: x.requestBytes,
        responseBytes,
      }),
    ];
    const verdict: Verdict = {
      endpoint: x.path,
      receiptId: x.receiptId,
      phase: "answer",
      ok: true,
      verified: this.#shortNames(checks, x.a, x.sealed !== null),
      checks,
    };
    this.#o.onVerdict?.(verdict);
    return verdict;
  }

  /** Reports a failed answer and throws its error. */
  #fail(x: Exchange, e: unknown): never {
    const err = e instanceof AciVerificationError
      ? e
      : new AciVerificationError("receipt_invalid", e instanceof Error ? e.message : String(e), {
        receiptId: x.receiptId,
        cause: e,
      });
    this.#o.onVerdict?.({
      endpoint: x.path,
      receiptId: x.receiptId,
      phase: "answer",
      ok: false,
      verified: [],
      checks: [...err.checks],
      error: err,
    });
    throw err;
  }

  #pinNote(a: AttestedGateway): Check {
    const plain = this.#base.protocol === "http:";
    if (!this.transport.pinning) {
      return check(
        "tls.pin",
        true,
        `TLS pinning is impossible in this runtime (browser fetch hides the peer certificate): ${
          plain ? "plain http on loopback" : "relying on E2EE"
        }`,
      );
    }
    if (plain) return check("tls.pin", true, "plain http on loopback: no TLS to pin");
    return check(
      "tls.pin",
      true,
      `every connection's key is one of ${a.tlsKeys.size} attested key(s)`,
    );
  }

  #shortNames(checks: Check[], a: AttestedGateway, e2ee: boolean): string[] {
    const names = ["attestation", a.dev ? "dev-evidence" : "hardware-quote", "measurement"];
    if (this.#base.protocol === "https:" && this.transport.pinning) names.push("tls-pin");
    if (e2ee) names.push("e2ee");
    const has = (n: string) => checks.some((c) => c.name === n && c.ok);
    if (has("receipt.signature")) names.push("receipt-signature");
    if (has("receipt.request_body_hash") && has("receipt.response_body_hash")) {
      names.push("body-hashes");
    }
    if (this.#policy.require_verified_upstream && has("receipt.upstream_verified")) {
      names.push("upstream-verified");
    }
    if (has("receipt.log_inclusion")) names.push("log-inclusion");
    if (has("receipt.log_inclusion_deferred")) names.push("log-inclusion-deferred");
    return names;
  }
}

/** `res` without an `x-aci-verified` header (only this client's verdict may set one). */
function withoutVerdict(res: Response): Response {
  if (!res.headers.has("x-aci-verified")) return res;
  const headers = new Headers(res.headers);
  headers.delete("x-aci-verified");
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
}
