/**
 * The gateway side of E2EE v2 (spec/e2ee-v2.md): validates the five request
 * headers, decrypts every encrypted request field in place with the attested
 * service key, claims the (service key, nonce) pair in the shared store, and returns the
 * restored body with a session that encrypts the generated fields of the
 * answer (whole, or each streamed chunk) to the client's key. Errors are
 * `GatewayError`s of the spec's `e2ee_*` kinds; nothing decrypted is ever
 * put in a message.
 */
import { GatewayError, parseJsonBody } from "../http/mod.ts";
import type { Translator } from "../formats/mod.ts";
import {
  type AadContext,
  canEncryptTo,
  E2EE_VERSION,
  encryptField,
  normalizePublicKey,
  requestAad,
  responseAad,
} from "./crypto.ts";
import {
  E2EE_ENDPOINTS,
  type E2eeEndpoint,
  requestSlots,
  responseIdFor,
  responseSlots,
} from "./fields.ts";
import type { E2eeKeyring } from "./keys.ts";
import type { ReplayGuard } from "./replay.ts";
import { checkClearText, CLEAR_TOOLS_HEADER, refuseClearAnswer } from "./clear_text.ts";

/** What the gateway's E2EE step needs (assembled once, passed down). */
export interface E2eeDeps {
  /** The current keyset's E2EE keys. */
  keyring: () => E2eeKeyring;
  replay: ReplayGuard;
  /** Epoch milliseconds. */
  now: () => number;
  randomBytes: (n: number) => Uint8Array;
}

/**
 * Encrypted fields one request may carry. Each costs an ECDH (~1 ms of pure-JS
 * curve arithmetic) before admission runs, so a body of thousands would stall
 * the process; a conversation of a thousand messages still fits.
 */
export const MAX_E2EE_FIELDS = 1024;

/** Fields decrypted per turn of the event loop. */
const DECRYPT_BATCH = 8;

/** §7: |now − ts| ≤ 300 s. */
export const E2EE_WINDOW_SECONDS = 300;

const V2_HEADERS = [
  "x-e2ee-version",
  "x-client-pub-key",
  "x-model-pub-key",
  "x-e2ee-nonce",
  "x-e2ee-timestamp",
] as const;

/** Whether the request asks for E2EE (any v2 header present). */
export function e2eeRequested(h: Headers): boolean {
  return V2_HEADERS.some((n) => h.has(n));
}

/** Encrypts the answer's generated fields; its headers go on the successful response. */
export interface E2eeSession {
  readonly headers: Record<string, string>;
  /** Encrypt the generated fields of a whole response object in place. */
  sealWhole(answer: unknown): void;
  /** A translator whose every chunk has its generated fields encrypted before it is written. */
  sealStream(inner: Translator): Translator;
}

