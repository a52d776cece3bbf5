/**
 * Minimal DER reader: just enough to walk Intel's SGX certificate extension
 * (SEQUENCEs of OID/value pairs). Every read is bounds-checked and returns
 * null instead of throwing, so hostile input cannot escape as an exception.
 */

/** One tag-length-value element inside `bytes`. */
export interface Tlv {
  tag: number;
  /** Offset of the value's first byte. */
  start: number;
  /** Offset one past the value's last byte. */
  end: number;
}

const TAG_INTEGER = 0x02;
export const TAG_OCTET_STRING = 0x04;
const TAG_OID = 0x06;
export const TAG_ENUMERATED = 0x0a;
export const TAG_SEQUENCE = 0x30;

/** Reads the element at `offset`, or null if it is truncated or uses a form DER forbids. */
export function readTlv(bytes: Uint8Array, offset: number): Tlv | null {
  if (offset + 2 > bytes.length) return null;
  const tag = bytes[offset];
  if ((tag & 0x1f) === 0x1f) return null; // multi-byte tags never appear in our structures
  let len = bytes[offset + 1];
  let pos = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || pos + n > bytes.length) return null;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + bytes[pos + i];
    pos += n;
  }
  if (pos + len > bytes.length) return null;
  return { tag, start: pos, end: pos + len };
}

/** The direct children of a constructed element, or null if any is malformed. */
export function children(bytes: Uint8Array, parent: Tlv): Tlv[] | null {
  const out: Tlv[] = [];
  let pos = parent.start;
  while (pos < parent.end) {
    const t = readTlv(bytes, pos);
    if (!t || t.end > parent.end) return null;
    out.push(t);
    pos = t.end;
  }
  return out;
}

/** Dotted form of an OBJECT IDENTIFIER value. */
export function decodeOid(bytes: Uint8Array, t: Tlv): string | null {
  if (t.tag !== TAG_OID || t.end <= t.start) return null;
  const parts: number[] = [];
  let v = 0;
  for (let i = t.start; i < t.end; i++) {
    v = v * 128 + (bytes[i] & 0x7f);
    if (v > Number.MAX_SAFE_INTEGER / 128) return null;
    if (!(bytes[i] & 0x80)) {
      parts.push(v);
      v = 0;
    } else if (i === t.end - 1) return null;
  }
  const first = parts.shift();
  if (first === undefined) return null;
  const a = first < 80 ? Math.floor(first / 40) : 2;
  return [a, first - a * 40, ...parts].join(".");
}

/** A small non-negative INTEGER or ENUMERATED value (SVNs, types), or null. */
export function decodeSmallUint(bytes: Uint8Array, t: Tlv): number | null {
  if (t.tag !== TAG_INTEGER && t.tag !== TAG_ENUMERATED) return null;
  const len = t.end - t.start;
  if (len < 1 || len > 5 || bytes[t.start] & 0x80) return null;
  let v = 0;
  for (let i = t.start; i < t.end; i++) v = v * 256 + bytes[i];
  return v;
}

/** Encodes a dotted OID (used by the test forge and by lookups). */
export function encodeOid(oid: string): Uint8Array {
  const nums = oid.split(".").map(Number);
  const body: number[] = [];
  const push = (n: number) => {
    const tmp = [n & 0x7f];
    for (n = Math.floor(n / 128); n > 0; n = Math.floor(n / 128)) tmp.unshift((n & 0x7f) | 0x80);
    body.push(...tmp);
  };
  push(nums[0] * 40 + nums[1]);
  for (const n of nums.slice(2)) push(n);
  return encodeTlv(TAG_OID, Uint8Array.from(body));
}

/** Encodes one element with a definite length. */
export function encodeTlv(tag: number, value: Uint8Array): Uint8Array {
  const len = value.length;
  let header: number[];
  if (len < 0x80) header = [tag, len];
  else if (len < 0x100) header = [tag, 0x81, len];
  else if (len < 0x10000) header = [tag, 0x82, len >> 8, len & 0xff];
  else header = [tag, 0x83, len >> 16, (len >> 8) & 0xff, len & 0xff];
  const out = new Uint8Array(header.length + len);
  out.set(header);
  out.set(value, header.length);
  return out;
}

/** Encodes a small non-negative INTEGER (or ENUMERATED with `tag`). */
export function encodeSmallUint(n: number, tag = TAG_INTEGER): Uint8Array {
  const bytes: number[] = [];
  do {
    bytes.unshift(n & 0xff);
    n = Math.floor(n / 256);
  } while (n > 0);
  if (bytes[0] & 0x80) bytes.unshift(0);
  return encodeTlv(tag, Uint8Array.from(bytes));
}
