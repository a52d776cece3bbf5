/**
 * The E2EE v2 client's answer side: opens the generated fields of a response
 * object or chunk, and decrypts an SSE stream event by event while keeping the
 * wire bytes its receipt covers (src/e2ee/client.ts wraps fetch around them).
 */
import { SseFrameBuffer } from "./sse_frames.ts";
import { isRecord } from "../verify/json_shape.ts";
import { type AadContext, decryptField, responseAad } from "../e2ee/crypto.ts";
import { type E2eeEndpoint, responseIdFor, responseSlots } from "../e2ee/fields.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Decrypt the generated fields of a response object (or chunk) in place; throws on any failure. */
export function openResponse(
  kind: E2eeEndpoint,
  body: Record<string, unknown>,
  stream: boolean,
  ctx: AadContext,
  clientSecret: Uint8Array,
): void {
  const slots = [...responseSlots(kind, body, stream)];
  // An error event is plaintext by the spec, and generates nothing: only a body that is one
  // (an error object, no generated field) passes unopened. An `error` member beside
  // generated text does not switch their authentication off.
  if (isRecord(body["error"]) && slots.length === 0) return;
  const id = responseIdFor(body);
  for (const s of slots) {
    const v = s.get();
    const plain = typeof v === "string"
      ? decryptField(ctx.algo, clientSecret, v, responseAad(ctx, id, s.path))
      : null;
    if (plain === null) throw new Error(`E2EE: response field ${s.path} did not authenticate`);
    const text = decoder.decode(plain);
    s.set(s.json ? JSON.parse(text) : text);
  }
}

/**
 * One SSE event (without its blank-line terminator) with its JSON data's
 * generated fields opened; other events pass unchanged. Returns it terminated.
 */
export function decryptSseFrame(f: string, open: (o: Record<string, unknown>) => void): string {
  const lines = f.split(/\r?\n/);
  const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
  if (data.length === 0) return f + "\n\n";
  const payload = data.join("\n");
  if (payload === "[DONE]") return f + "\n\n";
  const obj = JSON.parse(payload);
  if (isRecord(obj)) open(obj);
  const other = lines.filter((l) => !l.startsWith("data:"));
  return [...other, `data: ${JSON.stringify(obj)}`].join("\n") + "\n\n";
}

/**
 * Decrypts each SSE event's JSON data; passes other events and framing
 * through. The wire bytes are settled once the source ends, also when the
 * reader stops early (the SDK stops at `[DONE]`): the rest is read then, so
 * the exchange holds the whole stream its receipt covers.
 */
export function sseDecryptor(
  src: ReadableStream<Uint8Array>,
  open: (o: Record<string, unknown>) => void,
  settle: (wire: Uint8Array) => void,
): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>(new SseDecryptor(src, open, settle), {
    highWaterMark: 0,
  });
}

/** The stream's underlying source: the source's reader, the wire bytes and the partial event. */
class SseDecryptor implements UnderlyingDefaultSource<Uint8Array> {
  #reader: ReadableStreamDefaultReader<Uint8Array>;
  #open: (o: Record<string, unknown>) => void;
  #settle: (wire: Uint8Array) => void;
  #wire: Uint8Array[] = [];
  #text = new TextDecoder();
  #frames = new SseFrameBuffer();

  constructor(
    src: ReadableStream<Uint8Array>,
    open: (o: Record<string, unknown>) => void,
    settle: (wire: Uint8Array) => void,
  ) {
    this.#reader = src.getReader();
    this.#open = open;
    this.#settle = settle;
  }

  async pull(ctl: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    try {
      for (;;) {
        const r = await this.#reader.read();
        if (r.done) {
          const out = this.#drain(this.#text.decode(), true);
          if (out) ctl.enqueue(encoder.encode(out));
          this.#finish();
          ctl.close();
          return;
        }
        this.#wire.push(r.value);
        const out = this.#drain(this.#text.decode(r.value, { stream: true }), false);
        if (out) return ctl.enqueue(encoder.encode(out));
      }
    } catch (e) {
      this.#finish();
      this.#reader.cancel().catch(() => {});
      ctl.error(e);
    }
  }

  async cancel(): Promise<void> {
    try {
      for (;;) {
        const r = await this.#reader.read();
        if (r.done) break;
        this.#wire.push(r.value);
      }
    } catch {
      // the source failed: settle with what arrived
    }
    this.#finish();
  }

  /** The complete events buffered, opened; at the end also what is left. */
  #drain(text: string, final: boolean): string {
    let out = "";
    for (const f of this.#frames.push(text)) out += decryptSseFrame(f, this.#open);
    const rest = final ? this.#frames.take() : "";
    if (rest.trim() !== "") out += decryptSseFrame(rest, this.#open);
    return out;
  }

  #finish(): void {
    const wire = this.#wire;
    const total = new Uint8Array(wire.reduce((n, c) => n + c.byteLength, 0));
    let off = 0;
    for (const c of wire) {
      total.set(c, off);
      off += c.byteLength;
    }
    this.#settle(total);
  }
}
