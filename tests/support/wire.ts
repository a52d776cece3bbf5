/**
 * Typed views of the gateway's JSON answers for the end-to-end tests: the
 * project's own wire types (receipts, session documents, reports) and small
 * narrowing helpers that assert the member of a union a test expects, so the
 * tests read fields with types instead of `any`.
 */
import assert from "node:assert/strict";
import type { Receipt, ReceiptEvent, UpstreamVerifiedEvent } from "../../src/aci/receipt.ts";
import type { Claim, ClaimSource, SessionDocument } from "../../src/sessions/types.ts";

export type { Receipt, ReceiptEvent } from "../../src/aci/receipt.ts";
export type { SessionDocument } from "../../src/sessions/types.ts";
export type { SessionListEntry } from "../../src/sessions/store.ts";
export type { CanonicalReport } from "../../src/attestation/reports.ts";

/** The OpenAI-format error envelope every non-Anthropic route answers with. */
export interface ErrorEnvelope {
  error: { message: string; type: string; code: string | null; param?: string | null };
}

/** A model object of `/v1/models` (the fields the tests read). */
export interface ModelObject {
  id: string;
  is_tee: boolean;
  [field: string]: unknown;
}

export interface ModelList {
  data: ModelObject[];
}

/** `/healthz` with the operator token (handlers/health.ts). */
export interface HealthDetail {
  status: "ok" | "degraded" | "unavailable";
  unverified_upstreams?: string[];
  upstreams: Record<string, { verified: boolean; session_id?: string; reason?: string }>;
}

/** A JSON answer as the type the route documents (the caller names it). */
export async function jsonOf<T>(res: Response): Promise<T> {
  return await res.json() as T;
}

/** The receipt's `upstream.verified` event with `result: "verified"`; fails the test otherwise. */
export function verifiedEvent(r: Receipt): UpstreamVerifiedEvent {
  const ev = r.event_log.find((e): e is UpstreamVerifiedEvent =>
    e.type === "upstream.verified" && "result" in e && e.result === "verified"
  );
  assert.ok(ev, `no verified upstream.verified event in ${JSON.stringify(r.event_log)}`);
  return ev;
}

/** The `type`s of a receipt's events, in order. */
export const eventTypes = (r: Receipt): string[] => r.event_log.map((e: ReceiptEvent) => e.type);

/** A claim that is asserted or refuted (with its source); fails the test for `unknown`. */
export function decided(
  c: Claim,
): { status: "asserted" | "refuted"; source: ClaimSource; reason?: string } {
  if (c.status === "unknown") throw new assert.AssertionError({ message: "the claim is unknown" });
  return c;
}

/** A provider-specific entry of a session's `claims.extra` (e.g. `gpu_evidence`); fails when absent. */
export function extraClaim(doc: SessionDocument, name: string): Record<string, unknown> {
  const e: Record<string, unknown> | undefined = doc.claims.extra?.[name];
  assert.ok(e, `claims.extra.${name}`);
  return e;
}
