/**
 * The E2EE v2 field cipher (spec/e2ee-v2.md §4, §6): ECDH between a fresh
 * ephemeral key and the recipient's static key (X25519 or secp256k1),
 * HKDF-SHA256 with no salt and the suite's info string, AES-256-GCM with the
 * field's JCS associated data. A field value is lowercase hex of
 * `ephemeral public key ‖ 12-byte nonce ‖ ciphertext ‖ 16-byte tag`.
 * Shared by the gateway, the client module and the verifier; pure apart from
 * the entropy it is handed.
 */
import { gcmOpen, gcmSeal, hkdfAesKey } from "./aead.ts";
import { x25519PublicKey, x25519SharedSecret } from "./x25519.ts";
import { x25519 } from "@noble/curves/ed25519.js";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { bytesToHex, hexToBytes } from "../aci/hex.ts";
import { concatBytes } from "../aci/bytes.ts";
import { jcsBytes } from "../aci/jcs.ts";

export const E2EE_VERSION = "2";
export const X25519_ALGO = "x25519-aes-256-gcm-hkdf-sha256";
export const SECP256K1_ALGO = "secp256k1-aes-256-gcm-hkdf-sha256";
export type E2eeAlgo = typeof X25519_ALGO | typeof SECP256K1_ALGO;

const HKDF_INFO: Record<E2eeAlgo, string> = {
  [X25519_ALGO]: "aci.e2ee.v2.x25519",
  [SECP256K1_ALGO]: "aci.e2ee.v2.secp256k1",
};
const EPHEMERAL_LEN: Record<E2eeAlgo, number> = { [X25519_ALGO]: 32, [SECP256K1_ALGO]: 65 };
const NONCE_LEN = 12;
const TAG_LEN = 16;

/** True for the two suites of §4; anything else is rejected, never guessed. */
export function isE2eeAlgo(algo: unknown): algo is E2eeAlgo {
  return algo === X25519_ALGO || algo === SECP256K1_ALGO;
}

/**
 * The canonical lowercase hex of a public key for `algo`, or null when it is
 * not a valid key of that suite: 32 raw bytes for X25519; for secp256k1 a
 * point on the curve, given as the 65-byte `04…` form or the 64 bytes without
 * the prefix (the same key). An optional `0x` prefix is accepted.
 */
export function normalizePublicKey(algo: E2eeAlgo, value: string): string | null {
  const hex = value.startsWith("0x") ? value.slice(2) : value;
  let bytes: Uint8Array;
  try {
    bytes = hexToBytes(hex);
  } catch {
    return null;
  }
  if (algo === X25519_ALGO) return bytes.length === 32 ? bytesToHex(bytes) : null;
  if (bytes.length === 64) bytes = Uint8Array.of(4, ...bytes);
  if (bytes.length !== 65 || bytes[0] !== 4) return null;
  try {
    secp256k1.Point.fromBytes(bytes).assertValidity();
  } catch {
    return null;
  }
  return bytesToHex(bytes);
}

/** A fresh static key pair for `algo` (secret key bytes, public key in the suite's encoding). */
export function generateKeyPair(
  algo: E2eeAlgo,
  secretKey?: Uint8Array,
): { secretKey: Uint8Array; publicKey: Uint8Array } {
  if (algo === X25519_ALGO) {
    const sk = secretKey ?? x25519.utils.randomSecretKey();
    return { secretKey: sk, publicKey: x25519PublicKey(sk) };
  }
  const sk = secretKey ?? secp256k1.utils.randomSecretKey();
  return { secretKey: sk, publicKey: secp256k1.getPublicKey(sk, false) };
}

/** The raw ECDH shared secret: X25519 output, or the x coordinate of the secp256k1 point. */
function sharedSecret(algo: E2eeAlgo, secretKey: Uint8Array, publicKey: Uint8Array): Uint8Array {
  if (algo === X25519_ALGO) return x25519SharedSecret(secretKey, publicKey);
  return secp256k1.getSharedSecret(secretKey, publicKey, true).subarray(1);
}

function aesKey(algo: E2eeAlgo, shared: Uint8Array): Uint8Array {
  return hkdfAesKey(shared, HKDF_INFO[algo]);
}

