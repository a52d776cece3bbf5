/**
 * The live quota leases of one admitter (leases.ts holds the arithmetic):
 * requests taken from them in memory, background renewals asked for, slices
 * granted after a batch's decision, leases folded back into a batch's commit,
 * and idle or old ones handed back by a sweep.
 */
import type { KvWrite } from "../store/mod.ts";
import { holdClosedWrites, holdRateClosedWrites } from "./holds.ts";
import type { KeyRecord } from "../keys/mod.ts";
import {
  type Lease,
  LEASE_IDLE_MS,
  LEASE_LIFETIME_MS,
  leaseReturnWrites,
  leaseSlice,
  mergeLease,
  pastHalfLife,
  runningLow,
  takeFromLease,
} from "./leases.ts";
import { limitsFor, rateHeaders, type Tiers } from "./rate_limit.ts";
import type { Working } from "./admission_decide.ts";
import type { AdmissionEstimate, Pending } from "./admission_types.ts";

export interface LeasePoolOptions {
  /** Writes hand-backs (the group committer's `write`). */
  write: (ops: KvWrite[]) => Promise<void>;
  /** Whether this process is the only live replica; leases are granted only then. */
  soleReplica: () => Promise<boolean>;
  /** Monotonic milliseconds for lease lifetimes. */
  monotonic: () => number;
  /** With it, a hand-back also closes its hold (holds.ts). */
  holdInstance?: string;
  leaseMaxRequests?: number;
  /** The workers sharing this host's leases: each slice is this fraction of a sole replica's. */
  leaseParts?: number;
  tiers: Tiers;
}

export class LeasePool {
  readonly #o: LeasePoolOptions;
  /** Live leases by key id; a key's lease is detached while a batch folds it back. */
  readonly #leases = new Map<string, Lease>();
  readonly #detached = new Map<string, Lease>();
  /**
   * Leases whose renewal was asked for: one try per slice (a merge clears it), so a
   * renewal that grants nothing near a limit is not asked again on every request.
   */
  readonly #renewAsked = new WeakSet<Lease>();
  /** Each lease's renewal as its last request would ask it (sized on that request). */
  readonly #renewers = new WeakMap<Lease, () => void>();
  #sweeper: ReturnType<typeof setInterval> | undefined;
  #closed = false;

