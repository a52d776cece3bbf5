/**
 * Response bodies the demo upstream sends piece by piece: SSE events paced by
 * an optional delay, with optional keepalive comments, and an optional
 * connection reset after N pieces. Every wait is abortable, so closing the
 * server or a client disconnect never leaves a timer behind.
 */

import { sleep } from "../store/mod.ts";

const encoder = new TextEncoder();

/** The SSE comment some upstreams send to keep idle connections open. */
const KEEPALIVE_COMMENT = ": PROCESSING\n\n";

/** How to send the pieces of a body. */
export interface PacingOptions {
  /** Delay before every piece but the first. */
  gapMs: number;
  /** Prefix every piece with `: PROCESSING` (for SSE bodies only). */
  keepalive: boolean;
  /** Abort the connection after this many pieces; null = send them all. */
  resetAfter: number | null;
  /** Aborts when the server closes: the body then errors out promptly. */
  signal: AbortSignal;
}

/**
 * A byte stream of `pieces` sent with the given pacing. A reset errors the
 * stream, which makes the HTTP server abort the connection mid-body.
 */
export function pacedBody(pieces: string[], opts: PacingOptions): ReadableStream<Uint8Array> {
  const cancelled = new AbortController();
  const signal = AbortSignal.any([opts.signal, cancelled.signal]);
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        if (opts.resetAfter !== null && sent >= opts.resetAfter) {
          // Let the pieces already queued reach the socket before the reset.
          await sleep(20, signal);
          controller.error(new Error("demo upstream: connection reset (injected fault)"));
          return;
        }
        if (sent >= pieces.length) {
          controller.close();
          return;
        }
        if (sent > 0 && opts.gapMs > 0) await sleep(opts.gapMs, signal);
        const piece = pieces[sent++] ?? "";
        controller.enqueue(encoder.encode(opts.keepalive ? KEEPALIVE_COMMENT + piece : piece));
      } catch (e) {
        // Only an abort lands here: the server is closing or the client left.
        if (!cancelled.signal.aborted) controller.error(e);
      }
    },
    cancel() {
      cancelled.abort();
    },
  }, { highWaterMark: 0 });
}
