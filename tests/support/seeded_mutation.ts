/**
 * Seeded structural mutation of JSON request bodies for fuzz tests: a small
 * deterministic PRNG (so a failing seed replays exactly) and mutators that
 * change types, values, keys and structure, plus a few byte-level ones.
 */

/** mulberry32: tiny, fast, good enough to pick mutations; deterministic per seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const pick = <T>(rnd: () => number, xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];

/** Values chosen to sit on type and range edges. */
const EDGE_VALUES: readonly Json[] = [
  null,
  true,
  false,
  0,
  -1,
  1,
  0.5,
  -0.0001,
  2.0001,
  4097,
  1e308,
  -1e308,
  2 ** 53 + 2,
  Number.MAX_SAFE_INTEGER,
  "",
  "x",
  "user",
  "assistant",
  "system",
  "tool",
  "function",
  "text",
  "image_url",
  "demo/echo",
  "demo/embed-large",
  "\u0000",
  "\ud800",
  "‮rtl",
  "x".repeat(3000),
  "data:image/png;base64,@@@",
  [],
  [null],
  [""],
  {},
  { type: "text" },
  { role: "user" },
];

const EXTRA_KEYS = [
  "provider",
  "stream",
  "tools",
  "n",
  "max_tokens",
  "__proto__",
  "constructor",
  "zzz",
];

/** All containers in the tree with the path to each, root first. */
function containers(v: Json): (Json[] | { [k: string]: Json })[] {
  const out: (Json[] | { [k: string]: Json })[] = [];
  const walk = (x: Json, depth: number) => {
    if (x === null || typeof x !== "object" || depth > 12) return;
    out.push(x);
    for (const c of Array.isArray(x) ? x : Object.values(x)) walk(c, depth + 1);
  };
  walk(v, 0);
  return out;
}

function randomValue(rnd: () => number): Json {
  return structuredClone(pick(rnd, EDGE_VALUES));
}

/** Applies one structural mutation in place (the root may be replaced: the result is returned). */
function mutateOnce(root: Json, rnd: () => number): Json {
  const all = containers(root);
  if (all.length === 0 || rnd() < 0.02) return randomValue(rnd);
  const target = pick(rnd, all);
  if (Array.isArray(target)) {
    const op = Math.floor(rnd() * 6);
    if (target.length === 0 || op === 0) target.push(randomValue(rnd));
    else if (op === 1) target.splice(Math.floor(rnd() * target.length), 1);
    else if (op === 2) target[Math.floor(rnd() * target.length)] = randomValue(rnd);
    else if (op === 3) {
      const i = Math.floor(rnd() * target.length);
      target.push(structuredClone(target[i]));
    } else if (op === 4) {
      const i = Math.floor(rnd() * target.length);
      target[i] = [target[i]];
    } else target.length = 0;
    return root;
  }
  const keys = Object.keys(target);
  const op = Math.floor(rnd() * 7);
  if (keys.length === 0 || op === 0) {
    const k = pick(rnd, EXTRA_KEYS);
    Object.defineProperty(target, k, {
      value: randomValue(rnd),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else {
    const k = pick(rnd, keys);
    if (op === 1) delete target[k];
    else if (op === 2) target[k] = randomValue(rnd);
    else if (op === 3) target[k] = [target[k]];
    else if (op === 4) target[k] = { value: target[k] };
    else if (op === 5) {
      const v = target[k];
      delete target[k];
      target[k.toUpperCase() === k ? k + "_" : k.toUpperCase()] = v;
    } else {
      const v = target[k];
      // Type flips that keep the value recognisable: "1" ↔ 1, [x] ↔ x, true ↔ "true".
      target[k] = typeof v === "number"
        ? String(v)
        : typeof v === "string"
        ? (Number.isNaN(Number(v)) ? v.length : Number(v))
        : typeof v === "boolean"
        ? String(v)
        : Array.isArray(v)
        ? (v[0] ?? null)
        : v === null
        ? 0
        : JSON.stringify(v);
    }
  }
  return root;
}

const encoder = new TextEncoder();

/** Byte-level damage to serialized JSON: truncation, a flipped byte, an injected byte. */
function mutateBytes(text: string, rnd: () => number): Uint8Array {
  const b = encoder.encode(text);
  const i = Math.floor(rnd() * b.length);
  const op = Math.floor(rnd() * 4);
  if (op === 0) return b.slice(0, i);
  if (op === 1) {
    const c = b.slice();
    c[i] ^= 1 << Math.floor(rnd() * 8);
    return c;
  }
  const inject = op === 2 ? [0xff] : [0x22];
  return new Uint8Array([...b.subarray(0, i), ...inject, ...b.subarray(i)]);
}

/** One fuzzed body: 1-3 structural mutations of `valid`, or (1 in 10) byte-level damage. */
export function mutateBody(valid: unknown, rnd: () => number): string | Uint8Array {
  let v = structuredClone(valid) as Json;
  const n = 1 + Math.floor(rnd() * 3);
  for (let i = 0; i < n; i++) v = mutateOnce(v, rnd);
  const text = JSON.stringify(v);
  return rnd() < 0.1 ? mutateBytes(text, rnd) : text;
}
