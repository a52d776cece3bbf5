/** The public routes besides inference: catalog, receipts and the log, attestation, account, operations. */
import {
  canonicalAttestation,
  getCheckpoint,
  getConsistency,
  getEvidenceBundle,
  getInclusion,
  getLegacySignature,
  getOwnKey,
  getOwnUsage,
  getReceipt,
  getSession,
  getTile,
  healthz,
  legacyAttestation,
  listEmbeddingModels,
  listModels,
  listSessions,
  retrieveModel,
  TILE_SEGMENTS,
  vendorModels,
  verifyPage,
  verifyScript,
} from "../../handlers/mod.ts";
import { OwnKeySchema } from "../../admission/mod.ts";
import { catalogFilters, dayParam, schemaOf, str } from "../../operator/mod.ts";
import type { RouteRow } from "./row.ts";

export const PUBLIC_ROUTES: RouteRow[] = [
  {
    method: "GET",
    path: "/v1/models",
    handler: listModels,
    envelope: "openai",
    auth: "none",
    doc: {
      summary: "Chat models",
      tag: "catalog",
      query: catalogFilters,
      errors: [400],
    },
  },
  {
    method: "GET",
    path: "/v1/models/:vendor",
    handler: vendorModels,
    envelope: "openai",
    auth: "none",
    doc: {
      summary: "One confidential vendor's models (legacy listing), or one model by encoded id",
      tag: "catalog",
      errors: [404],
    },
  },
  {
    method: "GET",
    path: "/v1/models/:provider/:model",
    handler: retrieveModel,
    envelope: "openai",
    auth: "none",
    doc: {
      summary: "One model object",
      tag: "catalog",
      errors: [404],
    },
  },
  {
    method: "GET",
    path: "/v1/embeddings/models",
    handler: listEmbeddingModels,
    envelope: "openai",
    auth: "none",
    doc: {
      summary: "Embedding models",
      tag: "catalog",
      query: catalogFilters,
      errors: [400],
    },
  },
  {
    method: "GET",
    path: "/v1/aci/receipts/:id",
    handler: getReceipt,
    envelope: "openai",
    auth: "optional-key",
    doc: {
      summary: "The signed receipt of a response (only for the key that made the request)",
      tag: "receipts",
      errors: [401, 404],
    },
  },
  {
    method: "GET",
    path: "/v1/aci/receipts/:id/inclusion",
    handler: getInclusion,
    envelope: "openai",
    auth: "optional-key",
    doc: {
      summary: "The receipt's leaf index and inclusion proof against the served checkpoint " +
        "(503 log_pending until it is in one)",
      tag: "receipts",
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
  },
  {
    method: "GET",
    path: "/v1/aci/receipts/:id/bundle",
    handler: getEvidenceBundle,
    envelope: "openai",
    auth: "optional-key",
    doc: {
      summary:
        "Offline evidence bundle: receipt, archived report and keyset, sessions, inclusion " +
        "proof, checkpoint, the reports of its signing keysets and the collateral each quote's " +
        "check consumed (task verify --bundle)",
      tag: "receipts",
      errors: [401, 404, 503],
    },
  },
  {
    method: "GET",
    path: "/v1/aci/log/checkpoint",
    handler: getCheckpoint,
    envelope: "openai",
    auth: "none",
    doc: {
      summary: "The transparency log's latest checkpoint (C2SP tlog-checkpoint, signed note)",
      tag: "receipts",
      ok: { type: "text/plain; charset=utf-8" },
      errors: [503],
    },
  },
  {
    method: "GET",
    path: "/v1/aci/log/consistency",
    handler: getConsistency,
    envelope: "openai",
    auth: "none",
    doc: {
      summary: "Consistency proof between two tree sizes (computable from the tiles too)",
      tag: "receipts",
      query: [
        { name: "from", description: "the older tree size" },
        { name: "to", description: "the newer tree size (at most the checkpoint's)" },
      ],
      errors: [400, 503],
    },
  },
  ...tileRows(),
  {
    method: "GET",
    path: "/v1/signature/:id",
    handler: getLegacySignature,
    envelope: "openai",
    auth: "optional-key",
    doc: {
      summary: "The same receipt in the legacy vllm-proxy signature envelope",
      tag: "receipts",
      query: [{
        name: "signing_algo",
        description: "ecdsa (default) or ed25519",
        schema: { enum: ["ecdsa", "ed25519"] },
      }],
      errors: [400, 401, 404],
    },
  },
  {
    method: "GET",
    path: "/v1/aci/attestation",
    handler: canonicalAttestation,
    envelope: "openai",
    auth: "none",
    doc: {
      summary: "The gateway's attestation report (fresh nonce, or an archived keyset's report)",
      tag: "attestation",
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
  },
  {
    method: "GET",
    path: "/v1/aci/sessions",
    handler: listSessions,
    envelope: "openai",
    auth: "key",
    doc: {
      summary: "Current attested upstream sessions",
      tag: "attestation",
      query: [
        { name: "upstream_name", description: "One upstream", schema: str },
        { name: "model", description: "Upstreams routing this model", schema: str },
      ],
      errors: [400, 401, 404],
    },
  },
  {
    method: "GET",
    path: "/v1/aci/sessions/:id",
    handler: getSession,
    envelope: "openai",
    auth: "key",
    doc: {
      summary: "One attested session document (its id is the SHA-256 of its JCS form)",
      tag: "attestation",
      errors: [400, 401, 404],
    },
  },
  {
    method: "GET",
    path: "/v1/attestation/report",
    handler: legacyAttestation,
    envelope: "openai",
    auth: "none",
    doc: {
      summary: "Legacy attestation report",
      tag: "attestation",
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
  },
  {
    method: "GET",
    path: "/v1/key",
    handler: getOwnKey,
    envelope: "openai",
    auth: "key",
    doc: {
      summary:
        "The calling key: balance, reserved, available, spent, tier, limits and rate-limit buckets",
      tag: "account",
      ok: { schema: schemaOf(OwnKeySchema) },
      errors: [401],
    },
  },
  {
    method: "GET",
    path: "/v1/usage",
    handler: getOwnUsage,
    envelope: "openai",
    auth: "key",
    doc: {
      summary: "The calling key's usage per UTC day and model",
      tag: "account",
      query: [dayParam("from"), dayParam("to")],
      errors: [400, 401],
    },
  },
  {
    method: "GET",
    path: "/healthz",
    handler: healthz,
    envelope: "openai",
    auth: "operator-optional",
    doc: {
      summary: "Health: ok, degraded or unavailable (503); operators get the detail",
      tag: "operations",
      ok: {
        schema: {
          type: "object",
          properties: { status: { enum: ["ok", "degraded", "unavailable"] } },
          required: ["status"],
        },
      },
      errors: [503],
    },
  },
  {
    method: "GET",
    path: "/verify",
    handler: verifyPage,
    envelope: "openai",
    auth: "none",
    doc: {
      summary: "A page that verifies a receipt in the browser",
      tag: "receipts",
      ok: { type: "text/html", schema: str },
      errors: [],
    },
  },
  {
    method: "GET",
    path: "/verify/app.js",
    handler: verifyScript,
    envelope: "openai",
    auth: "none",
    doc: {
      summary: "The verify page's script (built from the project's verify library)",
      tag: "receipts",
      ok: { type: "text/javascript", schema: str },
      errors: [],
    },
  },
];

/** C2SP tlog-tiles paths: `tile/<L>/<N>[.p/<W>]` and `tile/entries/…`, 2 to TILE_SEGMENTS segments after `tile/`. */
function tileRows(): RouteRow[] {
  const names = ["level", "a", "b", "c", "d", "e", "f", "g"].slice(0, TILE_SEGMENTS);
  const out: RouteRow[] = [];
  for (let n = 2; n <= TILE_SEGMENTS; n++) {
    out.push({
      method: "GET",
      path: `/v1/aci/log/tile/${names.slice(0, n).map((s) => ":" + s).join("/")}`,
      handler: getTile,
      envelope: "openai",
      auth: "none",
      doc: {
        summary: `A Merkle tile or entry bundle (C2SP tlog-tiles; ${n} path segments)`,
        tag: "receipts",
        ok: { type: "application/octet-stream" },
        errors: [404],
      },
    });
  }
  return out;
}
