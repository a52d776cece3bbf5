/** Turning a zod validation failure into the OpenAI formats' 400, naming the parameter path. */
import type { z } from "zod";
import { badParam, type GatewayError } from "../http/errors.ts";
import { formatParamPath, pickIssue } from "./messages/param_error.ts";

/** `input` is the parsed body: a wrong type is told apart from an absent field by looking. */
export function zodToGatewayError(err: z.ZodError, input: unknown): GatewayError {
  const first = err.issues[0];
  if (!first) return badParam("body", "invalid request body");
  const picked = pickIssue(first, input);
  const param = formatPath(picked.path);
  if (picked.unknownKeys) {
    return badParam(param, `unrecognized parameter(s): ${picked.unknownKeys.join(", ")}`);
  }
  if (picked.missing) return badParam(param, `missing required parameter '${param}'`);
  return badParam(param, `invalid '${param}': ${picked.message}`);
}

export function formatPath(path: readonly PropertyKey[]): string {
  return formatParamPath(path) || "body";
}

/** Parse with a schema or throw the 400. */
export function parseWith<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const res = schema.safeParse(body);
  if (!res.success) throw zodToGatewayError(res.error, body);
  return res.data;
}
