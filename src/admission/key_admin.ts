/**
 * Key administration, once: what `deno task keys`, the admin HTTP API
 * (`/admin/v1/…`) and the key holder's own `GET /v1/key` / `GET /v1/usage`
 * answer. Every figure comes from one function (key_figures.ts), so the CLI
 * and the API cannot disagree: `balance` (given − spent), `reserved` (held
 * by replicas for requests in flight and quota leases) and `available`
 * (`balance − reserved`), as exact decimal strings, and the rate buckets'
 * use apart from what lease slices hold.
 */
import { addCredits, formatCredits, parseCredits } from "./credits.ts";
import { type KeyFigures, readKeyFigures } from "./key_figures.ts";
import {
  createKey,
  getKey,
  isTier,
  type KeyRecord,
  keyRecordKey,
  listKeys,
  parseKeyRecord,
  revokeKey,
  type Tier,
} from "../keys/mod.ts";
import { limitsFor, type Tiers } from "./rate_limit.ts";
import { type DayRange, readDailyUsage } from "./usage_daily.ts";
import { retryTransient } from "../store/mod.ts";
import { GatewayError } from "../http/mod.ts";

/** A bad argument (CLI usage error, API 400). */
export class KeyArgumentError extends Error {
  constructor(readonly param: string, message: string) {
    super(message);
  }
}

export interface KeySummary {
  key_id: string;
  name: string;
  tier: Tier;
  status: "active" | "revoked";
  created_at: string;
  revoked_at: string | null;
  /** Credits given minus credits spent by settled requests (decimal string). */
  balance: string;
  /** Credits held by all replicas for requests in flight and quota leases. */
  reserved: string;
  /** `balance − reserved`: what new requests can spend. */
  available: string;
  limits: { rpm: number; tpm: number; custom: boolean };
}

export interface KeyDetail extends KeySummary {
  usage: { requests: number; prompt_tokens: number; completion_tokens: number; spent: string };
  /**
   * The rate-limit buckets: how full each is with requests made (requests,
   * tokens), what quota-lease slices hold in them (unused, or taken by
   * requests not yet settled), and when the
   * requests made have drained.
   */
  rate_limit: {
    requests: number;
    tokens: number;
    requests_reserved: number;
    tokens_reserved: number;
    resets_in_seconds: number;
  };
}

export interface KeyAdminDeps {
  kv: Deno.Kv;
  now: () => number;
  tiers: Tiers;
}

/** The credit figures of a summary (a new key's: all given, nothing reserved). */
type Credits = Pick<KeyFigures, "balance" | "reserved" | "available">;

function summary(rec: KeyRecord, credits: Credits, tiers: Tiers): KeySummary {
  const lim = limitsFor(rec, tiers);
  return {
    key_id: rec.key_id,
    name: rec.name,
    tier: rec.tier,
    status: rec.revoked_at === null ? "active" : "revoked",
    created_at: new Date(rec.created_at).toISOString(),
    revoked_at: rec.revoked_at === null ? null : new Date(rec.revoked_at).toISOString(),
    balance: formatCredits(credits.balance),
    reserved: formatCredits(credits.reserved),
    available: formatCredits(credits.available),
    limits: { rpm: lim.rpm, tpm: lim.tpm, custom: rec.rpm !== undefined },
  };
}

function notFound(id: string): GatewayError {
  return new GatewayError("not_found", `no such key: ${id}`);
}

/** Decimal credits → nano; a KeyArgumentError naming `param` when malformed. */
export function creditsArg(param: string, text: string): bigint {
  try {
    return parseCredits(text);
  } catch (e) {
    throw new KeyArgumentError(param, (e as Error).message);
  }
}

function checkLimits(tier: Tier, rpm: number | undefined, tpm: number | undefined): void {
  if ((rpm === undefined) !== (tpm === undefined)) {
    throw new KeyArgumentError(rpm === undefined ? "rpm" : "tpm", "rpm and tpm go together");
  }
  if (rpm !== undefined && tier !== "enterprise") {
    throw new KeyArgumentError("rpm", "rpm/tpm are only for enterprise keys");
  }
  for (const [name, v] of [["rpm", rpm], ["tpm", tpm]] as const) {
    if (v !== undefined && (!Number.isSafeInteger(v) || v <= 0)) {
      throw new KeyArgumentError(name, `${name} must be a positive integer`);
    }
  }
}

