/**
 * The workload's E2EE v2 key pairs: one X25519 and one secp256k1 key, made
 * with each keyset and listed in its `e2ee_public_keys`. Used only to decrypt
 * request fields (never to sign, never as a receipt or legacy key). Secret
 * keys live in closures: a keyring can be logged or serialized safely.
 *
 * Replicas behind one load balancer must accept the same keys, so when a
 * shared seed is configured (delivered to each TEE by its KMS) the keys of a
 * rotation epoch are derived from it; without one they are random per keyset.
 */
import { hkdfSync } from "node:crypto";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { bytesToHex, type E2eePublicKey, sha256Hex } from "../aci/mod.ts";
import {
  decryptField,
  type E2eeAlgo,
  generateKeyPair,
  normalizePublicKey,
  SECP256K1_ALGO,
  X25519_ALGO,
} from "./crypto.ts";

/** One service key the gateway holds. */
export interface E2eeServiceKey {
  keyId: string;
  algo: E2eeAlgo;
  /** Canonical lowercase hex (32 bytes X25519, 65-byte `04…` secp256k1). */
  publicKeyHex: string;
}

export interface E2eeKeyring {
  /** The `e2ee_public_keys` entries, X25519 first (the suite §4 recommends). */
  readonly entries: E2eePublicKey[];
  /** The listed key equal to `supplied` under some suite's normalization, or null. */
  find(supplied: string): E2eeServiceKey | null;
  /** Decrypt one request field with the named key's secret; null when it does not authenticate. */
  decrypt(key: E2eeServiceKey, valueHex: string, aad: Uint8Array): Uint8Array | null;
  toJSON(): E2eePublicKey[];
}

const ALGOS: E2eeAlgo[] = [X25519_ALGO, SECP256K1_ALGO];
const KEY_ID_PREFIX: Record<E2eeAlgo, string> = {
  [X25519_ALGO]: "e2ee-x25519",
  [SECP256K1_ALGO]: "e2ee-secp256k1",
};

/**
 * A keyring. `secretKeys` pins keys (tests, vectors); otherwise `seed` and
 * `epoch` derive them (replicas sharing the seed agree), else they are random.
 */
export function createE2eeKeyring(
  opts: { seed?: Uint8Array; epoch?: number; secretKeys?: Partial<Record<E2eeAlgo, Uint8Array>> } =
    {},
): E2eeKeyring {
  const held = ALGOS.map((algo) => {
    const pair = generateKeyPair(
      algo,
      opts.secretKeys?.[algo] ??
        (opts.seed ? derivedSecret(opts.seed, algo, opts.epoch ?? 0) : undefined),
    );
    const publicKeyHex = bytesToHex(pair.publicKey);
    const key: E2eeServiceKey = {
      keyId: `${KEY_ID_PREFIX[algo]}:${sha256Hex(pair.publicKey).slice(0, 16)}`,
      algo,
      publicKeyHex,
    };
    return { key, secretKey: pair.secretKey };
  });
  const entries = held.map(({ key }) => ({
    key_id: key.keyId,
    algo: key.algo,
    public_key: key.publicKeyHex,
  }));
  return Object.freeze({
    entries,
    find(supplied: string) {
      for (const { key } of held) {
        if (normalizePublicKey(key.algo, supplied) === key.publicKeyHex) return key;
      }
      return null;
    },
    decrypt(key: E2eeServiceKey, valueHex: string, aad: Uint8Array) {
      const h = held.find((x) => x.key.keyId === key.keyId);
      return h ? decryptField(key.algo, h.secretKey, valueHex, aad) : null;
    },
    toJSON: () => entries.map((e) => ({ ...e })),
  });
}

/** HKDF-SHA256(seed, info = role ‖ suite ‖ epoch): a distinct key per suite and epoch. */
function derivedSecret(seed: Uint8Array, algo: E2eeAlgo, epoch: number): Uint8Array {
  for (let counter = 0;; counter++) {
    const sk = new Uint8Array(
      hkdfSync("sha256", seed, new Uint8Array(0), `cgw.e2ee.v2|${algo}|${epoch}|${counter}`, 32),
    );
    if (algo === X25519_ALGO || secp256k1.utils.isValidSecretKey(sk)) return sk;
  }
}
