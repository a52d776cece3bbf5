/**
 * Usage per key, per UTC day and per model, for `GET /v1/usage` and the
 * admin API. Settlement adds deferred sums (riding the receipt's commit, like
 * the usage totals; store/deferred_sums.ts) to
 * `["usage_day", key_id, "YYYY-MM-DD", model, field]` (`Deno.KvU64`): they wait
 * in the replica's pending row and are applied now and then, and readers add
 * the rows. Entries are kept as long as the key's totals: four small counters
 * per key, model and day.
 */
import { type KvWrite, readWithDeferred } from "../store/mod.ts";
import { u64, USAGE_FIELDS, USAGE_PENDING_PREFIX, type UsageField } from "../keys/mod.ts";

export const dailyUsageKey = (
  keyId: string,
  day: string,
  model: string,
  field: UsageField,
): Deno.KvKey => ["usage_day", keyId, day, model, field];

const DAY_MS = 86_400_000;
/** The longest range one usage query may span (bounds the KV scan). */
export const MAX_USAGE_DAYS = 366;

/** The UTC day of an instant, `YYYY-MM-DD`. */
export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export interface SettledUsage {
  promptTokens: number;
  completionTokens: number;
  costNano: bigint;
}

/** The blind writes recording one settled request in its day and model. */
export function dailyUsageWrites(
  keyId: string,
  model: string,
  nowMs: number,
  u: SettledUsage,
): KvWrite[] {
  const day = dayOf(nowMs);
  const k = (f: UsageField) => dailyUsageKey(keyId, day, model, f);
  return [
    { op: "defer", key: k("requests"), value: 1n },
    { op: "defer", key: k("prompt_tokens"), value: BigInt(u.promptTokens) },
    { op: "defer", key: k("completion_tokens"), value: BigInt(u.completionTokens) },
    { op: "defer", key: k("spent_nano"), value: u.costNano },
  ];
}

export interface DailyUsageRow {
  date: string;
  model: string;
  requests: bigint;
  prompt_tokens: bigint;
  completion_tokens: bigint;
  spent_nano: bigint;
}

export interface DayRange {
  from: string;
  to: string;
}

const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;

function parseDay(name: string, v: string): number {
  const t = DAY_RE.test(v) ? Date.parse(`${v}T00:00:00Z`) : NaN;
  if (!Number.isFinite(t) || dayOf(t) !== v) {
    throw new RangeError(`${name} must be a date YYYY-MM-DD`);
  }
  return t;
}

/**
 * An inclusive day range from optional `from` / `to` (`YYYY-MM-DD`, UTC);
 * default: the 30 days ending today. Throws RangeError naming the bad value.
 */
export function dayRange(from: string | null, to: string | null, nowMs: number): DayRange {
  const toMs = to === null ? Date.parse(`${dayOf(nowMs)}T00:00:00Z`) : parseDay("to", to);
  const fromMs = from === null ? toMs - 29 * DAY_MS : parseDay("from", from);
  if (fromMs > toMs) throw new RangeError("from must not be after to");
  if ((toMs - fromMs) / DAY_MS + 1 > MAX_USAGE_DAYS) {
    throw new RangeError(`a usage range spans at most ${MAX_USAGE_DAYS} days`);
  }
  return { from: dayOf(fromMs), to: dayOf(toMs) };
}

/** Rows of one key's usage in a day range, by day then model: the counters and the pending deltas. */
export async function readDailyUsage(
  kv: Deno.Kv,
  keyId: string,
  range: DayRange,
): Promise<DailyUsageRow[]> {
  const end = dayOf(Date.parse(`${range.to}T00:00:00Z`) + DAY_MS);
  const { shared, deferred } = await readWithDeferred(kv, USAGE_PENDING_PREFIX, async () => {
    const entries: [Deno.KvKey, bigint][] = [];
    const iter = kv.list({
      start: ["usage_day", keyId, range.from],
      end: ["usage_day", keyId, end],
    });
    for await (const e of iter) entries.push([e.key, u64(e.value)]);
    return entries;
  });
  const rows = new Map<string, DailyUsageRow>();
  const add = (key: Deno.KvKey, value: bigint) => {
    const [head, k, date, model, field] = key;
    if (
      key.length !== 5 || head !== "usage_day" || k !== keyId || typeof date !== "string" ||
      typeof model !== "string" || date < range.from || date >= end ||
      !(USAGE_FIELDS as readonly unknown[]).includes(field)
    ) return;
    const id = `${date}\u0000${model}`;
    let row = rows.get(id);
    if (!row) {
      row = {
        date,
        model,
        requests: 0n,
        prompt_tokens: 0n,
        completion_tokens: 0n,
        spent_nano: 0n,
      };
      rows.set(id, row);
    }
    row[field as UsageField] += value;
  };
  for (const [key, v] of shared) add(key, v);
  for (const [key, v] of deferred.entries()) add(key, v);
  // By day then model, as the counters are listed.
  return [...rows.values()].sort((a, b) =>
    a.date < b.date ? -1 : a.date > b.date ? 1 : a.model < b.model ? -1 : a.model > b.model ? 1 : 0
  );
}
