/**
 * The workload's identity: its key pairs, the keyset listing their public
 * halves, and the keyset digest every receipt and report carries. Keys are
 * generated in-process and never leave it. Before `not_after` the identity
 * rotates to a fresh keyset; every keyset ever served is archived in KV so
 * old receipts stay verifiable after a rotation or restart.
 */
import { buildKeyset, generateWorkloadKeys, type WorkloadKeys } from "../aci/signer.ts";
import { keysetDigest, type WorkloadKeyset } from "../aci/keyset.ts";

export interface IdentitySnapshot {
  keys: WorkloadKeys;
  keyset: WorkloadKeyset;
  digest: string;
}

export interface Identity {
  /** The current keyset (rotating first when it is within the rotation margin of `not_after`). */
  current(): IdentitySnapshot;
  /** Called with each new snapshot (start-up and every rotation), e.g. to archive it. */
  onRotate(fn: (s: IdentitySnapshot) => void): void;
}

export interface IdentityOptions {
  subject: string | null;
  ttlSeconds: number;
  now: () => number;
  /** SPKI digests of TLS keys the gateway itself terminates with. */
  tlsSpkiSha256s?: { spki_sha256: string; domain?: string }[];
  /** Restore sealed keys instead of generating (operator-configured source). */
  generate?: () => WorkloadKeys;
}

export function createIdentity(opts: IdentityOptions): Identity {
  const listeners: ((s: IdentitySnapshot) => void)[] = [];
  const make = (): IdentitySnapshot => {
    const keys = (opts.generate ?? generateWorkloadKeys)();
    const notAfter = Math.floor(opts.now() / 1000) + opts.ttlSeconds;
    const keyset = buildKeyset({
      keys,
      subject: opts.subject,
      notAfter,
      tlsSpkiSha256s: opts.tlsSpkiSha256s ?? [],
      e2eeKeys: [],
    });
    return { keys, keyset, digest: keysetDigest(keyset) };
  };
  let snap = make();
  // Rotate a tenth of the lifetime early so no receipt is signed by a keyset about to lapse.
  const margin = Math.max(1, Math.floor(opts.ttlSeconds / 10));
  return {
    current() {
      if (Math.floor(opts.now() / 1000) >= snap.keyset.not_after - margin) {
        snap = make();
        for (const l of listeners) l(snap);
      }
      return snap;
    },
    onRotate(fn) {
      listeners.push(fn);
      fn(snap);
    },
  };
}
