/**
 * The two fields every OpenAI- or Anthropic-shaped upstream answer carries and
 * the pipeline reads: its id and its usage. Read defensively: the answer is
 * the upstream's JSON, not yet trusted.
 */
import type { TokenUsage } from "./stream_translator.ts";

export function idOf(upstream: unknown): string | null {
  if (upstream && typeof upstream === "object" && "id" in upstream) {
    const id = (upstream as { id: unknown }).id;
    if (typeof id === "string") return id;
  }
  return null;
}

export function usageField(upstream: unknown): TokenUsage | undefined {
  if (!upstream || typeof upstream !== "object") return undefined;
  const u = (upstream as { usage?: unknown }).usage;
  if (!u || typeof u !== "object") return undefined;
  const { prompt_tokens, completion_tokens, input_tokens, output_tokens } = u as Record<
    string,
    unknown
  >;
  const p = prompt_tokens !== undefined ? prompt_tokens : input_tokens;
  const c = completion_tokens !== undefined ? completion_tokens : output_tokens;
  if (p === undefined) return undefined;
  // Passed on as sent (even when not a number): the settlement bounds it (usage_bounds.ts) and
  // says so in the receipt, instead of this reader silently dropping it.
  return { prompt_tokens: p as number, completion_tokens: c === undefined ? 0 : c as number };
}
