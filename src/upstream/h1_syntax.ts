/** HTTP/1.1 syntax shared by request writing and response parsing (RFC 9110/9112). */

export const CR = 0x0d;

export const LF = 0x0a;

export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Field values as RFC 9110 allows them (no CTLs but HTAB), obs-text included. */
export const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export function listTokens(value: string | null): string[] {
  if (value === null) return [];
  return value.split(",").map((t) => trimOws(t).toLowerCase()).filter((t) => t !== "");
}

export function trimOws(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && (s.charCodeAt(a) === 0x20 || s.charCodeAt(a) === 0x09)) a++;
  while (b > a && (s.charCodeAt(b - 1) === 0x20 || s.charCodeAt(b - 1) === 0x09)) b--;
  return s.slice(a, b);
}
