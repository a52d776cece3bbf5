/**
 * The chat-shaped endpoints' shared first step (chat, messages, responses):
 * the prompt's tokens, counted with the model's tokenizer and stopping past
 * its context, then the context-window check with the output the client asked
 * for.
 */
import type { ChatModel } from "../catalog/catalog.ts";
import { estimateChatTokens } from "../formats/chat.ts";
import type { ChatRequest } from "../formats/chat_types.ts";
import { checkContextLength } from "../tokens/context.ts";

/** Prompt tokens of `chat`, after a 400 naming `param` when prompt + output exceed the context. */
export function chatPromptTokens(
  chat: ChatRequest,
  model: ChatModel,
  modelId: string,
  requestedOutput: number | undefined,
  param: string,
): number {
  const contextLength = model.config.context_length;
  const promptTokens = estimateChatTokens(
    chat.messages,
    model.tokenizer,
    contextLength,
    chat.tools,
  );
  checkContextLength({ promptTokens, requestedOutput, contextLength, modelId, param });
  return promptTokens;
}
