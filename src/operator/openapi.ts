/**
 * The OpenAPI 3.1 document served at `GET /openapi.json`. Request bodies are
 * generated from the same zod schemas that validate requests (zod 4's
 * `z.toJSONSchema`, JSON Schema 2020-12, which OpenAPI 3.1 uses as is), so
 * the document cannot drift from validation. The operations come from the
 * route table (src/app/routes/), so every route has one and nothing else
 * does (tests/openapi_test.ts compares them); errors use one envelope per format, and the headers every response
 * carries are declared once.
 */
import { EXPOSED_HEADERS } from "../http/mod.ts";
import { type Json, json, type Op, str } from "./openapi_operations.ts";

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

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
  "x-e2ee-applied": "`true` when the answer's generated fields are encrypted (E2EE v2).",
  "x-e2ee-version": "The E2EE version the answer was encrypted with.",
  "x-e2ee-algo": "The E2EE algorithm the answer was encrypted with.",
  "x-serving-provider": "The provider that answered (after failover).",
  "x-serving-model": "The canonical model id the requested model (or alias) resolved to.",
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
      // A 429 always says when to come back.
      headers: status === 429
        ? { ...hdrs, "retry-after": { $ref: `#/components/headers/${headerName("retry-after")}` } }
        : hdrs,
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

/** The OpenAPI 3.1 document of `operations` (keyed `METHOD /pattern`); `version` is the gateway's. */
export function openApiDocument(version: string, operations: readonly [string, Op][]): Json {
  const paths: Record<string, Json> = {};
  for (const [key, op] of operations) {
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
    // Relative: the gateway that serves this document (base or tee listener) serves the API.
    servers: [{ url: "/", description: "The gateway serving this document" }],
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
          h === "retry-after"
            ? { description, required: true, schema: { type: "integer", minimum: 0 } }
            : { description, schema: str },
        ]),
      ),
    },
  };
}
