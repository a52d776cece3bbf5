/**
 * Reading a whole (non-streamed) upstream answer within bounds: at most
 * `maxBytes` (a larger answer fails instead of being buffered: a compressed
 * or merely huge answer must not grow memory without limit), no silence
 * longer than `idleMs`, no longer than `totalMs` in all, and the upstream
 * request is aborted as soon as the client leaves. Every failure aborts the
 * upstream exchange, so its connection is closed, never reused half-read.
 */
import { type After, type Deadline, GatewayError, timerAfter } from "../http/mod.ts";
import { concatBytes } from "../aci/mod.ts";

export interface BodyReadLimits {
  maxBytes: number;
  idleMs: number;
  totalMs: number;
  /** Arms the deadlines (the gateway's wheel, http/deadlines.ts); default: runtime timers. */
  after?: After;
}

export async function readWholeBody(
  body: ReadableStream<Uint8Array> | null,
  limits: BodyReadLimits,
  abortUpstream: (reason: unknown) => void,
  clientSignal: AbortSignal | undefined,
): Promise<Uint8Array<ArrayBuffer>> {
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  let failure: GatewayError | null = null;
  const fail = (e: GatewayError) => {
    if (failure) return;
    failure = e;
    abortUpstream(e);
    reader.cancel(e).catch(() => {}); // settles a pending read
  };
  const onClient = () => fail(new GatewayError("invalid_request", "client closed the request"));
  if (clientSignal?.aborted) onClient();
  clientSignal?.addEventListener("abort", onClient, { once: true });
  const after = limits.after ?? timerAfter;
  const total = after(
    limits.totalMs,
    () => fail(new GatewayError("upstream_timeout", "upstream answer not complete in time")),
  );
  let idle: Deadline | undefined;
  const parts: Uint8Array[] = [];
  let n = 0;
  try {
    while (true) {
      idle?.cancel();
      idle = after(
        limits.idleMs,
        () => fail(new GatewayError("upstream_timeout", "upstream answer stalled")),
      );
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (e) {
        if (failure) throw failure;
        void e; // the transport's error names the origin only; the status says enough
        throw new GatewayError("upstream_error", "upstream response could not be read");
      }
      if (failure) throw failure;
      if (r.done) break;
      n += r.value.byteLength;
      if (n > limits.maxBytes) {
        fail(new GatewayError("upstream_error", "upstream answer exceeds max_upstream_body_bytes"));
        throw failure!;
      }
      parts.push(r.value);
    }
  } finally {
    idle?.cancel();
    total.cancel();
    clientSignal?.removeEventListener("abort", onClient);
  }
  if (parts.length === 1) return new Uint8Array(parts[0]);
  return concatBytes(parts, n);
}
