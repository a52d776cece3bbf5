/**
 * The E2EE v2 client, shipped with the gateway: fetches the attestation
 * report with a fresh nonce and verifies it (keyset digest, report data,
 * quote), picks the attested E2EE key, and returns a `fetch`-compatible
 * function that encrypts the prompt fields of every chat, completions and
 * embeddings request and decrypts the generated fields of the answer, whole
 * or streamed. Passed as the `openai` SDK's `fetch`, the unmodified SDK works
 * end to end:
 *
 *   const e2ee = await createE2eeFetch({ baseURL, allowDevEvidence: true });
 *   const client = new OpenAI({ baseURL, apiKey, fetch: e2ee });
 *
 * It refuses a key that is not in the verified keyset, and a successful
 * answer that does not say it was encrypted to this request's key.
 */
import { randomBytes } from "./random.ts";
import { CLEAR_TOOLS_HEADER, clearToolsNonce, usesTools } from "../e2ee/clear_text.ts";
import { bytesToHex } from "../aci/hex.ts";
import { allPassed } from "../verify/checks.ts";
import { type QuoteCheck, verifyReport } from "../verify/report.ts";
import { isRecord } from "../verify/json_shape.ts";
import {
  type AadContext,
  E2EE_VERSION,
  type E2eeAlgo,
  encryptField,
  generateKeyPair,
  isE2eeAlgo,
  normalizePublicKey,
  requestAad,
  X25519_ALGO,
} from "../e2ee/crypto.ts";
import { E2EE_ENDPOINTS, type E2eeEndpoint, requestSlots } from "../e2ee/fields.ts";
import { openResponse, sseDecryptor } from "./e2ee_response.ts";

export { openResponse, sseDecryptor };

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface E2eeClientOptions {
  /** The gateway's API base, e.g. `https://gateway.example/v1`. */
  baseURL: string;
  /** The transport (default: the global fetch). */
  fetch?: Fetch;
  /** Preferred suite (default X25519; the other suite is used when the keyset lacks it). */
  algo?: E2eeAlgo;
  /** Encrypt to this service key only: refused unless it is in the verified keyset. */
  modelPublicKey?: string;
  /** Accept development (non-hardware) evidence: for local development only. */
  allowDevEvidence?: boolean;
  /** Hardware quote verification (TDX / SEV-SNP); without it a hardware quote fails. */
  quoteCheck?: QuoteCheck;
  /** Structured content arrays: encrypted as a whole (default, hides their shape) or per part. */
  contentArrays?: "whole" | "parts";
  /**
   * Accept that tool definitions, tool choice and the model's tool calls (names and
   * arguments) travel in clear: the request's nonce then commits to its exact tool
   * parameters (`X-E2EE-Clear-Tools`, docs/e2ee.md). Without it a request with tools throws.
   */
  clearTools?: boolean;
  /**
   * Called once per E2EE exchange, with what a receipt check needs (see `task verify`).
   * Not awaited: it may await `wireResponse`, which settles once the answer has been read.
   */
  onExchange?: (x: E2eeExchange) => unknown;
  now?: () => number;
  randomBytes?: (n: number) => Uint8Array;
}

/** One request's E2EE facts, for verifying its receipt afterwards. */
export interface E2eeExchange {
  endpoint: string;
  receiptId: string | null;
  /** The compact JSON the gateway hashes as `request.received` (§8). */
  restoredRequest: Uint8Array;
  /** The exact response bytes received (ciphertext and SSE framing included), once complete. */
  wireResponse: Promise<Uint8Array>;
  /** What `task verify --e2ee-context` reads to check each field's tag and AAD. */
  context: {
    algo: E2eeAlgo;
    model: string;
    nonce: string;
    timestamp: number;
    client_private_key: string;
  };
}

/** The attested key this client encrypts to. */
export interface AttestedKey {
  key_id: string;
  algo: E2eeAlgo;
  public_key: string;
  keysetDigest: string;
}