const P25519 = 2n ** 255n - 19n;
/** u-coordinates of the X25519 points of order dividing 8 (the libsodium blocklist, reduced mod p). */
const LOW_ORDER = new Set([
  0n,
  1n,
  P25519 - 1n,
  325606250916557431795983626356110631294008115727848805560023387167927233504n,
  39382357235489614581723060781553021112529911719440698176882885853963445705823n,
]);

/**
 * Whether a (normalized) recipient key can be encrypted to. A low-order
 * X25519 key would make every shared secret all zero; a secp256k1 key was
 * already checked to be on the curve (cofactor 1). Checked by value, not
 * with a trial ECDH, which would cost two scalar multiplications per request.
 */
export function canEncryptTo(algo: E2eeAlgo, recipientHex: string): boolean {
  if (algo === SECP256K1_ALGO) return normalizePublicKey(algo, recipientHex) !== null;
  const bytes = hexToBytes(recipientHex);
  if (bytes.length !== 32) return false;
  let u = 0n;
  for (let i = 31; i >= 0; i--) u = (u << 8n) | BigInt(i === 31 ? bytes[i] & 0x7f : bytes[i]);
  return !LOW_ORDER.has(u % P25519);
}

/** Encrypt one field to `recipientHex` (normalized) with a fresh ephemeral key and nonce. */
export function encryptField(
  algo: E2eeAlgo,
  recipientHex: string,
  plaintext: Uint8Array,
  aad: Uint8Array,
  randomBytes: (n: number) => Uint8Array,
): string {
  const eph = generateKeyPair(algo, ephemeralSecret(algo, randomBytes));
  const key = aesKey(algo, sharedSecret(algo, eph.secretKey, hexToBytes(recipientHex)));
  const iv = randomBytes(NONCE_LEN);
  const body = gcmSeal(key, iv, plaintext, aad);
  return bytesToHex(concatBytes([eph.publicKey, iv, body]));
}

function ephemeralSecret(algo: E2eeAlgo, randomBytes: (n: number) => Uint8Array): Uint8Array {
  if (algo === X25519_ALGO) return randomBytes(32); // clamped by X25519 itself
  // A uniformly random scalar below the group order (retry the rare out-of-range draw).
  for (;;) {
    const sk = randomBytes(32);
    if (secp256k1.utils.isValidSecretKey(sk)) return sk;
  }
}

/**
 * Decrypt one field with the recipient's secret key; null on any failure
 * (bad hex, short blob, invalid ephemeral key, tag or AAD mismatch), so a
 * caller can only ever see authenticated plaintext.
 */
export function decryptField(
  algo: E2eeAlgo,
  secretKey: Uint8Array,
  valueHex: string,
  aad: Uint8Array,
): Uint8Array | null {
  try {
    // Lowercase hex on the wire; an `0x` prefix or upper case is read as the reference does.
    const blob = hexToBytes(valueHex.startsWith("0x") ? valueHex.slice(2) : valueHex);
    const e = EPHEMERAL_LEN[algo];
    if (blob.length < e + NONCE_LEN + TAG_LEN) return null;
    const key = aesKey(algo, sharedSecret(algo, secretKey, blob.subarray(0, e)));
    return gcmOpen(key, blob.subarray(e, e + NONCE_LEN), blob.subarray(e + NONCE_LEN), aad);
  } catch {
    return null;
  }
}

/** What every field's associated data binds besides its path. */
export interface AadContext {
  algo: E2eeAlgo;
  /** The request's top-level `model`, byte-exact. */
  model: string;
  /** `X-E2EE-Nonce` as sent. */
  nonce: string;
  /** `X-E2EE-Timestamp`, as an integer. */
  ts: number;
}

/** §6 request-field AAD: JCS of `{algo, field, model, nonce, purpose, ts}`. */
export function requestAad(ctx: AadContext, field: string): Uint8Array {
  return jcsBytes({
    purpose: "aci.e2ee.request.v2",
    algo: ctx.algo,
    model: ctx.model,
    field,
    nonce: ctx.nonce,
    ts: ctx.ts,
  });
}

/** §6 response-field AAD: the request AAD's members plus the clear response `id` (or ""). */
export function responseAad(ctx: AadContext, id: string, field: string): Uint8Array {
  return jcsBytes({
    purpose: "aci.e2ee.response.v2",
    algo: ctx.algo,
    model: ctx.model,
    id,
    field,
    nonce: ctx.nonce,
    ts: ctx.ts,
  });
}
