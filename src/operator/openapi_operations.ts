/**
 * How one operation of the OpenAPI document is described: the route table
 * (src/app/routes/) gives each row one, with its body from the zod schema
 * that validates it and its success and error statuses, and
 * src/operator/openapi.ts renders them.
 */
import { z } from "zod";

export type Json = Record<string, unknown>;

/** A zod schema as the document's JSON Schema (2020-12). */
export function schemaOf(s: z.ZodType, io: "input" | "output" = "input"): Json {
  const j = z.toJSONSchema(s, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
  }) as Json;
  delete j.$schema; // the document's dialect is already 2020-12
  return j;
}

/** A non-streamed answer's schema (src/formats/response_schemas.ts; streams are SSE text). */
export const answer = (s: z.ZodType) => ({ schema: schemaOf(s, "output") });

export const json = (schema: Json) => ({ "application/json": { schema } });

export interface Op {
  summary: string;
  tag: "inference" | "catalog" | "receipts" | "attestation" | "account" | "operations" | "admin";
  auth: "key" | "optional-key" | "operator" | "none" | "operator-optional";
  body?: Json;
  query?: { name: string; description: string; schema?: Json }[];
  /** Success status, schema and content type. */
  ok?: { status?: number; schema?: Json; type?: string; description?: string };
  errors: number[];
  /** Anthropic error envelope. */
  anthropic?: boolean;
  inference?: boolean;
  /** Server-sent events when `stream: true`. */
  streams?: boolean;
}

export const INFERENCE_ERRORS = [400, 401, 403, 404, 413, 415, 429, 500, 502, 503, 504];
export const str = { type: "string" };
export const dayParam = (name: string) => ({
  name,
  description: `UTC day, YYYY-MM-DD (default: ${name === "to" ? "today" : "29 days before to"})`,
  schema: { type: "string", pattern: "^\\d{4}-\\d{2}-\\d{2}$" },
});
export const catalogFilters = [
  {
    name: "zdr",
    description: "Only models with a zero-data-retention route",
    schema: { enum: ["true"] },
  },
  {
    name: "tee",
    description: "Only models with a confidential (TEE) route",
    schema: { enum: ["true"] },
  },
];
