/**
 * The Anthropic and Responses formats' 400 for a failed zod parse:
 * `param: message`, naming the offending path (`messages[1].content[0].type`).
 * The issue is picked as for every format (`../zod_error.ts`).
 */

import type { z } from "zod";
import { badParam, type GatewayError } from "../../http/mod.ts";
import { formatParamPath, pickIssue } from "../zod_error.ts";

/**
 * `input` is what was parsed, `prefix` is where it sits in the body (e.g.
 * `["input", 3]`), `root` names the body when the path is empty.
 */
export function zodToBadParam(
  error: z.ZodError,
  input: unknown,
  prefix: readonly PropertyKey[] = [],
  root = "body",
): GatewayError {
  const first = error.issues[0];
  if (!first) return badParam(prefix.length > 0 ? formatParamPath(prefix) : root, "Invalid input");
  const picked = pickIssue(first, input, prefix);
  const param = picked.path.length > 0 ? formatParamPath(picked.path) : root;
  if (picked.unknownKeys) {
    return badParam(param, `${param}: unrecognized parameter(s): ${picked.unknownKeys.join(", ")}`);
  }
  return badParam(param, `${param}: ${picked.missing ? "Field required" : picked.message}`);
}
