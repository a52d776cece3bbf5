/**
 * Reading request bodies: a hard size limit enforced while streaming (never
 * trusting Content-Length alone), the JSON content type, and strict parsing
 * that rejects invalid UTF-8 and duplicate object keys (two parsers reading
 * one body differently would defeat the receipt's body hash).
 */
import { GatewayError } from "./errors.ts";
import { concatBytes } from "../aci/mod.ts";
import { type After, timerAfter } from "./deadlines.ts";
import { Buffer, isUtf8 } from "node:buffer";
import {
  decoder,
  duplicateKey,
  surrogateEscape,
  tooDeep,
  unpairedSurrogate,
  wellFormed,
} from "./json_strict.ts";
import { parseInPieces, PIECES_MIN_BYTES } from "./json_pieces.ts";

/** Bounds on reading one body beyond its size: a deadline and reserved memory. */
export interface BodyIntake {
  /** The whole body, budget wait included, must arrive within this. */
  timeoutMs: number;
  /** Reserves `total` body bytes before they are read (see body_budget.ts). */
  reserve(total: number, signal: AbortSignal): Promise<void>;
  /** Arms the deadline (the gateway's wheel, http/deadlines.ts); default: a runtime timer. */
  after?: After;
}

/** Declared bodies up to this size are read natively in one call (the fast path). */
const NATIVE_READ_MAX = 64 * 1024;

/** Reservation steps for a body of undeclared length (chunked). */
const CHUNKED_STEP = 1024 * 1024;

export async function readBody(
  req: Request,
  maxBytes: number,
  intake?: BodyIntake,
): Promise<Uint8Array> {
  const declared = req.headers.get("content-length");
  if (declared !== null) {
    if (!/^\d+$/.test(declared)) {
      throw new GatewayError("invalid_request", "invalid Content-Length");
    }
    if (Number(declared) > maxBytes) throw tooLarge(maxBytes);
  }
  if (!intake) return await readWithin(req, maxBytes, declared, null, null);
  const deadline = new AbortController();
  const timer = (intake.after ?? timerAfter)(
    intake.timeoutMs,
    () => deadline.abort(timedOut(intake.timeoutMs)),
  );
  const late = new Promise<never>((_, reject) =>
    deadline.signal.addEventListener("abort", () => reject(deadline.signal.reason), {
      once: true,
    })
  );
  late.catch(() => {});
  try {
    if (declared !== null) await intake.reserve(Number(declared), deadline.signal);
    const reserve = (n: number) => intake.reserve(n, deadline.signal);
    return await readWithin(req, maxBytes, declared, reserve, late);
  } finally {
    timer.cancel();
  }
}

async function readWithin(
  req: Request,
  maxBytes: number,
  declared: string | null,
  reserve: ((total: number) => Promise<void>) | null,
  late: Promise<never> | null,
): Promise<Uint8Array> {
  const within = <T>(p: Promise<T>): Promise<T> => late ? Promise.race([p, late]) : p;
  if (declared !== null && Number(declared) <= NATIVE_READ_MAX) {
    // The server reads exactly the declared length, which fits the limit: take the
    // runtime's native whole-body read instead of pumping a JS stream.
    const whole = req.bytes();
    whole.catch(() => {});
    try {
      return await within(whole);
    } catch (e) {
      if (e instanceof GatewayError) throw e;
      throw new GatewayError("invalid_request", "request body could not be read");
    }
  }
  if (declared !== null && req.body) {
    // A large declared body goes into one buffer V8 allocates (and so counts towards
    // collection): the native read's buffers are invisible to the collector, and a
    // flood of 4 MB bodies read that way, two at a time, still left over 1 GB resident.
    const out = new Uint8Array(Number(declared));
    let off = 0;
    const reader = req.body.getReader();
    try {
      while (true) {
        const { done, value } = await within(reader.read());
        if (done) break;
        if (off + value.byteLength > out.length) throw tooLarge(maxBytes);
        out.set(value, off);
        off += value.byteLength;
      }
    } catch (e) {
      await reader.cancel().catch(() => {});
      if (e instanceof GatewayError) throw e;
      throw new GatewayError("invalid_request", "request body could not be read");
    }
    if (off !== out.length) throw new GatewayError("invalid_request", "request body is truncated");
    return out;
  }
  if (!req.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  let reserved = 0;
  const reader = req.body.getReader();
  try {
    while (true) {
      if (reserve && total >= reserved) {
        reserved = Math.min(maxBytes, reserved + CHUNKED_STEP);
        await reserve(reserved);
      }
      const { done, value } = await within(reader.read());
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) {
        await reader.cancel().catch(() => {});
        throw tooLarge(maxBytes);
      }
      chunks.push(value);
    }
  } catch (e) {
    if (e instanceof GatewayError) {
      if (e.kind === "request_timeout") await reader.cancel().catch(() => {});
      throw e;
    }
    throw new GatewayError("invalid_request", "request body could not be read");
  }
  if (chunks.length === 1) return chunks[0];
  return concatBytes(chunks, total);
}

