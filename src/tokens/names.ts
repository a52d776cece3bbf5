/**
 * The tokenizer names a catalog entry may choose (no encoding loaded here, so
 * the configuration schema and the CLIs stay light; ./count.ts loads them).
 */
export const TOKENIZERS = ["o200k_base", "cl100k_base"] as const;
export type TokenizerName = (typeof TOKENIZERS)[number];

/**
 * The documented fallback: o200k_base (GPT-4o / o-series / gpt-oss). For other
 * families (Llama, Qwen, Claude…) it is an estimate, typically within ±20% of
 * the family's own tokenizer; admission settles on the upstream's real usage.
 */
export const FALLBACK_TOKENIZER: TokenizerName = "o200k_base";