export type E2eeFetch = Fetch & {
  /** The key currently encrypted to (re-attested when the gateway rotates). */
  attestedKey(): AttestedKey;
};

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Fetch and verify a fresh report, and select the E2EE key to use from its keyset. */
async function attestE2eeKey(opts: E2eeClientOptions): Promise<AttestedKey> {
  const f = opts.fetch ?? fetch;
  const random = opts.randomBytes ?? randomBytes;
  const nonce = bytesToHex(random(32));
  const url = new URL(`${opts.baseURL.replace(/\/+$/, "")}/aci/attestation`);
  url.searchParams.set("nonce", nonce);
  const res = await f(url, { headers: { accept: "application/json" } });
  if (!res.ok) throw new Error(`E2EE: attestation report answered HTTP ${res.status}`);
  const report: unknown = await res.json();
  const checks = await verifyReport(report, {
    nonce,
    allowDevEvidence: opts.allowDevEvidence,
    quoteCheck: opts.quoteCheck,
    now: opts.now ?? Date.now,
  });
  if (!allPassed(checks)) {
    const failed = checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
    throw new Error(`E2EE: the attestation report did not verify (${failed.join("; ")})`);
  }
  const key = e2eeKeyFromReport(report, opts);
  if (typeof key === "string") throw new Error(`E2EE: ${key}`);
  return key;
}

/**
 * The E2EE key to encrypt to, chosen from a report that already verified, or
 * why there is none.
 */
export function e2eeKeyFromReport(
  report: unknown,
  opts: Pick<E2eeClientOptions, "algo" | "modelPublicKey">,
): AttestedKey | string {
  if (!isRecord(report) || !isRecord(report["attestation"])) return "not a report";
  const caps = report["service_capabilities"];
  const versions = isRecord(caps) ? caps["supported_e2ee_versions"] : undefined;
  if (!Array.isArray(versions) || !versions.includes(E2EE_VERSION)) {
    return "the attested service does not advertise E2EE v2";
  }
  const keyset = report["attestation"]["workload_keyset"];
  const listed = isRecord(keyset) && Array.isArray(keyset["e2ee_public_keys"])
    ? keyset["e2ee_public_keys"].filter((k): k is Record<string, string> =>
      isRecord(k) && isE2eeAlgo(k["algo"]) && typeof k["public_key"] === "string" &&
      typeof k["key_id"] === "string"
    )
    : [];
  let pick: Record<string, string> | undefined;
  if (opts.modelPublicKey !== undefined) {
    pick = listed.find((k) =>
      normalizePublicKey(k.algo as E2eeAlgo, opts.modelPublicKey!) ===
        normalizePublicKey(k.algo as E2eeAlgo, k.public_key)
    );
    if (!pick) return "the given service key is not in the verified keyset";
  } else {
    const want = opts.algo ?? X25519_ALGO;
    pick = listed.find((k) => k.algo === want) ?? listed[0];
    if (!pick) return "the verified keyset lists no E2EE v2 key";
  }
  const algo = pick.algo as E2eeAlgo;
  const publicKey = normalizePublicKey(algo, pick.public_key);
  if (publicKey === null) return "the attested key is malformed";
  return {
    key_id: pick.key_id,
    algo,
    public_key: publicKey,
    keysetDigest: report["workload_keyset_digest"] as string,
  };
}

/** One request sealed to an attested key: what to send, and what opens the answer. */
export interface SealedRequest {
  /** The body to send (prompt fields encrypted). */
  wire: string;
  /** The compact JSON the gateway hashes as `request.received` (§8). */
  restored: Uint8Array;
  /** The five E2EE v2 request headers. */
  headers: Record<string, string>;
  ctx: AadContext;
  clientSecret: Uint8Array;
}

