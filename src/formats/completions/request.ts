/** Legacy `/v1/completions` requests and streams. Pure. */
import { countText, newBpeBudget, type TokenizerName } from "../../tokens/mod.ts";
import { z } from "zod";
import { parseWith } from "../zod_error.ts";

export const completionRequestSchema = z.looseObject({
  model: z.string().min(1),
  prompt: z.union([z.string(), z.array(z.string()).min(1).max(128)]),
  max_tokens: z.number().int().positive().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  n: z.number().int().min(1).max(128).optional(),
  /** Completions generated per prompt (and billed) when larger than `n`. */
  best_of: z.number().int().min(1).max(128).optional(),
  stream: z.boolean().optional(),
  stream_options: z.strictObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullable().optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  seed: z.number().int().optional(),
  suffix: z.string().nullable().optional(),
  echo: z.boolean().optional(),
  user: z.string().max(256).optional(),
  provider: z.unknown().optional(),
});

/** The validated body; `provider` is dropped (set undefined) before forwarding. */
export type CompletionRequest = z.infer<typeof completionRequestSchema>;

export interface ParsedCompletion {
  model: string;
  body: CompletionRequest;
  provider: unknown;
  stream: boolean;
  clientWantsUsage: boolean;
}

export function parseCompletionRequest(body: unknown): ParsedCompletion {
  const r = parseWith(completionRequestSchema, body);
  return {
    model: r.model,
    body: { ...r, provider: undefined },
    provider: r.provider,
    stream: r.stream === true,
    clientWantsUsage: r.stream_options?.include_usage === true,
  };
}

/**
 * Prompt tokens of each prompt of a legacy completion (each gets its own
 * completion, so each must fit the context on its own); counting a prompt
 * stops past `limit`.
 */
export function countCompletionPrompts(
  prompt: string | string[],
  tokenizer: TokenizerName,
  limit?: number,
): number[] {
  const budget = newBpeBudget(); // one BPE budget for all the prompts of a request
  return (typeof prompt === "string" ? [prompt] : prompt).map((p) =>
    countText(p, tokenizer, limit, budget)
  );
}

export function upstreamCompletionBody(
  body: CompletionRequest,
  upstreamModel: string,
): CompletionRequest {
  const out: CompletionRequest = { ...body, model: upstreamModel };
  if (out.stream) out.stream_options = { include_usage: true };
  return out;
}

/** The upstream's completion as the client gets it: the model id it asked for. */
export function completionForClient(upstream: unknown, model: string): unknown {
  return { ...(upstream as Record<string, unknown>), model };
}
