/**
 * The transparency log as the gateway uses it: entries go in as pending KV
 * writes (a receipt's rides its own group commit, so a receipt the client
 * holds is durably queued for the log), the sequencer (sequencer.ts) appends
 * them, and the reads here serve the C2SP tlog-tiles resources and proofs
 * from the stored tiles. With witnesses configured, cosignatures are
 * gathered after each append (witnesses.ts).
 */
import {
  bytesToHex,
  checkpointBody,
  consistencyProof,
  emptyRoot,
  inclusionProof,
  leafHash,
  TILE_WIDTH,
  tileExistsFor,
  type TileRef,
} from "../aci/mod.ts";
import { framed, type KvWrite, retryTransient } from "../store/mod.ts";
import { createSequencer, type Sequencer, type SequencerOptions } from "./sequencer.ts";
import {
  COSIGNED_KEY,
  decodeQueued,
  encodeQueued,
  encodeQueuedReceipt,
  findLeafRef,
  type Head,
  HEAD_KEY,
  kvRows,
  leafAtPrefix,
  leafKey,
  PENDING_PREFIX,
  subtreeReader,
  type TileSource,
  tileSource,
} from "./tiles.ts";
import { readBundle } from "./chunks.ts";
import { createWitnessClient, type WitnessConfig } from "./witnesses.ts";
import { createLogWaiters, type LogWaiters } from "./waiters.ts";
import { type After, timerAfter } from "../http/mod.ts";

export type { Head } from "./tiles.ts";

export interface TransparencyLog {
  readonly origin: string;
  /**
   * The pending-entry write to commit with whatever the entry records. With the
   * second it was made in (a receipt's `served_at`), its leaf index is kept in
   * that second's shared rows and found again by `leafIndex(entry, second)`.
   */
  pendingWrite(entry: Uint8Array, second?: number): KvWrite;
  /**
   * A receipt's pending write, from its JCS and `served_at` second: the entry
   * `receiptEntry(receiptJcs)`, queued compactly (tiles.ts `encodeQueuedReceipt`).
   */
  pendingReceipt(receiptJcs: string, second: number): KvWrite;
  /** Queues an entry on its own (sessions, keysets), unless the log already holds it. */
  enqueue(entry: Uint8Array): Promise<void>;
  /** Told that pending entries were committed: sequence them now. */
  kick(): void;
  /**
   * The checkpoint served: the latest, or the latest with enough cosignatures
   * (null while none has them); before the first append, the signed size-0 one.
   */
  checkpoint(): Promise<Head | null>;
  /** The latest signed tree head (ahead of the served checkpoint while cosignatures are awaited). */
  head(): Promise<Head | null>;
  /** A tile's or bundle's bytes for a signed tree size; null when it does not exist. */
  tile(ref: TileRef, entries: boolean): Promise<Uint8Array | null>;
  /** The leaf index of an entry (queued with `second`, if it was), null when not (yet) logged. */
  leafIndex(entry: Uint8Array, second?: number): Promise<number | null>;
  inclusion(index: number, size: number): Promise<Uint8Array[]>;
  consistency(from: number, to: number): Promise<Uint8Array[]>;
  /** Requests waiting for the served checkpoint to grow (`inclusion?wait=`). */
  readonly waiters: LogWaiters;
  /** Resolves once every entry pending now is in the tree (and its cosigning attempted). */
  settle(): Promise<void>;
  close(): Promise<void>;
}

export interface LogOptions {
  kv: Deno.Kv;
  origin: string;
  now: () => number;
  randomBytes: (n: number) => Uint8Array;
  sign: (body: string) => string;
  witnesses: WitnessConfig[];
  requiredCosignatures: number;
  witnessFetch?: (url: string, init: RequestInit) => Promise<Response>;
  sweepIntervalMs: number;
  /** Entries committed within this window share one append (one tile and bundle rewrite, one commit). */
  batchMs: number;
  onAppend?: (count: number) => void;
  log: (line: Record<string, unknown>) => void;
  /** Whether this process appends (one worker per host does; sequencer.ts). */
  append?: boolean;
  /** The receipts' group commit lane, whose queued writes an append carries (sequencer.ts). */
  lane?: SequencerOptions["lane"];
  /** Deadlines of waiting requests and their shared head re-read (the gateway's wheel). */
  after?: After;
  /** While requests wait: how often the head is re-read for appends made elsewhere. */
  waitPollMs?: number;
  /** Requests waiting at once; past it, `wait` answers 503 at once. */
  maxWaiters?: number;
}

