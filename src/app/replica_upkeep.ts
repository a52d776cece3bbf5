/**
 * This replica's life on a shared store: its keysets archived at every
 * rotation, its attestation announced on a heartbeat (a third of the replica
 * TTL), the holds of crashed replicas recovered, and whether it is the only
 * live replica (quota leases are safe only then; see admission/leases.ts).
 */
import { recoverHolds } from "../admission/mod.ts";
import type { Identity, ReplicaRegistry, ReportService } from "../attestation/mod.ts";
import type { LogLine } from "../handlers/mod.ts";

export interface ReplicaUpkeep {
  /** Announces this replica's current attestation. */
  announce(): Promise<void>;
  /** Returns the credits held by replicas that are gone (a crash) to their keys. */
  recover(): Promise<void>;
  /**
   * Whether no other replica is live (re-read at most twice a second); the workers of
   * this host (ids starting with `host.`) are not others: they split its leases.
   */
  soleReplica(): Promise<boolean>;
  /** Stops the heartbeat at once, then waits for a running recovery and keyset archive writes. */
  close(): Promise<void>;
}

export function startReplicaUpkeep(o: {
  kv: Deno.Kv;
  identity: Identity;
  reports: ReportService;
  replicas: ReplicaRegistry;
  ttlMs: number;
  now: () => number;
  log: (line: LogLine) => void;
  /** Logs each archived keyset (digest and report digest) in the transparency log. */
  logKeyset?: (keysetDigest: string, report: unknown) => Promise<void>;
  /** This host's id when it runs workers (replica ids `host.index.random`). */
  host?: string;
}): ReplicaUpkeep {
  const { kv, replicas, log } = o;
  const announce = async () => {
    const report = await o.reports.canonical(null);
    await replicas.announce(report.attestation);
  };
  /** Archive writes of rotated keysets still running (close waits for them). */
  const archiving = new Set<Promise<void>>();
  o.identity.onRotate((snap) => {
    const p: Promise<void> = o.reports.archive(snap).then((report) =>
      o.logKeyset?.(snap.digest, report)
    ).catch((e) => log({ level: "error", msg: "keyset archive failed", error: String(e) })).finally(
      () => archiving.delete(p),
    );
    archiving.add(p);
  });
  let recovering: Promise<void> = Promise.resolve();
  const recover = () =>
    recovering = recoverHolds(kv, { self: replicas.id, live: () => replicas.liveIds() }).then(
      (r) => {
        if (r.instances > 0) {
          log({
            level: "info",
            msg: "recovered holds of gone replicas",
            instances: r.instances,
            refunded_nano: r.refundedNano.toString(),
          });
        }
      },
    ).catch((e) => log({ level: "error", msg: "hold recovery failed", error: String(e) }));
  const heartbeat = setInterval(() => {
    announce().catch((e) =>
      log({ level: "error", msg: "replica announce failed", error: String(e) })
    );
    void recover();
  }, o.ttlMs / 3);
  let sole: { at: number; value: Promise<boolean> } | null = null;
  return {
    announce,
    recover,
    soleReplica() {
      const t = o.now();
      if (sole === null || t - sole.at > 500 || t < sole.at) {
        const mine = o.host === undefined ? null : `${o.host}.`;
        sole = {
          at: t,
          value: mine === null
            ? replicas.others().then((others) => others.length === 0)
            : replicas.liveIds().then((ids) =>
              [...ids].every((id) => id === replicas.id || id.startsWith(mine))
            ),
        };
      }
      return sole.value;
    },
    async close() {
      clearInterval(heartbeat);
      await Promise.all([recovering, ...archiving]);
    },
  };
}
