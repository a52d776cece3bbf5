/**
 * How many output tokens a request may produce, for admission (issue #15
 * item 3): the cap forwarded upstream (the client's, or
 * `limits.default_output_reserve`), per completion. A model that reasons
 * spends reasoning tokens that some upstreams do not count against the
 * client's cap, so its reservation is the model's whole output length.
 */
import type { ChatModel } from "../catalog/mod.ts";

export interface OutputReserve {
  /** Sent upstream when the client named no maximum. */
  cap: number;
  /** Reserved per completion (cap, or the model's output length when it reasons). */
  perCompletion: number;
}

export function outputReserve(
  model: ChatModel,
  clientCap: number | undefined,
  defaultReserve: number,
  promptTokens = 0,
): OutputReserve {
  const limit = model.config.max_output_length;
  // The default cap also leaves the prompt its room in the context.
  const room = Math.max(1, model.config.context_length - promptTokens);
  const cap = clientCap ?? Math.min(defaultReserve, limit, room);
  const reasons = model.config.supported_features.includes("reasoning");
  return { cap, perCompletion: reasons ? Math.max(cap, limit) : cap };
}
