/**
 * The context-window check: the prompt's tokens (counted by ./count.ts) plus
 * the output the request asks for must fit the model's `context_length`.
 */
import { badParam } from "../http/mod.ts";

export function checkContextLength(a: {
  promptTokens: number;
  /** The output tokens the client asked for (its max_tokens); undefined when it named none. */
  requestedOutput: number | undefined;
  contextLength: number;
  modelId: string;
  /** The parameter named in the 400 (`messages`, `prompt`, `input`). */
  param: string;
}): void {
  const out = a.requestedOutput ?? 0;
  if (a.promptTokens + out <= a.contextLength) return;
  const over = a.promptTokens > a.contextLength
    ? `the prompt has more than ${a.contextLength} tokens`
    : `you requested ${a.promptTokens + out} tokens (${a.promptTokens} in the prompt, ${out} ` +
      "for the output)";
  throw badParam(
    a.param,
    `model ${a.modelId}'s maximum context length is ${a.contextLength} tokens; ${over}`,
  );
}
