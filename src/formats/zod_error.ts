/** Turning a zod validation failure into the gateway's 400, naming the parameter path. */
import type { z } from "zod";
import { badParam, type GatewayError } from "../http/errors.ts";
import { formatParamPath } from "./messages/param_error.ts";

export function zodToGatewayError(err: z.ZodError): GatewayError {
  const issue = err.issues[0];
  const param = formatPath(issue.path);
  let message = issue.message;
  if (issue.code === "invalid_type" && issue.input === undefined) {
    message = `missing required parameter '${param}'`;
  } else if (issue.code === "unrecognized_keys") {
    message = `unrecognized parameter(s): ${issue.keys.join(", ")}`;
  } else message = `invalid '${param}': ${message}`;
  return badParam(param, message);
}

export function formatPath(path: readonly PropertyKey[]): string {
  return formatParamPath(path) || "body";
}

/** Parse with a schema or throw the 400. */
export function parseWith<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const res = schema.safeParse(body);
  if (!res.success) throw zodToGatewayError(res.error);
  return res.data;
}
