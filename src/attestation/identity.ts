/**
 * The workload's identity: its key pairs, the keyset listing their public
 * halves, and the keyset digest every receipt and report carries. Keys are
 * generated in-process and never leave it. Before `not_after` the identity
 * rotates to a fresh keyset; every keyset ever served is archived in KV so
 * old receipts stay verifiable after a rotation or restart.
 */
import {
  buildKeyset,
  bytesToHex,
  createNoteSigner,
  generateWorkloadKeys,
  keysetDigest,
  type NoteSigner,
  sha256Hex,
  type WorkloadKeys,
  type WorkloadKeyset,
} from "../aci/mod.ts";
import { createE2eeKeyring, type E2eeKeyring } from "../e2ee/mod.ts";

/** The log origin when none is configured (tests, bench). */
export const DEFAULT_LOG_ORIGIN = "localhost/v1/aci/log";

export interface IdentitySnapshot {
  keys: WorkloadKeys;
  /** The E2EE v2 keys listed in this keyset (made, rotated and archived with it). */
  e2ee: E2eeKeyring;
  keyset: WorkloadKeyset;
  digest: string;
  /** Signs the transparency log's checkpoints (key name = the log's origin; listed in the keyset). */
  log: NoteSigner;
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
  /**
   * A secret shared by the replicas behind one load balancer (from the TEE's
   * KMS): their E2EE keys are then derived from it per rotation epoch of
   * `ttlSeconds`, and every replica rotates at the epoch boundary.
   */
  e2eeSeed?: Uint8Array;
  /** The transparency log's origin, the name of its checkpoint key. */
  logOrigin?: string;
}

export function createIdentity(opts: IdentityOptions): Identity {
  const listeners: ((s: IdentitySnapshot) => void)[] = [];
  // Rotate a tenth of the lifetime early so no receipt is signed by a keyset about to lapse.
  const margin = Math.max(1, Math.floor(opts.ttlSeconds / 10));
  const make = (): IdentitySnapshot => {
    const keys = (opts.generate ?? generateWorkloadKeys)();
    const nowS = Math.floor(opts.now() / 1000);
    let notAfter = nowS + opts.ttlSeconds;
    let e2ee: E2eeKeyring;
    if (opts.e2eeSeed) {
      // Epoch-aligned, so replicas sharing the seed publish (and accept) the same keys.
      const epoch = Math.floor(nowS / opts.ttlSeconds);
      notAfter = (epoch + 1) * opts.ttlSeconds + margin;
      e2ee = createE2eeKeyring({ seed: opts.e2eeSeed, epoch });
    } else e2ee = createE2eeKeyring();
    const log = createNoteSigner(opts.logOrigin ?? DEFAULT_LOG_ORIGIN);
    const keyset = buildKeyset({
      keys,
      subject: opts.subject,
      notAfter,
      tlsSpkiSha256s: opts.tlsSpkiSha256s ?? [],
      e2eeKeys: e2ee.entries,
      noteKey: {
        keyId: `c2sp-note:${sha256Hex(log.publicKey).slice(0, 16)}`,
        publicKeyHex: bytesToHex(log.publicKey),
      },
    });
    return { keys, e2ee, keyset, digest: keysetDigest(keyset), log };
  };
  let snap = make();
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
