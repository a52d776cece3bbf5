/**
 * The workload's own signing keys, generated in-process (or restored from a
 * sealed seed) and never exposed: private material lives only in closures,
 * so a keys object can be logged or JSON-serialized without leaking it.
 * Ed25519 signs receipts; secp256k1 serves the legacy `signing_algo=ecdsa`
 * surfaces.
 */

import { secp256k1 } from "@noble/curves/secp256k1.js";
import { sha256Hex } from "./digest.ts";
import {
  ed25519PrivateKeyFromSeed,
  ed25519RawPublicKey,
  ed25519Sign,
  generateEd25519PrivateKey,
} from "./ed25519.ts";
import { ethereumAddress, ethereumAddressBytes, signEip191 } from "./ethereum.ts";
import { bytesToHex, isLowerHex } from "./hex.ts";
import type { E2eePublicKey, TlsPublicKey, WorkloadKeyset } from "./keyset.ts";

const encoder = new TextEncoder();

import { NOTE_KEY_ALGO } from "./note.ts";
export { NOTE_KEY_ALGO };

/** Public description of the workload keys (what `toJSON` returns). */
export interface WorkloadKeysPublic {
  ed25519_key_id: string;
  ed25519_public_key: string;
  secp256k1_key_id: string;
  secp256k1_public_key: string;
  ethereum_address: string;
}

/** The workload's key pairs; only public parts are readable. */
export interface WorkloadKeys {
  readonly ed25519KeyId: string;
  /** Raw 32-byte public key, lowercase hex. */
  readonly ed25519PublicKeyHex: string;
  readonly secp256k1KeyId: string;
  /** 65-byte uncompressed SEC1 public key (`04…`), lowercase hex. */
  readonly secp256k1PublicKeyHex: string;
  /** EIP-55 checksummed `0x…` address of the secp256k1 key. */
  readonly ethereumAddress: string;
  /** The 20 raw address bytes (a fresh copy on each read). */
  readonly ethereumAddressBytes: Uint8Array;
  /** The raw 32-byte Ed25519 public key (a fresh copy on each read). */
  readonly ed25519PublicKey: Uint8Array;
  /** 64-byte Ed25519 signature over `bytes`. */
  signEd25519(bytes: Uint8Array): Uint8Array;
  /** 64-byte Ed25519 signature over the UTF-8 bytes of `text`. */
  signEd25519Text(text: string): Uint8Array;
  /** EIP-191 personal_sign of `text`: 65 bytes `r‖s‖v`, `v = 27 + recovery id`. */
  signEip191(text: string): Uint8Array;
  toJSON(): WorkloadKeysPublic;
}

/** Options for {@link generateWorkloadKeys}; seeds restore sealed keys (and pin test vectors). */
export interface WorkloadKeyOptions {
  /** 32-byte Ed25519 seed; random when absent. */
  ed25519Seed?: Uint8Array;
  /** 32-byte secp256k1 secret scalar; random when absent. */
  secp256k1SecretKey?: Uint8Array;
  /** Override of the derived Ed25519 key id. */
  ed25519KeyId?: string;
  /** Override of the derived secp256k1 key id. */
  secp256k1KeyId?: string;
}

/**
 * Creates the workload keys. Key ids are stable functions of the public keys:
 * `ed25519:<first 16 hex of sha256(raw 32-byte key)>` and
 * `secp256k1:<first 16 hex of sha256(65-byte uncompressed key)>`.
 */
