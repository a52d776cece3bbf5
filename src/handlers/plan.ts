/**
 * What an inference endpoint tells the shared pipeline about one request:
 * the model, routes, estimates, and how to build the upstream body and turn
 * the upstream's answer into the client's format. Built by thin per-endpoint
 * modules; the pipeline does everything else.
 */
import type { Candidate } from "../routing/mod.ts";
import { idOf, type TokenUsage, type Translator, usageField } from "../formats/mod.ts";
import { MAX_SETTLEMENT_NANO } from "../admission/mod.ts";
import type { TokenizerName } from "../tokens/mod.ts";
import type { KvWrite } from "../store/mod.ts";
import { boundUsage } from "./usage_bounds.ts";

// The stream contract lives with the formats that implement it.
export type { TokenUsage, Translator } from "../formats/mod.ts";

export interface InferencePlan {
  /** The model id the client asked for (echoed in responses and receipts). */
  modelId: string;
  /** The raw `provider` block, validated by the router. */
  provider: unknown;
  routes: { provider: string; model: string }[];
  stream: boolean;
  /**
   * For admission: estimated prompt tokens and the output tokens reserved
   * (what the upstream is allowed: `max_tokens × n`, or the model's output
   * length). `maxPromptTokens` is the most prompt a request can have (a
   * text-only chat prompt's byte ceiling, else the context length, per prompt;
   * `max_input_tokens` per embeddings input): reported usage is clamped to it and to
   * `outputTokens` (usage_bounds.ts). `exactPromptTokens`: when `promptTokens` is
   * a ceiling (prompt_tokens.ts), the exact count, made only when billed without
   * the upstream's usage.
   */
  estimate: {
    promptTokens: number;
    outputTokens: number;
    maxPromptTokens: number;
    exactPromptTokens?: () => number;
  };
  pricing: { prompt: number; completion: number };
  /** The model's tokenizer: counts delivered text when a stream ends without usage. */
  tokenizer?: TokenizerName;
  /** Path on the candidate's base URL (a native-format upstream gets its own format's path). */
  upstreamPath(c: Candidate): string;
  upstreamBody(c: Candidate): unknown;
  /** Non-streamed: the upstream JSON → the client's JSON. */
  respond(upstream: unknown, c: Candidate): unknown;
  usage(upstream: unknown): TokenUsage | undefined;
  chatId(upstream: unknown): string | null;
  /** Streamed: a fresh translator for this response from this candidate. */
  translator(c: Candidate): Translator;
  /** SSE content type for streamed responses. */
  streamContentType?: string;
}

/**
 * Cost in nano-credits, rounded up: the gateway never undercharges by rounding.
 * Saturates at `MAX_SETTLEMENT_NANO` (and is 0 for counts that are not
 * numbers), so no price or count can make a sum in the ledger wrap.
 */
export function costNano(u: TokenUsage, pricing: { prompt: number; completion: number }): bigint {
  const nano = u.prompt_tokens * pricing.prompt * 1e9 +
    u.completion_tokens * pricing.completion * 1e9;
  if (Number.isNaN(nano) || nano <= 0) return 0n;
  if (nano >= MAX_SETTLEMENT_FLOAT) return MAX_SETTLEMENT_NANO;
  return BigInt(Math.ceil(nano - 1e-6));
}

const MAX_SETTLEMENT_FLOAT = Number(MAX_SETTLEMENT_NANO);

/**
 * Settles the admission at reported usage (undefined: none reported), each field
 * not a valid count replaced by `fallback`'s (default: the admission's estimate).
 */
export type Settle = (u: TokenUsage | undefined, fallback?: TokenUsage) => KvWrite[];

/** OpenRouter's `usage.cost`: the answer's cost in credits (the nano-credits settled, as a number). */
export function costCredits(
  u: TokenUsage,
  pricing: { prompt: number; completion: number },
): number {
  return Number(costNano(u, pricing)) / 1e9;
}

/**
 * `usage.cost` for a stream translator. Made here, not as a closure inside a plan,
 * whose scope holds the parsed prompt: a stream would keep it alive for its whole life.
 */
