/**
 * The fourth stage: failover over the candidates, one attempt at a time
 * (`routing/failover.ts`), the request state itself serving as the forward
 * plan and the receipt as the attempt log.
 */
import { forward, type ForwardResult } from "../routing/mod.ts";
import type { InferenceState } from "./inference_state.ts";

export async function forwardStage(s: InferenceState): Promise<ForwardResult> {
  const { ctx } = s;
  s.noteAttemptsStarted();
  const t0 = ctx.monotonic();
  let result: ForwardResult;
  try {
    result = await forward(s, ctx.forward, s.rec!);
  } finally {
    s.timed("upstream", t0);
  }
  const provider = result.candidate.provider.name;
  s.noteProvider(provider);
  s.headers.set("x-serving-provider", provider);
  s.headers.set("x-serving-model", s.servedModel);
  s.bodies.clear(); // the prompt's bytes are not kept for the answer's life
  return result;
}
