/**
 * Attested sessions in KV. Documents are immutable and content-addressed
 * (`session_id = hex(sha256(JCS(doc)))`); each replica publishes which
 * session is current for each upstream. A session is kept until its
 * `expires_at` plus the receipt retention, so it outlives every receipt that
 * can cite it (receipts only cite sessions that are current when served).
 */
import { jcs, jcsBytes, sessionEntry, sha256Hex } from "../aci/mod.ts";
import {
  applyWrites,
  COLLATERAL_BLOBS,
  getBlob,
  type KvWrite,
  putBlob,
  retryTransient,
} from "../store/mod.ts";
import type { SessionDocument } from "./types.ts";
import { archiveDigest, type CollateralArchive } from "../verify/mod.ts";

export const SESSION_PREFIX = "sessions";
export const CURRENT_PREFIX = "sessions_current";

export function sessionIdOf(doc: SessionDocument): string {
  return sha256Hex(jcs(doc));
}

interface StoredSession {
  document: SessionDocument;
  /** Epoch ms; KV expiry is best-effort, so reads check this too. */
  until: number;
  /** Digest of the collateral archive the verification consumed, when it used any. */
  collateral?: string;
}

interface CurrentPointer {
  session_id: string;
  until: number;
}

/** A list entry: the document plus its id, without `evidence.data` (so it no longer hashes to its id). */
export type SessionListEntry = Omit<SessionDocument, "evidence"> & {
  session_id: string;
  evidence: { digest: string };
};

export interface SessionStore {
  /** Stores a session, with the collateral its verification consumed (archived first). */
  put(doc: SessionDocument, collateral?: CollateralArchive): Promise<string>;
  get(id: string): Promise<SessionDocument | null>;
  /** The archived collateral of a stored session: its digest and the archive, or null. */
  collateral(id: string): Promise<{ digest: string; archive: CollateralArchive } | null>;
  setCurrent(upstream: string, replica: string, id: string, expiresAtMs: number): Promise<void>;
  clearCurrent(upstream: string, replica: string): Promise<void>;
  listCurrent(filter: { upstreams?: string[] }): Promise<SessionListEntry[]>;
}

export function createSessionStore(
  kv: Deno.Kv,
  opts: {
    now: () => number;
    receiptRetentionMs: number;
    /**
     * The replicas alive now and this replica's id: a current pointer of a replica that
     * stopped is not listed (no live process can serve its session). Absent: all listed.
     */
    replicas?: { self: string; live: () => Promise<Set<string>> };
    /** The transparency log: each stored session's id is queued in the same commit. */
    log?: { pendingWrite(entry: Uint8Array): KvWrite; kick(): void };
  },
): SessionStore {
  return {
    async put(doc, collateral) {
      const id = sessionIdOf(doc);
      const keepMs = Math.max(0, doc.expires_at * 1000 - opts.now()) + opts.receiptRetentionMs;
      const value: StoredSession = { document: doc, until: opts.now() + keepMs };
      if (collateral) {
        // Before the session: a stored session never cites collateral that is not there.
        value.collateral = await putBlob(kv, COLLATERAL_BLOBS, jcsBytes(collateral), keepMs);
      }
      const log = opts.log;
      if (log) {
        const pending = log.pendingWrite(sessionEntry(id));
        await retryTransient(async () => {
          const atomic = kv.atomic().set([SESSION_PREFIX, id], value, { expireIn: keepMs });
          applyWrites(atomic, [pending]);
          const res = await atomic.commit();
          if (!res.ok) throw new Error("session commit was not applied");
        });
        log.kick();
      } else {
        await retryTransient(() => kv.set([SESSION_PREFIX, id], value, { expireIn: keepMs }));
      }
      return id;
    },
    async get(id) {
      const e = await kv.get<StoredSession>([SESSION_PREFIX, id]);
      return e.value && e.value.until > opts.now() ? e.value.document : null;
    },
    async collateral(id) {
      const e = await kv.get<StoredSession>([SESSION_PREFIX, id]);
      const digest = e.value && e.value.until > opts.now() ? e.value.collateral : undefined;
      if (digest === undefined) return null;
      const bytes = await getBlob(kv, COLLATERAL_BLOBS, digest);
      if (bytes === null) return null;
      const archive = JSON.parse(new TextDecoder().decode(bytes)) as CollateralArchive;
      return archiveDigest(archive) === digest ? { digest, archive } : null;
    },
    async setCurrent(upstream, replica, id, expiresAtMs) {
      const ttl = Math.max(1, expiresAtMs - opts.now());
      const value: CurrentPointer = { session_id: id, until: expiresAtMs };
      await retryTransient(() =>
        kv.set([CURRENT_PREFIX, upstream, replica], value, { expireIn: ttl })
      );
    },
    async clearCurrent(upstream, replica) {
      await retryTransient(() => kv.delete([CURRENT_PREFIX, upstream, replica]));
    },
    async listCurrent(filter) {
      const t = opts.now();
      const ids = new Set<string>();
      const live = opts.replicas ? await opts.replicas.live() : null;
      if (live && opts.replicas) live.add(opts.replicas.self);
      for await (
        const e of kv.list<CurrentPointer>({ prefix: [CURRENT_PREFIX] }, { limit: 1000 })
      ) {
        const upstream = e.key[1] as string;
        if (filter.upstreams && !filter.upstreams.includes(upstream)) continue;
        if (live && !live.has(e.key[2] as string)) continue;
        if (e.value.until > t) ids.add(e.value.session_id);
      }
      const out: SessionListEntry[] = [];
      for (const id of ids) {
        const doc = await this.get(id);
        if (!doc) continue;
        out.push({ ...doc, session_id: id, evidence: { digest: doc.evidence.digest } });
      }
      return out.sort((a, b) =>
        a.upstream_name.localeCompare(b.upstream_name) || b.established_at - a.established_at
      );
    },
  };
}
