/**
 * The one place admission turns prompt text into a token count. Until a real
 * tokenizer replaces it (swap this function's body), it returns an upper
 * bound that holds for any byte-level BPE tokenizer: a token covers at least
 * one UTF-8 byte, so a text has at most as many tokens as bytes. A bound, not
 * an average, because a reservation below real usage lets parallel requests
 * overdraw a balance (issue #15 item 3); settlement refunds the difference.
 */

/** Upper bound on the tokens of `text`: its UTF-8 byte length. */
export function textTokens(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // Each UTF-16 unit of a surrogate pair is half of a 4-byte sequence.
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c < 0xe000 ? 2 : 3;
  }
  return n;
}

/** Tokens a chat template adds around each message (role markers, separators). */
export const MESSAGE_FRAMING_TOKENS = 8;
/** Tokens reserved for one image or video input (a high-detail tile set). */
export const MEDIA_TOKENS = 1_600;
