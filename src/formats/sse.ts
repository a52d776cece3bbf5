/**
 * Server-sent events: frame encoding for what the gateway writes, and an
 * incremental decoder (bytes or text in, events out) for what upstreams send.
 * The decoder follows the WHATWG event-stream rules: comment lines (`: PROCESSING`
 * keep-alives) are dropped here so they can never reach a client or a JSON parser.
 */

import { GatewayError } from "../http/mod.ts";

/** One dispatched SSE event. `event` is absent when the frame had no `event:` line. */
export interface SseEvent {
  event?: string;
  data: string;
  id?: string;
}

/** `event: <type>\ndata: <json>\n\n` — the framing of the messages and responses formats. */
export function encodeSseEvent(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** `data: <json>\n\n` — the chat-completions framing (no event name). */
export function encodeSseData(data: unknown): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

/** Default bound on one pending line/event so a hostile upstream cannot grow memory without limit. */
const DEFAULT_MAX_PENDING_CHARS = 16 * 1024 * 1024;

/**
 * Incremental SSE decoder. Feed arbitrary slices (a multi-byte character or a
 * CRLF may be split across slices); each `push` returns the events completed so far.
 */
export class SseDecoder {
  readonly #text = new TextDecoder("utf-8");
  readonly #maxPending: number;
  #buf = "";
  #afterCR = false;
  #first = true;
  #data: string[] = [];
  #event: string | undefined;
  #id: string | undefined;
  #pendingChars = 0;

  constructor(opts: { maxPendingChars?: number } = {}) {
    const max = opts.maxPendingChars ?? DEFAULT_MAX_PENDING_CHARS;
    if (!Number.isInteger(max) || max <= 0) {
      throw new RangeError("maxPendingChars must be a positive integer");
    }
    this.#maxPending = max;
  }

  /** Decode the next slice of the stream. */
  push(chunk: Uint8Array | string): SseEvent[] {
    const text = typeof chunk === "string" ? chunk : this.#text.decode(chunk, { stream: true });
    return this.#consume(text);
  }

  /**
   * The stream ended. A final event not terminated by a blank line is still
   * dispatched: some upstreams close the body right after the last `data:` line.
   */
  end(): SseEvent[] {
    const out = this.#consume(this.#text.decode());
    if (this.#buf.length > 0) {
      this.#line(this.#buf, out);
      this.#buf = "";
    }
    this.#dispatch(out);
    return out;
  }

  #consume(text: string): SseEvent[] {
    const out: SseEvent[] = [];
    let s = text;
    if (this.#first && s.length > 0) {
      this.#first = false;
      if (s.charCodeAt(0) === 0xfeff) s = s.slice(1);
    }
    let start = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      // The LF of a CRLF pair (possibly split across pushes) ends nothing new.
      if (c === 10 && this.#afterCR && i === start) {
        this.#afterCR = false;
        start = i + 1;
        continue;
      }
      this.#line(this.#buf + s.slice(start, i), out);
      this.#buf = "";
      this.#afterCR = c === 13;
      start = i + 1;
    }
    if (start < s.length) {
      this.#afterCR = false;
      this.#buf += s.slice(start);
    }
    if (this.#buf.length + this.#pendingChars > this.#maxPending) {
      throw new GatewayError("upstream_error", "upstream event stream frame too large");
    }
    return out;
  }

  #line(line: string, out: SseEvent[]): void {
    if (line === "") {
      this.#dispatch(out);
      return;
    }
    if (line.charCodeAt(0) === 58 /* ':' */) return; // comment / keep-alive
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (field) {
      case "data":
        this.#data.push(value);
        // The line's own cost too: a million empty `data:` lines are still megabytes.
        this.#pendingChars += value.length + 1;
        break;
      case "event":
        this.#event = value;
        break;
      case "id":
        if (!value.includes("\0")) this.#id = value;
        break;
      default:
        break; // `retry` and unknown fields mean nothing to a proxy
    }
  }

  #dispatch(out: SseEvent[]): void {
    if (this.#data.length > 0) {
      const ev: SseEvent = { data: this.#data.join("\n") };
      if (this.#event !== undefined && this.#event !== "") ev.event = this.#event;
      if (this.#id !== undefined) ev.id = this.#id;
      out.push(ev);
    }
    this.#data = [];
    this.#event = undefined;
    this.#id = undefined; // per-frame id: a proxy has no use for a sticky last-event-id
    this.#pendingChars = 0;
  }
}
