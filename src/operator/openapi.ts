/**
 * The OpenAPI 3.1 document served at `GET /openapi.json`. Request bodies are
 * generated from the same zod schemas that validate requests (zod 4's
 * `z.toJSONSchema`, JSON Schema 2020-12, which OpenAPI 3.1 uses as is), so
 * the document cannot drift from validation. Every route of the route table
 * has an entry here and nothing else does (tests/openapi_test.ts compares
 * them); errors use one envelope per format, and the headers every response
 * carries are declared once.
 */
import { z } from "zod";
import { chatRequestSchema } from "../formats/chat.ts";
import { completionRequestSchema } from "../formats/completions.ts";
import { embeddingRequestSchema } from "../formats/embeddings.ts";
import { MessagesRequestSchema } from "../formats/messages/schema.ts";
import { ResponsesRequestSchema } from "../formats/responses/schema.ts";
import { CreateKeyBody, CreditBody, UpdateKeyBody } from "../accounts/admin_bodies.ts";
import { EXPOSED_HEADERS } from "../http/cors.ts";

type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType): Json {
  const j = z.toJSONSchema(s, {
    target: "draft-2020-12",
    io: "input",
    unrepresentable: "any",
  }) as Json;
  delete j.$schema; // the document's dialect is already 2020-12
  return j;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json) => ({ "application/json": { schema } });

const HEADER_DOCS: Record<string, string> = {
  "x-receipt-id": "Id of the signed receipt of this response (GET /v1/aci/receipts/{id}).",
  "x-request-id": "The gateway's id for this request.",
  "x-service-trace-id": "The client's trace id, or one the gateway made.",
  "x-aci-version": "Always `aci/1`.",
  "x-aci-keyset-digest": "Digest of the keyset that signs this replica's receipts.",
  "server-timing":
    "`gw` (the gateway's own time) and, for inference, `admit`, `upstream`, `commit`.",
  "retry-after": "Seconds to wait after a 429.",
  "x-ratelimit-limit": "Requests per minute allowed for this key.",
  "x-ratelimit-remaining": "Requests the key may make now (its request bucket).",
  "x-ratelimit-reset": "Seconds until the window resets.",
  "x-ratelimit-limit-tokens": "Tokens per minute allowed for this key.",
  "x-ratelimit-remaining-tokens": "Tokens the key may use now (its token bucket).",
  "x-e2ee-applied": "`true` when the response body is encrypted to the client (E2EE v2).",
  "x-e2ee-version": "The E2EE version the response was encrypted with.",
  "x-e2ee-algo": "The E2EE algorithm the response was encrypted with.",
};

const headerName = (h: string) => h.replace(/(^|-)([a-z])/g, (_m, d, c) => d + c.toUpperCase());

/** Headers on every response, plus the inference ones where they apply. */
function headers(kind: "all" | "inference"): Json {
  const names = kind === "inference"
    ? EXPOSED_HEADERS.filter((h) => h !== "retry-after")
    : ["x-aci-version", "x-aci-keyset-digest", "server-timing"];
  return Object.fromEntries(
    names.map((h) => [h, { $ref: `#/components/headers/${headerName(h)}` }]),
  );
}

