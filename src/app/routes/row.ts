/**
 * One row of the route table (`table.ts`): method, path, what serves it,
 * its error envelope, who may call it and its OpenAPI operation. The
 * router, the OpenAPI document's operations and the service capabilities
 * are all built from the rows (below), so an endpoint is one row.
 */
import type { ErrorFormat, Handler } from "../../http/mod.ts";
import type { GatewayContext, InferenceEndpoint } from "../../handlers/mod.ts";
import type { Op } from "../../operator/mod.ts";

/** What the OpenAPI document says of a route beyond what its row already says. */
export type OpDoc = Omit<Op, "auth" | "anthropic" | "inference">;

interface RowCommon {
  method: string;
  /** Router syntax: literal segments and `:name` captures. */
  path: string;
  /**
   * Who may call. `operator` rows are wrapped in the operator check and its
   * audit line when the router is built (`action` names them in that line);
   * `key` and `optional-key` routes authenticate in their handler or the
   * pipeline, whose refusal receipt depends on when that happens.
   */
  auth: Op["auth"];
  action?: string;
  doc: OpDoc;
}

/** A plain handler, answering errors in `envelope`. */
export interface HandlerRow extends RowCommon {
  handler: Handler<GatewayContext>;
  envelope: ErrorFormat;
  inference?: undefined;
}

/** An inference endpoint the pipeline runs; its envelope is the endpoint's `errorFormat`. */
export interface InferenceRow extends RowCommon {
  inference: InferenceEndpoint;
  /** Its format's name in the service capabilities (e.g. `openai.chat_completions`). */
  format: string;
  handler?: undefined;
}

export type RouteRow = HandlerRow | InferenceRow;

export const envelopeOf = (row: RouteRow): ErrorFormat =>
  row.inference ? row.inference.errorFormat : row.envelope;

/** The OpenAPI operations, keyed `METHOD /pattern` (what `operator/openapi.ts` renders). */
export function operationsOf(rows: readonly RouteRow[]): [string, Op][] {
  return rows.map((row) => [`${row.method} ${row.path}`, {
    ...row.doc,
    auth: row.auth,
    ...(envelopeOf(row) === "anthropic" ? { anthropic: true } : {}),
    ...(row.inference ? { inference: true } : {}),
  }]);
}

/** What the gateway declares it serves (every report's `service_capabilities`). */
export function capabilitiesOf(rows: readonly RouteRow[]) {
  const inference = rows.filter((r): r is InferenceRow => r.inference !== undefined);
  return {
    serving: "aggregator",
    supported_e2ee_versions: ["2"],
    endpoints: inference.map((r) => r.path),
    formats: inference.map((r) => r.format),
    receipts: {
      signature_algorithms: ["ed25519"],
      legacy_signature_algorithms: ["ecdsa", "ed25519"],
    },
    attested_sessions: true,
  };
}
