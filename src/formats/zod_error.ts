/**
 * Turning a zod validation failure into the gateway's 400, naming the
 * parameter path (`messages[1].content[0].type`) and telling an absent field
 * from a present one with a bad value. `pickIssue` serves every format; this
 * module words the OpenAI formats' messages, `messages/param_error.ts` the
 * Anthropic and Responses ones. Messages come from the schema (expected types,
 * allowed values), never from the rejected input, so no prompt text can leak
 * into them.
 */
import type { z } from "zod";
import { badParam, type GatewayError } from "../http/mod.ts";

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
  /** The field is absent from the input (zod 4 does not report the input itself). */
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

/** The OpenAI formats' 400; `input` is the parsed body. */
export function zodToGatewayError(err: z.ZodError, input: unknown): GatewayError {
  const first = err.issues[0];
  if (!first) return badParam("body", "invalid request body");
  const picked = pickIssue(first, input);
  const param = formatParamPath(picked.path) || "body";
  if (picked.unknownKeys) {
    return badParam(param, `unrecognized parameter(s): ${picked.unknownKeys.join(", ")}`);
  }
  if (picked.missing) return badParam(param, `missing required parameter '${param}'`);
  return badParam(param, `invalid '${param}': ${picked.message}`);
}

/** Parse with a schema or throw the 400. */
export function parseWith<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const res = schema.safeParse(body);
  if (!res.success) throw zodToGatewayError(res.error, body);
  return res.data;
}
