/**
 * A loopback pass-through proxy that records the exact bytes of every
 * request and response crossing it, placed between the gateway and a demo
 * upstream so tests can check a receipt's `request.forwarded` and
 * `response.received` hashes against the bytes really on the wire.
 */
import { concatBytes } from "../../src/aci/bytes.ts";

export interface RecordedExchange {
  path: string;
  /** The request body exactly as the gateway sent it. */
  request: Uint8Array;
  /** Resolves with the response body exactly as the upstream sent it (streams: once they end). */
  response: Promise<Uint8Array>;
}

export interface RecordingProxy {
  /** Origin, e.g. `http://127.0.0.1:PORT`. */
  url: string;
  exchanges: RecordedExchange[];
  close(): Promise<void>;
}

/** Starts a proxy forwarding everything to `target` (an origin). */
export function startRecordingProxy(target: string): RecordingProxy {
  const exchanges: RecordedExchange[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const request = new Uint8Array(await req.arrayBuffer());
    const headers = new Headers(req.headers);
    headers.delete("host");
    headers.delete("content-length");
    const upstream = await fetch(`${target}${url.pathname}${url.search}`, {
      method: req.method,
      headers,
      body: req.method === "GET" ? undefined : request,
      signal: req.signal,
    });
    const parts: Uint8Array[] = [];
    let settle: (b: Uint8Array) => void = () => {};
    const response = new Promise<Uint8Array>((r) => (settle = r));
    exchanges.push({ path: url.pathname, request, response });
    const body = upstream.body?.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, ctl) {
          parts.push(chunk);
          ctl.enqueue(chunk);
        },
        flush() {
          settle(concatBytes(parts));
        },
      }),
    );
    if (!body) settle(new Uint8Array());
    const out = new Headers(upstream.headers);
    // fetch already decoded the body; the bytes recorded are the ones the gateway reads.
    out.delete("content-length");
    out.delete("content-encoding");
    return new Response(body ?? null, { status: upstream.status, headers: out });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    exchanges,
    close: () => server.shutdown(),
  };
}
