/**
 * `POST /v1/messages/count_tokens` (Anthropic format): the prompt tokens of a
 * Messages request, counted by the same module and tokenizer the gateway
 * uses for its limits and reservations (src/tokens/). Authenticated; nothing
 * is sent upstream and nothing is stored, so no receipt.
 *
 * Bounded like the inference endpoints (#25 item 1): each call is charged to
 * the key's bucket of unadmitted requests before its body is read, and the
 * count stops at the model's context length (a longer prompt is a 400, as
 * `/v1/messages` would answer it).
 */
import type { AccountDeps, ConfigDeps, RequestPathDeps } from "./context.ts";
import {
  badParam,
  jsonResponse,
  largeBodyTurn,
  parseJsonBody,
  readBody,
  requireJsonContentType,
} from "../http/mod.ts";
import { estimateChatTokens, parseMessagesRequest } from "../formats/mod.ts";
import { authenticateCaller } from "./auth.ts";
import { checkContextLength } from "../tokens/mod.ts";

/** What this module uses of the gateway's context. */
type Deps = ConfigDeps & RequestPathDeps & AccountDeps;

/** Members of a Messages request that describe generation, not input: accepted and not counted. */
const GENERATION_ONLY = ["max_tokens", "stream", "temperature", "top_p", "top_k", "stop_sequences"];

export async function countTokens(req: Request, ctx: Deps): Promise<Response> {
  const key = await authenticateCaller(req, ctx);
  ctx.preAdmission.charge(key);
  requireJsonContentType(req);
  // Read within the same byte budget and deadline as an inference body.
  const ticket = ctx.bodyBudget.ticket(key.key_id);
  let body: unknown;
  try {
    const wire = await readBody(req, ctx.config.limits.max_body_bytes, {
      timeoutMs: ctx.config.limits.body_timeout_ms,
      reserve: ticket.reserve,
      after: ctx.deadlines.after,
    });
    await largeBodyTurn(wire);
    body = parseJsonBody(wire);
  } finally {
    ticket.release();
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw badParam("body", "the request body must be a JSON object");
  }
  // count_tokens takes a Messages request without `max_tokens`; validate the rest
  // exactly as /v1/messages does.
  const input = { ...(body as Record<string, unknown>) };
  for (const k of GENERATION_ONLY) delete input[k];
  const p = parseMessagesRequest({ ...input, max_tokens: 1 });
  const model = ctx.catalog.chatModel(p.model);
  const contextLength = model.config.context_length;
  const n = estimateChatTokens(
    p.chat.messages,
    model.tokenizer,
    contextLength,
    p.chat.tools,
    ctx.promptCounts.scope(key.digest),
  );
  checkContextLength({
    promptTokens: n,
    requestedOutput: undefined,
    contextLength,
    modelId: p.model,
    param: "messages",
  });
  return jsonResponse({ input_tokens: n });
}
