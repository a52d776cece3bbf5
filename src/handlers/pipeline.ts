/**
 * The one inference pipeline behind all five inference endpoints, as named
 * stages over one per-request state (`inference_state.ts`):
 * intake (authenticate, read, decrypt, hash, parse) → route (plan, constraints,
 * candidates) → admit (rate limit + credits) → forward (failover) → answer
 * (whole or streamed; settle usage and commit the signed receipt in one group
 * commit); any failure → refuse (a refusal after authentication gets a receipt too),
 * which rethrows it for the app's one error renderer.
 */
import type { GatewayContext } from "./context.ts";
import type { RequestInfo } from "./request_info.ts";
import { type InferenceEndpoint, InferenceState } from "./inference_state.ts";
import { intake } from "./intake.ts";
import { route } from "./route.ts";
import { admit } from "./admit.ts";
import { forwardStage } from "./forward_stage.ts";
import { answer } from "./answer.ts";
import { refuse } from "./refuse.ts";

// Named here too: app/app.ts registers endpoints through the pipeline's names.
export type { InferenceEndpoint, PlanDeps } from "./inference_state.ts";
// Defined in its own module so handlers/context.ts can name it without importing the pipeline.
export type { RequestInfo } from "./request_info.ts";

export async function handleInference(
  req: Request,
  ctx: GatewayContext,
  ep: InferenceEndpoint,
  info: RequestInfo,
): Promise<Response> {
  const s = new InferenceState(req, ctx, ep, info);
  try {
    await intake(s);
    const plan = route(s);
    await admit(s, s.key!, plan);
    const result = await forwardStage(s);
    return await answer(s, plan, result);
  } catch (e) {
    return await refuse(s, e);
  }
}
