/**
 * Replicas sharing one store announce themselves in KV (a heartbeat entry
 * with an expiry), so `all_attestations` can list every live replica's
 * nonce-less attestation. Nothing here assumes this process is the only one.
 */
import type { AttestationEntry } from "./entry.ts";
import { retryTransient } from "../store/mod.ts";

export const REPLICA_PREFIX = "replicas";

export interface ReplicaRegistry {
  readonly id: string;
  /** Publish this replica's current nonce-less attestation. */
  announce(entry: AttestationEntry): Promise<void>;
  /** The other live replicas' attestations. */
  others(): Promise<AttestationEntry[]>;
  /** Ids of every live replica (this one once announced). */
  liveIds(): Promise<Set<string>>;
}

interface Announcement {
  entry: AttestationEntry;
  /** Epoch ms; KV expiry is best-effort, so readers check this too. */
  until: number;
}

export function createReplicaRegistry(
  kv: Deno.Kv,
  opts: { id: string; ttlMs: number; now: () => number },
): ReplicaRegistry {
  return {
    id: opts.id,
    async announce(entry) {
      const value: Announcement = { entry, until: opts.now() + opts.ttlMs };
      await retryTransient(() =>
        kv.set([REPLICA_PREFIX, opts.id], value, { expireIn: opts.ttlMs })
      );
    },
    async others() {
      const out: AttestationEntry[] = [];
      const t = opts.now();
      for await (const e of kv.list<Announcement>({ prefix: [REPLICA_PREFIX] }, { limit: 256 })) {
        if (e.key[1] !== opts.id && e.value.until > t) out.push(e.value.entry);
      }
      return out;
    },
    async liveIds() {
      const out = new Set<string>();
      const t = opts.now();
      for await (const e of kv.list<Announcement>({ prefix: [REPLICA_PREFIX] })) {
        if (typeof e.key[1] === "string" && e.value.until > t) out.add(e.key[1]);
      }
      return out;
    },
  };
}
