/**
 * Turns a zod validation failure into the gateway's `badParam` error, naming the
 * offending path (`messages[1].content[0].type`). One picker serves every
 * format; the wording differs per format (see `zodToBadParam` and
 * `../zod_error.ts`). Messages come from the schema (expected types, allowed
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

/** What one validation failure is about. */
export interface PickedIssue {
  /** Full path in the body (with the caller's prefix). */
  path: PropertyKey[];
  /** The schema's message (never input text). */
  message: string;
  /** The field is absent from the input (zod does not report the input itself). */
  missing: boolean;
  /** Unknown keys, for an `unrecognized_keys` issue. */
  unknownKeys?: string[];
}

/** The value at `path` inside `input`, or undefined when any step is absent. */
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let v = input;
  for (const key of path) {
    if (v === null || typeof v !== "object") return undefined;
    if (!Object.hasOwn(v, key)) return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

/**
 * The first issue, descending into the union branch that got furthest.
 * `input` is the value that was parsed; `prefix` is where it sits in the body.
 */
export function pickIssue(
  issue: Issue,
  input: unknown,
  prefix: readonly PropertyKey[] = [],
  at: readonly PropertyKey[] = [],
): PickedIssue {
  const rel = [...at, ...issue.path];
  const path = [...prefix, ...rel];
  if (issue.code === "unrecognized_keys") {
    return { path, message: issue.message, missing: false, unknownKeys: issue.keys };
  }
  if (issue.code !== "invalid_union" || issue.errors.length === 0) {
    const missing = issue.code === "invalid_type" && valueAt(input, rel) === undefined;
    return { path, message: issue.message, missing };
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
  if (best) return pickIssue(best, input, prefix, rel);
  // Every branch failed at the union itself: say which shapes would have been accepted.
  const expected = new Set<string>();
  for (const branch of issue.errors) {
    for (const sub of branch) if (sub.code === "invalid_type") expected.add(sub.expected);
  }
  const message = expected.size > 0
    ? `Invalid input: expected ${[...expected].join(" or ")}`
    : issue.message;
  return { path, message, missing: valueAt(input, rel) === undefined };
}

/**
 * The 400 for a failed `safeParse` in the Anthropic and Responses formats
 * (`param: message`); `input` is what was parsed, `prefix` is where it sits in
 * the body (e.g. `["input", 3]`), `root` names the body when the path is empty.
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
