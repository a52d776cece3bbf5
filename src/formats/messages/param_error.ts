/**
 * Turns a zod validation failure into the gateway's `badParam` error, naming the
 * offending path (`messages[1].content[0].type`). Shared by the messages and
 * responses adapters. Messages come from the schema (expected types, allowed
 * values), never from the rejected input, so no prompt text can leak into them.
 */

import type { z } from "zod";
import { badParam, type GatewayError } from "../../http/errors.ts";

type Issue = z.core.$ZodIssue;

/** `["messages", 1, "content"]` → `messages[1].content`. */
export function formatParamPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out === "" ? String(key) : `.${String(key)}`;
  }
  return out;
}

/** The first issue, descending into the union branch that got furthest. */
function pickIssue(
  issue: Issue,
  prefix: readonly PropertyKey[],
): { path: PropertyKey[]; message: string } {
  const path = [...prefix, ...issue.path];
  if (issue.code !== "invalid_union" || issue.errors.length === 0) {
    return { path, message: issue.message };
  }
  let best: Issue | undefined;
  let bestDepth = 0;
  for (const branch of issue.errors) {
    for (const sub of branch) {
      const depth = sub.path.length + (sub.code === "invalid_union" ? 1 : 0);
      if (depth > bestDepth) {
        best = sub;
        bestDepth = depth;
      }
    }
  }
  if (best) return pickIssue(best, path);
  // Every branch failed at the union itself: say which shapes would have been accepted.
  const expected = new Set<string>();
  for (const branch of issue.errors) {
    for (const sub of branch) if (sub.code === "invalid_type") expected.add(sub.expected);
  }
  const message = expected.size > 0
    ? `Invalid input: expected ${[...expected].join(" or ")}`
    : issue.message;
  return { path, message };
}

/**
 * The 400 for a failed `safeParse`; `prefix` is where the parsed value sits in
 * the body (e.g. `["input", 3]`), `root` names the body when the path is empty.
 */
export function zodToBadParam(
  error: z.ZodError,
  prefix: readonly PropertyKey[] = [],
  root = "body",
): GatewayError {
  const first = error.issues[0];
  if (!first) return badParam(prefix.length > 0 ? formatParamPath(prefix) : root, "Invalid input");
  const { path, message } = pickIssue(first, prefix);
  const param = path.length > 0 ? formatParamPath(path) : root;
  return badParam(param, `${param}: ${message}`);
}
