/**
 * Extracts the exact source text of a top-level member of a JSON object.
 * Intel signs the served bytes of the `tcbInfo` / `enclaveIdentity` value, so
 * verification must use those bytes, never a re-serialization.
 */

function skipWs(s: string, i: number): number {
  while (i < s.length && (s[i] === " " || s[i] === "\n" || s[i] === "\r" || s[i] === "\t")) i++;
  return i;
}

/** Index one past the end of the string literal starting at `i` (a `"`), or -1. */
function endOfString(s: string, i: number): number {
  for (let j = i + 1; j < s.length; j++) {
    if (s[j] === "\\") j++;
    else if (s[j] === '"') return j + 1;
  }
  return -1;
}

/** Index one past the end of the JSON value starting at `i`, or -1. */
function endOfValue(s: string, i: number): number {
  if (s[i] === '"') return endOfString(s, i);
  if (s[i] === "{" || s[i] === "[") {
    let depth = 0;
    for (let j = i; j < s.length; j++) {
      const c = s[j];
      if (c === '"') {
        const e = endOfString(s, j);
        if (e < 0) return -1;
        j = e - 1;
      } else if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") {
        depth--;
        if (depth === 0) return j + 1;
      }
    }
    return -1;
  }
  let j = i;
  while (j < s.length && !",}] \n\r\t".includes(s[j])) j++;
  return j > i ? j : -1;
}

/**
 * The raw text of `obj[key]` at the top level of `text`, or null when absent,
 * duplicated (parsers disagree on which copy wins) or the object is malformed.
 */
export function rawJsonMember(text: string, key: string): string | null {
  let i = skipWs(text, 0);
  if (text[i] !== "{") return null;
  i = skipWs(text, i + 1);
  let found: string | null = null;
  while (i < text.length && text[i] !== "}") {
    if (text[i] !== '"') return null;
    const keyEnd = endOfString(text, i);
    if (keyEnd < 0) return null;
    let name: unknown;
    try {
      name = JSON.parse(text.slice(i, keyEnd));
    } catch {
      return null;
    }
    i = skipWs(text, keyEnd);
    if (text[i] !== ":") return null;
    i = skipWs(text, i + 1);
    const valueEnd = endOfValue(text, i);
    if (valueEnd < 0) return null;
    if (name === key) {
      if (found !== null) return null;
      found = text.slice(i, valueEnd);
    }
    i = skipWs(text, valueEnd);
    if (text[i] === ",") i = skipWs(text, i + 1);
    else if (text[i] !== "}") return null;
  }
  if (text[i] !== "}" || skipWs(text, i + 1) !== text.length) return null;
  return found;
}
