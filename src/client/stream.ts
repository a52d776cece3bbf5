/**
 * A streamed answer on its way to the SDK: events flow through as they
 * arrive (E2EE fields opened when sealed), except the stream's final event,
 * which is held until the whole wire stream has been checked against its
 * receipt. A failed check errors the stream in place of that event, so a
 * reader never sees a complete stream whose receipt did not verify.
 */
import { splitSseFrames } from "./sse_frames.ts";
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

// Long as one closure over the stream's state; each inner function is short.
export function verifiedStream(
  src: ReadableStream<Uint8Array>,
  o: VerifiedStreamOptions,
): ReadableStream<Uint8Array> {
  const reader = src.getReader();
  const wire: Uint8Array[] = [];
  const text = new TextDecoder();
  const enc = new TextEncoder();
  let buf = "";
  let held = "";
  const frame = (f: string) => o.open ? decryptSseFrame(f, o.open) : f + "\n\n";
  /** Complete events ready to go now; the final one (and anything after it) is held. */
  const drain = (final: boolean): string => {
    let out = "";
    const split = splitSseFrames(buf);
    buf = split.rest;
    for (const f of split.frames) {
      if (held !== "" || isFinalEvent(f)) held += frame(f);
      else out += frame(f);
    }
    if (final && buf.trim() !== "") {
      held += o.open ? decryptSseFrame(buf, o.open).slice(0, -2) : buf;
      buf = "";
    }
    return out;
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctl) {
      try {
        for (;;) {
          const r = await reader.read();
          if (r.done) {
            buf += text.decode();
            const out = drain(true);
            if (out) ctl.enqueue(enc.encode(out));
            let verdict: unknown;
            try {
              verdict = await o.verify(concatBytes(wire));
            } catch (e) {
              const replacement = o.onFailure?.(e) ?? null;
              if (replacement === null) return ctl.error(e);
              ctl.enqueue(enc.encode(replacement));
              return ctl.close();
            }
            const note = o.beforeFinal?.(verdict) ?? "";
            if (note || held) ctl.enqueue(enc.encode(note + held));
            return ctl.close();
          }
          wire.push(r.value);
          buf += text.decode(r.value, { stream: true });
          const out = drain(false);
          if (out) return ctl.enqueue(enc.encode(out));
        }
      } catch (e) {
        reader.cancel().catch(() => {});
        ctl.error(e);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}
