/**
 * An independent E2EE v2 implementation for tests, written from the spec
 * alone and sharing no code with src/e2ee: WebCrypto HKDF-SHA256 and
 * AES-256-GCM, @noble/curves ECDH, and the AAD bytes built by hand in the
 * published member order (sorted names, compact), not through a JCS library.
 * What the gateway sends is decrypted here, so a bug mirrored on both sides
 * of src/e2ee cannot pass unnoticed.
 */
import { x25519 } from "@noble/curves/ed25519.js";
import { secp256k1 } from "@noble/curves/secp256k1.js";

export const X25519 = "x25519-aes-256-gcm-hkdf-sha256";
export const SECP256K1 = "secp256k1-aes-256-gcm-hkdf-sha256";
type Algo = typeof X25519 | typeof SECP256K1;

const enc = new TextEncoder();

export function hex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

export function unhex(h: string): Uint8Array {
  const s = h.startsWith("0x") ? h.slice(2) : h;
  return Uint8Array.from(s.match(/../g) ?? [], (x) => parseInt(x, 16));
}

/** The AAD, written out member by member (JCS order: algo, field, [id], model, nonce, purpose, ts). */
export function aad(
  kind: "request" | "response",
  p: { algo: string; field: string; model: string; nonce: string; ts: number; id?: string },
): Uint8Array {
  const q = (s: string) => JSON.stringify(s);
  const id = kind === "response" ? `,"id":${q(p.id ?? "")}` : "";
  return enc.encode(
    `{"algo":${q(p.algo)},"field":${q(p.field)}${id},"model":${q(p.model)},"nonce":${
      q(p.nonce)
    },"purpose":"aci.e2ee.${kind}.v2","ts":${p.ts}}`,
  );
}

function shared(algo: Algo, sk: Uint8Array, pk: Uint8Array): Uint8Array {
  return algo === X25519
    ? x25519.getSharedSecret(sk, pk)
    : secp256k1.getSharedSecret(sk, pk, false).slice(1, 33);
}

async function aesKey(algo: Algo, secret: Uint8Array): Promise<CryptoKey> {
  const base = await crypto.subtle.importKey("raw", secret as BufferSource, "HKDF", false, [
    "deriveKey",
  ]);
  return crypto.subtle.deriveKey(
    {
      name: "HKDF",
      hash: "SHA-256",
      salt: new Uint8Array(0),
      info: enc.encode(algo === X25519 ? "aci.e2ee.v2.x25519" : "aci.e2ee.v2.secp256k1"),
    },
    base,
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"],
  );
}

/** Decrypt a field value with the recipient's secret key; throws when it does not authenticate. */
export async function decrypt(
  algo: Algo,
  sk: Uint8Array,
  valueHex: string,
  ad: Uint8Array,
): Promise<string> {
  const blob = unhex(valueHex);
  const e = algo === X25519 ? 32 : 65;
  const key = await aesKey(algo, shared(algo, sk, blob.slice(0, e)));
  const plain = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: blob.slice(e, e + 12), additionalData: ad as BufferSource },
    key,
    blob.slice(e + 12),
  );
  return new TextDecoder().decode(plain);
}

/** Encrypt a field to `recipient` (hex) with a fresh ephemeral key, as a client would. */
export async function encrypt(
  algo: Algo,
  recipient: string,
  plaintext: string,
  ad: Uint8Array,
): Promise<string> {
  const esk = algo === X25519 ? x25519.utils.randomSecretKey() : secp256k1.utils.randomSecretKey();
  const epk = algo === X25519 ? x25519.getPublicKey(esk) : secp256k1.getPublicKey(esk, false);
  const key = await aesKey(algo, shared(algo, esk, unhex(recipient)));
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ct = new Uint8Array(
    await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: ad as BufferSource },
      key,
      enc.encode(plaintext),
    ),
  );
  return hex(new Uint8Array([...epk, ...iv, ...ct]));
}

/** A client key pair for `algo` (public key hex in the suite's encoding). */
export function clientKeys(algo: Algo): { sk: Uint8Array; pk: string } {
  if (algo === X25519) {
    const sk = x25519.utils.randomSecretKey();
    return { sk, pk: hex(x25519.getPublicKey(sk)) };
  }
  const sk = secp256k1.utils.randomSecretKey();
  return { sk, pk: hex(secp256k1.getPublicKey(sk, false)) };
}
