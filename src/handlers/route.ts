/**
 * The second stage: the endpoint's plan for the parsed body, the client's
 * routing constraints, and the candidates that may serve it.
 */
import { parseRouting, selectCandidates } from "../routing/mod.ts";
import type { InferenceState } from "./inference_state.ts";
import type { InferencePlan } from "./plan.ts";

export function route(s: InferenceState): InferencePlan {
  const { ctx } = s;
  const plan = s.ep.plan(s.parsed, ctx, s.key ? ctx.promptCounts.scope(s.key.digest) : undefined);
  s.plan = plan;
  s.modelId = plan.modelId;
  s.noteModel(plan.modelId);
  const constraints = parseRouting(plan.provider, s.req.headers);
  s.verificationRequired = constraints.aciVerified;
  s.candidates = selectCandidates({
    routes: plan.routes,
    providers: ctx.catalog.providers,
    verification: ctx.verification,
    constraints,
    modelId: plan.modelId,
  });
  return plan;
}