/**
 * Before each long synchronous step on a large body (hashing, parsing: tens of
 * milliseconds at 4 MB), lets the requests queued behind it run first, so one
 * key's large bodies do not stall every other key's request for their sum.
 */
export function largeBodyTurn(bytes: Uint8Array): Promise<void> | undefined {
  return bytes.byteLength >= LARGE_BODY ? new Promise((r) => setTimeout(r, 0)) : undefined;
}

const LARGE_BODY = 1024 * 1024;

function timedOut(ms: number): GatewayError {
  // Closing the connection: its unread rest must not be taken for the next request.
  return new GatewayError("request_timeout", `request body not received within ${ms} ms`, {
    headers: { connection: "close" },
  });
}

function tooLarge(max: number): GatewayError {
  return new GatewayError("payload_too_large", `request body exceeds the limit of ${max} bytes`);
}

/** Require a JSON content type on POST bodies. */
export function requireJsonContentType(req: Request): void {
  const ct = req.headers.get("content-type");
  if (ct === null) return; // many clients omit it for JSON; the body is still parsed strictly
  const mime = ct.split(";")[0].trim().toLowerCase();
  if (mime !== "application/json" && !mime.endsWith("+json")) {
    throw new GatewayError("unsupported_media_type", "Content-Type must be application/json");
  }
}

/**
 * A request body parsed once: its bytes, its value, and where each member
 * of a top-level object sits in the bytes (found by the structure scan, in the
 * same pass), so an upstream body that differs from it in a few members can be
 * spliced from these bytes (http/json_splice.ts) instead of serialized again.
 */
export interface JsonDocument {
  bytes: Uint8Array;
  value: unknown;
  /**
   * Top-level object members: decoded key → [start, end) byte offsets of the
   * member (key, colon and value, with the whitespace around them; without the
   * separating comma or the braces). Null when the document is not an object.
   */
  members: ReadonlyMap<string, readonly [number, number]> | null;
}

/**
 * Parse a JSON body strictly: valid UTF-8, valid JSON, no duplicate keys,
 * bounded nesting, no unpaired surrogate escapes.
 */
export function parseJsonBody(bytes: Uint8Array, maxDepth = 64): unknown {
  return parseJsonDocument(bytes, maxDepth).value;
}

