/**
 * The demo upstream's API: the fake model's chat, completions, embeddings and
 * model list, with the recorded stats and the injected faults. Records in
 * memory only, never logged.
 */
import { ERROR_KINDS, errorBody, GatewayError } from "../http/mod.ts";
import type { Fault, FaultSlot } from "./faults.ts";
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

/** What the API serves and how. */
export interface DemoApiOptions {
  /** Label used in response ids and `owned_by`. */
  name: string;
  models: readonly string[];
  apiKey?: string;
  embeddingDefaultDims: number;
  now: () => number;
  extraRoutes?: (req: Request) => Response | null | Promise<Response | null>;
  faults: FaultSlot;
  stats: DemoStats;
  /** Aborted when the server closes: releases hung requests and open streams. */
  closing: AbortSignal;
}

const JSON_HEADERS = { "content-type": "application/json" };
const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" };

export function errorResponse(err: GatewayError): Response {
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

export function emptyStats(): DemoStats {
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

const ROUTES: Record<string, string> = {
  "/v1/models": "GET",
  "/v1/chat/completions": "POST",
  "/v1/completions": "POST",
  "/v1/embeddings": "POST",
};

/** The demo API's request handler and the fake model's endpoints. */
export class DemoApi {
  #o: DemoApiOptions;
  #seq = 0;

  constructor(o: DemoApiOptions) {
    this.#o = o;
    // Handed to the server as its handler: bound once here.
    this.handler = this.handler.bind(this);
  }

  async handler(request: Request): Promise<Response> {
    try {
      return await this.#handle(request);
    } catch (e) {
      if (e instanceof GatewayError) return errorResponse(e);
      // An aborted wait (client gone or server closing), or a bug: never echo details.
      const kind = this.#o.closing.aborted ? "unavailable" : "internal";
      return errorResponse(new GatewayError(kind, "demo upstream could not answer"));
    }
  }

  async #handle(request: Request): Promise<Response> {
    const o = this.#o;
    const extra = o.extraRoutes ? await o.extraRoutes(request) : null;
    if (extra !== null) return extra;
    const path = new URL(request.url).pathname;
    const { body, bodyIsJson } = await this.#record(request, path);

    if (o.apiKey !== undefined && request.headers.get("authorization") !== `Bearer ${o.apiKey}`) {
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
    const signal = o.closing;
    const fault = o.faults.take(path);
    if (fault?.kind === "status") return statusFaultResponse(fault);
    if (fault?.kind === "hang") {
      await new Promise<void>((resolve) => {
        if (signal.aborted) return resolve();
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
      return errorResponse(new GatewayError("unavailable", "demo upstream closing"));
    }
    if (fault?.kind === "delay") await sleep(fault.ms, signal);

    if (path === "/v1/models") return this.#modelList(fault, signal);
    if (!bodyIsJson) throw new GatewayError("invalid_request", "request body must be JSON");
    if (path === "/v1/chat/completions") return this.#chat(body, fault, signal);
    if (path === "/v1/completions") return this.#completions(body, fault, signal);
    return this.#embeddings(body, fault, signal);
  }

  /** Counts the request and keeps its head and JSON body (memory only). */
  async #record(request: Request, path: string): Promise<{ body: unknown; bodyIsJson: boolean }> {
    const stats = this.#o.stats;
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
    return { body, bodyIsJson };
  }

  #meta(prefix: string, model: string) {
    return {
      id: `${prefix}-${this.#o.name}-${++this.#seq}`,
      created: Math.floor(this.#o.now() / 1000),
      model,
    };
  }

  #checkModel(model: string): void {
    if (!this.#o.models.includes(model)) {
      throw new GatewayError("model_not_found", `The model \`${model}\` does not exist`, {
        param: "model",
      });
    }
  }

  #chat(body: unknown, fault: Fault | null, signal: AbortSignal): Response {
    const req = parseChatRequest(body);
    this.#checkModel(req.model);
    const plan = planChat(req);
    const m = this.#meta("chatcmpl", req.model);
    const emptyToolCalls = fault?.kind === "empty_tool_calls";
    if (!req.stream) {
      return jsonResponse(renderChatCompletion(plan, m, { emptyToolCalls }), fault, signal);
    }
    const usage = usageMode(req.stream_options?.include_usage === true, fault);
    const chunks = renderChatChunks(plan, m, { usage, emptyToolCalls });
    return sseResponse(sseEvents(chunks, fault?.kind !== "no_done"), fault, signal);
  }

  #completions(body: unknown, fault: Fault | null, signal: AbortSignal): Response {
    const req = parseCompletionRequest(body);
    this.#checkModel(req.model);
    const plan = planCompletion(req);
    const m = this.#meta("cmpl", req.model);
    if (!req.stream) return jsonResponse(renderTextCompletion(plan, m), fault, signal);
    const usage = usageMode(req.stream_options?.include_usage === true, fault);
    const chunks = renderTextCompletionChunks(plan, m, { usage });
    return sseResponse(sseEvents(chunks, fault?.kind !== "no_done"), fault, signal);
  }

  #embeddings(body: unknown, fault: Fault | null, signal: AbortSignal): Response {
    const req = parseEmbeddingRequest(body);
    this.#checkModel(req.model);
    return jsonResponse(fakeEmbeddings(req, this.#o.embeddingDefaultDims), fault, signal);
  }

  #modelList(fault: Fault | null, signal: AbortSignal): Response {
    const created = Math.floor(this.#o.now() / 1000);
    const data = this.#o.models.map((id) => ({
      id,
      object: "model",
      created,
      owned_by: this.#o.name,
    }));
    return jsonResponse({ object: "list", data }, fault, signal);
  }
}

function pacing(fault: Fault | null, signal: AbortSignal): PacingOptions {
  return {
    gapMs: fault?.kind === "token_delay" ? fault.ms : 0,
    keepalive: fault?.kind === "keepalive_comments",
    resetAfter: fault?.kind === "reset_mid_stream" ? fault.afterChunks : null,
    signal,
  };
}

/** A JSON body, cut in two and reset halfway under `reset_mid_stream`. */
function jsonResponse(value: unknown, fault: Fault | null, signal: AbortSignal): Response {
  const text = JSON.stringify(value);
  if (fault?.kind !== "reset_mid_stream") return new Response(text, { headers: JSON_HEADERS });
  const half = Math.floor(text.length / 2);
  const body = pacedBody([text.slice(0, half), text.slice(half)], {
    ...pacing(null, signal),
    resetAfter: 1,
  });
  return new Response(body, { headers: JSON_HEADERS });
}

function sseResponse(events: string[], fault: Fault | null, signal: AbortSignal): Response {
  return new Response(pacedBody(events, pacing(fault, signal)), { headers: SSE_HEADERS });
}