// Long only as one closure over the store and clock: each operation inside is short.
export function keyAdmin(deps: KeyAdminDeps) {
  const { kv, now, tiers } = deps;

  const figures = (rec: KeyRecord) => readKeyFigures(kv, rec, tiers, now());

  async function detail(rec: KeyRecord): Promise<KeyDetail> {
    const f = await figures(rec);
    const { usage, rate } = f;
    return {
      ...summary(rec, f, tiers),
      usage: {
        requests: Number(usage.requests),
        prompt_tokens: Number(usage.prompt_tokens),
        completion_tokens: Number(usage.completion_tokens),
        spent: formatCredits(usage.spent_nano),
      },
      rate_limit: {
        requests: rate.requests,
        tokens: rate.tokens,
        requests_reserved: rate.requestsReserved,
        tokens_reserved: rate.tokensReserved,
        resets_in_seconds: rate.resetSeconds,
      },
    };
  }

  async function mustGet(id: string): Promise<KeyRecord> {
    const rec = await getKey(kv, id);
    if (rec === null) throw notFound(id);
    return rec;
  }

  return {
    async create(o: {
      tier: string;
      name?: string;
      credits?: string;
      rpm?: number;
      tpm?: number;
    }): Promise<{ key: string; summary: KeySummary }> {
      if (!isTier(o.tier)) {
        throw new KeyArgumentError("tier", "tier must be free, pro or enterprise");
      }
      checkLimits(o.tier, o.rpm, o.tpm);
      const creditsNano = creditsArg("credits", o.credits ?? "0");
      const { key, record } = await createKey(kv, {
        tier: o.tier,
        name: o.name,
        rpm: o.rpm,
        tpm: o.tpm,
        creditsNano,
        now,
      });
      const credits = { balance: creditsNano, reserved: 0n, available: creditsNano };
      return { key, summary: summary(record, credits, tiers) };
    },

    async list(): Promise<KeySummary[]> {
      const recs = await listKeys(kv);
      const all = await Promise.all(recs.map(figures));
      return recs.map((r, i) => summary(r, all[i], tiers));
    },

    async show(id: string): Promise<KeyDetail> {
      return detail(await mustGet(id));
    },

    /** Adds credits; `revoked` tells the caller to warn (the credits cannot be spent). */
    async credit(id: string, amount: string): Promise<{ summary: KeySummary; revoked: boolean }> {
      const nano = creditsArg("amount", amount);
      if (nano === 0n) throw new KeyArgumentError("amount", "amount must be positive");
      try {
        await addCredits(kv, id, nano);
      } catch (e) {
        if (e instanceof RangeError) throw new KeyArgumentError("amount", e.message);
        throw e;
      }
      const rec = await mustGet(id);
      return {
        summary: summary(rec, await figures(rec), tiers),
        revoked: rec.revoked_at !== null,
      };
    },

    async revoke(id: string): Promise<KeySummary> {
      const rec = await revokeKey(kv, id, now);
      if (rec === null) throw notFound(id);
      return summary(rec, await figures(rec), tiers);
    },

    /**
     * Sets the tier and/or the per-key limits. `rpm`/`tpm` null drops the
     * override; leaving enterprise drops it too (overrides are enterprise-only).
     */
    async update(
      id: string,
      o: { tier?: string; rpm?: number | null; tpm?: number | null },
    ): Promise<KeySummary> {
      if (o.tier !== undefined && !isTier(o.tier)) {
        throw new KeyArgumentError("tier", "tier must be free, pro or enterprise");
      }
      for (;;) {
        const out = await retryTransient(async () => {
          const e = await kv.get(keyRecordKey(id));
          if (e.value === null) throw notFound(id);
          const rec = parseKeyRecord(e.value);
          const tier = (o.tier ?? rec.tier) as Tier;
          let rpm = o.rpm === undefined ? rec.rpm : o.rpm ?? undefined;
          let tpm = o.tpm === undefined ? rec.tpm : o.tpm ?? undefined;
          if (tier !== "enterprise" && o.rpm === undefined && o.tpm === undefined) {
            rpm = undefined;
            tpm = undefined;
          }
          checkLimits(tier, rpm, tpm);
          const next: KeyRecord = { ...rec, tier };
          delete next.rpm;
          delete next.tpm;
          if (rpm !== undefined) next.rpm = rpm;
          if (tpm !== undefined) next.tpm = tpm;
          const res = await kv.atomic().check(e).set(keyRecordKey(id), next).commit();
          return res.ok ? next : null;
        });
        if (out !== null) return summary(out, await figures(out), tiers);
      }
    },

    async usage(id: string, range: DayRange) {
      await mustGet(id);
      const rows = await readDailyUsage(kv, id, range);
      return {
        key_id: id,
        from: range.from,
        to: range.to,
        data: rows.map((r) => ({
          date: r.date,
          model: r.model,
          requests: Number(r.requests),
          prompt_tokens: Number(r.prompt_tokens),
          completion_tokens: Number(r.completion_tokens),
          spent: formatCredits(r.spent_nano),
        })),
      };
    },

    /** Every key's usage per model over a day range (days summed), for the admin API. */
    async usageByKey(range: DayRange) {
      const out: {
        key_id: string;
        model: string;
        requests: number;
        prompt_tokens: number;
        completion_tokens: number;
        spent: string;
      }[] = [];
      for (const rec of await listKeys(kv)) {
        const byModel = new Map<string, [bigint, bigint, bigint, bigint]>();
        for (const r of await readDailyUsage(kv, rec.key_id, range)) {
          const t = byModel.get(r.model) ?? [0n, 0n, 0n, 0n];
          byModel.set(r.model, [
            t[0] + r.requests,
            t[1] + r.prompt_tokens,
            t[2] + r.completion_tokens,
            t[3] + r.spent_nano,
          ]);
        }
        for (const [model, t] of byModel) {
          out.push({
            key_id: rec.key_id,
            model,
            requests: Number(t[0]),
            prompt_tokens: Number(t[1]),
            completion_tokens: Number(t[2]),
            spent: formatCredits(t[3]),
          });
        }
      }
      return { from: range.from, to: range.to, data: out };
    },

    /** What a key holder sees of their own key (`GET /v1/key`). */
    detailOf: detail,
  };
}

export type KeyAdmin = ReturnType<typeof keyAdmin>;