  constructor(o: LeasePoolOptions) {
    this.#o = o;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Admits `est` from `key`'s lease: its rate headers, or null when there is no
   * lease or it cannot hold the request. Asks `renew` once per slice running low;
   * a slice getting old is renewed by the sweep, with the last `renew` given.
   */
  take(
    key: KeyRecord,
    est: AdmissionEstimate,
    renew: () => void,
  ): Record<string, string> | null {
    const lease = this.#leases.get(key.key_id);
    if (lease === undefined || this.#closed) return null;
    const tm = this.#o.monotonic();
    if (!takeFromLease(lease, tm, est.tokens, est.costNano)) return null;
    this.#renewers.set(lease, renew);
    if (!this.#renewAsked.has(lease) && runningLow(lease)) {
      this.#renewAsked.add(lease);
      renew();
    }
    return rateHeaders(limitsFor(key, this.#o.tiers), lease.shownReq, lease.shownTok);
  }

  /** Whether `id` has a lease live or being folded back (it may pay from it). */
  holds(id: string): boolean {
    return !this.#closed && (this.#leases.has(id) || this.#detached.has(id));
  }

  /** Detaches `id`'s live lease so the batch folds it back (exactly, in its commit). */
  detach(id: string): void {
    const live = this.#leases.get(id);
    if (live) {
      this.#leases.delete(id);
      this.#detached.set(id, live);
    }
  }

  /** The lease being folded back for `id` (kept across the batch's attempts). */
  detachedOf(id: string): Lease | undefined {
    return this.#detached.get(id);
  }

  /** A batch that never committed leaves its folded-back leases reserved: keep using them. */
  restore(batch: Pending[]): void {
    for (const p of batch) {
      const l = this.#detached.get(p.key.key_id);
      if (l === undefined) continue;
      this.#detached.delete(p.key.key_id);
      if (!this.#leases.has(p.key.key_id)) this.#install(p.key.key_id, l);
    }
  }

  /**
   * Far from every limit, reserves a slice for the next requests of each key
   * the batch admitted (updating `work` so the commit writes it). Empty unless
   * this process is the sole replica.
   */
  async grant(batch: Pending[], work: Map<string, Working>): Promise<Map<string, Lease>> {
    const granted = new Map<string, Lease>();
    if (this.#closed || ![...work.values()].some((w) => w.last !== null)) return granted;
    if (!(await this.#o.soleReplica().catch(() => false))) return granted;
    const tm = this.#o.monotonic();
    for (const p of batch) {
      const w = work.get(p.key.key_id)!;
      if (w.last === null || granted.has(p.key.key_id) || w.unpaid > 0n) continue;
      const limits = limitsFor(p.key, this.#o.tiers);
      const slice = leaseSlice(
        { req: limits.rpm - w.state.req, tok: limits.tpm - w.state.tok, credit: w.balance },
        w.last.tokens,
        w.last.costNano,
        this.#o.leaseMaxRequests,
        this.#o.leaseParts,
      );
      if (slice === null) continue;
      granted.set(p.key.key_id, {
        req: slice.req,
        tok: slice.tok,
        credit: slice.credit,
        shownReq: w.state.req,
        shownTok: w.state.tok,
        grantedAt: tm,
        lastUse: tm,
        size: slice,
      });
      w.state = { ...w.state, req: w.state.req + slice.req, tok: w.state.tok + slice.tok };
      w.balance -= slice.credit;
      w.held += slice.credit;
      w.rate.heldReq += slice.req;
      w.rate.heldTok += slice.tok;
      w.admitted = true; // a renewal-only key writes its entries too
    }
    return granted;
  }

  /** The batch's commit landed: folded-back leases are gone, granted slices go live. */
  committed(keyIds: string[], granted: Map<string, Lease>): void {
    for (const id of keyIds) this.#detached.delete(id);
    for (const [id, l] of granted) {
      const live = this.#leases.get(id); // only a renewal leaves the live lease in place
      if (live !== undefined) {
        mergeLease(live, l);
        this.#renewAsked.delete(live);
        continue;
      }
      this.#install(id, l);
    }
  }

  /** Hands back every lease (durably) and stops leasing. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#sweep(true);
  }

  /** A lease's hand-back: its unused part, and the holds it closes. */
  #returnWrites(id: string, l: Lease): KvWrite[] {
    const inst = this.#o.holdInstance;
    return [
      ...leaseReturnWrites(id, l),
      ...(inst === undefined ? [] : [
        ...holdClosedWrites(inst, id, l.credit),
        ...holdRateClosedWrites(inst, id, l.req, l.tok),
      ]),
    ];
  }

  #install(id: string, l: Lease): void {
    if (this.#closed) {
      // After close (a batch that failed late): hand the slice back, start no timer.
      void this.#o.write(this.#returnWrites(id, l)).catch(() => {});
      return;
    }
    this.#leases.set(id, l);
    this.#sweeper ??= setInterval(() => void this.#sweep(false).catch(() => {}), LEASE_IDLE_MS / 2);
  }

  /**
   * Returns leases that went idle, got old, or outlived the sole-replica
   * condition; asks the renewal of those in use past half their lifetime.
   * (Asked here, at a time no request chose, a lone stream's first chunk does
   * not share the core with the renewal's commit, as it did when the request
   * that found the lease old asked it: ~0.5 of c=1 streams, +1.5 ms.)
   */
  async #sweep(all: boolean): Promise<void> {
    const sole = all || this.#leases.size === 0
      ? false
      : await this.#o.soleReplica().catch(() => false);
    const t = this.#o.monotonic();
    const writes: KvWrite[] = [];
    for (const [id, l] of this.#leases) {
      const stale = t - l.lastUse >= LEASE_IDLE_MS || t - l.grantedAt >= LEASE_LIFETIME_MS;
      if (all || !sole || stale) {
        this.#leases.delete(id);
        writes.push(...this.#returnWrites(id, l));
      } else if (!this.#renewAsked.has(l) && pastHalfLife(l, t)) {
        const renew = this.#renewers.get(l);
        if (renew) {
          this.#renewAsked.add(l);
          renew();
        }
      }
    }
    if (this.#leases.size === 0 && this.#sweeper !== undefined) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
    // A failed return leaves the slice reserved in the store (it never
    // over-admits); the committer reports the failure.
    if (writes.length > 0) await this.#o.write(writes);
  }
}