/** Appends by another replica or worker are seen within this (one KV read for all waiters). */
const WAIT_POLL_MS = 50;
const MAX_WAITERS = 1024;

// Long as one closure over shared state; each inner function is short.
export function createTransparencyLog(o: LogOptions): TransparencyLog {
  const { kv } = o;
  // Full tiles never change: cache a few for proofs.
  const fullTiles = new Map<string, Uint8Array>();
  const fullBundles = new Map<number, Uint8Array>();
  const rows = kvRows(kv);
  const stored = tileSource(rows);
  const tile: TileSource = async (level, index) => {
    const k = `${level}/${index}`;
    const hit = fullTiles.get(k);
    if (hit) return hit;
    const v = await stored(level, index);
    if (v !== null && v.length === TILE_WIDTH * 32) {
      if (fullTiles.size >= 256) fullTiles.delete(fullTiles.keys().next().value!);
      fullTiles.set(k, v);
    }
    return v;
  };
  const witnesses = o.witnesses.length > 0
    ? createWitnessClient({
      kv,
      witnesses: o.witnesses,
      required: o.requiredCosignatures,
      fetch: o.witnessFetch ?? (() => Promise.reject(new Error("no fetch for witnesses"))),
      consistency: (m, n) => consistencyProof(subtreeReader(tile), m, n),
      log: o.log,
    })
    : null;
  const waiters = createLogWaiters({
    after: o.after ?? timerAfter,
    pollMs: o.waitPollMs ?? WAIT_POLL_MS,
    max: o.maxWaiters ?? MAX_WAITERS,
    // What the served checkpoint follows: the head, and with witnesses the cosigned head.
    probe: async () => {
      if (witnesses === null) return String((await kv.get<Head>(HEAD_KEY)).value?.size ?? 0);
      const [head, cosigned] = await kv.getMany<[Head, Head]>([HEAD_KEY, COSIGNED_KEY]);
      return `${head.value?.size ?? 0}/${cosigned.value?.size ?? 0}`;
    },
    onError: (e) =>
      o.log({ level: "error", msg: "transparency log head re-read failed", error: String(e) }),
  });
  const sequencer: Sequencer = createSequencer({
    kv,
    now: o.now,
    origin: o.origin,
    sign: o.sign,
    append: o.append,
    lane: o.lane,
    onAppend: (head, count) => {
      o.onAppend?.(count);
      witnesses?.submit(head);
      // Cosigned heads arrive later, seen by the waiters' re-read; without witnesses this
      // head is the served checkpoint, and its size is what that re-read would find.
      waiters.notify(witnesses === null ? String(head.size) : undefined);
    },
    onError: (e) =>
      o.log({ level: "error", msg: "transparency log append failed", error: String(e) }),
  });
  // The sweep is for entries no live replica's batch timer will sequence (their replica
  // stopped between commit and append): only rows older than one sweep interval wake it, so
  // it never cuts a batch short with fresh rows. A pass of our own sequencer since then took
  // every row then pending, stale ones first: nothing to look for (under load, every sweep).
  const sweepStale = async () => {
    const stale = o.now() - o.sweepIntervalMs;
    if (o.append === false || sequencer.caughtUpSince(stale)) return;
    const end: Deno.KvKey = [...PENDING_PREFIX, stale];
    for await (const _ of kv.list({ prefix: PENDING_PREFIX, end }, { limit: 1 })) {
      sequencer.kick();
    }
  };
  const sweep = setInterval(() => {
    sweepStale().catch((e) =>
      o.log({ level: "error", msg: "transparency log sweep failed", error: String(e) })
    );
  }, o.sweepIntervalMs);
  let batch: ReturnType<typeof setTimeout> | null = null;
  const kickSoon = () => {
    if (batch !== null) return;
    batch = setTimeout(() => {
      batch = null;
      sequencer.kick();
    }, o.batchMs);
  };
  // Unique across replicas by a random part drawn once, within this one by a counter.
  const self = bytesToHex(o.randomBytes(8));
  let seq = 0;
  const pendingKey = (): Deno.KvKey => [...PENDING_PREFIX, o.now(), self + (seq++).toString(36)];

  // The empty tree's checkpoint (C2SP tlog-checkpoint: size 0, root SHA-256 of ""), signed by
  // the current key; re-signed at most once a second (keys rotate, the public endpoint is cheap).
  let empty: { at: number; head: Head } | null = null;
  const emptyHead = (): Head => {
    const at = o.now();
    if (empty === null || at - empty.at >= 1000 || at < empty.at) {
      const root = emptyRoot();
      const body = checkpointBody(o.origin, 0, root);
      empty = { at, head: { size: 0, root, checkpoint: body + "\n" + o.sign(body) } };
    }
    return empty.head;
  };

  const checkpoint = async (): Promise<Head | null> => {
    if (witnesses === null) return (await kv.get<Head>(HEAD_KEY)).value ?? emptyHead();
    const [head, cosigned] = await kv.getMany<[Head, Head]>([HEAD_KEY, COSIGNED_KEY]);
    // Nothing appended yet: the empty tree commits to nothing, so there is nothing to cosign.
    if (head.value === null) return emptyHead();
    if (o.requiredCosignatures > 0) return cosigned.value;
    // Without a quorum required, the latest head, with its cosignatures once they came.
    if (cosigned.value && cosigned.value.size === head.value.size) {
      return cosigned.value;
    }
    return head.value;
  };

  return {
    origin: o.origin,
    // A frame: the entries of one group commit share one pending row (store/kv_writes.ts).
    pendingWrite: (entry, second) => ({
      op: "frame",
      key: pendingKey(),
      value: encodeQueued(entry, second),
    }),
    pendingReceipt: (receiptJcs, second) => ({
      op: "frame",
      key: pendingKey(),
      value: encodeQueuedReceipt(receiptJcs, second),
    }),
    async enqueue(entry) {
      const known = await kv.get(leafKey(bytesToHex(leafHash(entry))));
      if (known.value !== null) return;
      await retryTransient(() => kv.set(pendingKey(), framed([entry])));
      kickSoon();
    },
    kick: kickSoon,
    checkpoint,
    head: async () => (await kv.get<Head>(HEAD_KEY)).value,
    async tile(ref, entries) {
      // Up to the latest signed head: witnesses check a checkpoint before it is served.
      const cp = (await kv.get<Head>(HEAD_KEY)).value;
      if (cp === null || !tileExistsFor(cp.size, entries ? { ...ref, level: 0 } : ref)) return null;
      if (entries) {
        const full = ref.width === TILE_WIDTH ? fullBundles.get(ref.index) : undefined;
        if (full) return full;
        // Stored as queued (a receipt as its compact frame): spelled out as the entries.
        const b = await readBundle(rows, ref.index);
        if (b === null || b.records.length < ref.width) return null;
        const bytes = framed(b.records.slice(0, ref.width).map((r) => decodeQueued(r).entry));
        // Full bundles never change, and spelling out 256 entries is work a public
        // endpoint should do once: keep a few.
        if (ref.width === TILE_WIDTH) {
          if (fullBundles.size >= 64) fullBundles.delete(fullBundles.keys().next().value!);
          fullBundles.set(ref.index, bytes);
        }
        return bytes;
      }
      const bytes = await tile(ref.level, ref.index);
      if (bytes === null || bytes.length < ref.width * 32) return null;
      return bytes.slice(0, ref.width * 32);
    },
    async leafIndex(entry, second) {
      const hash = leafHash(entry);
      if (second !== undefined) {
        // One row per append that took entries of that second: a few rows, scanned.
        for await (const e of kv.list<Uint8Array>({ prefix: leafAtPrefix(second) })) {
          const index = findLeafRef(e.value, hash);
          if (index !== null) return index;
        }
      }
      // Entries queued without a second (sessions, keysets, receipts from before the rows).
      return (await kv.get<number>(leafKey(bytesToHex(hash)))).value;
    },
    inclusion: (index, size) => inclusionProof(subtreeReader(tile), index, size),
    consistency: (from, to) => consistencyProof(subtreeReader(tile), from, to),
    waiters,
    async settle() {
      await sequencer.drain();
      await witnesses?.idle();
    },
    async close() {
      waiters.close();
      clearInterval(sweep);
      if (batch !== null) clearTimeout(batch);
      await sequencer.close();
      await witnesses?.close();
    },
  };
}
