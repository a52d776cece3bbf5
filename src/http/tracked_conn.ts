/**
 * One accepted connection as the accept loop tracks it: whether a request is
 * in flight, whether a head ever arrived, and since when it has waited.
 */
import type { ServeInfo } from "./connection_types.ts";

const noop = () => {};

export class TrackedConn {
  /** Closes a waiting connection. */
  close: () => void = noop;
  /** Graceful close: at once when idle, after the in-flight responses otherwise. */
  drain: () => void = noop;
  /** Requests on this connection whose responses are not yet delivered. */
  inFlight = 0;
  /** Whether a request head ever arrived (decides which deadline a wait has). */
  served = false;
  /** When the current wait began (monotonic ms); meaningful while `inFlight` is 0. */
  since: number;
  closing = false;
  #handler: (req: Request) => Promise<Response>;
  #now: () => number;

  constructor(handler: (req: Request) => Promise<Response>, now: () => number) {
    this.#handler = handler;
    this.#now = now;
    this.since = now();
    // Handed to the runtime once and called per request: bound here, not per call.
    this.perConn = this.perConn.bind(this);
    this.done = this.done.bind(this);
  }

  /** Requests of this connection, as the runtime serves them. */
  perConn(req: Request, info: ServeInfo): Promise<Response> {
    this.inFlight++;
    this.served = true;
    info.completed.then(this.done, this.done);
    return this.#handler(req);
  }

  /** A response delivered (or abandoned): the wait restarts once none is in flight. */
  done(): void {
    this.inFlight--;
    if (this.inFlight > 0) return;
    this.since = this.#now();
  }
}

export function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // already closed
  }
}
