/**
 * Hostile loopback middleboxes for the verifying client's attack tests: an
 * HTTP proxy in front of a gateway that can rewrite answers (flip one byte of
 * a body or of one stream chunk) or take its attestation report from another
 * gateway, and a TLS man in the middle that terminates with its own key and
 * records every plaintext byte a client sends it.
 */
import { concatBytes } from "../../src/aci/bytes.ts";

export interface TamperingProxy {
  url: string;
  /** Method and path of each request that reached the proxy. */
  seen: string[];
  /** Per tampered stream: whether a byte was flipped. */
  flips: boolean[];
  close(): Promise<void>;
}

export interface TamperOptions {
  /** Where `/v1/aci/attestation` is taken from (default: the target). */
  reportFrom?: string;
  /** Flip one byte of every POST answer: of the whole body, or of its `chunk`-th stream chunk. */
  flip?: { chunk?: number };
  /** Inclusion proofs: answered 404 (never logged), or with one proof hash changed. */
  inclusion?: "drop" | "corrupt";
  /**
   * Streams: forward this many chunks, then hang up on the gateway and end the client's
   * stream cleanly, as if it were whole.
   */
  cut?: number;
}

/** Flips the case of the first ASCII letter of a content value (keeps JSON valid). */
function flipOne(b: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const s = new TextDecoder().decode(b);
  const m = /"(content|text|delta)":\s*"([^"]*?)([a-zA-Z])/.exec(s);
  if (!m) return b;
  const at = m.index + m[0].length - 1;
  const out = new Uint8Array(b);
  out[new TextEncoder().encode(s.slice(0, at)).length] ^= 0x20;
  return out;
}

export function startTamperingProxy(target: string, o: TamperOptions = {}): TamperingProxy {
  const seen: string[] = [];
  const flips: boolean[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    seen.push(`${req.method} ${url.pathname}`);
    const origin = url.pathname === "/v1/aci/attestation" ? o.reportFrom ?? target : target;
    const headers = new Headers(req.headers);
    headers.delete("host");
    const body = req.method === "GET" ? undefined : new Uint8Array(await req.arrayBuffer());
    const isInclusion = url.pathname.endsWith("/inclusion");
    if (isInclusion && o.inclusion === "drop") {
      const error = {
        type: "not_found",
        code: "receipt_not_found",
        message: "unknown",
        param: null,
      };
      return Response.json({ error }, { status: 404 });
    }
    const up = await fetch(`${origin}${url.pathname}${url.search}`, {
      method: req.method,
      headers,
      body,
    });
    if (isInclusion && o.inclusion === "corrupt" && up.status === 200) {
      const proof = await up.json();
      const first = atob(proof.inclusion_proof[0]);
      proof.inclusion_proof[0] = btoa(
        String.fromCharCode(first.charCodeAt(0) ^ 1) + first.slice(1),
      );
      return Response.json(proof);
    }
    const out = new Headers(up.headers);
    out.delete("content-length");
    const sse = (up.headers.get("content-type") ?? "").startsWith("text/event-stream");
    if (o.cut !== undefined && sse && up.body) {
      const reader = up.body.getReader();
      let left = o.cut;
      return new Response(
        new ReadableStream<Uint8Array>({
          async pull(ctl) {
            const r = left-- > 0 ? await reader.read() : { done: true, value: undefined };
            if (r.done) {
              await reader.cancel().catch(() => {});
              return ctl.close();
            }
            ctl.enqueue(r.value);
          },
        }),
        { status: up.status, headers: out },
      );
    }
    if (!o.flip || req.method !== "POST" || !up.body) {
      return new Response(up.body, { status: up.status, headers: out });
    }
    if (!(up.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
      return new Response(flipOne(new Uint8Array(await up.arrayBuffer())), {
        status: up.status,
        headers: out,
      });
    }
    let n = 0;
    let flipped = false;
    const want = o.flip.chunk ?? 1;
    return new Response(
      up.body.pipeThrough(
        new TransformStream<Uint8Array<ArrayBuffer>, Uint8Array<ArrayBuffer>>({
          transform(c, ctl) {
            // The first chunk from the `want`-th on that carries a content value.
            const f = !flipped && n++ >= want ? flipOne(c) : c;
            if (f !== c) flipped = true;
            ctl.enqueue(f);
          },
          flush() {
            flips.push(flipped);
          },
        }),
      ),
      { status: up.status, headers: out },
    );
  });
  const { port } = server.addr as Deno.NetAddr;
  return { url: `http://127.0.0.1:${port}`, seen, flips, close: () => server.shutdown() };
}

export interface TlsMitm {
  url: string;
  /** Every plaintext byte clients sent, per connection. */
  received: Uint8Array[][];
  close(): Promise<void>;
}

/** Terminates TLS with `cert` (not the attested key), relays plaintext to `target` over TLS. */
export function startTlsMitm(
  targetPort: number,
  cert: { certPem: string; keyPem: string },
  caPem: string,
): TlsMitm {
  const listener = Deno.listenTls({
    hostname: "127.0.0.1",
    port: 0,
    cert: cert.certPem,
    key: cert.keyPem,
  });
  const received: Uint8Array[][] = [];
  const conns = new Set<Deno.Conn>();
  const relay = async (client: Deno.TlsConn) => {
    const log: Uint8Array[] = [];
    received.push(log);
    conns.add(client);
    let up: Deno.TlsConn | null = null;
    try {
      up = await Deno.connectTls({ hostname: "127.0.0.1", port: targetPort, caCerts: [caPem] });
      conns.add(up);
      const toUp = (async () => {
        for await (
          const c of client.readable.pipeThrough(
            new TransformStream({
              transform(x, ctl) {
                log.push(x);
                ctl.enqueue(x);
              },
            }),
          )
        ) await up!.write(c);
      })();
      await Promise.race([up.readable.pipeTo(client.writable), toUp]).catch(() => {});
    } catch {
      // a refused handshake or a closed peer ends the relay
    } finally {
      for (const c of [client, up]) {
        if (c) {
          conns.delete(c);
          try {
            c.close();
          } catch { /* closed */ }
        }
      }
    }
  };
  const loop = (async () => {
    for await (const c of listener) relay(c);
  })().catch(() => {});
  return {
    url: `https://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    received,
    async close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await loop;
    },
  };
}

/** All bytes a MITM received, as text. */
export function receivedText(m: TlsMitm): string {
  return new TextDecoder().decode(concatBytes(m.received.flat()));
}

export interface SwitchRelay {
  url: string;
  /** Sends new connections to `port` and drops the open ones (a restart behind one address). */
  switchTo(port: number): void;
  close(): Promise<void>;
}

/** A plain TCP relay (TLS passes through untouched) whose target can change. */
export function startSwitchRelay(port: number): SwitchRelay {
  let target = port;
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  const closeAll = () => {
    for (const c of open) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    open.clear();
  };
  const relay = async (client: Deno.Conn) => {
    open.add(client);
    try {
      const up = await Deno.connect({ hostname: "127.0.0.1", port: target });
      open.add(up);
      await Promise.race([
        up.readable.pipeTo(client.writable),
        client.readable.pipeTo(up.writable),
      ]);
    } catch {
      // a dropped side ends the relay
    }
  };
  const loop = (async () => {
    for await (const c of listener) relay(c);
  })().catch(() => {});
  return {
    url: `https://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    switchTo(p) {
      target = p;
      closeAll();
    },
    async close() {
      listener.close();
      closeAll();
      await loop;
    },
  };
}
