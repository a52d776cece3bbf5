/**
 * Admission's read of each account, and a short-lived cache of it.
 *
 * Settlements only ever add to the separate counters (refunds, overruns,
 * debt), never to the two checked entries (balance, state), so a cached
 * balance/state stays exact until another process admits on the same key —
 * which the commit's versionstamp checks detect, forcing a fresh read. Cached
 * counters can only lag; admission decides from them only far from every
 * limit (see `nearLimit` in admission_decide.ts).
 */
import {
  type AccountState,
  balanceKey,
  creditRefundKey,
  debtKey,
  reqRefundKey,
  stateKey,
  tokOverKey,
  tokRefundKey,
} from "../keys/mod.ts";
import type { AdmissionKv } from "./admission_types.ts";

/** One account's entries: balance, state, debt, token refund, token overrun, credit and request refunds. */
export type AccountEntries = Deno.KvEntryMaybe<unknown>[];

/** How long read account entries may be reused (the counters in them can only lag). */
const CACHE_MS = 500;

export class AccountCache {
  readonly #kv: AdmissionKv;
  readonly #now: () => number;
  readonly #entries = new Map<string, { entries: AccountEntries; at: number }>();

  constructor(kv: AdmissionKv, now: () => number) {
    this.#kv = kv;
    this.#now = now;
  }

  /**
   * The entries of each account, one KV read per account (a `getMany` takes at
   * most 10 keys, so one account's 7 entries per call keep them one consistent
   * read); the cache keeps them.
   */
  async read(keyIds: string[]): Promise<Map<string, AccountEntries>> {
    const results = await Promise.all(keyIds.map((id) =>
      this.#kv.getMany([
        balanceKey(id),
        stateKey(id),
        debtKey(id),
        tokRefundKey(id),
        tokOverKey(id),
        creditRefundKey(id),
        reqRefundKey(id),
      ])
    ));
    const t = this.#now();
    const out = new Map<string, AccountEntries>();
    keyIds.forEach((id, i) => {
      out.set(id, results[i]);
      this.#entries.set(id, { entries: results[i], at: t });
    });
    return out;
  }

  /** Every account's recent entries, or null when any is missing or too old. */
  cached(keyIds: string[]): Map<string, AccountEntries> | null {
    const t = this.#now();
    const out = new Map<string, AccountEntries>();
    for (const id of keyIds) {
      const c = this.#entries.get(id);
      if (!c || t - c.at > CACHE_MS || t < c.at) return null;
      out.set(id, c.entries);
    }
    return out;
  }

  /** After a lost versionstamp race: read these afresh next time. */
  forget(keyIds: string[]): void {
    for (const id of keyIds) this.#entries.delete(id);
  }

  /** A commit wrote `id`'s checked entries: cache them as they now stand (read time kept). */
  written(
    id: string,
    prev: AccountEntries,
    balance: bigint,
    state: AccountState,
    versionstamp: string,
    t: number,
  ): void {
    const next = [...prev];
    next[0] = { key: balanceKey(id), value: new Deno.KvU64(balance), versionstamp };
    next[1] = { key: stateKey(id), value: state, versionstamp };
    this.#entries.set(id, { entries: next, at: this.#entries.get(id)?.at ?? t });
  }
}
