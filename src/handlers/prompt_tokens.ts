/**
 * The chat-shaped endpoints' shared first step (chat, messages, responses):
 * the prompt's tokens for admission, and the context-window check with the
 * output the client asked for.
 *
 * A cheap ceiling decides first (docs/decisions/prompt-cost.md): every text at
 * its UTF-8 bytes, which no count can exceed. When the ceiling plus the output
 * fits the context, the check passes and the default output cap is the same as
 * with the exact count, so the prompt is not tokenized: admission reserves the
 * ceiling (tokens/min and credits are settled to the upstream's usage
 * afterwards), and the exact count is made only if something asks for it (a
 * usage the upstream never reported). Next, the same with the key's earlier
 * counts of the long texts it sent before in place of their bytes
 * (docs/decisions/prompt-counts-reused.md): a coding agent's next turn fits
 * without tokenizing its new text. Otherwise it is counted, with the model's
 * tokenizer (reusing those counts), stopping past its context.
 */
import type { ChatModel } from "../catalog/mod.ts";
import { type ChatRequest, chatTokenCeilingOf, estimateChatTokens } from "../formats/mod.ts";
import {
  byteLength,
  checkContextLength,
  type ScopedCounts,
  type TextMeasure,
} from "../tokens/mod.ts";
import { textBytes } from "../http/mod.ts";

export interface PromptTokens {
  /** Reserved at admission: the exact count, or the ceiling when that decided. */
  reserve: number;
  /**
   * The most prompt tokens an upstream may bill (usage_bounds.ts): the byte ceiling (no
   * byte-level BPE count exceeds it) for a prompt of text only, else the context length
   * (an image's or audio's real cost is the upstream's to say).
   */
  billable: number;
  /** The exact count (counted on first call when the ceiling decided, then kept). */
  exact: () => number;
  /** Whether the ceiling decided (no count was made). */
  bounded: boolean;
}

/**
 * Prompt tokens of `chat`, after a 400 naming `param` when prompt + output
 * exceed the context. `defaultOutput`: the output reserved when the client
 * names none (min of the default reserve and the model's output length).
 */
export function chatPromptTokens(
  chat: ChatRequest,
  model: ChatModel,
  modelId: string,
  requestedOutput: number | undefined,
  param: string,
  defaultOutput: number,
  reuse?: ScopedCounts,
  known?: KnownBytes,
): PromptTokens {
  const contextLength = model.config.context_length;
  const room = contextLength - (requestedOutput ?? defaultOutput);
  const bytes: TextMeasure = known
    ? (text, message, part) => known(text, message, part) ?? byteLength(text)
    : byteLength;
  const ceiling = chatTokenCeilingOf(chat.messages, chat.tools, bytes);
  const billable = textOnly(chat) ? Math.min(contextLength, ceiling) : contextLength;
  const bounded = (reserve: number): PromptTokens => {
    let exact: number | undefined;
    return {
      reserve,
      billable,
      bounded: true,
      exact: () =>
        exact ??= estimateChatTokens(
          chat.messages,
          model.tokenizer,
          contextLength,
          chat.tools,
          reuse,
        ),
    };
  };
  if (ceiling <= room) return bounded(ceiling);
  if (reuse?.any) {
    // The key's earlier counts where it sent a text before, bytes for the rest
    // (docs/decisions/prompt-counts-reused.md): an agent's new turn is not tokenized.
    // A key with nothing kept skips this: naming its texts would find nothing.
    let reused = 0;
    const mixed = chatTokenCeilingOf(chat.messages, chat.tools, (text, message, part) => {
      const kept = reuse.peek(model.tokenizer, text);
      if (kept === undefined) return bytes(text, message, part);
      reused += text.length;
      return kept;
    });
    if (mixed <= room) {
      reuse.counts.totals.reused += reused;
      return bounded(mixed);
    }
  }
  const promptTokens = estimateChatTokens(
    chat.messages,
    model.tokenizer,
    contextLength,
    chat.tools,
    reuse,
  );
  checkContextLength({ promptTokens, requestedOutput, contextLength, modelId, param });
  return { reserve: promptTokens, billable, exact: () => promptTokens, bounded: false };
}

/** Whether every message's content is text (a string, or parts of type `text` only). */
function textOnly(chat: ChatRequest): boolean {
  for (const m of chat.messages) {
    const c = (m as { content?: unknown }).content;
    if (Array.isArray(c) && c.some((p) => (p as { type?: unknown })?.type !== "text")) return false;
  }
  return true;
}

/** A request's long texts' UTF-8 lengths its parse noted, by where they sit (undefined: not known). */
export type KnownBytes = (text: string, message?: number, part?: number) => number | undefined;

/**
 * What the parse in pieces (http/json_pieces.ts) noted of a chat body's long
 * texts, found by their place in its `messages`: the byte ceiling then never
 * copies a long text into one flat string (the validated request holds the
 * same strings in the same places; each is checked to be the same string).
 */
export function parsedTextBytes(body: unknown): KnownBytes | undefined {
  const messages = body !== null && typeof body === "object"
    ? (body as { messages?: unknown }).messages
    : undefined;
  if (!Array.isArray(messages)) return undefined;
  return (text, message, part) => {
    if (message === undefined) return undefined;
    const m: unknown = messages[message];
    if (part === undefined) return textBytes(m, "content", text);
    const content = m !== null && typeof m === "object"
      ? (m as { content?: unknown }).content
      : undefined;
    return Array.isArray(content) ? textBytes(content[part], "text", text) : undefined;
  };
}

/** The output reserved when a request names no maximum, before the context's room. */
export function defaultOutputOf(model: ChatModel, defaultReserve: number): number {
  return Math.min(defaultReserve, model.config.max_output_length);
}
