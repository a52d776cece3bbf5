/**
 * `POST /v1/messages/count_tokens` (Anthropic format): the prompt tokens of a
 * Messages request, counted by the same module and tokenizer the gateway
 * uses for its limits and reservations (src/tokens/). Authenticated; nothing
 * is sent upstream and nothing is stored, so no receipt.
 */
import type { GatewayContext } from "./context.ts";
import { parseJsonBody, readBody, requireJsonContentType } from "../http/body.ts";
import { badParam } from "../http/errors.ts";
import { jsonResponse } from "../http/json.ts";
import { parseMessagesRequest } from "../formats/messages/mod.ts";
import { estimateChatTokens } from "../formats/chat.ts";
import { authenticateCaller } from "./pipeline.ts";

/** Members of a Messages request that describe generation, not input: accepted and not counted. */
const GENERATION_ONLY = ["max_tokens", "stream", "temperature", "top_p", "top_k", "stop_sequences"];

export async function countTokens(req: Request, ctx: GatewayContext): Promise<Response> {
  await authenticateCaller(req, ctx);
  requireJsonContentType(req);
  const body = parseJsonBody(await readBody(req, ctx.config.limits.max_body_bytes));
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw badParam("body", "the request body must be a JSON object");
  }
  // count_tokens takes a Messages request without `max_tokens`; validate the rest
  // exactly as /v1/messages does.
  const input = { ...(body as Record<string, unknown>) };
  for (const k of GENERATION_ONLY) delete input[k];
  const p = parseMessagesRequest({ ...input, max_tokens: 1 });
  const model = ctx.catalog.chatModel(p.model);
  const n = estimateChatTokens(p.chat.messages, model.tokenizer, undefined, p.chat.tools);
  return jsonResponse({ input_tokens: n });
}