/**
 * The `usage.cost` a stream shows its client: of the usage as the settlement bounds it
 * (usage_bounds.ts: invalid counts at `bounds`' estimate, counts clamped to its maxima), so
 * the figure is the one billed, not the upstream's own (a 10^9-token claim shows what it
 * costs, which is at most the clamp).
 */
export function costOf(
  pricing: { prompt: number; completion: number },
  bounds: { promptTokens: number; maxPromptTokens: number; outputTokens: number },
): (u: TokenUsage) => number {
  const fallback = { prompt_tokens: bounds.promptTokens, completion_tokens: bounds.outputTokens };
  const max = { promptTokens: bounds.maxPromptTokens, completionTokens: bounds.outputTokens };
  return (u) => costCredits(boundUsage(u, fallback, max).usage, pricing);
}

/**
 * How a plan reaches one kind of upstream: its path, body, answer and stream translation.
 * `U` is the answer's type in the upstream's format (`ChatResponse` for chat upstreams).
 */
export interface UpstreamSide<U = unknown> {
  path: string;
  body(c: Candidate): unknown;
  respond(upstream: U): unknown;
  translator(): Translator;
}

/**
 * The per-candidate part of a plan for a format some upstreams speak natively
 * (`native_formats`): those get the client's format passed through, the others
 * the request translated to chat.
 */
export function nativeOrTranslated<T>(
  format: "messages" | "responses",
  native: UpstreamSide,
  translated: UpstreamSide<T>,
): PlanSides {
  const side = (c: Candidate) =>
    c.provider.native_formats.includes(format) ? native : translated as UpstreamSide;
  return {
    upstreamPath: (c) => side(c).path,
    upstreamBody: (c) => side(c).body(c),
    respond: (u, c) => side(c).respond(u),
    translator: (c) => side(c).translator(),
  };
}

/** The per-candidate part of a plan: path, body, answer and stream translation. */
export interface PlanSides<U = unknown> {
  upstreamPath(c: Candidate): string;
  upstreamBody(c: Candidate): unknown;
  /** Non-streamed: the upstream's answer, as its format's type → the client's JSON. */
  respond(upstream: U, c: Candidate): unknown;
  translator(c: Candidate): Translator;
}

/** What every plan takes from the parsed request. */
export interface PlanRequest {
  model: string;
  provider: unknown;
  stream?: boolean;
}

/** What every plan takes from the catalog's model. */
export interface PlanModel {
  config: {
    routes: { provider: string; model: string }[];
    /** An embedding model prices only its input: its completion price is 0. */
    pricing: { prompt: number; completion: number } | { prompt: number };
  };
  tokenizer?: TokenizerName;
}

/**
 * The one place a plan is made: the fields every endpoint shares from its parsed
 * request and model, its estimate, and its per-candidate sides. `overrides`: an
 * endpoint whose answers are not chat-shaped (embeddings) reads usage and ids its own way.
 */
export function basePlan<U>(
  p: PlanRequest,
  model: PlanModel,
  estimate: InferencePlan["estimate"],
  sides: PlanSides<U>,
  overrides?: Pick<InferencePlan, "usage" | "chatId">,
): InferencePlan {
  return {
    modelId: p.model,
    provider: p.provider,
    routes: model.config.routes,
    stream: p.stream === true,
    estimate,
    pricing: pricingOf(model.config.pricing),
    tokenizer: model.tokenizer,
    upstreamPath: sides.upstreamPath,
    upstreamBody: sides.upstreamBody,
    // The upstream's JSON read as the format's answer type: the upstream was asked in that
    // format, and the format's translators read the answer defensively.
    respond: sides.respond,
    usage: overrides?.usage ?? usageField,
    chatId: overrides?.chatId ?? idOf,
    translator: sides.translator,
  };
}

function pricingOf(p: PlanModel["config"]["pricing"]): { prompt: number; completion: number } {
  return "completion" in p ? p : { prompt: p.prompt, completion: 0 };
}
