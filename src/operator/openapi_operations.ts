/**
 * The operations of the OpenAPI document (src/operator/openapi.ts renders
 * them): one entry per route, its body from the zod schema that validates it,
 * its success and error statuses.
 */
import { SignedPolicy } from "../sessions/policy/document.ts";
import { z } from "zod";
import { chatRequestSchema } from "../formats/chat.ts";
import { completionRequestSchema } from "../formats/completions.ts";
import { embeddingRequestSchema } from "../formats/embeddings.ts";
import { MessagesRequestSchema } from "../formats/messages/schema.ts";
import { ResponsesRequestSchema } from "../formats/responses/schema.ts";
import { CreateKeyBody, CreditBody, UpdateKeyBody } from "../accounts/admin_bodies.ts";
import { KeyDetailSchema, KeySummarySchema, OwnKeySchema } from "../accounts/key_views.ts";
import {
  ChatCompletionSchema,
  CompletionSchema,
  EmbeddingsSchema,
  MessageSchema,
  ResponseSchema,
} from "../formats/response_schemas.ts";

export type Json = Record<string, unknown>;

function schemaOf(s: z.ZodType, io: "input" | "output" = "input"): Json {
  const j = z.toJSONSchema(s, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
  }) as Json;
  delete j.$schema; // the document's dialect is already 2020-12
  return j;
}

/** A non-streamed answer's schema (src/formats/response_schemas.ts; streams are SSE text). */
const answer = (s: z.ZodType) => ({ schema: schemaOf(s, "output") });

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

const INFERENCE_ERRORS = [400, 401, 403, 404, 413, 415, 429, 500, 502, 503, 504];
export const str = { type: "string" };
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
    ok: answer(ChatCompletionSchema),
    errors: INFERENCE_ERRORS,
    inference: true,
    streams: true,
  },
  "POST /v1/completions": {
    summary: "Legacy text completion (OpenAI format)",
    tag: "inference",
    auth: "key",
    body: schemaOf(completionRequestSchema),
    ok: answer(CompletionSchema),
    errors: INFERENCE_ERRORS,
    inference: true,
    streams: true,
  },
  "POST /v1/embeddings": {
    summary: "Embeddings (OpenAI format)",
    tag: "inference",
    auth: "key",
    body: schemaOf(embeddingRequestSchema),
    ok: answer(EmbeddingsSchema),
    errors: INFERENCE_ERRORS,
    inference: true,
  },
  "POST /v1/messages": {
    summary: "Messages (Anthropic format); streamed as SSE with stream: true",
    tag: "inference",
    auth: "key",
    body: schemaOf(MessagesRequestSchema),
    ok: answer(MessageSchema),
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
    ok: answer(ResponseSchema),
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
  "GET /v1/aci/receipts/:id/inclusion": {
    summary: "The receipt's leaf index and inclusion proof against the served checkpoint " +
      "(503 log_pending until it is in one)",
    tag: "receipts",
    auth: "optional-key",
    query: [
      { name: "tree_size", description: "prove against an older checkpoint size" },
      {
        name: "wait",
        description: "milliseconds (0–5000) to hold the request until the receipt is in a " +
          "signed checkpoint, instead of answering 503 log_pending at once",
      },
    ],
    errors: [400, 401, 404, 503],
  },
  "GET /v1/aci/receipts/:id/bundle": {
    summary: "Offline evidence bundle: receipt, archived report and keyset, sessions, inclusion " +
      "proof, checkpoint, the reports of its signing keysets and the collateral each quote's " +
      "check consumed (task verify --bundle)",
    tag: "receipts",
    auth: "optional-key",
    errors: [401, 404, 503],
  },
  "GET /v1/aci/log/checkpoint": {
    summary: "The transparency log's latest checkpoint (C2SP tlog-checkpoint, signed note)",
    tag: "receipts",
    auth: "none",
    ok: { type: "text/plain; charset=utf-8" },
    errors: [503],
  },
  "GET /v1/aci/log/consistency": {
    summary: "Consistency proof between two tree sizes (computable from the tiles too)",
    tag: "receipts",
    auth: "none",
    query: [
      { name: "from", description: "the older tree size" },
      { name: "to", description: "the newer tree size (at most the checkpoint's)" },
    ],
    errors: [400, 503],
  },
  ...tileOperations(),
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
    summary:
      "The calling key: balance, reserved, available, spent, tier, limits and rate-limit buckets",
    tag: "account",
    auth: "key",
    ok: { schema: schemaOf(OwnKeySchema) },
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
    ok: {
      schema: {
        type: "object",
        properties: { data: { type: "array", items: schemaOf(KeySummarySchema) } },
        required: ["data"],
      },
    },
    errors: [401, 404],
  },
  "GET /admin/v1/keys/:id": {
    summary: "Show a key: balance, reserved, available, usage, limits, rate-limit buckets",
    tag: "admin",
    auth: "operator",
    ok: { schema: schemaOf(KeyDetailSchema) },
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
  "GET /admin/v1/config": {
    summary: "The configuration in force, its version, digest and when it was applied",
    tag: "admin",
    auth: "operator",
    errors: [401, 404],
  },
  "PUT /admin/v1/config": {
    summary: "Replace the configuration live (only providers, models and embedding models may " +
      "differ; validated as at start-up; streams in progress keep their routes)",
    tag: "admin",
    auth: "operator",
    body: { type: "object", description: "A whole configuration (docs/configuration.md)" },
    errors: [400, 401, 404, 413, 415],
  },
  "GET /admin/v1/health": {
    summary: "Health detail: each confidential upstream's verification",
    tag: "admin",
    auth: "operator",
    errors: [401, 404],
  },
  "GET /admin/v1/measurement-policies": {
    summary: "The measurement policies in force: upstream, version, digest, signing key",
    tag: "admin",
    auth: "operator",
    errors: [401, 404],
  },
  "PUT /admin/v1/measurement-policies/:id": {
    summary:
      "Install a signed measurement policy for a confidential upstream (takes effect at once)",
    tag: "admin",
    auth: "operator",
    body: schemaOf(SignedPolicy),
    errors: [400, 401, 404, 413, 415],
  },
  "GET /admin/v1/metrics": {
    summary: "Prometheus metrics (text format 0.0.4)",
    tag: "admin",
    auth: "operator",
    ok: { type: "text/plain", schema: str },
    errors: [401, 404],
  },
};

/** C2SP tlog-tiles paths: `tile/<L>/<N>[.p/<W>]` and `tile/entries/…`, 2 to 8 segments after `tile/`. */
function tileOperations(): Record<string, Op> {
  const names = ["level", "a", "b", "c", "d", "e", "f", "g"];
  const out: Record<string, Op> = {};
  for (let n = 2; n <= names.length; n++) {
    out[`GET /v1/aci/log/tile/${names.slice(0, n).map((s) => ":" + s).join("/")}`] = {
      summary: `A Merkle tile or entry bundle (C2SP tlog-tiles; ${n} path segments)`,
      tag: "receipts",
      auth: "none",
      ok: { type: "application/octet-stream" },
      errors: [404],
    };
  }
  return out;
}