/** {@link parseJsonBody}, also giving the top-level members' byte ranges. */
export function parseJsonDocument(bytes: Uint8Array, maxDepth = 64): JsonDocument {
  if (!isUtf8(bytes)) throw new GatewayError("invalid_request", "request body is not valid UTF-8");
  if (bytes.byteLength >= PIECES_MIN_BYTES) {
    // A large body's one text would be a fresh large object (docs/decisions/prompt-pieces.md).
    const pieces = parseInPieces(bytes, maxDepth);
    if (pieces !== null) return { bytes, value: pieces.value, members: pieces.members };
  }
  const text = decoder.decode(bytes);
  const members = checkStructure(text, maxDepth);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    if (text.trim() === "") {
      throw new GatewayError("invalid_request", "request body is empty; expected JSON");
    }
    throw new GatewayError("invalid_request", "request body is not valid JSON");
  }
  // Only a `\uD8xx`-style escape can produce an unpaired surrogate (the fatal
  // decoder refuses them as raw bytes), so most bodies skip the walk.
  if (surrogateEscape(text) && !wellFormed(value)) {
    throw unpairedSurrogate();
  }
  return { bytes, value, members: byteRanges(text, bytes, members) };
}

/**
 * Text offsets → byte offsets. A text as long as its bytes is ASCII (any other
 * character takes more UTF-8 bytes than UTF-16 units), where they coincide;
 * otherwise the UTF-8 length of each span between marks is added up (natively).
 */
function byteRanges(
  text: string,
  bytes: Uint8Array,
  members: Map<string, [number, number]> | null,
): Map<string, [number, number]> | null {
  if (members === null || text.length === bytes.length) return members;
  let at = 0;
  let byte = 0;
  const toByte = (i: number) => {
    byte += Buffer.byteLength(text.slice(at, i), "utf8");
    at = i;
    return byte;
  };
  // Members are in text order and do not overlap: one forward pass converts them.
  for (const r of members.values()) {
    r[0] = toByte(r[0]);
    r[1] = toByte(r[1]);
  }
  return members;
}

/**
 * One linear scan over the text for nesting depth and duplicate keys, which
 * also notes the top-level object's members (text offsets, see
 * {@link JsonDocument}; null when the text is not an object). Invalid JSON is
 * left for JSON.parse to reject; this scan only needs to be right on valid JSON.
 */
function checkStructure(text: string, maxDepth: number): Map<string, [number, number]> | null {
  const stack: (Set<string> | null)[] = [];
  let expectKey = false;
  let members: Map<string, [number, number]> | null = null;
  let memberStart = 0;
  let memberKey: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const j = stringEnd(text, i);
      const top = stack[stack.length - 1];
      if (expectKey && top) {
        let key: string;
        try {
          key = JSON.parse(text.slice(i, j + 1));
        } catch {
          // An invalid string: JSON.parse will reject the body.
          return null;
        }
        if (top.has(key)) {
          throw duplicateKey(key);
        }
        top.add(key);
        if (stack.length === 1) memberKey = key;
        expectKey = false;
      }
      i = j;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      stack.push(c === 0x7b ? new Set() : null);
      if (stack.length > maxDepth) {
        throw tooDeep(maxDepth);
      }
      expectKey = c === 0x7b;
      if (stack.length === 1 && c === 0x7b && members === null) {
        members = new Map();
        memberStart = i + 1;
      }
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */ || c === 0x2c /* , */) {
      if (stack.length === 1 && members !== null && memberKey !== null) {
        members.set(memberKey, [memberStart, i]);
        memberKey = null;
        memberStart = i + 1;
      }
      if (c === 0x2c) expectKey = stack[stack.length - 1] instanceof Set;
      else {
        stack.pop();
        expectKey = false;
      }
    }
  }
  return members;
}

/**
 * The index of the quote closing the string opened at `open` (or the text's
 * length). Found with the native `indexOf` rather than a loop over every
 * character (a 4 MB prompt is one string); a quote preceded by an
 * odd run of backslashes is escaped. Linear: each backslash run is counted
 * once, for the one quote that follows it.
 */
function stringEnd(text: string, open: number): number {
  let j = open + 1;
  for (;;) {
    j = text.indexOf('"', j);
    if (j < 0) return text.length;
    let k = j - 1;
    while (k > open && text.charCodeAt(k) === 0x5c) k--;
    if ((j - 1 - k) % 2 === 0) return j;
    j++;
  }
}