/** Encrypts a request body (JSON text) to `key`; throws when it has nothing E2EE can encrypt. */
export function sealRequestBody(
  kind: E2eeEndpoint,
  bodyText: string,
  key: AttestedKey,
  o: {
    random: (n: number) => Uint8Array;
    now: () => number;
    contentArrays?: "whole" | "parts";
    /** Accept tools and tool calls in clear (committed to by the nonce, X-E2EE-Clear-Tools). */
    clearTools?: boolean;
  },
): SealedRequest {
  const plain = JSON.parse(bodyText);
  if (!isRecord(plain) || typeof plain["model"] !== "string") {
    throw new Error("E2EE: the request body must be a JSON object with a string model");
  }
  const client = generateKeyPair(key.algo);
  // Tools go in clear: only when the caller accepts it, committed to by the nonce.
  let toolSalt: string | null = null;
  if (kind === "chat" && usesTools(plain)) {
    if (o.clearTools !== true) {
      throw new Error(
        "E2EE: tools and tool calls travel in clear; pass clearTools: true to accept that",
      );
    }
    toolSalt = bytesToHex(o.random(32));
  }
  const ctx: AadContext = {
    algo: key.algo,
    model: plain["model"],
    nonce: toolSalt === null ? bytesToHex(o.random(32)) : clearToolsNonce(toolSalt, plain),
    ts: Math.floor(o.now() / 1000),
  };
  const { wire, restored } = sealRequest(kind, plain, ctx, key.public_key, o.random, o);
  return {
    wire,
    restored,
    ctx,
    clientSecret: client.secretKey,
    headers: {
      "x-e2ee-version": E2EE_VERSION,
      "x-client-pub-key": bytesToHex(client.publicKey),
      "x-model-pub-key": key.public_key,
      "x-e2ee-nonce": ctx.nonce,
      "x-e2ee-timestamp": String(ctx.ts),
      ...(toolSalt === null ? {} : { [CLEAR_TOOLS_HEADER]: toolSalt }),
    },
  };
}

/** Whether a successful answer says it was encrypted for this request's suite. */
export function e2eeApplied(headers: Headers, algo: E2eeAlgo): boolean {
  return headers.get("x-e2ee-applied") === "true" &&
    headers.get("x-e2ee-version") === E2EE_VERSION && headers.get("x-e2ee-algo") === algo;
}

/** Attest once, then encrypt every E2EE-capable request with the attested key. */
export async function createE2eeFetch(opts: E2eeClientOptions): Promise<E2eeFetch> {
  const c = new E2eeClient(opts, await attestE2eeKey(opts));
  return Object.assign(
    (input: string | URL | Request, init?: RequestInit) => c.fetch(input, init),
    { attestedKey: () => c.key },
  );
}

/** The attested key (attested again on a rotation) and one method per step of a request. */
class E2eeClient {
  key: AttestedKey;
  #opts: E2eeClientOptions;
  #base: Fetch;
  #random: (n: number) => Uint8Array;
  #now: () => number;
  #basePath: string;

  constructor(opts: E2eeClientOptions, key: AttestedKey) {
    this.#opts = opts;
    this.key = key;
    this.#base = opts.fetch ?? fetch;
    this.#random = opts.randomBytes ?? randomBytes;
    this.#now = opts.now ?? Date.now;
    this.#basePath = new URL(opts.baseURL).pathname.replace(/\/+$/, "");
  }

  async fetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
    if (input instanceof Request) throw new Error("E2EE: pass a URL and init, not a Request");
    const url = new URL(input);
    const basePath = this.#basePath;
    const path = url.pathname.startsWith(basePath) ? url.pathname.slice(basePath.length) : "";
    const kind = E2EE_ENDPOINTS[`/v1${path}`];
    if ((init.method ?? "GET").toUpperCase() !== "POST" || kind === undefined) {
      const base = this.#base; // called unbound: a browser's fetch rejects another `this`
      return base(input, init);
    }
    const res = await this.#send(url, init, kind);
    if (res.status !== 400 || res.headers.get("content-type")?.includes("json") !== true) {
      return res;
    }
    // A rotated keyset: attest again (fresh nonce) and resend once, encrypted to the new key.
    const body = await res.clone().json().catch(() => null);
    if (body?.error?.type !== "e2ee_model_key_mismatch") return res;
    this.key = await attestE2eeKey(this.#opts);
    return await this.#send(url, init, kind);
  }

