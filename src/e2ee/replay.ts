/**
 * E2EE v2 replay protection shared by every replica (spec/e2ee-v2.md §7): the
 * (service key, nonce bytes) pair is claimed with one atomic check-and-set in
 * the shared KV store. The client key is left out on purpose: the v2 AAD does
 * not bind it, so a captured request resent under another X-Client-Pub-Key
 * would otherwise be a new tuple and answered (encrypted to whoever resent
 * it, billed to the victim). Stricter than the spec's tuple, never looser.
 * Only a digest of the pair is stored,
 * and it expires when the request's timestamp leaves the acceptance window,
 * after which the request would be refused for its timestamp anyway.
 */
import { sha256Hex } from "../aci/mod.ts";
import { retryTransient } from "../store/mod.ts";

export const REPLAY_PREFIX = "e2ee_replay";

export interface ReplayGuard {
  /**
   * True when this is the nonce's first use with this service key and it is now claimed until
   * `expiresAtMs`; false when it was already claimed and has not expired.
   */
  claim(
    claim: { serviceKey: string; nonce: string },
    expiresAtMs: number,
  ): Promise<boolean>;
}

export function createReplayGuard(kv: Deno.Kv, now: () => number): ReplayGuard {
  return {
    claim({ serviceKey, nonce }, expiresAtMs) {
      // Normalized inputs: a lowercase hex key, and the nonce lowercased (hex case is not a new nonce).
      const key = [REPLAY_PREFIX, sha256Hex(`${serviceKey}|${nonce.toLowerCase()}`)];
      return retryTransient(async () => {
        const t = now();
        const expireIn = Math.max(1, expiresAtMs - t);
        const first = await kv.atomic()
          .check({ key, versionstamp: null })
          .set(key, expiresAtMs, { expireIn })
          .commit();
        if (first.ok) return true;
        // KV deletes expired entries lazily: a claim past its expiry is free to take again.
        const held = await kv.get<number>(key);
        if (held.value !== null && held.value > t) return false;
        const again = await kv.atomic().check(held).set(key, expiresAtMs, { expireIn }).commit();
        return again.ok;
      });
    },
  };
}
