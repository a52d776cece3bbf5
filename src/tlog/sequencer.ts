/**
 * Sequencing: turning committed pending entries into tree leaves. Every
 * replica runs one; they share the store and take turns through one KV
 * check on the head. A run reads a batch of pending entries, appends them to
 * the right edge, signs the checkpoint of the new size, and commits tiles,
 * bundle, leaf index, head and checkpoint together while deleting the
 * pending entries — all or nothing. Two replicas racing for the same size:
 * the loser's check fails and it re-reads (no fork); an entry stays pending
 * until a commit that sequences it lands (no gap, no loss); a replica killed
 * mid-append left nothing half-written, and the survivors' sweep sequences
 * its pending entries. Head and checkpoint are one value, so there is no
 * crash window between them.
 */
import { bytesToHex } from "../aci/hex.ts";
import { checkpointBody } from "../aci/note.ts";
import { leafHash, treeHash } from "../aci/merkle.ts";
import { retryTransient } from "../store/transient.ts";
import {
  bundleKey,
  decodeBundle,
  Edge,
  type Head,
  HEAD_KEY,
  leafKey,
  PENDING_PREFIX,
  tileKey,
  type TileSource,
} from "./tiles.ts";

/** Entries per append (a leaf-index row each, ~80 key bytes), inside KV's atomic limits. */
const BATCH = 400;

export interface SequencerOptions {
  kv: Deno.Kv;
  origin: string;
  /** Signs a checkpoint body: one note signature line (the current keyset's log key). */
  sign: (body: string) => string;
  /** Told after each appended batch (cosigning, metrics). */
  onAppend?: (head: Head, count: number) => void;
  onError?: (e: unknown) => void;
  /**
   * False on all but one worker of a host (docs/decisions/workers.md): the log has one
   * appender per host, so `kick` does nothing here and the pending rows wait for that
   * one; only `drain` (at shutdown) appends, so nothing waits for a restart.
   */
  append?: boolean;
}

export interface Sequencer {
  /** Sequence what is pending now (coalesced: one run at a time, rerun if kicked meanwhile). */
  kick(): void;
  /** Resolves once everything pending when called was sequenced (by any replica). */
  drain(): Promise<void>;
  /** Stops sequencing (after the run in progress). */
  close(): Promise<void>;
}

export function createSequencer(o: SequencerOptions): Sequencer {
  const { kv } = o;
  let edge: { versionstamp: string; edge: Edge } | null = null;
  let running: Promise<void> | null = null;
  let again = false;
  let closed = false;
  const tile: TileSource = async (level, index) =>
    (await kv.get<Uint8Array>(tileKey(level, index))).value;
  const bundle: TileSource = async (_level, index) =>
    (await kv.get<Uint8Array>(bundleKey(index))).value;

  /** One append; returns how many pending entries it consumed (0: nothing pending). */
  const once = async (): Promise<number> => {
    for (;;) {
      // Pending rows hold the framed entries of one commit each; take rows up to BATCH entries.
      const pending: Deno.KvEntry<Uint8Array>[] = [];
      const entries: Uint8Array[] = [];
      for await (const e of kv.list<Uint8Array>({ prefix: PENDING_PREFIX }, { limit: BATCH })) {
        const rows = decodeBundle(e.value);
        if (pending.length > 0 && entries.length + rows.length > BATCH) break;
        pending.push(e);
        entries.push(...rows);
      }
      if (pending.length === 0) return 0;
      const head = await kv.get<Head>(HEAD_KEY);
      const size = head.value?.size ?? 0;
      const base = edge !== null && edge.versionstamp === head.versionstamp
        ? edge.edge
        : await Edge.load(size, tile, bundle);
      const next = base.clone();
      // The same entry twice in one batch (a session stored by two replicas) is logged once;
      // across batches, enqueue (log.ts) skips entries already in the log.
      const seen = new Set<string>();
      const fresh: Uint8Array[] = [];
      for (const entry of entries) {
        const h = bytesToHex(leafHash(entry));
        if (seen.has(h)) continue;
        seen.add(h);
        fresh.push(entry);
      }
      const writes = next.append(fresh);
      const root = await treeHash(next.reader(), next.size);
      const body = checkpointBody(o.origin, next.size, root);
      const newHead: Head = { size: next.size, root, checkpoint: body + "\n" + o.sign(body) };
      // The head check alone serializes appends: every append changes the head.
      const atomic = kv.atomic().check(head);
      for (const p of pending) atomic.delete(p.key);
      for (const t of writes.tiles) atomic.set(tileKey(t.level, t.index), t.bytes);
      for (const b of writes.bundles) atomic.set(bundleKey(b.index), b.bytes);
      writes.leaves.forEach((h, i) => atomic.set(leafKey(bytesToHex(h)), size + i));
      atomic.set(HEAD_KEY, newHead);
      const res = await atomic.commit();
      if (res.ok) {
        edge = { versionstamp: res.versionstamp, edge: next };
        o.onAppend?.(newHead, fresh.length);
        return entries.length;
      }
      // Another replica appended first (maybe these very entries): re-read and retry.
      edge = null;
    }
  };

  const run = async () => {
    do {
      again = false;
      try {
        while (!closed && await retryTransient(once) > 0) { /* until nothing is pending */ }
      } catch (e) {
        o.onError?.(e);
      }
    } while (again && !closed);
    running = null;
  };

  const start = () => {
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    running = run();
  };

  return {
    kick() {
      if (o.append !== false) start();
    },
    async drain() {
      for (;;) {
        if (running) await running;
        const any = kv.list({ prefix: PENDING_PREFIX }, { limit: 1 });
        let empty = true;
        for await (const _ of any) empty = false;
        if (empty) return;
        start();
        if (running) await running;
      }
    },
    async close() {
      closed = true;
      if (running) await running;
    },
  };
}
