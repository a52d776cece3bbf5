/**
 * What refusals cost the store. Every refusal keeps its
 * `x-receipt-id`, but a key's refusals are bounded per window: the first
 * `budget` of a window get their own receipt (kept `retentionMs`, shorter
 * than an answered request's), and the rest of that window share one durable
 * receipt whose `refusals.shared` event counts them. The shared receipt is
 * written with the first refusal it covers (durable before that answer goes
 * out); its count is re-signed into the same entry at most once per
 * `flushMs` and when the window ends, so a flood adds at most `budget + 1`
 * entries per key per window, and later refusals write nothing at all.
 *
 * The budget is per process (memory), so N replicas store at most N times
 * it. A crash loses at most the last `flushMs` of count increments, never a
 * receipt id that was handed out.
 */
import type { KvWrite } from "../store/mod.ts";
import type { ReceiptDraft } from "./recorder.ts";

export interface RefusalPolicy {
  /** Own receipts per key per window. */
  budget: number;
  windowMs: number;
  /** How long refusal receipts (own and shared) are kept. */
  retentionMs: number;
}

interface Shared {
  draft: ReceiptDraft;
  windowStart: number;
  count: number;
  dirty: boolean;
}

interface Budget {
  window: number;
  stored: number;
  shared: Shared | null;
}

/** Keys tracked at once; the oldest is dropped first (its shared receipt flushed). */
const MAX_KEYS = 10_000;
const FLUSH_MS = 1_000;

export interface RefusalStore {
  /** The receipt id for this refusal and the writes that must be durable before answering. */
  record(draft: ReceiptDraft): { receiptId: string; writes: KvWrite[] };
  /** Writes every pending count and stops the timer. */
  close(): Promise<void>;
}

export function createRefusalStore(opts: {
  policy: RefusalPolicy;
  now: () => number;
  /** The signed receipt's KV writes, kept for `expireInMs`. */
  persist: (draft: ReceiptDraft, expireInMs: number) => KvWrite[];
  write: (ops: KvWrite[]) => Promise<void>;
  onError?: (e: unknown) => void;
  flushMs?: number;
}): RefusalStore {
  const { policy } = opts;
  const flushMs = opts.flushMs ?? FLUSH_MS;
  const budgets = new Map<string, Budget>();
  const dirty = new Set<Shared>();
  let timer: ReturnType<typeof setInterval> | undefined;

  function sharedWrites(s: Shared): KvWrite[] {
    const events = [...s.draft.events];
    // The count goes before the response hash, which stays the last event.
    events.splice(events.length - 1, 0, {
      type: "refusals.shared",
      count: s.count,
      window_start: Math.floor(s.windowStart / 1000),
      window_seconds: Math.floor(policy.windowMs / 1000),
    });
    return opts.persist({ ...s.draft, events }, policy.retentionMs);
  }

  function flush(list: Shared[]): Promise<void> {
    const writes: KvWrite[] = [];
    for (const s of list) {
      dirty.delete(s);
      s.dirty = false;
      writes.push(...sharedWrites(s));
    }
    if (dirty.size === 0 && timer !== undefined) {
      clearInterval(timer);
      timer = undefined;
    }
    return writes.length === 0 ? Promise.resolve() : opts.write(writes);
  }

  function retire(b: Budget): void {
    if (b.shared?.dirty) void flush([b.shared]).catch(opts.onError ?? (() => {}));
  }

  return {
    record(draft) {
      const t = opts.now();
      const window = Math.floor(t / policy.windowMs);
      const owner = draft.ownerDigest ?? "";
      let b = budgets.get(owner);
      if (b === undefined || b.window !== window) {
        if (b !== undefined) retire(b);
        budgets.delete(owner);
        b = { window, stored: 0, shared: null };
        budgets.set(owner, b);
        if (budgets.size > MAX_KEYS) {
          const [oldest, ob] = budgets.entries().next().value!;
          budgets.delete(oldest);
          retire(ob);
        }
      }
      if (b.stored < policy.budget) {
        b.stored++;
        return { receiptId: draft.receiptId, writes: opts.persist(draft, policy.retentionMs) };
      }
      if (b.shared === null) {
        b.shared = { draft, windowStart: window * policy.windowMs, count: 1, dirty: false };
        return { receiptId: draft.receiptId, writes: sharedWrites(b.shared) };
      }
      const s = b.shared;
      s.count++;
      if (!s.dirty) {
        s.dirty = true;
        dirty.add(s);
        timer ??= setInterval(
          () => void flush([...dirty]).catch(opts.onError ?? (() => {})),
          flushMs,
        );
      }
      return { receiptId: s.draft.receiptId, writes: [] };
    },
    async close() {
      await flush([...dirty]);
    },
  };
}
