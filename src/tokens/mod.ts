/** Token counting's front door: the tokenizers by name and the counts the handlers reserve. */

export { utf8Length } from "./bounds.ts";
export { checkContextLength } from "./context.ts";
export {
  byteLength,
  chatTokenCeiling,
  type CountableMessage,
  countChatInto,
  countText,
  newBpeBudget,
  prepareTokenizers,
  type TextMeasure,
  TokenCounter,
} from "./count.ts";
export { FALLBACK_TOKENIZER, type TokenizerName, TOKENIZERS } from "./names.ts";
export { type CountingTotals, ScopedCounts, TextCounts } from "./text_counts.ts";
