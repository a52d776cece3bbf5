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

// Long as one closure over shared state; each inner function is short.
export function nodeSocketConn(socket: Duplex): H1Socket {
  const queue: Uint8Array[] = [];
  let queued = 0;
  let ended = false;
  let failure: unknown = null;
  let waiter: {
    into: Uint8Array;
    resolve: (n: number | null) => void;
    reject: (e: unknown) => void;
  } | null = null;

  /** Moves queued bytes into `into`; returns the count. */
  const take = (into: Uint8Array): number => {
    let n = 0;
    while (queue.length > 0 && n < into.length) {
      const head = queue[0];
      const k = Math.min(head.length, into.length - n);
      into.set(head.subarray(0, k), n);
      n += k;
      if (k === head.length) queue.shift();
      else queue[0] = head.subarray(k);
    }
    queued -= n;
    if (queued < HIGH_WATER_BYTES && socket.isPaused()) socket.resume();
    return n;
  };
  const settle = () => {
    const w = waiter;
    if (!w) return;
    if (queue.length > 0) {
      waiter = null;
      w.resolve(take(w.into));
    } else if (failure !== null) {
      waiter = null;
      w.reject(failure);
    } else if (ended) {
      waiter = null;
      w.resolve(null);
    }
  };

  socket.on("data", (chunk: Uint8Array) => {
    // Copied: node may reuse a pooled buffer once this handler returns.
    queue.push(new Uint8Array(chunk));
    queued += chunk.length;
    if (queued >= HIGH_WATER_BYTES) socket.pause();
    settle();
  });
  socket.on("end", () => {
    ended = true;
    settle();
  });
  socket.on("error", (e: unknown) => {
    failure ??= e;
    settle();
  });
  socket.on("close", () => {
    ended = true;
    settle();
  });

  return {
    read(into: Uint8Array): Promise<number | null> {
      if (waiter) return Promise.reject(new Error("a read is already pending"));
      if (queue.length > 0) return Promise.resolve(take(into));
      if (failure !== null) return Promise.reject(failure);
      if (ended) return Promise.resolve(null);
      return new Promise((resolve, reject) => {
        waiter = { into, resolve, reject };
      });
    },
    write(bytes: Uint8Array): Promise<number> {
      return new Promise((resolve, reject) => {
        if (socket.destroyed) return reject(new Error("socket closed"));
        socket.write(bytes, (e?: Error | null) => e ? reject(e) : resolve(bytes.length));
      });
    },
    close() {
      socket.destroy();
      ended = true;
      settle();
    },
  };
}
