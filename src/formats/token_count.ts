/**
 * The one place admission turns prompt text into a token count. Until a real
 * tokenizer replaces it (swap this function's body), it returns an upper
 * bound that holds for any byte-level BPE tokenizer: a token covers at least
 * one UTF-8 byte, so a text has at most as many tokens as bytes. A bound, not
 * an average, because a reservation below real usage lets parallel requests
 * overdraw a balance (issue #15 item 3); settlement refunds the difference.
 */
import { Buffer } from "node:buffer";

/** Upper bound on the tokens of `text`: its UTF-8 byte length (counted natively, no copy). */
export function textTokens(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/** Tokens a chat template adds around each message (role markers, separators). */
export const MESSAGE_FRAMING_TOKENS = 8;
/** Tokens reserved for one image or video input (a high-detail tile set). */
export const MEDIA_TOKENS = 1_600;

/**
 * A typical count for a prompt whose bound is `bound` (4 bytes per token, the
 * usual rate for English text): what a client is shown (Anthropic
 * `message_start`) and billed only when an upstream reports no usage (a client
 * that left a stream early). Reservations always use the bound.
 */
export function typicalTokens(bound: number): number {
  return Math.ceil(bound / 4);
}
