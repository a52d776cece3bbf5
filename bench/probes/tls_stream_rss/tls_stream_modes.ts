/**
 * The ways of holding an upstream stream that bench/probes/tls_stream_rss/tls_stream_rss.ts
 * compares: each opens one connection to the mock (TLS or plain), sends one
 * `hold` streaming request and reads up to its first event.
 */
import tls from "node:tls";
import net from "node:net";
import { chatBody } from "../../load.ts";
import { pinnedTlsConnector } from "../../../src/upstream/pinned_tls.ts";
import { spkiSha256FromCertDer } from "../../../src/upstream/spki.ts";
import { nodeSocketConn } from "../../../src/upstream/node_socket.ts";
import { bodySourceOf, createH1Client, type H1Socket } from "../../../src/upstream/h1_client.ts";

export const MODES = {
  "deno-tcp": "Deno.connect to the plain mock (the plain path's upstream socket)",
  "node-net": "node:net to the plain mock",
  "deno-connecttls": "Deno.connectTls with caCerts",
  "deno-starttls": "Deno.connect + Deno.startTls (socket_connector.ts)",
  "node-tls-idle": "tls.connect, handshake only, nothing sent",
  "node-tls": "tls.connect with `ca`, flowing 'data' events",
  "node-tls-ctx": "tls.connect with one shared secureContext",
  "node-tls-net": "tls.connect over a connected net.Socket",
  "node-tls-paused": "shared context, paused mode ('readable' + read())",
  "node-tls-onread": "shared context, `onread` into one shared buffer",
  "pin-in-identity-check":
    "shared context, pin read in checkServerIdentity from node's certificate (tried, not adopted)",
  "pinned": "the pinned connector (pinned_tls.ts + node_socket.ts), raw reads",
  "h1-pinned": "the HTTP/1.1 client over the pinned connector, body read from its source",
} as const;
export type ConnMode = keyof typeof MODES;

export interface Upstream {
  url: string;
  caPem: string;
  spkiSha256: string;
  /** The same mock over plain HTTP. */
  plainUrl: string;
}

/** An open held stream; `drain` reads it to the end and closes it. */
export interface Held {
  drain(): Promise<void>;
}

const enc = new TextEncoder();

