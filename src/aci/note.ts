/**
 * C2SP signed notes (Ed25519, type 0x01), tlog-checkpoint bodies and
 * tlog-cosignature/v1 (timestamped Ed25519, type 0x04): the byte formats the
 * transparency log publishes and its monitors and witnesses check. Key ids
 * are SHA-256(name ‖ 0x0A ‖ type ‖ public key)[:4].
 */
import { sha256 } from "./digest.ts";
import { ed25519Verify } from "./ed25519.ts";
import { bytesToHex } from "./hex.ts";

/** The keyset algo of the transparency log's checkpoint key (team contract). */
export const NOTE_KEY_ALGO = "c2sp-note-ed25519";
export const SIG_ED25519 = 0x01;
export const EM_DASH = "\u2014";
export const SIG_COSIGNATURE = 0x04;
const encoder = new TextEncoder();

/** Standard base64 (btoa: the same in Deno and the /verify page's browser bundle). */
export function b64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

/** Strict standard base64 (RFC 4648 §4, padded); null when not exactly that. */
export function unb64(s: string): Uint8Array | null {
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(s)) return null;
  const bin = atob(s);
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** A key name is non-empty, with no Unicode space and no `+`. */
export function validKeyName(name: string): boolean {
  return name.length > 0 && !/[\s+]/u.test(name) && !hasControl(name, false);
}

/** Whether `s` holds an ASCII control character (below U+0020), newlines aside when allowed. */
function hasControl(s: string, newlineOk: boolean): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 && !(newlineOk && c === 0x0a)) return true;
  }
  return false;
}

export function keyId(name: string, type: number, publicKey: Uint8Array): Uint8Array {
  const buf = new Uint8Array([...encoder.encode(name), 0x0a, type, ...publicKey]);
  return sha256(buf).slice(0, 4);
}

/** `<name>+<hex key id>+<base64(type ‖ key)>`. */
export function verifierKey(name: string, type: number, publicKey: Uint8Array): string {
  return `${name}+${bytesToHex(keyId(name, type, publicKey))}+${
    b64(new Uint8Array([type, ...publicKey]))
  }`;
}

export interface ParsedVerifierKey {
  name: string;
  type: number;
  publicKey: Uint8Array;
  id: Uint8Array;
}

export function parseVerifierKey(vkey: string): ParsedVerifierKey | null {
  // The base64 part may itself hold `+`: split at the first two only.
  const a = vkey.indexOf("+");
  const b = a < 0 ? -1 : vkey.indexOf("+", a + 1);
  if (b < 0) return null;
  const parts = [vkey.slice(0, a), vkey.slice(a + 1, b), vkey.slice(b + 1)];
  if (!validKeyName(parts[0]) || !/^[0-9a-f]{8}$/.test(parts[1])) return null;
  const raw = unb64(parts[2]);
  if (raw === null || raw.length !== 33) return null;
  const type = raw[0];
  if (type !== SIG_ED25519 && type !== SIG_COSIGNATURE) return null;
  const publicKey = raw.slice(1);
  const id = keyId(parts[0], type, publicKey);
  if (bytesToHex(id) !== parts[1]) return null;
  return { name: parts[0], type, publicKey, id };
}

export function cosignedMessage(body: string, time: number): string {
  return `cosignature/v1\ntime ${time}\n${body}`;
}

export interface NoteSignature {
  name: string;
  id: Uint8Array;
  sig: Uint8Array;
  /** The line as written, newline included. */
  line: string;
}

export interface Note {
  /** The note text, final newline included. */
  text: string;
  signatures: NoteSignature[];
}

const MAX_NOTE_BYTES = 1 << 20;
const MAX_SIGNATURES = 100;

/** Splits a signed note; null when malformed (control characters, no signatures, a bad line). */
export function parseNote(note: string): Note | null {
  if (note.length > MAX_NOTE_BYTES || hasControl(note, true)) return null;
  if (!note.endsWith("\n")) return null;
  const split = note.lastIndexOf("\n\n");
  if (split < 0) return null;
  const text = note.slice(0, split + 1);
  const sigLines = note.slice(split + 2).split("\n").slice(0, -1);
  if (sigLines.length === 0 || sigLines.length > MAX_SIGNATURES) return null;
  const signatures: NoteSignature[] = [];
  for (const line of sigLines) {
    const m = /^\u2014 (\S+) (\S+)$/u.exec(line);
    if (!m || !validKeyName(m[1])) return null;
    const raw = unb64(m[2]);
    if (raw === null || raw.length < 5) return null;
    signatures.push({ name: m[1], id: raw.slice(0, 4), sig: raw.slice(4), line: line + "\n" });
  }
  return { text, signatures };
}

const sameBytes = (a: Uint8Array, b: Uint8Array) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

export interface VerifiedNote {
  note: Note;
  /** Names of the known keys whose signatures verified. */
  verifiedBy: ParsedVerifierKey[];
  /** Cosignature timestamps, per verified cosigner name. */
  cosignedAt: Map<string, number>;
}

/**
 * Verifies a note against known vkeys (types 0x01 and 0x04): signatures from
 * unknown keys are ignored; a known key's bad signature rejects the note; at
 * least one known signature must verify.
 */
export function verifyNote(note: string, keys: readonly ParsedVerifierKey[]): VerifiedNote | null {
  const parsed = parseNote(note);
  if (parsed === null) return null;
  const verifiedBy: ParsedVerifierKey[] = [];
  const cosignedAt = new Map<string, number>();
  const text = encoder.encode(parsed.text);
  for (const s of parsed.signatures) {
    const key = keys.find((k) => k.name === s.name && sameBytes(k.id, s.id));
    if (!key) continue;
    if (key.type === SIG_ED25519) {
      if (!ed25519Verify(key.publicKey, s.sig, text)) return null;
    } else {
      if (s.sig.length !== 72) return null;
      const time = Number(new DataView(s.sig.buffer, s.sig.byteOffset).getBigUint64(0));
      const msg = encoder.encode(cosignedMessage(parsed.text, time));
      if (!ed25519Verify(key.publicKey, s.sig.slice(8), msg)) return null;
      cosignedAt.set(key.name, time);
    }
    if (!verifiedBy.includes(key)) verifiedBy.push(key);
  }
  return verifiedBy.length === 0 ? null : { note: parsed, verifiedBy, cosignedAt };
}

export interface Checkpoint {
  origin: string;
  size: number;
  root: Uint8Array;
  /** The note text (body) exactly. */
  body: string;
}

export function checkpointBody(origin: string, size: number, root: Uint8Array): string {
  return `${origin}\n${size}\n${b64(root)}\n`;
}

/** Parses a checkpoint's note text (origin, size, root hash, extension lines ignored). */
export function parseCheckpointBody(body: string): Checkpoint | null {
  const lines = body.split("\n");
  if (lines.length < 4 || lines[lines.length - 1] !== "") return null;
  const [origin, sizeText, rootText] = lines;
  if (origin === "" || !/^(0|[1-9][0-9]{0,15})$/.test(sizeText)) return null;
  const size = Number(sizeText);
  const root = unb64(rootText);
  if (!Number.isSafeInteger(size) || root === null || root.length !== 32) return null;
  if (lines.slice(3, -1).some((l) => l === "")) return null;
  return { origin, size, root, body };
}
