/**
 * What E2EE v2 cannot encrypt and must therefore refuse:
 * request parameters that make prompt or generated text travel in clear
 * (logprobs, echo, audio transcripts, tool definitions and tool calls), and
 * anything generated in an answer outside the spec's encrypted fields.
 *
 * Tools are the one exception a client may opt in to, through a signal an
 * intermediary cannot forge: the request's nonce (authenticated in every
 * field's AAD) is the commitment `sha256(JCS({purpose, salt, params}))` to the
 * exact tool parameters, and the salt travels in `X-E2EE-Clear-Tools`. Adding,
 * removing or changing a tool parameter, or the header, breaks the commitment;
 * changing the nonce breaks every field. See docs/decisions/e2ee-clear-tools.md.
 */
import { badParam, GatewayError } from "../http/errors.ts";
import { jcs } from "../aci/jcs.ts";
import { sha256Hex } from "../aci/digest.ts";
import type { E2eeEndpoint } from "./fields.ts";

/** The opt-in header: 64 hex characters of salt. */
export const CLEAR_TOOLS_HEADER = "x-e2ee-clear-tools";
export const CLEAR_TOOLS_PURPOSE = "aci.e2ee.clear-tools.v1";

/** The request parameters that define tools or force their use (their values go in clear). */
export const TOOL_PARAMS = [
  "tools",
  "tool_choice",
  "functions",
  "function_call",
  "parallel_tool_calls",
] as const;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

/** Null, absent, false, "", [] and {} carry nothing. */
function empty(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === "") return true;
  if (Array.isArray(v)) return v.length === 0;
  return isObj(v) && Object.keys(v).length === 0;
}

/**
 * The nonce that commits a request to its tool parameters (lowercase hex): what a
 * client that opts in sends as `X-E2EE-Nonce`, with `salt` in `X-E2EE-Clear-Tools`.
 */
export function clearToolsNonce(salt: string, body: Obj): string {
  const params: Obj = {};
  for (const p of TOOL_PARAMS) if (body[p] !== undefined) params[p] = body[p];
  return sha256Hex(jcs({ purpose: CLEAR_TOOLS_PURPOSE, salt: salt.toLowerCase(), params }));
}

/** Whether a request body uses tools (definitions, forcing, or tool calls in its history). */
export function usesTools(body: Obj): boolean {
  if (TOOL_PARAMS.some((p) => !empty(body[p]))) return true;
  const messages = body["messages"];
  return Array.isArray(messages) &&
    messages.some((m) => isObj(m) && (!empty(m["tool_calls"]) || !empty(m["function_call"])));
}

/**
 * Refuses (400 naming the parameter) a request whose parameters would put prompt or
 * generated text in clear; returns whether the client opted in to tools in clear.
 * Checked before any decryption: a refusal costs no ECDH.
 */
export function checkClearText(
  kind: E2eeEndpoint,
  body: Obj,
  nonce: string,
  optIn: string | null,
): boolean {
  const refuse = (param: string, what: string) =>
    badParam(
      param,
      `${param} is refused under E2EE: ${what} would travel in clear (docs/e2ee.md)`,
    );
  if (kind === "chat") {
    if (body["top_logprobs"] !== undefined && body["top_logprobs"] !== null) {
      throw refuse("top_logprobs", "the answer's tokens");
    }
    if (!empty(body["logprobs"])) throw refuse("logprobs", "the answer's tokens");
    const modalities = body["modalities"];
    if (!empty(body["audio"]) || (Array.isArray(modalities) && modalities.includes("audio"))) {
      throw refuse("audio", "the audio's transcript");
    }
  } else if (kind === "completions") {
    if (body["logprobs"] !== undefined && body["logprobs"] !== null) {
      throw refuse("logprobs", "the answer's tokens");
    }
    if (!empty(body["echo"])) throw refuse("echo", "the prompt");
  }
  if (optIn === null) {
    if (kind === "chat" && usesTools(body)) {
      throw refuse(
        "tools",
        `tool definitions and tool calls (opt in with ${CLEAR_TOOLS_HEADER}, docs/e2ee.md)`,
      );
    }
    return false;
  }
  if (kind !== "chat") throw badParam(CLEAR_TOOLS_HEADER, "tools exist only on chat");
  if (!/^[0-9a-fA-F]{64}$/.test(optIn) || clearToolsNonce(optIn, body) !== nonce.toLowerCase()) {
    // The nonce does not commit to these tool parameters: they were added or changed.
    throw new GatewayError(
      "invalid_request",
      `${CLEAR_TOOLS_HEADER}: the nonce does not commit to this request's tool parameters`,
    );
  }
  return true;
}

/** Answer members (message/delta, choice) that are encrypted or carry no generated text. */
const MESSAGE_KEYS = new Set(["role", "content", "reasoning", "reasoning_content", "audio"]);
const TOOL_KEYS = new Set(["tool_calls", "function_call"]);
const CHOICE_KEYS = new Set([
  "index",
  "message",
  "delta",
  "text",
  "finish_reason",
  "stop_reason",
  "matched_stop",
]);
const AUDIO_KEYS = new Set(["id", "data", "expires_at"]);
const TOP_CLEAR = ["prompt_logprobs", "prompt_token_ids"];

/**
 * Throws (502: nothing is written, or the stream ends in its error event) when an
 * answer object carries generated text the spec does not encrypt: the response
 * must never be marked E2EE-applied with anything generated in clear.
 */
export function refuseClearAnswer(kind: E2eeEndpoint, o: Obj, clearTools: boolean): void {
  if (kind === "embeddings") return;
  const leak = (path: string) =>
    new GatewayError(
      "upstream_error",
      `upstream sent ${path}, which E2EE cannot protect; the answer was withheld`,
    );
  for (const k of TOP_CLEAR) if (!empty(o[k])) throw leak(k);
  const choices = o["choices"];
  if (!Array.isArray(choices)) return;
  for (const c of choices) {
    if (!isObj(c)) continue;
    for (const [k, v] of Object.entries(c)) {
      if (!CHOICE_KEYS.has(k) && !empty(v)) throw leak(`choices.${k}`);
    }
    for (const holder of ["message", "delta"]) {
      const m = c[holder];
      if (!isObj(m)) continue;
      for (const [k, v] of Object.entries(m)) {
        if (MESSAGE_KEYS.has(k) || (clearTools && TOOL_KEYS.has(k)) || empty(v)) continue;
        throw leak(`${holder}.${k}`);
      }
      const audio = m["audio"];
      if (isObj(audio)) {
        for (const [k, v] of Object.entries(audio)) {
          if (!AUDIO_KEYS.has(k) && !empty(v)) throw leak(`${holder}.audio.${k}`);
        }
      }
    }
  }
}