function rawRequest(u: URL): Uint8Array {
  const body = chatBody("hold", true);
  return enc.encode(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: ${u.host}\r\ncontent-type: application/json\r\n` +
      `content-length: ${enc.encode(body).length}\r\n\r\n${body}`,
  );
}

/** Writes `req`, then reads into a 1 KiB buffer until the first event arrived. */
async function holdOver(s: H1Socket, req: Uint8Array): Promise<Held> {
  await s.write(req);
  const buf = new Uint8Array(1024);
  const dec = new TextDecoder();
  let text = "";
  while (!text.includes("data:")) {
    const n = await s.read(buf);
    if (n === null) throw new Error("closed before the first event");
    text += dec.decode(buf.subarray(0, n));
  }
  return {
    async drain() {
      let seen = text;
      while (!seen.includes("[DONE]")) {
        const n = await s.read(buf);
        if (n === null) break;
        seen = seen.slice(-16) + dec.decode(buf.subarray(0, n));
      }
      s.close();
    },
  };
}

/** Chunks queued by a node socket, handed out as H1Socket reads. */
function chunkQueue(socket: net.Socket): { push(c: Uint8Array): void; conn: H1Socket } {
  const queue: Uint8Array[] = [];
  let wake: (() => void) | null = null;
  let ended = false;
  socket.on("end", () => {
    ended = true;
    wake?.();
  });
  socket.on("error", () => {});
  return {
    push(c) {
      queue.push(c);
      wake?.();
    },
    conn: {
      async read(into) {
        while (queue.length === 0 && !ended) await new Promise<void>((r) => (wake = r));
        const head = queue.shift();
        if (!head) return null;
        const k = Math.min(head.length, into.length);
        into.set(head.subarray(0, k));
        if (k < head.length) queue.unshift(head.subarray(k));
        return k;
      },
      write: (p) => new Promise((r, j) => socket.write(p, (e) => e ? j(e) : r(p.length))),
      close: () => socket.destroy(),
    },
  };
}

/** Flowing mode: a copy of each 'data' chunk. */
function flowing(socket: net.Socket): H1Socket {
  const q = chunkQueue(socket);
  socket.on("data", (c: Uint8Array) => q.push(new Uint8Array(c)));
  return q.conn;
}

function paused(socket: net.Socket): H1Socket {
  const q = chunkQueue(socket);
  socket.on("readable", () => {
    let c: Uint8Array | null;
    while ((c = socket.read()) !== null) q.push(new Uint8Array(c));
  });
  return q.conn;
}

function secureNode(o: tls.ConnectionOptions): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect(o);
    s.once("secureConnect", () => resolve(s));
    s.once("error", reject);
  });
}

function connectedNet(host: string, port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    socket.once("connect", () => resolve(socket)).once("error", reject);
  });
}

/** A function opening one held stream the way `mode` says. */
export function opener(mode: ConnMode, up: Upstream): () => Promise<Held> {
  const u = new URL(up.url);
  const hostname = u.hostname;
  const port = Number(u.port);
  const tcpPort = Number(new URL(up.plainUrl).port);
  const req = rawRequest(u);
  const ctx = tls.createSecureContext({ ca: up.caPem });
  const pinned = pinnedTlsConnector(tls.connect, { spkiSha256: up.spkiSha256, ca: up.caPem });
  const client = createH1Client({ connect: pinned, now: () => performance.now() });
  const shared = new Uint8Array(16 * 1024);
  switch (mode) {
    case "deno-tcp":
      return async () => holdOver(await Deno.connect({ hostname, port: tcpPort }), req);
    case "node-net":
      return async () => holdOver(flowing(await connectedNet(hostname, tcpPort)), req);
    case "deno-connecttls":
      return async () =>
        holdOver(await Deno.connectTls({ hostname, port, caCerts: [up.caPem] }), req);
    case "deno-starttls":
      return async () => {
        const tcp = await Deno.connect({ hostname, port });
        const conn = await Deno.startTls(tcp, { hostname, caCerts: [up.caPem] });
        await conn.handshake();
        return holdOver(conn, req);
      };
    case "node-tls-idle":
      return async () => {
        const s = await secureNode({ host: hostname, port, ca: up.caPem });
        s.on("error", () => {});
        return { drain: () => Promise.resolve(void s.destroy()) };
      };
    case "node-tls":
      return async () =>
        holdOver(flowing(await secureNode({ host: hostname, port, ca: up.caPem })), req);
    case "node-tls-ctx":
      return async () =>
        holdOver(flowing(await secureNode({ host: hostname, port, secureContext: ctx })), req);
    case "node-tls-net":
      return async () => {
        const socket = await connectedNet(hostname, port);
        return holdOver(flowing(await secureNode({ socket, ca: up.caPem })), req);
      };
    case "node-tls-paused":
      return async () =>
        holdOver(paused(await secureNode({ host: hostname, port, secureContext: ctx })), req);
    case "node-tls-onread":
      return async () => {
        let q: ReturnType<typeof chunkQueue> | null = null;
        const options = {
          host: hostname,
          port,
          secureContext: ctx,
          // Node's `onread`: bytes land in one shared buffer and are copied out at once.
          onread: { buffer: shared, callback: (n: number) => void q?.push(shared.slice(0, n)) },
        };
        const s = await secureNode(options as tls.ConnectionOptions);
        q = chunkQueue(s);
        return holdOver(q.conn, req);
      };
    case "pin-in-identity-check":
      return async () => {
        const s = await secureNode({
          host: hostname,
          port,
          secureContext: ctx,
          checkServerIdentity(host, cert) {
            const err = tls.checkServerIdentity(host, cert);
            if (err) return err;
            const der = new Uint8Array(cert.raw.buffer, cert.raw.byteOffset, cert.raw.byteLength);
            return spkiSha256FromCertDer(der) === up.spkiSha256 ? undefined : new Error("pin");
          },
        });
        s.setNoDelay(true);
        return holdOver(nodeSocketConn(s), req);
      };
    case "pinned":
      return async () => holdOver(await pinned({ hostname, port, tls: true }), req);
    case "h1-pinned":
      return async () => {
        const res = await client.fetch(`${up.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: chatBody("hold", true),
          connector: { id: "pin", connect: pinned },
        });
        const source = bodySourceOf(res);
        if (!source) throw new Error("no body source");
        await source.read();
        return {
          async drain() {
            while ((await source.read()) !== null) { /* to the end */ }
          },
        };
      };
  }
}
