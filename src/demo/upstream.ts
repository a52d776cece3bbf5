/**
 * The demo upstream: a deterministic OpenAI-compatible HTTP(S) server on
 * loopback, serving the fake model for `deno task dev` and as the real HTTP
 * upstream of end-to-end tests. It records what it received (in memory only,
 * never logged) and can be told to misbehave (see `faults.ts`).
 */
import { ERROR_KINDS, errorBody, GatewayError } from "../http/mod.ts";
import { type Fault, FaultSlot } from "./faults.ts";
import { fakeEmbeddings } from "./fake_embeddings.ts";
import { planChat, planCompletion } from "./fake_model.ts";
import {
  renderChatChunks,
  renderChatCompletion,
  renderTextCompletion,
  renderTextCompletionChunks,
  type UsageMode,
} from "./fake_render.ts";
import { parseChatRequest, parseCompletionRequest, parseEmbeddingRequest } from "./fake_request.ts";
import { pacedBody, type PacingOptions } from "./paced_body.ts";
import { sleep } from "../store/mod.ts";

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

/**
 * What the demo upstream has received since start or the last `resetStats()`.
 * Model listings (`GET /v1/models`, which the gateway asks for at start-up) are
 * counted apart in `listings`: `total` and `byPath` are the inference traffic
 * tests judge by.
 */
export interface DemoStats {
  listings: number;
  total: number;
  byPath: Record<string, number>;
  lastPath: string | null;
  lastMethod: string | null;
  /** Header names are lowercase. */
  lastHeaders: Record<string, string> | null;
  /** The last request body parsed as JSON (undefined when absent or not JSON). Memory only. */
  lastBody: unknown;
}

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

const JSON_HEADERS = { "content-type": "application/json" };
const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" };

function errorResponse(err: GatewayError): Response {
  return new Response(JSON.stringify(errorBody(err, "openai")), {
    status: ERROR_KINDS[err.kind].status,
    headers: { ...JSON_HEADERS, ...err.headers },
  });
}

function statusFaultResponse(f: Extract<Fault, { kind: "status" }>): Response {
  const body = f.body === undefined
    ? JSON.stringify({
      error: {
        message: `demo upstream injected status ${f.status}`,
        type: "server_error",
        code: null,
        param: null,
      },
    })
    : typeof f.body === "string"
    ? f.body
    : JSON.stringify(f.body);
  return new Response(body, { status: f.status, headers: { ...JSON_HEADERS, ...f.headers } });
}

function sseEvents(chunks: unknown[], withDone: boolean): string[] {
  const events = chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`);
  if (withDone) events.push("data: [DONE]\n\n");
  return events;
}

function usageMode(includeUsage: boolean, fault: Fault | null): UsageMode {
  if (fault?.kind === "usage_in_finish_chunk") return "in_finish";
  if (fault?.kind === "usage_after_finish" || includeUsage) return "after_finish";
  return "none";
}

function emptyStats(): DemoStats {
  return {
    listings: 0,
    total: 0,
    byPath: {},
    lastPath: null,
    lastMethod: null,
    lastHeaders: null,
    lastBody: undefined,
  };
}

function originOf(hostname: string, port: number, tls: boolean): string {
  const host = hostname === "0.0.0.0"
    ? "127.0.0.1"
    : hostname.includes(":")
    ? `[${hostname}]`
    : hostname;
  return `${tls ? "https" : "http"}://${host}:${port}`;
}

const ROUTES: Record<string, string> = {
  "/v1/models": "GET",
  "/v1/chat/completions": "POST",
  "/v1/completions": "POST",
  "/v1/embeddings": "POST",
};

