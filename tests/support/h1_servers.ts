/**
 * Loopback servers and client helpers the HTTP/1.1 client's unit tests share
 * (src/upstream/h1_*_test.ts): a Deno.serve or raw TCP peer, scripted answers,
 * and bounded waits. Test-only.
 */
import assert from "node:assert/strict";
import {
  createH1Client,
  type H1Client,
  type H1ClientOptions,
  type H1Connect,
  type H1Target,
} from "../../src/upstream/h1_client.ts";

export const enc = new TextEncoder();
export const dec = new TextDecoder();

/** A real loopback connector that counts connects and records targets. */
export function tcpConnector(redirectPort?: number): { connect: H1Connect; targets: H1Target[] } {
  const targets: H1Target[] = [];
  return {
    targets,
    connect: (t) => {
      targets.push(t);
      return Deno.connect({ hostname: "127.0.0.1", port: redirectPort ?? t.port });
    },
  };
}

export function newClient(
  extra: Partial<H1ClientOptions> = {},
  redirectPort?: number,
): { client: H1Client; targets: H1Target[] } {
  const { connect, targets } = tcpConnector(redirectPort);
  return { client: createH1Client({ connect, now: () => performance.now(), ...extra }), targets };
}

/** Runs `fn` with a Deno.serve server and a client, closing both whatever happens. */
export async function withServe(
  handler: Deno.ServeHandler,
  fn: (base: string, client: H1Client, targets: H1Target[]) => Promise<void>,
  opts: Partial<H1ClientOptions> = {},
): Promise<void> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handler);
  const { client, targets } = newClient(opts);
  try {
    await fn(`http://127.0.0.1:${server.addr.port}`, client, targets);
  } finally {
    client.close();
    await server.shutdown();
  }
}

export interface RawRequest {
  head: string;
  path: string;
  body: Uint8Array;
}

/** The server side of one raw TCP connection. */
export class Peer {
  #buf = new Uint8Array(0);
  constructor(readonly conn: Deno.Conn) {}

  async #more(): Promise<boolean> {
    const chunk = new Uint8Array(64 * 1024);
    let n: number | null;
    try {
      n = await this.conn.read(chunk);
    } catch {
      return false;
    }
    if (n === null) return false;
    const next = new Uint8Array(this.#buf.length + n);
    next.set(this.#buf);
    next.set(chunk.subarray(0, n), this.#buf.length);
    this.#buf = next;
    return true;
  }

  /** The next request (head + content-length body), or null once the client closed. */
  async request(): Promise<RawRequest | null> {
    let end: number;
    while ((end = indexOfHeadEnd(this.#buf)) < 0) if (!(await this.#more())) return null;
    const head = dec.decode(this.#buf.subarray(0, end));
    const m = /\r\ncontent-length: *(\d+)/i.exec(head);
    const len = m ? Number(m[1]) : 0;
    while (this.#buf.length < end + len) if (!(await this.#more())) return null;
    const body = this.#buf.slice(end, end + len);
    this.#buf = this.#buf.slice(end + len);
    return { head, path: head.split(" ")[1], body };
  }

  async send(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? enc.encode(data) : data;
    let off = 0;
    while (off < bytes.length) off += await this.conn.write(bytes.subarray(off));
  }

  /** Resolves when the client closes the connection (EOF or reset). */
  async closedByClient(): Promise<void> {
    while (await this.#more()) { /* drop */ }
  }
}

export function indexOfHeadEnd(b: Uint8Array): number {
  for (let i = 3; i < b.length; i++) {
    if (b[i - 3] === 13 && b[i - 2] === 10 && b[i - 1] === 13 && b[i] === 10) return i + 1;
  }
  return -1;
}

export interface RawServer {
  port: number;
  base: string;
  /** Connections accepted so far. */
  accepted(): number;
  close(): Promise<void>;
}

/** A raw TCP server; `handle` runs per connection, which is closed when it returns. */
export function rawServer(handle: (p: Peer, index: number) => Promise<void>): RawServer {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const tasks: Promise<void>[] = [];
  let accepted = 0;
  const loop = (async () => {
    while (true) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch {
        return;
      }
      const index = accepted++;
      conns.add(conn);
      tasks.push((async () => {
        try {
          await handle(new Peer(conn), index);
        } catch {
          /* the client went away */
        } finally {
          conns.delete(conn);
          try {
            conn.close();
          } catch { /* closed */ }
        }
      })());
    }
  })();
  const port = listener.addr.port;
  return {
    port,
    base: `http://127.0.0.1:${port}`,
    accepted: () => accepted,
    async close() {
      listener.close();
      await loop;
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await Promise.all(tasks);
    },
  };
}

/** Answers requests by path; the connection closes after a path listed in `closeAfter`. */
export function scriptedServer(
  script: Record<string, string | Uint8Array>,
  closeAfter: string[] = [],
  seen: RawRequest[] = [],
): RawServer {
  return rawServer(async (p) => {
    for (let r = await p.request(); r !== null; r = await p.request()) {
      seen.push(r);
      await p.send(script[r.path] ?? "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
      if (closeAfter.includes(r.path)) return;
    }
  });
}

export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Fails instead of hanging: a pull-driven stream that waited for EOF would deadlock. */
export async function within<T>(p: Promise<T>, what: string, ms = 2000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export async function until(cond: () => boolean, what: string, ms = 2000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`${what}: not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export async function rejectsTypeError(p: Promise<unknown>, secret?: string): Promise<TypeError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof TypeError, `expected a TypeError, got ${e}`);
    if (secret) assert.ok(!String(e.message).includes(secret), `error leaks: ${e.message}`);
    return e;
  }
  assert.fail("expected a rejection");
}

/** An AbortSignal that tracks its registered listeners. */
export function trackedSignal(): { ctl: AbortController; listeners: Set<unknown> } {
  const ctl = new AbortController();
  const listeners = new Set<unknown>();
  const s = ctl.signal;
  const add = s.addEventListener.bind(s);
  const remove = s.removeEventListener.bind(s);
  s.addEventListener = (
    type: string,
    l: EventListenerOrEventListenerObject,
    o?: boolean | AddEventListenerOptions,
  ) => {
    listeners.add(l);
    add(type, l, o);
  };
  s.removeEventListener = (
    type: string,
    l: EventListenerOrEventListenerObject,
    o?: boolean | EventListenerOptions,
  ) => {
    listeners.delete(l);
    remove(type, l, o);
  };
  return { ctl, listeners };
}

export const ok = (body: string, extra = "") =>
  `HTTP/1.1 200 OK\r\ncontent-length: ${enc.encode(body).length}\r\n${extra}\r\n${body}`;
