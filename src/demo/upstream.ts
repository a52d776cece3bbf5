/**
 * The demo upstream: a deterministic OpenAI-compatible HTTP(S) server on
 * loopback, serving the fake model for `deno task dev` and as the real HTTP
 * upstream of end-to-end tests. It records what it received (in memory only,
 * never logged) and can be told to misbehave (see `faults.ts`).
 */
import { GatewayError } from "../http/mod.ts";
import { type Fault, FaultSlot } from "./faults.ts";
import { DemoApi, type DemoStats, emptyStats, errorResponse } from "./demo_api.ts";

/** Model names served when none are configured. */
const DEFAULT_DEMO_MODELS: readonly string[] = ["demo-chat", "demo-reasoner", "demo-embed"];

/** Embedding size when neither the request nor the options give one. */
const DEFAULT_EMBEDDING_DIMS = 16;

/** The clock used when none is injected (fixed, so output stays byte-identical across runs). */
const DEFAULT_DEMO_EPOCH_MS = 1_735_689_600_000;

/** Options of `startDemoUpstream`. */
export interface DemoUpstreamOptions {
  /** Label used in response ids and `owned_by`. */
  name: string;
  /** Default 127.0.0.1. */
  hostname?: string;
  /** Default 0 (an ephemeral port). */
  port?: number;
  models?: string[];
  /** When set, every request must carry `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  embeddingDefaultDims?: number;
  /** Epoch milliseconds, for `created` fields; default a fixed instant. */
  now?: () => number;
  /** Serve HTTPS with this PEM certificate chain and private key. */
  tls?: { cert: string; key: string };
  /**
   * Extra routes (e.g. a development attestation endpoint), tried before the
   * demo API: a Response answers the request, null falls through. Requests
   * they answer are not counted in `stats` and need no API key, so `stats`
   * keeps describing only the inference traffic.
   */
  extraRoutes?: (req: Request) => Response | null | Promise<Response | null>;
}

export type { DemoStats } from "./demo_api.ts";

/** A running demo upstream. */
export interface DemoUpstream {
  readonly name: string;
  /** Origin, e.g. `http://127.0.0.1:PORT` (no trailing slash, no `/v1`). */
  readonly url: string;
  readonly port: number;
  readonly models: readonly string[];
  /** Live counters (the same object across `resetStats()`). */
  readonly stats: DemoStats;
  /** Sets the fault for subsequent requests (null clears it); throws RangeError on a malformed fault. */
  setFault(f: Fault | null): void;
  resetStats(): void;
  /** Stops listening, releases hung requests and open streams, and waits for the server to finish. */
  close(): Promise<void>;
}

function originOf(hostname: string, port: number, tls: boolean): string {
  const host = hostname === "0.0.0.0"
    ? "127.0.0.1"
    : hostname.includes(":")
    ? `[${hostname}]`
    : hostname;
  return `${tls ? "https" : "http"}://${host}:${port}`;
}

/** Starts a demo upstream; resolves once it listens. */
// deno-lint-ignore require-await -- async so that bad options reject rather than throw.
export async function startDemoUpstream(opts: DemoUpstreamOptions): Promise<DemoUpstream> {
  const models = [...(opts.models ?? DEFAULT_DEMO_MODELS)];
  if (models.length === 0) throw new RangeError("models must not be empty");
  const defaultDims = opts.embeddingDefaultDims ?? DEFAULT_EMBEDDING_DIMS;
  if (!Number.isInteger(defaultDims) || defaultDims <= 0) {
    throw new RangeError("embeddingDefaultDims must be a positive integer");
  }
  const hostname = opts.hostname ?? "127.0.0.1";
  const faults = new FaultSlot();
  const closing = new AbortController();
  const stats = emptyStats();
  const api = new DemoApi({
    name: opts.name,
    models,
    apiKey: opts.apiKey,
    embeddingDefaultDims: defaultDims,
    now: opts.now ?? (() => DEFAULT_DEMO_EPOCH_MS),
    extraRoutes: opts.extraRoutes,
    faults,
    stats,
    closing: closing.signal,
  });

  const base = {
    hostname,
    port: opts.port ?? 0,
    onListen: () => {},
    onError: () => errorResponse(new GatewayError("internal", "demo upstream error")),
  };
  const server = opts.tls
    ? Deno.serve({ ...base, cert: opts.tls.cert, key: opts.tls.key }, api.handler)
    : Deno.serve(base, api.handler);
  let closed: Promise<void> | null = null;
  const port = server.addr.port;
  return {
    name: opts.name,
    url: originOf(hostname, port, opts.tls !== undefined),
    port,
    models,
    stats,
    setFault: (f) => faults.set(f),
    // Reset in place: tests may hold on to the `stats` object.
    resetStats: () => void Object.assign(stats, emptyStats()),
    close: () => {
      if (closed === null) {
        closing.abort(new Error("demo upstream closing"));
        closed = server.shutdown();
      }
      return closed;
    },
  };
}
