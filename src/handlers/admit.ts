/**
 * The third stage: rate limits and credits for the plan's estimate
 * (`admission/admission.ts`); once admitted, the body no longer counts as being
 * read, and the receipt names the model an alias resolved to (#31).
 */
import { costNano, type InferencePlan } from "./plan.ts";
import type { InferenceState } from "./inference_state.ts";
import type { KeyRecord } from "../keys/mod.ts";

export async function admit(s: InferenceState, key: KeyRecord, plan: InferencePlan): Promise<void> {
  const { ctx, info } = s;
  const { promptTokens, outputTokens } = plan.estimate;
  const t0 = ctx.monotonic();
  try {
    s.admission = await ctx.admitter.admit(key, {
      tokens: promptTokens + outputTokens,
      costNano: costNano(
        { prompt_tokens: promptTokens, completion_tokens: outputTokens },
        plan.pricing,
      ),
      requestId: info.requestId,
    });
  } finally {
    s.timed("admit", t0);
  }
  s.bodyTicket!.release(); // admitted: the body's bytes no longer count as being read
  ctx.preAdmission.admitted(key);
  for (const [k, v] of Object.entries(s.admission.headers)) s.headers.set(k, v);
  s.rec!.admitted();
  // Provenance (#31): the canonical model an alias resolved to, in the headers and the receipt.
  s.servedModel = ctx.catalog.resolvedId(plan.modelId);
  s.rec!.servedModel(s.servedModel);
}
