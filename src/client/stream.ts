/**
 * A streamed answer on its way to the SDK: events flow through as they
 * arrive (E2EE fields opened when sealed), except the stream's final event,
 * which is held until the whole wire stream has been checked against its
 * receipt. A failed check errors the stream in place of that event, so a
 * reader never sees a complete stream whose receipt did not verify.
 */
import { SseFrameBuffer } from "./sse_frames.ts";
import { concatBytes } from "../aci/bytes.ts";
import { decryptSseFrame } from "./e2ee_response.ts";

/** Whether an SSE event ends its stream (OpenAI `[DONE]`, Anthropic, Responses). */
export function isFinalEvent(frame: string): boolean {
  return /^data: ?\[DONE\]\s*$/m.test(frame) ||
    /^event: ?(message_stop|response\.(completed|incomplete|failed)|error)\s*$/m.test(frame);
}

export interface VerifiedStreamOptions {
  /** Opens a sealed event's JSON in place (E2EE), or null for plaintext. */
  open: ((o: Record<string, unknown>) => void) | null;
  /** Checks the whole wire stream; rejects to fail the stream. */
  verify: (wire: Uint8Array) => Promise<unknown>;
  /** Inserted before the held final event once verified (the proxy's verdict comment). */
  beforeFinal?: (verdict: unknown) => string;
  /** Replaces the error (the proxy ends the stream with an error event instead). */
  onFailure?: (e: unknown) => string | null;
}

export function verifiedStream(
  src: ReadableStream<Uint8Array>,
  o: VerifiedStreamOptions,
): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>(new VerifiedSource(src, o), { highWaterMark: 0 });
}

const enc = new TextEncoder();

/** The stream's underlying source: the source's reader, the wire bytes and the held final event. */
class VerifiedSource implements UnderlyingDefaultSource<Uint8Array> {
  #reader: ReadableStreamDefaultReader<Uint8Array>;
  #o: VerifiedStreamOptions;
  #wire: Uint8Array[] = [];
  #text = new TextDecoder();
  #frames = new SseFrameBuffer();
  #held = "";

  constructor(src: ReadableStream<Uint8Array>, o: VerifiedStreamOptions) {
    this.#reader = src.getReader();
    this.#o = o;
  }

  async pull(ctl: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    try {
      for (;;) {
        const r = await this.#reader.read();
        if (r.done) return await this.#end(ctl);
        this.#wire.push(r.value);
        const out = this.#drain(this.#text.decode(r.value, { stream: true }), false);
        if (out) return ctl.enqueue(enc.encode(out));
      }
    } catch (e) {
      this.#reader.cancel().catch(() => {});
      ctl.error(e);
    }
  }

  cancel(reason: unknown): Promise<void> {
    return this.#reader.cancel(reason);
  }

  /** The source ended: the rest goes out, and the held final event once the wire verified. */
  async #end(ctl: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    const o = this.#o;
    const out = this.#drain(this.#text.decode(), true);
    if (out) ctl.enqueue(enc.encode(out));
    let verdict: unknown;
    try {
      verdict = await o.verify(concatBytes(this.#wire));
    } catch (e) {
      const replacement = o.onFailure?.(e) ?? null;
      if (replacement === null) return ctl.error(e);
      ctl.enqueue(enc.encode(replacement));
      return ctl.close();
    }
    const note = o.beforeFinal?.(verdict) ?? "";
    if (note || this.#held) ctl.enqueue(enc.encode(note + this.#held));
    return ctl.close();
  }

  #frame(f: string): string {
    const open = this.#o.open;
    return open ? decryptSseFrame(f, open) : f + "\n\n";
  }

  /** Complete events ready to go now; the final one (and anything after it) is held. */
  #drain(text: string, final: boolean): string {
    let out = "";
    for (const f of this.#frames.push(text)) {
      if (this.#held !== "" || isFinalEvent(f)) this.#held += this.#frame(f);
      else out += this.#frame(f);
    }
    const rest = final ? this.#frames.take() : "";
    if (rest.trim() !== "") {
      const open = this.#o.open;
      this.#held += open ? decryptSseFrame(rest, open).slice(0, -2) : rest;
    }
    return out;
  }
}
