/**
 * Upstream usage is a number from outside: before it bills anything it must
 * be a non-negative safe integer (else the gateway's own estimate stands in)
 * and no larger than what the gateway let the upstream do — the output cap it
 * sent (`max_tokens × n`, or the model's output length) and the context the
 * prompt had to fit (docs/decisions/upstream-usage-bounds.md).
 */
import type { TokenUsage } from "../formats/mod.ts";

/** The most a request may be billed for, in tokens. */
export interface UsageBounds {
  promptTokens: number;
  completionTokens: number;
}

type Field = keyof TokenUsage;

export interface BoundedUsage {
  usage: TokenUsage;
  /** Fields the upstream sent as something other than a non-negative safe integer. */
  invalid: Field[];
  /** Fields cut down to their bound. */
  clamped: Field[];
}

const FIELDS: readonly Field[] = ["prompt_tokens", "completion_tokens"];

/** `reported` made billable: each field valid (else `fallback`'s) and within `bounds`. */
export function boundUsage(
  reported: TokenUsage,
  fallback: TokenUsage,
  bounds: UsageBounds,
): BoundedUsage {
  const usage = { prompt_tokens: 0, completion_tokens: 0 };
  const invalid: Field[] = [];
  const clamped: Field[] = [];
  const max: TokenUsage = {
    prompt_tokens: bounds.promptTokens,
    completion_tokens: bounds.completionTokens,
  };
  for (const f of FIELDS) {
    let v: unknown = reported[f];
    if (!isCount(v)) {
      invalid.push(f);
      v = isCount(fallback[f]) ? fallback[f] : 0;
    }
    const cap = isCount(max[f]) ? max[f] : 0;
    if ((v as number) > cap) {
      clamped.push(f);
      v = cap;
    }
    usage[f] = v as number;
  }
  return { usage, invalid, clamped };
}

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}
