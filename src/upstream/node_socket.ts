/**
 * A `node:net`/`node:tls` socket seen through the three calls the HTTP/1.1
 * client makes of a connection (`read` into its buffer, `write`, `close`),
 * so a TLS socket whose peer key was checked by `node:tls` (pinned_tls.ts)
 * carries requests exactly like a `Deno.Conn`. Incoming bytes wait in a short
 * queue; the socket is paused while the queue holds more than one read
 * buffer's worth, so a fast upstream cannot make it grow.
 */
import type { Duplex } from "node:stream";
import type { H1Socket } from "./h1_client.ts";

/** Bytes queued before the socket is paused. */
const HIGH_WATER_BYTES = 16 * 1024;

export function nodeSocketConn(socket: Duplex): H1Socket {
  return new NodeSocketConn(socket);
}

interface Waiter {
  into: Uint8Array;
  resolve: (n: number | null) => void;
  reject: (e: unknown) => void;
}

/** The socket's queued bytes, its end or failure, and the one read waiting for them. */
class NodeSocketConn implements H1Socket {
  #socket: Duplex;
  #queue: Uint8Array[] = [];
  #queued = 0;
  #ended = false;
  #failure: unknown = null;
  #waiter: Waiter | null = null;

  constructor(socket: Duplex) {
    this.#socket = socket;
    // One handler of each per connection, registered once.
    socket.on("data", (chunk: Uint8Array) => this.#data(chunk));
    socket.on("end", () => this.#end());
    socket.on("error", (e: unknown) => {
      this.#failure ??= e;
      this.#settle();
    });
    socket.on("close", () => this.#end());
  }

  read(into: Uint8Array): Promise<number | null> {
    if (this.#waiter) return Promise.reject(new Error("a read is already pending"));
    if (this.#queue.length > 0) return Promise.resolve(this.#take(into));
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#ended) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      this.#waiter = { into, resolve, reject };
    });
  }

  write(bytes: Uint8Array): Promise<number> {
    const socket = this.#socket;
    return new Promise((resolve, reject) => {
      if (socket.destroyed) return reject(new Error("socket closed"));
      socket.write(bytes, (e?: Error | null) => e ? reject(e) : resolve(bytes.length));
    });
  }

  close(): void {
    this.#socket.destroy();
    this.#end();
  }

  #data(chunk: Uint8Array): void {
    // Copied: node may reuse a pooled buffer once this handler returns.
    this.#queue.push(new Uint8Array(chunk));
    this.#queued += chunk.length;
    if (this.#queued >= HIGH_WATER_BYTES) this.#socket.pause();
    this.#settle();
  }

  #end(): void {
    this.#ended = true;
    this.#settle();
  }

  /** Moves queued bytes into `into`; returns the count. */
  #take(into: Uint8Array): number {
    const queue = this.#queue;
    let n = 0;
    while (queue.length > 0 && n < into.length) {
      const head = queue[0];
      const k = Math.min(head.length, into.length - n);
      into.set(head.subarray(0, k), n);
      n += k;
      if (k === head.length) queue.shift();
      else queue[0] = head.subarray(k);
    }
    this.#queued -= n;
    if (this.#queued < HIGH_WATER_BYTES && this.#socket.isPaused()) this.#socket.resume();
    return n;
  }

  /** Answers the waiting read, if any, once there is something to answer it with. */
  #settle(): void {
    const w = this.#waiter;
    if (!w) return;
    if (this.#queue.length > 0) {
      this.#waiter = null;
      w.resolve(this.#take(w.into));
    } else if (this.#failure !== null) {
      this.#waiter = null;
      w.reject(this.#failure);
    } else if (this.#ended) {
      this.#waiter = null;
      w.resolve(null);
    }
  }
}