export interface OpenedRequest {
  /** The restored request object (what the ordinary pipeline validates and forwards). */
  body: Record<string, unknown>;
  /** Its compact JSON: what `request.received` hashes (§8). */
  restored: Uint8Array;
  session: E2eeSession;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

const fail = (kind: ConstructorParameters<typeof GatewayError>[0], message: string) =>
  new GatewayError(kind, message);

/**
 * Null when the request carries no E2EE v2 header. Otherwise the decrypted,
 * restored request, or a thrown `e2ee_*` GatewayError (before any byte of it
 * could go upstream).
 */
// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
export async function openE2ee(
  deps: E2eeDeps,
  h: Headers,
  endpoint: string,
  wire: Uint8Array,
): Promise<OpenedRequest | null> {
  if (!e2eeRequested(h)) return null;
  const kind = E2EE_ENDPOINTS[endpoint];
  if (kind === undefined) {
    throw fail("e2ee_unsupported_endpoint", `E2EE v2 is not supported on ${endpoint}`);
  }
  // No downgrade to the legacy (no-AAD) scheme.
  if (h.has("x-signing-algo")) {
    throw fail("e2ee_invalid_version", "X-Signing-Algo must not be sent with E2EE v2 headers");
  }
  const version = h.get("x-e2ee-version");
  if (version === null) throw fail("e2ee_header_missing", "missing X-E2EE-Version header");
  if (version !== E2EE_VERSION) {
    throw fail("e2ee_invalid_version", "unsupported X-E2EE-Version; this service supports 2");
  }
  const [clientKey, modelKey, nonce, tsText] = V2_HEADERS.slice(1).map((n) => h.get(n));
  if (clientKey === null || modelKey === null || nonce === null || tsText === null) {
    const missing = V2_HEADERS.filter((n) => !h.has(n)).join(", ");
    throw fail("e2ee_header_missing", `missing E2EE v2 header(s): ${missing}`);
  }
  if (!/^[0-9a-fA-F]{64}$/.test(nonce)) {
    throw fail("e2ee_invalid_nonce", "X-E2EE-Nonce must be exactly 64 hexadecimal characters");
  }
  const ts = /^[0-9]{1,15}$/.test(tsText) ? Number(tsText) : NaN;
  const nowS = Math.floor(deps.now() / 1000);
  if (!Number.isSafeInteger(ts) || Math.abs(nowS - ts) > E2EE_WINDOW_SECONDS) {
    throw fail(
      "e2ee_invalid_timestamp",
      `X-E2EE-Timestamp must be Unix seconds within ${E2EE_WINDOW_SECONDS} s of the service clock`,
    );
  }
  const keyring = deps.keyring(); // one keyset for the whole request, even across a rotation
  const serviceKey = keyring.find(modelKey);
  if (serviceKey === null) {
    throw fail(
      "e2ee_model_key_mismatch",
      "X-Model-Pub-Key is not an E2EE key of this service's current attested keyset",
    );
  }
  const client = normalizePublicKey(serviceKey.algo, clientKey);
  if (client === null || !canEncryptTo(serviceKey.algo, client)) {
    throw fail("e2ee_invalid_public_key", `X-Client-Pub-Key is not a valid ${serviceKey.algo} key`);
  }
  const parsed = parseJsonBody(wire);
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw fail("e2ee_invalid_payload_model", "the request body must be an object with a model");
  }
  const body = parsed as Record<string, unknown>;
  if (typeof body["model"] !== "string") {
    throw fail("e2ee_invalid_payload_model", "the top-level model must be present and a string");
  }
  const ctx: AadContext = { algo: serviceKey.algo, model: body["model"], nonce, ts };
  // Parameters that would put text in clear are refused before any ECDH is spent.
  const clearTools = checkClearText(kind, body, nonce, h.get(CLEAR_TOOLS_HEADER));
  const slots = requestSlots(kind, body);
  if (slots.length === 0) throw fail("e2ee_decryption_failed", "no encrypted field in the request");
  if (slots.length > MAX_E2EE_FIELDS) {
    throw fail("invalid_request", `at most ${MAX_E2EE_FIELDS} encrypted fields per request`);
  }
  for (const [i, s] of slots.entries()) {
    // Decrypted in batches that yield, so one request of a thousand fields
    // (an ECDH each) does not hold the event loop for a second.
    if (i > 0 && i % DECRYPT_BATCH === 0) await new Promise((r) => setTimeout(r, 0));
    const plain = keyring.decrypt(serviceKey, s.get() as string, requestAad(ctx, s.path));
    let text: string | null = null;
    if (plain !== null) {
      try {
        text = decoder.decode(plain);
      } catch {
        text = null;
      }
    }
    if (text === null || !text.isWellFormed()) {
      throw fail("e2ee_decryption_failed", `field ${s.path} could not be decrypted`);
    }
    s.set(s.wholeContent ? restoreContent(text) : text);
  }
  // Claimed only once every field authenticated: a forged copy cannot burn a client's nonce.
  const first = await deps.replay.claim(
    // Not the client key: the AAD does not bind it, so it must not make a replay new.
    { serviceKey: serviceKey.publicKeyHex, nonce },
    (ts + E2EE_WINDOW_SECONDS + 1) * 1000,
  );
  if (!first) {
    throw fail("e2ee_replay_detected", "this E2EE nonce was already used with this service key");
  }
  return {
    body,
    restored: encoder.encode(JSON.stringify(body)),
    session: createSession(kind, ctx, client, deps.randomBytes, clearTools),
  };
}

/** §5: a whole-content plaintext that parses as a JSON array is structured content. */
function restoreContent(text: string): unknown {
  if (!text.trimStart().startsWith("[")) return text;
  try {
    const v = JSON.parse(text);
    return Array.isArray(v) ? v : text;
  } catch {
    return text;
  }
}

function createSession(
  kind: E2eeEndpoint,
  ctx: AadContext,
  clientKey: string,
  randomBytes: (n: number) => Uint8Array,
  clearTools: boolean,
): E2eeSession {
  const seal = (obj: unknown, stream: boolean) => {
    if (obj === null || typeof obj !== "object" || Array.isArray(obj)) return;
    const o = obj as Record<string, unknown>;
    if (stream) dropEmptyDeltaContent(o);
    // Nothing generated may leave in clear under X-E2EE-Applied (tool calls only by opt-in).
    refuseClearAnswer(kind, o, clearTools);
    const id = responseIdFor(o);
    for (const s of responseSlots(kind, o, stream)) {
      const v = s.get();
      if (!s.json && typeof v !== "string") {
        // Never pass generated content on in clear under an E2EE-applied response.
        throw new GatewayError("upstream_error", `upstream sent a non-string ${s.path}`);
      }
      const plain = encoder.encode(s.json ? JSON.stringify(v) : v as string);
      s.set(encryptField(ctx.algo, clientKey, plain, responseAad(ctx, id, s.path), randomBytes));
    }
  };
  return {
    headers: { "x-e2ee-applied": "true", "x-e2ee-version": E2EE_VERSION, "x-e2ee-algo": ctx.algo },
    sealWhole: (answer) => seal(answer, false),
    sealStream: (inner) => ({
      ...inner,
      chunk(c: never, event?: string) {
        seal(c, true);
        return inner.chunk(c, event);
      },
    }),
  };
}

/** §5: an empty-string delta content may be omitted (it would only reveal a chunk boundary). */
function dropEmptyDeltaContent(chunk: Record<string, unknown>): void {
  const choices = chunk["choices"];
  if (!Array.isArray(choices)) return;
  for (const c of choices) {
    const d = c && typeof c === "object" ? (c as Record<string, unknown>)["delta"] : undefined;
    if (d && typeof d === "object" && (d as Record<string, unknown>)["content"] === "") {
      delete (d as Record<string, unknown>)["content"];
    }
  }
}