  async #send(url: URL, init: RequestInit, kind: E2eeEndpoint): Promise<Response> {
    if (typeof init.body !== "string") throw new Error("E2EE: the request body must be a string");
    const key = this.key;
    const opts = this.#opts;
    const sealed = sealRequestBody(kind, init.body, key, {
      random: this.#random,
      now: this.#now,
      ...opts,
    });
    const { wire, restored, ctx } = sealed;
    const secretKey = sealed.clientSecret;
    const headers = new Headers(init.headers);
    headers.delete("content-length");
    headers.set("content-type", "application/json");
    for (const [k, v] of Object.entries(sealed.headers)) headers.set(k, v);
    const base = this.#base;
    const res = await base(url, { ...init, headers, body: wire });
    let settle: (b: Uint8Array) => void = () => {};
    const wireResponse = new Promise<Uint8Array>((r) => (settle = r));
    opts.onExchange?.({
      endpoint: url.pathname.slice(this.#basePath.length) || url.pathname,
      receiptId: res.headers.get("x-receipt-id"),
      restoredRequest: restored,
      wireResponse,
      context: {
        algo: key.algo,
        model: ctx.model,
        nonce: ctx.nonce,
        timestamp: ctx.ts,
        client_private_key: bytesToHex(secretKey),
      },
    });
    if (!res.ok) {
      // Error bodies are plaintext by the spec; nothing to decrypt.
      const body = new Uint8Array(await res.arrayBuffer());
      settle(body);
      return new Response(body, { status: res.status, headers: res.headers });
    }
    if (!e2eeApplied(res.headers, key.algo)) {
      await res.body?.cancel();
      throw new Error("E2EE: the gateway answered without E2EE v2 applied to this request");
    }
    const outHeaders = new Headers(res.headers);
    outHeaders.delete("content-length");
    if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
      return new Response(
        sseDecryptor(res.body!, (o) => openResponse(kind, o, true, ctx, secretKey), settle),
        { status: res.status, headers: outHeaders },
      );
    }
    const bytes = new Uint8Array(await res.arrayBuffer());
    settle(bytes);
    const json = JSON.parse(decoder.decode(bytes));
    if (isRecord(json)) openResponse(kind, json, false, ctx, secretKey);
    return new Response(JSON.stringify(json), { status: res.status, headers: outHeaders });
  }
}

/** Encrypt every prompt field of a plaintext request; also return the restored compact JSON. */
function sealRequest(
  kind: E2eeEndpoint,
  plain: Record<string, unknown>,
  ctx: AadContext,
  serviceKey: string,
  random: (n: number) => Uint8Array,
  opts: { contentArrays?: "whole" | "parts" },
): { wire: string; restored: Uint8Array } {
  if (kind === "chat" && Array.isArray(plain["messages"])) {
    for (const m of plain["messages"]) {
      if (!isRecord(m)) continue;
      const c = m["content"];
      // A string that parses as a JSON array would be restored as structured content (§5):
      // send it as one text part instead, which means the same to the model.
      if (typeof c === "string" && looksLikeArray(c)) m["content"] = [{ type: "text", text: c }];
      else if (Array.isArray(c) && (opts.contentArrays ?? "whole") === "whole") {
        m["content"] = JSON.stringify(c);
      }
    }
  }
  const sealed = structuredClone(plain);
  const slots = requestSlots(kind, sealed);
  if (slots.length === 0) throw new Error("E2EE: the request has no field E2EE v2 can encrypt");
  for (const s of slots) {
    const text = s.get() as string;
    s.set(
      encryptField(ctx.algo, serviceKey, encoder.encode(text), requestAad(ctx, s.path), random),
    );
  }
  // The gateway restores whole content that parses as an array to the array itself.
  for (const s of requestSlots(kind, plain)) {
    if (s.wholeContent && looksLikeArray(s.get() as string)) s.set(JSON.parse(s.get() as string));
  }
  return { wire: JSON.stringify(sealed), restored: encoder.encode(JSON.stringify(plain)) };
}

function looksLikeArray(s: string): boolean {
  try {
    return Array.isArray(JSON.parse(s));
  } catch {
    return false;
  }
}
