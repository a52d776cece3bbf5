/**
 * The most text one event may hold before its end: a stream that never ends a frame is
 * refused at this size instead of being buffered (and rescanned) without bound.
 */
export const MAX_SSE_FRAME_CHARS = 16 * 1024 * 1024;

/**
 * Splits buffered SSE text into its complete frames (each without its blank-line
 * terminator) and the incomplete rest. One scan from the start: a buffer that
 * holds many frames is not re-sliced once per frame.
 */
export function splitSseFrames(buf: string): { frames: string[]; rest: string } {
  const frames: string[] = [];
  const end = /\r?\n\r?\n/g;
  let from = 0;
  for (let m = end.exec(buf); m !== null; m = end.exec(buf)) {
    frames.push(buf.slice(from, m.index));
    from = m.index + m[0].length;
  }
  return { frames, rest: from === 0 ? buf : buf.slice(from) };
}

/**
 * Buffers SSE text as it arrives and hands out complete frames. Only the new text (and
 * the three characters before it, where a terminator may start) is looked at for a frame
 * end, so text that ends no frame is appended without being scanned or copied again: a
 * stream that never ends a frame costs its length once, until {@link MAX_SSE_FRAME_CHARS}.
 */
export class SseFrameBuffer {
  #buf = "";
  /** The last three characters received: kept apart, as slicing the buffer would copy it. */
  #tail = "";

  /** Appends `text`; returns the frames it completed (each without its terminator). */
  push(text: string): string[] {
    const probe = this.#tail + text;
    this.#tail = probe.slice(-3);
    this.#buf += text;
    if (!/\r?\n\r?\n/.test(probe)) {
      if (this.#buf.length > MAX_SSE_FRAME_CHARS) {
        throw new Error("the event stream holds a frame larger than 16 MiB");
      }
      return [];
    }
    const split = splitSseFrames(this.#buf);
    this.#buf = split.rest;
    return split.frames;
  }

  /** What is left after the last complete frame (taken: the buffer is then empty). */
  take(): string {
    const rest = this.#buf;
    this.#buf = "";
    this.#tail = "";
    return rest;
  }
}
