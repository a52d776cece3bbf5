/**
 * Signing C2SP notes: the log's checkpoint key (Ed25519, type 0x01) and a
 * witness's cosignatures (tlog-cosignature/v1, type 0x04). Verification and
 * the formats are in note.ts (which the /verify page bundles; this does not).
 */
import type { KeyObject } from "node:crypto";
import {
  ed25519PrivateKeyFromSeed,
  ed25519RawPublicKey,
  ed25519Sign,
  generateEd25519PrivateKey,
} from "./ed25519.ts";
import { bytesToHex } from "./hex.ts";
import {
  b64,
  cosignedMessage,
  EM_DASH,
  keyId,
  SIG_COSIGNATURE,
  SIG_ED25519,
  validKeyName,
  verifierKey,
} from "./note.ts";

const encoder = new TextEncoder();

/** An Ed25519 key that signs notes (the log's checkpoints, or a witness's cosignatures). */
export interface NoteSigner {
  readonly name: string;
  readonly publicKey: Uint8Array;
  readonly publicKeyHex: string;
  /** The vkey (type 0x01). */
  readonly vkey: string;
  /** One signature line (`— name base64\n`) over `text`. */
  sign(text: string): string;
  /** A tlog-cosignature/v1 line over a checkpoint body at `time` (Unix seconds). */
  cosign(body: string, time: number): string;
  /** The cosigner vkey (type 0x04). */
  readonly cosignerVkey: string;
}

export function createNoteSigner(name: string, seed?: Uint8Array): NoteSigner {
  if (!validKeyName(name)) throw new Error(`invalid note key name ${JSON.stringify(name)}`);
  const priv: KeyObject = seed ? ed25519PrivateKeyFromSeed(seed) : generateEd25519PrivateKey();
  const pub = ed25519RawPublicKey(priv);
  const id = keyId(name, SIG_ED25519, pub);
  const coId = keyId(name, SIG_COSIGNATURE, pub);
  return Object.freeze({
    name,
    publicKey: pub,
    publicKeyHex: bytesToHex(pub),
    vkey: verifierKey(name, SIG_ED25519, pub),
    cosignerVkey: verifierKey(name, SIG_COSIGNATURE, pub),
    sign(text: string): string {
      const sig = ed25519Sign(priv, encoder.encode(text));
      return `${EM_DASH} ${name} ${b64(new Uint8Array([...id, ...sig]))}\n`;
    },
    cosign(body: string, time: number): string {
      const sig = ed25519Sign(priv, encoder.encode(cosignedMessage(body, time)));
      const ts = new Uint8Array(8);
      new DataView(ts.buffer).setBigUint64(0, BigInt(time));
      return `${EM_DASH} ${name} ${b64(new Uint8Array([...coId, ...ts, ...sig]))}\n`;
    },
  });
}
