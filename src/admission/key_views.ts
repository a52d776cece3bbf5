/**
 * The shapes in which keys are shown (zod): a key's summary and detail (the
 * admin API, key_admin.ts) and the key holder's own view (`GET /v1/key`). The
 * API document (operator/openapi_operations.ts) is generated from them, and
 * the tests check the answers against them.
 */
import { z } from "zod";
import { WINDOW_MS } from "./rate_limit.ts";
import type { KeyDetail } from "./key_admin.ts";
import { TIERS } from "../keys/mod.ts";

const credits = (what: string) =>
  z.string().regex(/^-?\d+(\.\d{1,9})?$/).describe(`${what} (exact decimal credits)`);
const count = (what: string) => z.number().int().nonnegative().describe(what);
const LEASE_HELD = (what: string) =>
  `${what} quota-lease slices hold in the bucket: unused, or taken by requests not yet settled`;

/** The three credit figures, the same on every surface (key_figures.ts). */
const creditFigures = {
  balance: credits("Credits given minus credits spent by settled requests"),
  reserved: credits(
    "Credits held by all gateway replicas for requests in flight and quota-lease slices",
  ),
  available: credits("balance − reserved: what new requests can spend"),
};

const usage = z.object({
  requests: count("Settled requests"),
  prompt_tokens: count("Prompt tokens of settled requests"),
  completion_tokens: count("Completion tokens of settled requests"),
  spent: credits("Credits spent by settled requests"),
});

export const KeySummarySchema = z.object({
  key_id: z.string(),
  name: z.string(),
  tier: z.enum(TIERS),
  status: z.enum(["active", "revoked"]),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
  ...creditFigures,
  limits: z.object({
    rpm: count("Requests per minute"),
    tpm: count("Tokens per minute"),
    custom: z.boolean(),
  }),
});

export const KeyDetailSchema = KeySummarySchema.extend({
  usage,
  rate_limit: z.object({
    requests: count("Requests made in the request bucket (draining at rpm)"),
    tokens: count("Tokens in the token bucket (draining at tpm)"),
    requests_reserved: count(LEASE_HELD("Requests")),
    tokens_reserved: count(LEASE_HELD("Tokens")),
    resets_in_seconds: count("Seconds until both buckets are empty"),
  }),
});

export const OwnKeySchema = z.object({
  data: z.object({
    key_id: z.string(),
    name: z.string(),
    tier: z.enum(TIERS),
    ...creditFigures,
    spent: credits("Credits spent by settled requests"),
    usage,
    limits: z.object({ rpm: count("Requests per minute"), tpm: count("Tokens per minute") }),
    rate_limit: z.object({
      interval_seconds: count("A full bucket drains in this long"),
      requests_used: count("Requests made in the request bucket"),
      requests_reserved: count(LEASE_HELD("Requests")),
      requests_remaining: count("rpm − used − reserved"),
      tokens_used: count("Tokens in the token bucket (estimates until settled)"),
      tokens_reserved: count(LEASE_HELD("Tokens")),
      tokens_remaining: count("tpm − used − reserved"),
      resets_in_seconds: count("Seconds until both buckets are empty"),
    }),
  }),
});
export type OwnKey = z.infer<typeof OwnKeySchema>;

/** The key holder's view of their key's detail. */
export function ownKeyView(d: KeyDetail): OwnKey {
  const r = d.rate_limit;
  return {
    data: {
      key_id: d.key_id,
      name: d.name,
      tier: d.tier,
      balance: d.balance,
      reserved: d.reserved,
      available: d.available,
      spent: d.usage.spent,
      usage: d.usage,
      limits: { rpm: d.limits.rpm, tpm: d.limits.tpm },
      rate_limit: {
        // Token buckets holding one interval's worth, refilling continuously.
        interval_seconds: WINDOW_MS / 1000,
        requests_used: r.requests,
        requests_reserved: r.requests_reserved,
        requests_remaining: Math.max(0, d.limits.rpm - r.requests - r.requests_reserved),
        tokens_used: r.tokens,
        tokens_reserved: r.tokens_reserved,
        tokens_remaining: Math.max(0, d.limits.tpm - r.tokens - r.tokens_reserved),
        resets_in_seconds: r.resets_in_seconds,
      },
    },
  };
}