/** Starts a demo upstream; resolves once it listens. */
// Long as one closure over shared state; each inner function is short.
// deno-lint-ignore require-await -- async so that bad options reject rather than throw.
export async function startDemoUpstream(opts: DemoUpstreamOptions): Promise<DemoUpstream> {
  const models = [...(opts.models ?? DEFAULT_DEMO_MODELS)];
  if (models.length === 0) throw new RangeError("models must not be empty");
  const defaultDims = opts.embeddingDefaultDims ?? DEFAULT_EMBEDDING_DIMS;
  if (!Number.isInteger(defaultDims) || defaultDims <= 0) {
    throw new RangeError("embeddingDefaultDims must be a positive integer");
  }
  const now = opts.now ?? (() => DEFAULT_DEMO_EPOCH_MS);
  const hostname = opts.hostname ?? "127.0.0.1";
  const faults = new FaultSlot();
  const closing = new AbortController();
  const stats = emptyStats();
  let seq = 0;

  const meta = (prefix: string, model: string) => ({
    id: `${prefix}-${opts.name}-${++seq}`,
    created: Math.floor(now() / 1000),
    model,
  });

  const checkModel = (model: string): void => {
    if (!models.includes(model)) {
      throw new GatewayError("model_not_found", `The model \`${model}\` does not exist`, {
        param: "model",
      });
    }
  };

  const pacing = (fault: Fault | null, signal: AbortSignal): PacingOptions => ({
    gapMs: fault?.kind === "token_delay" ? fault.ms : 0,
    keepalive: fault?.kind === "keepalive_comments",
    resetAfter: fault?.kind === "reset_mid_stream" ? fault.afterChunks : null,
    signal,
  });

  /** A JSON body, cut in two and reset halfway under `reset_mid_stream`. */
  const jsonResponse = (value: unknown, fault: Fault | null, signal: AbortSignal): Response => {
    const text = JSON.stringify(value);
    if (fault?.kind !== "reset_mid_stream") return new Response(text, { headers: JSON_HEADERS });
    const half = Math.floor(text.length / 2);
    const body = pacedBody([text.slice(0, half), text.slice(half)], {
      ...pacing(null, signal),
      resetAfter: 1,
    });
    return new Response(body, { headers: JSON_HEADERS });
  };

  const sseResponse = (events: string[], fault: Fault | null, signal: AbortSignal): Response =>
    new Response(pacedBody(events, pacing(fault, signal)), { headers: SSE_HEADERS });

  const chat = (body: unknown, fault: Fault | null, signal: AbortSignal): Response => {
    const req = parseChatRequest(body);
    checkModel(req.model);
    const plan = planChat(req);
    const m = meta("chatcmpl", req.model);
    const emptyToolCalls = fault?.kind === "empty_tool_calls";
    if (!req.stream) {
      return jsonResponse(renderChatCompletion(plan, m, { emptyToolCalls }), fault, signal);
    }
    const usage = usageMode(req.stream_options?.include_usage === true, fault);
    const chunks = renderChatChunks(plan, m, { usage, emptyToolCalls });
    return sseResponse(sseEvents(chunks, fault?.kind !== "no_done"), fault, signal);
  };

  const completions = (body: unknown, fault: Fault | null, signal: AbortSignal): Response => {
    const req = parseCompletionRequest(body);
    checkModel(req.model);
    const plan = planCompletion(req);
    const m = meta("cmpl", req.model);
    if (!req.stream) return jsonResponse(renderTextCompletion(plan, m), fault, signal);
    const usage = usageMode(req.stream_options?.include_usage === true, fault);
    const chunks = renderTextCompletionChunks(plan, m, { usage });
    return sseResponse(sseEvents(chunks, fault?.kind !== "no_done"), fault, signal);
  };

  const embeddings = (body: unknown, fault: Fault | null, signal: AbortSignal): Response => {
    const req = parseEmbeddingRequest(body);
    checkModel(req.model);
    return jsonResponse(fakeEmbeddings(req, defaultDims), fault, signal);
  };

  const modelList = (fault: Fault | null, signal: AbortSignal): Response => {
    const created = Math.floor(now() / 1000);
    const data = models.map((id) => ({ id, object: "model", created, owned_by: opts.name }));
    return jsonResponse({ object: "list", data }, fault, signal);
  };

  const handle = async (request: Request): Promise<Response> => {
    const extra = opts.extraRoutes ? await opts.extraRoutes(request) : null;
    if (extra !== null) return extra;
    const path = new URL(request.url).pathname;
    if (path === "/v1/models" && request.method === "GET") stats.listings += 1;
    else {
      stats.total += 1;
      stats.byPath[path] = (stats.byPath[path] ?? 0) + 1;
      stats.lastPath = path;
      stats.lastMethod = request.method;
      stats.lastHeaders = Object.fromEntries(request.headers);
    }
    let body: unknown = undefined;
    let bodyIsJson = false;
    if (request.method === "POST") {
      const text = await request.text();
      try {
        body = JSON.parse(text);
        bodyIsJson = true;
      } catch {
        body = undefined;
      }
    }
    stats.lastBody = body;

    if (
      opts.apiKey !== undefined && request.headers.get("authorization") !== `Bearer ${opts.apiKey}`
    ) {
      return errorResponse(new GatewayError("invalid_api_key", "Incorrect API key provided"));
    }
    const expected = ROUTES[path];
    if (expected === undefined) {
      return errorResponse(new GatewayError("not_found", "no such route"));
    }
    if (request.method !== expected) {
      return errorResponse(
        new GatewayError("method_not_allowed", `use ${expected}`, { headers: { allow: expected } }),
      );
    }

    // Not `request.signal`: Deno aborts it once the response head is sent, which would cut
    // every paced stream. A client leaving mid-stream cancels the body instead.
    const signal = closing.signal;
    const fault = faults.take(path);
    if (fault?.kind === "status") return statusFaultResponse(fault);
    if (fault?.kind === "hang") {
      await new Promise<void>((resolve) => {
        if (signal.aborted) return resolve();
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
      return errorResponse(new GatewayError("unavailable", "demo upstream closing"));
    }
    if (fault?.kind === "delay") await sleep(fault.ms, signal);

    if (path === "/v1/models") return modelList(fault, signal);
    if (!bodyIsJson) throw new GatewayError("invalid_request", "request body must be JSON");
    if (path === "/v1/chat/completions") return chat(body, fault, signal);
    if (path === "/v1/completions") return completions(body, fault, signal);
    return embeddings(body, fault, signal);
  };

  const handler = async (request: Request): Promise<Response> => {
    try {
      return await handle(request);
    } catch (e) {
      if (e instanceof GatewayError) return errorResponse(e);
      // An aborted wait (client gone or server closing), or a bug: never echo details.
      const kind = closing.signal.aborted ? "unavailable" : "internal";
      return errorResponse(new GatewayError(kind, "demo upstream could not answer"));
    }
  };

  const base = {
    hostname,
    port: opts.port ?? 0,
    onListen: () => {},
    onError: () => errorResponse(new GatewayError("internal", "demo upstream error")),
  };
  const server = opts.tls
    ? Deno.serve({ ...base, cert: opts.tls.cert, key: opts.tls.key }, handler)
    : Deno.serve(base, handler);
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