export function generateWorkloadKeys(opts: WorkloadKeyOptions = {}): WorkloadKeys {
  const edPrivate = opts.ed25519Seed
    ? ed25519PrivateKeyFromSeed(opts.ed25519Seed)
    : generateEd25519PrivateKey();
  const edPublic = ed25519RawPublicKey(edPrivate);
  const edPublicHex = bytesToHex(edPublic);

  if (opts.secp256k1SecretKey && !secp256k1.utils.isValidSecretKey(opts.secp256k1SecretKey)) {
    throw new Error("invalid secp256k1 secret key");
  }
  // Copied so a caller wiping or reusing its buffer cannot change our key.
  const kSecret = opts.secp256k1SecretKey
    ? Uint8Array.from(opts.secp256k1SecretKey)
    : secp256k1.utils.randomSecretKey();
  const kPublic = secp256k1.getPublicKey(kSecret, false);
  const kPublicHex = bytesToHex(kPublic);
  const address = ethereumAddress(kPublic);
  const addressBytes = ethereumAddressBytes(kPublic);

  const edKeyId = opts.ed25519KeyId ?? `ed25519:${sha256Hex(edPublic).slice(0, 16)}`;
  const kKeyId = opts.secp256k1KeyId ?? `secp256k1:${sha256Hex(kPublic).slice(0, 16)}`;

  const publicView: WorkloadKeysPublic = {
    ed25519_key_id: edKeyId,
    ed25519_public_key: edPublicHex,
    secp256k1_key_id: kKeyId,
    secp256k1_public_key: kPublicHex,
    ethereum_address: address,
  };

  return Object.freeze({
    ed25519KeyId: edKeyId,
    ed25519PublicKeyHex: edPublicHex,
    secp256k1KeyId: kKeyId,
    secp256k1PublicKeyHex: kPublicHex,
    ethereumAddress: address,
    get ethereumAddressBytes() {
      return addressBytes.slice();
    },
    get ed25519PublicKey() {
      return edPublic.slice();
    },
    signEd25519: (bytes: Uint8Array) => ed25519Sign(edPrivate, bytes),
    signEd25519Text: (text: string) => ed25519Sign(edPrivate, encoder.encode(text)),
    signEip191: (text: string) => signEip191(kSecret, text),
    toJSON: () => ({ ...publicView }),
  });
}

/** Inputs of {@link buildKeyset}. */
export interface KeysetInput {
  keys: WorkloadKeys;
  subject: string | null;
  /** Unix seconds (integer). */
  notAfter: number;
  /** SPKI SHA-256 digests (64 lowercase hex) of TLS keys to pin, optionally with their domain. */
  tlsSpkiSha256s?: ReadonlyArray<string | TlsPublicKey>;
  e2eeKeys?: ReadonlyArray<E2eePublicKey>;
  /**
   * The transparency log's checkpoint key (C2SP signed-note Ed25519), listed
   * as algo "c2sp-note-ed25519" so the attestation covers it; receipt
   * verifiers ignore the algo.
   */
  noteKey?: { keyId: string; publicKeyHex: string };
}

/**
 * The keyset object for the report: the Ed25519 receipt key first (algo
 * "ed25519"), then the secp256k1 key (algo "secp256k1", 65-byte hex) so the
 * legacy ecdsa key is covered by the digest too. Rejects malformed inputs
 * rather than publishing them.
 */
export function buildKeyset(input: KeysetInput): WorkloadKeyset {
  if (!Number.isSafeInteger(input.notAfter) || input.notAfter <= 0) {
    throw new Error("notAfter must be a positive integer of Unix seconds");
  }
  const tls: TlsPublicKey[] = (input.tlsSpkiSha256s ?? []).map((entry) => {
    const item = typeof entry === "string" ? { spki_sha256: entry } : entry;
    if (!isLowerHex(item.spki_sha256, 32)) {
      throw new Error("tls spki_sha256 must be 64 lowercase hex characters");
    }
    // `domain` is omitted, not null, when unknown: the JCS form must not change shape.
    return item.domain === undefined
      ? { spki_sha256: item.spki_sha256 }
      : { spki_sha256: item.spki_sha256, domain: item.domain };
  });
  const e2ee: E2eePublicKey[] = (input.e2eeKeys ?? []).map((k) => ({
    key_id: k.key_id,
    algo: k.algo,
    public_key: k.public_key,
  }));
  // Keys are per role: an E2EE key may never double as a receipt or legacy signing key.
  const signing = [input.keys.ed25519PublicKeyHex, input.keys.secp256k1PublicKeyHex];
  if (e2ee.some((k) => signing.includes(k.public_key))) {
    throw new Error("an E2EE public key doubles as a signing key");
  }
  return {
    subject: input.subject,
    not_after: input.notAfter,
    receipt_signing_keys: [
      {
        key_id: input.keys.ed25519KeyId,
        algo: "ed25519",
        public_key: input.keys.ed25519PublicKeyHex,
      },
      {
        key_id: input.keys.secp256k1KeyId,
        algo: "secp256k1",
        public_key: input.keys.secp256k1PublicKeyHex,
      },
      ...(input.noteKey
        ? [{
          key_id: input.noteKey.keyId,
          algo: NOTE_KEY_ALGO,
          public_key: input.noteKey.publicKeyHex,
        }]
        : []),
    ],
    e2ee_public_keys: e2ee,
    tls_public_keys: tls,
  };
}
