/**
 * The settlement of an admission at the actual usage, bounded (#25) and
 * recorded per day. A function made here from numbers, not a method of the
 * request state: a stream holds it for its whole life, and the state holds the
 * plan and the prompt's bytes. So it writes its two log facts (`usage`,
 * `costNano`) itself, the one exception to the state owning them.
 */
import { type Admission, dailyUsageWrites } from "../admission/mod.ts";
import type { ReceiptRecorder } from "../receipts/mod.ts";
import type { GatewayContext } from "./context.ts";
import { costNano, type InferencePlan, type Settle } from "./plan.ts";
import type { RequestInfo } from "./request_info.ts";
import { boundUsage } from "./usage_bounds.ts";

/** An answer without usage: neither count is valid, so both come from the estimate. */
const NO_USAGE = { prompt_tokens: -1, completion_tokens: -1 };

export function settlementFor(
  admission: Admission,
  plan: InferencePlan,
  info: RequestInfo,
  keyId: string,
  ctx: Pick<GatewayContext, "now" | "log">,
  rec: ReceiptRecorder,
): Settle {
  const { pricing, estimate } = plan;
  const { now, log } = ctx;
  const bounds = {
    promptTokens: estimate.maxPromptTokens,
    completionTokens: estimate.outputTokens,
  };
  // Billed when the upstream reports no usage: the prompt's exact count, made only if read —
  // for a whole answer. A stream bills the admission's figure (the ceiling when that decided):
  // counting at its end would keep the prompt's text alive for as long as it runs.
  // Numbers only: `estimate` itself holds that lazy count (and through it the prompt).
  const exactPrompt = plan.stream ? undefined : estimate.exactPromptTokens;
  const { promptTokens, outputTokens } = estimate;
  const estimated = {
    get prompt_tokens() {
      return exactPrompt ? exactPrompt() : promptTokens;
    },
    completion_tokens: outputTokens,
  };
  return (u, fallback = estimated) => {
    // Numbers from the upstream: valid counts, within what the gateway let it do (#25).
    // No usage at all is billed as invalid usage is: at the estimate, said in the receipt.
    const b = boundUsage(u ?? NO_USAGE, fallback, bounds);
    const usage = b.usage;
    if (b.invalid.length > 0 || b.clamped.length > 0) {
      rec.usageBounded(usage, b.invalid, b.clamped);
      log({
        level: "warn",
        msg: "upstream usage bounded",
        request_id: info.requestId,
        invalid: b.invalid,
        clamped: b.clamped,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
      });
    }
    info.usage = usage;
    const actual = {
      promptTokens: usage.prompt_tokens,
      completionTokens: usage.completion_tokens,
      costNano: costNano(usage, pricing),
    };
    const writes = admission.settlement(actual);
    if (writes.length === 0) return writes; // settled already
    info.costNano = actual.costNano;
    // Per day and model, for GET /v1/usage and the admin API.
    writes.push(...dailyUsageWrites(keyId, info.model ?? "", now(), actual));
    return writes;
  };
}