interface Op {
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

const INFERENCE_ERRORS = [400, 401, 403, 404, 413, 415, 429, 500, 502, 503, 504];
const str = { type: "string" };
const dayParam = (name: string) => ({
  name,
  description: `UTC day, YYYY-MM-DD (default: ${name === "to" ? "today" : "29 days before to"})`,
  schema: { type: "string", pattern: "^\\d{4}-\\d{2}-\\d{2}$" },
});
const catalogFilters = [
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

/** Every route the gateway serves, by `METHOD /pattern` (router syntax, `:name` captures). */
export const OPERATIONS: Record<string, Op> = {
  "POST /v1/chat/completions": {
    summary: "Chat completion (OpenAI format); streamed as SSE with stream: true",
    tag: "inference",
    auth: "key",
    body: schemaOf(chatRequestSchema),
    errors: INFERENCE_ERRORS,
    inference: true,
    streams: true,
  },
  "POST /v1/completions": {
    summary: "Legacy text completion (OpenAI format)",
    tag: "inference",
    auth: "key",
    body: schemaOf(completionRequestSchema),
    errors: INFERENCE_ERRORS,
    inference: true,
    streams: true,
  },
  "POST /v1/embeddings": {
    summary: "Embeddings (OpenAI format)",
    tag: "inference",
    auth: "key",
    body: schemaOf(embeddingRequestSchema),
    errors: INFERENCE_ERRORS,
    inference: true,
  },
  "POST /v1/messages": {
    summary: "Messages (Anthropic format); streamed as SSE with stream: true",
    tag: "inference",
    auth: "key",
    body: schemaOf(MessagesRequestSchema),
    errors: INFERENCE_ERRORS,
    anthropic: true,
    inference: true,
    streams: true,
  },
  "POST /v1/messages/count_tokens": {
    summary: "Count a Messages request's input tokens (Anthropic format; the limits' tokenizer)",
    tag: "inference",
    auth: "key",
    body: schemaOf(MessagesRequestSchema.partial({ max_tokens: true })),
    ok: {
      schema: {
        type: "object",
        properties: { input_tokens: { type: "integer" } },
        required: ["input_tokens"],
      },
    },
    errors: [400, 401, 404, 413, 415],
    anthropic: true,
  },
  "POST /v1/responses": {
    summary: "Responses (OpenAI Responses format); streamed as SSE with stream: true",
    tag: "inference",
    auth: "key",
    body: schemaOf(ResponsesRequestSchema),
    errors: INFERENCE_ERRORS,
    inference: true,
    streams: true,
  },
  "GET /v1/models": {
    summary: "Chat models",
    tag: "catalog",
    auth: "none",
    query: catalogFilters,
    errors: [400],
  },
  "GET /v1/models/:vendor": {
    summary: "One confidential vendor's models (legacy listing), or one model by encoded id",
    tag: "catalog",
    auth: "none",
    errors: [404],
  },
  "GET /v1/models/:provider/:model": {
    summary: "One model object",
    tag: "catalog",
    auth: "none",
    errors: [404],
  },
  "GET /v1/embeddings/models": {
    summary: "Embedding models",
    tag: "catalog",
    auth: "none",
    query: catalogFilters,
    errors: [400],
  },
  "GET /v1/aci/receipts/:id": {
    summary: "The signed receipt of a response (only for the key that made the request)",
    tag: "receipts",
    auth: "optional-key",
    errors: [401, 404],
  },
  "GET /v1/signature/:id": {
    summary: "The same receipt in the legacy vllm-proxy signature envelope",
    tag: "receipts",
    auth: "optional-key",
    query: [{
      name: "signing_algo",
      description: "ecdsa (default) or ed25519",
      schema: { enum: ["ecdsa", "ed25519"] },
    }],
    errors: [400, 401, 404],
  },
  "GET /v1/aci/attestation": {
    summary: "The gateway's attestation report (fresh nonce, or an archived keyset's report)",
    tag: "attestation",
    auth: "none",
    query: [
      {
        name: "nonce",
        description: "64 lowercase hex",
        schema: { type: "string", pattern: "^[0-9a-f]{64}$" },
      },
      {
        name: "workload_keyset_digest",
        description: "sha256:<hex> of an archived keyset",
        schema: str,
      },
    ],
    errors: [400, 404],
  },
  "GET /v1/aci/sessions": {
    summary: "Current attested upstream sessions",
    tag: "attestation",
    auth: "key",
    query: [
      { name: "upstream_name", description: "One upstream", schema: str },
      { name: "model", description: "Upstreams routing this model", schema: str },
    ],
    errors: [400, 401, 404],
  },
  "GET /v1/aci/sessions/:id": {
    summary: "One attested session document (its id is the SHA-256 of its JCS form)",
    tag: "attestation",
    auth: "key",
    errors: [400, 401, 404],
  },
  "GET /v1/attestation/report": {
    summary: "Legacy attestation report",
    tag: "attestation",
    auth: "none",
    query: [
      { name: "nonce", description: "1-256 characters", schema: str },
      {
        name: "signing_algo",
        description: "ecdsa (default) or ed25519",
        schema: { enum: ["ecdsa", "ed25519"] },
      },
    ],
    errors: [400],
  },
  "GET /v1/key": {
    summary: "The calling key: balance, spent, tier, limits and rate-limit bucket levels",
    tag: "account",
    auth: "key",
    errors: [401],
  },
  "GET /v1/usage": {
    summary: "The calling key's usage per UTC day and model",
    tag: "account",
    auth: "key",
    query: [dayParam("from"), dayParam("to")],
    errors: [400, 401],
  },
  "GET /healthz": {
    summary: "Health: ok, degraded or unavailable (503); operators get the detail",
    tag: "operations",
    auth: "operator-optional",
    ok: {
      schema: {
        type: "object",
        properties: { status: { enum: ["ok", "degraded", "unavailable"] } },
        required: ["status"],
      },
    },
    errors: [503],
  },
  "GET /verify": {
    summary: "A page that verifies a receipt in the browser",
    tag: "receipts",
    auth: "none",
    ok: { type: "text/html", schema: str },
    errors: [],
  },
  "GET /verify/app.js": {
    summary: "The verify page's script (built from the project's verify library)",
    tag: "receipts",
    auth: "none",
    ok: { type: "text/javascript", schema: str },
    errors: [],
  },
  "GET /openapi.json": {
    summary: "This document",
    tag: "operations",
    auth: "none",
    errors: [],
  },
  "POST /admin/v1/keys": {
    summary: "Create a key (the key is in this response only)",
    tag: "admin",
    auth: "operator",
    body: schemaOf(CreateKeyBody),
    ok: { status: 201 },
    errors: [400, 401, 404],
  },
  "GET /admin/v1/keys": {
    summary: "List keys",
    tag: "admin",
    auth: "operator",
    errors: [401, 404],
  },
  "GET /admin/v1/keys/:id": {
    summary: "Show a key: balance, usage, limits, window",
    tag: "admin",
    auth: "operator",
    errors: [400, 401, 404],
  },
  "PATCH /admin/v1/keys/:id": {
    summary: "Set a key's tier and limits",
    tag: "admin",
    auth: "operator",
    body: schemaOf(UpdateKeyBody),
    errors: [400, 401, 404],
  },
  "POST /admin/v1/keys/:id/credit": {
    summary: "Add credits (warns when the key is revoked)",
    tag: "admin",
    auth: "operator",
    body: schemaOf(CreditBody),
    errors: [400, 401, 404],
  },
  "POST /admin/v1/keys/:id/revoke": {
    summary: "Revoke a key",
    tag: "admin",
    auth: "operator",
    errors: [400, 401, 404],
  },
  "GET /admin/v1/keys/:id/usage": {
    summary: "A key's usage per UTC day and model",
    tag: "admin",
    auth: "operator",
    query: [dayParam("from"), dayParam("to")],
    errors: [400, 401, 404],
  },
  "GET /admin/v1/usage": {
    summary: "Every key's usage per model over a day range",
    tag: "admin",
    auth: "operator",
    query: [dayParam("from"), dayParam("to")],
    errors: [400, 401, 404],
  },
  "GET /admin/v1/health": {
    summary: "Health detail: each confidential upstream's verification",
    tag: "admin",
    auth: "operator",
    errors: [401, 404],
  },
  "GET /admin/v1/metrics": {
    summary: "Prometheus metrics (text format 0.0.4)",
    tag: "admin",
    auth: "operator",
    ok: { type: "text/plain", schema: str },
    errors: [401, 404],
  },
};

const ERROR_TEXT: Record<number, string> = {
  400: "Invalid request (the envelope names the parameter)",
  401: "Missing, malformed, unknown or revoked credential",
  403: "Insufficient credits",
  404: "Not found (admin paths: also when the admin API is off)",
  413: "Body too large",
  415: "Content-Type is not application/json",
  429: "Rate limited (see Retry-After and the rate-limit headers)",
  500: "Internal error (never a stack trace)",
  502: "Upstream error",
  503: "Unavailable, or no verified upstream",
  504: "Upstream timeout",
};

function operation(key: string, op: Op): Json {
  const [method, pattern] = key.split(" ");
  const params: Json[] = [...pattern.matchAll(/:([a-z_]+)/g)].map((m) => ({
    name: m[1],
    in: "path",
    required: true,
    schema: str,
  }));
  for (const q of op.query ?? []) {
    params.push({
      name: q.name,
      in: "query",
      required: false,
      schema: q.schema ?? str,
      ...{ description: q.description },
    });
  }
  const hdrs = headers(op.inference ? "inference" : "all");
  const okStatus = String(op.ok?.status ?? 200);
  const okContent: Json = op.ok?.type
    ? { [op.ok.type]: { schema: op.ok.schema ?? str } }
    : json(op.ok?.schema ?? { type: "object" });
  if (op.streams) okContent["text/event-stream"] = { schema: str };
  const responses: Json = {
    [okStatus]: { description: op.ok?.description ?? "Success", headers: hdrs, content: okContent },
  };
  for (const status of op.errors) {
    responses[String(status)] = {
      description: ERROR_TEXT[status],
      headers: hdrs,
      content: json(ref(op.anthropic ? "AnthropicError" : "Error")),
    };
  }
  const security = op.auth === "key"
    ? [{ bearer: [] }, ...(op.anthropic ? [{ apiKeyHeader: [] }] : [])]
    : op.auth === "optional-key"
    ? [{ bearer: [] }, {}]
    : op.auth === "operator"
    ? [{ operator: [] }]
    : op.auth === "operator-optional"
    ? [{}, { operator: [] }]
    : [];
  return {
    operationId: `${method.toLowerCase()}${
      pattern.replace(/[/:](\w)/g, (_m, c) => c.toUpperCase()).replace(/[^A-Za-z0-9]/g, "")
    }`,
    summary: op.summary,
    tags: [op.tag],
    security,
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(op.body ? { requestBody: { required: true, content: json(op.body) } } : {}),
    responses,
  };
}

/** The OpenAPI 3.1 document; `version` is the gateway's. */
export function openApiDocument(version: string): Json {
  const paths: Record<string, Json> = {};
  for (const [key, op] of Object.entries(OPERATIONS)) {
    const [method, pattern] = key.split(" ");
    const path = pattern.replace(/:([a-z_]+)/g, "{$1}");
    paths[path] ??= {};
    paths[path][method.toLowerCase()] = operation(key, op);
  }
  const errorSchema = {
    type: "object",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["message", "type"],
        properties: {
          message: str,
          type: str,
          code: { type: ["string", "null"] },
          param: { type: ["string", "null"] },
        },
      },
    },
  };
  const anthropicError = {
    type: "object",
    required: ["type", "error"],
    properties: {
      type: { const: "error" },
      error: {
        type: "object",
        required: ["type", "message"],
        properties: { type: str, message: str },
      },
    },
  };
  return {
    openapi: "3.1.0",
    info: {
      title: "Confidential inference gateway",
      version,
      description: "OpenAI- and Anthropic-compatible inference with a signed receipt for every " +
        "response (x-receipt-id), attestation and attested upstream sessions.",
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    tags: ["inference", "catalog", "receipts", "attestation", "account", "operations", "admin"].map(
      (name) => ({ name }),
    ),
    paths,
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", description: "An API key: cgw-…" },
        apiKeyHeader: { type: "apiKey", in: "header", name: "x-api-key" },
        operator: {
          type: "http",
          scheme: "bearer",
          description: "The operator token (GATEWAY_ADMIN_TOKEN); without it the admin API is off",
        },
      },
      schemas: { Error: errorSchema, AnthropicError: anthropicError },
      headers: Object.fromEntries(
        Object.entries(HEADER_DOCS).map(([h, description]) => [
          headerName(h),
          { description, schema: str },
        ]),
      ),
    },
  };
}
