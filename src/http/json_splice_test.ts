import assert from "node:assert/strict";
import { parseJsonBody, parseJsonDocument } from "./body.ts";
import { freezeJson, jsonEqual, jsonFragments, spliceJson } from "./json_splice.ts";

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: true });

/** What the gateway sent before (#27): the parsed upstream value serialized again. */
const oldPath = (out: unknown): unknown => JSON.parse(JSON.stringify(out));
const sent = (bytes: Uint8Array): unknown => parseJsonBody(bytes);

/** Deterministic PRNG (mulberry32): the same shapes on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const CHARS = [
  "a",
  "Z",
  "0",
  " ",
  '"',
  "\\",
  "/",
  "\n",
  "\t",
  "\u0001",
  "}",
  ",",
  "{",
  "]",
  ":",
  "é",
  "→",
  "中",
  "😀",
  "\u2028",
  "\uFEFF",
];

/** JSON text of `v` spelled at random: whitespace, escapes, number literals. */
function spell(v: unknown, r: () => number): string {
  const ws = () => [" ", "", "\n", "\t ", "\r\n  "][Math.floor(r() * 5)];
  if (typeof v === "string") {
    let s = '"';
    for (const ch of v) {
      const pick = r();
      if (ch === '"' || ch === "\\" || ch.charCodeAt(0) < 0x20 || pick < 0.2) {
        // \uXXXX for every UTF-16 unit (an astral character as its surrogate pair).
        for (let i = 0; i < ch.length; i++) {
          const hex = ch.charCodeAt(i).toString(16).padStart(4, "0");
          s += "\\u" + (r() < 0.5 ? hex : hex.toUpperCase());
        }
      } else if (ch === "/" && pick < 0.5) s += "\\/";
      else s += ch;
    }
    return s + '"';
  }
  if (typeof v === "number") {
    if (Object.is(v, -0)) return r() < 0.5 ? "-0" : "-0.0e0";
    if (Number.isInteger(v) && r() < 0.3) return `${v}.0`;
    if (Number.isInteger(v) && v !== 0 && r() < 0.3) return `${v * 10}E-1`;
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return "[" + ws() + v.map((x) => spell(x, r)).join(ws() + "," + ws()) + "]";
  if (v !== null && typeof v === "object") {
    const parts = Object.entries(v).map(([k, x]) =>
      ws() + spell(k, r) + ws() + ":" + ws() + spell(x, r) + ws()
    );
    return "{" + parts.join(",") + ws() + "}";
  }
  return JSON.stringify(v);
}

function randomString(r: () => number, max = 12): string {
  let s = "";
  const n = Math.floor(r() * max);
  for (let i = 0; i < n; i++) s += CHARS[Math.floor(r() * CHARS.length)];
  return s;
}

function randomValue(r: () => number, depth: number): unknown {
  const k = r();
  if (depth <= 0 || k < 0.45) {
    const p = r();
    if (p < 0.4) return randomString(r);
    if (p < 0.55) return Math.floor(r() * 2000) - 1000;
    if (p < 0.65) return r() * 100;
    if (p < 0.7) return -0;
    if (p < 0.8) return r() < 0.5;
    return null;
  }
  if (k < 0.7) return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth - 1));
  const o: Record<string, unknown> = {};
  const n = Math.floor(r() * 4);
  for (let i = 0; i < n; i++) o[randomString(r, 4) + i] = randomValue(r, depth - 1);
  return o;
}

/** A client body: the usual chat members and random others, spelled at random. */
function randomBody(r: () => number): { text: string; value: Record<string, unknown> } {
  const value: Record<string, unknown> = {
    model: randomString(r) || "m",
    messages: [{ role: "user", content: randomString(r, 40) }],
  };
  const n = Math.floor(r() * 6);
  for (let i = 0; i < n; i++) value[randomString(r, 5) + "_" + i] = randomValue(r, 4);
  if (r() < 0.5) value.max_tokens = 16;
  if (r() < 0.3) value.stream_options = { include_usage: r() < 0.5 };
  return { text: (r() < 0.2 ? " \n" : "") + spell(value, r) + (r() < 0.2 ? "\t\n" : ""), value };
}

/** What the pipeline's plans do to a body, at random: as a new object, never in place. */
function randomEdit(raw: Record<string, unknown>, r: () => number): Record<string, unknown> {
  let entries = Object.entries(raw);
  const ops = Math.floor(r() * 4);
  for (let i = 0; i < ops; i++) {
    const op = Math.floor(r() * 9);
    const at = Math.floor(r() * entries.length);
    const e = entries[at];
    if (op === 0) entries.push([randomString(r, 4) + "+", randomValue(r, 3)]); // added
    else if (op === 1 && e) entries.splice(at, 1); // dropped
    else if (op === 2 && e) entries[at] = [e[0], randomValue(r, 3)]; // replaced
    else if (op === 3 && e) entries[at] = [e[0], structuredClone(e[1])]; // equal copy (as zod makes)
    else if (op === 4) entries = entries.sort(() => r() - 0.5); // reordered
    else if (op === 5 && e) entries[at] = [e[0], undefined]; // left out by JSON.stringify
    else if (op === 6 && e) entries[at] = [e[0], deepEdit(structuredClone(e[1]), r)]; // nested change
    else if (op === 7) entries.push(["model", "upstream/" + randomString(r)]); // renamed model
    else if (op === 8 && e) entries[at] = [e[0], new Date(0)]; // a toJSON
  }
  // Later entries of one key win, as in `{ ...chat, model }`.
  return Object.fromEntries(entries);
}

function deepEdit(v: unknown, r: () => number): unknown {
  if (Array.isArray(v)) {
    if (v.length === 0 || r() < 0.3) return [...v, 1];
    const i = Math.floor(r() * v.length);
    v[i] = deepEdit(v[i], r);
    return v;
  }
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v);
    if (keys.length === 0 || r() < 0.3) return { ...v, added: true };
    const k = keys[Math.floor(r() * keys.length)];
    (v as Record<string, unknown>)[k] = deepEdit((v as Record<string, unknown>)[k], r);
    return v;
  }
  if (typeof v === "string") return v + "x";
  if (typeof v === "number") return Object.is(v, -0) ? 0 : v + 1;
  return v === null ? 0 : !v;
}

Deno.test("splice: 3,000 random bodies and edits parse to what the serialized value did", () => {
  const r = rng(27);
  let copied = 0;
  for (let i = 0; i < 3000; i++) {
    const { text, value } = randomBody(r);
    const bytes = enc.encode(text);
    const doc = parseJsonDocument(bytes);
    assert.deepStrictEqual(doc.value, value, text);
    freezeJson(doc.value);
    const out = randomEdit(doc.value as Record<string, unknown>, r);
    const spliced = spliceJson(doc, out);
    // Strictly parsed (no duplicate key, no stray byte), equal to the old path's value,
    // -0 and 0 told apart.
    assert.deepStrictEqual(sent(spliced), oldPath(out), `${text}\n→ ${dec.decode(spliced)}`);
    if (spliced === bytes) copied++;
  }
  assert.ok(copied > 50, `unchanged bodies sent as received: ${copied}`);
});

Deno.test("splice: an unchanged body is the client's bytes themselves; a changed one copies the rest", () => {
  const text =
    ' {"model" : "a",\n "messages":[{"role":"user","content":"caf\\u00e9 \\ud83d\\ude00 →"}],' +
    '"max_tokens":16 } ';
  const bytes = enc.encode(text);
  const doc = parseJsonDocument(bytes);
  freezeJson(doc.value);
  const raw = doc.value as Record<string, unknown>;
  assert.equal(spliceJson(doc, { ...raw }), bytes);
  const renamed = spliceJson(doc, { ...raw, model: "upstream/a" });
  assert.equal(
    dec.decode(renamed),
    '{"model":"upstream/a",\n "messages":[{"role":"user","content":"caf\\u00e9 \\ud83d\\ude00 →"}],' +
      '"max_tokens":16 }',
  );
  assert.deepStrictEqual(sent(renamed), oldPath({ ...raw, model: "upstream/a" }));
  // Reordered members, none changed (the validator's order): still the client's bytes.
  const { model, ...rest } = raw;
  assert.equal(spliceJson(doc, { ...rest, model }), bytes);
  // A toJSON giving undefined is left out, as JSON.stringify leaves it out.
  const odd = { ...raw, model: "b", extra: { toJSON: () => undefined } };
  assert.deepStrictEqual(sent(spliceJson(doc, odd)), oldPath(odd));
  // A subarray of a larger buffer is copied, never aliased.
  const framed = new Uint8Array(bytes.length + 4);
  framed.set(bytes, 2);
  const inner = framed.subarray(2, 2 + bytes.length);
  const again = spliceJson(parseJsonDocument(inner), parseJsonDocument(inner).value);
  assert.notEqual(again, inner);
  assert.deepEqual(again, bytes);
  assert.equal(again.byteOffset, 0);
  assert.equal(again.byteLength, again.buffer.byteLength);
});

Deno.test("parseJsonDocument: member ranges are byte offsets, whatever precedes them", () => {
  const text = '{"é→😀":"中文",  "k\\u0065y" : [1, {"}": ","}] ,"z":"\\"}\\\\"}';
  const bytes = enc.encode(text);
  const doc = parseJsonDocument(bytes);
  const members = doc.members!;
  assert.deepEqual([...members.keys()], ["é→😀", "key", "z"]);
  const spans = [...members.values()].map(([a, b]) => dec.decode(bytes.subarray(a, b)));
  assert.deepEqual(spans, ['"é→😀":"中文"', '  "k\\u0065y" : [1, {"}": ","}] ', '"z":"\\"}\\\\"']);
  // Not an object: no members, the splice serializes.
  for (const t of ['["a"]', '"s"', "1", "null", "{}"]) {
    const d = parseJsonDocument(enc.encode(t));
    assert.equal(d.members === null, t !== "{}", t);
    assert.deepStrictEqual(sent(spliceJson(d, d.value)), JSON.parse(t));
  }
});

Deno.test("parseJsonDocument refuses what parseJsonBody refuses: duplicates, depth, surrogates, bytes", () => {
  const refused: [string | Uint8Array, RegExp][] = [
    ['{"a":1,"a":2}', /duplicate key/],
    ['{"a":1,"\\u0061":2}', /duplicate key/],
    ['{"x":{"b":1,"b":1}}', /duplicate key/],
    ['{"model":"a","messages":[],"model":"b"}', /duplicate key/],
    ["[".repeat(65) + "]".repeat(65), /nesting deeper/],
    ['{"a":"\\ud800"}', /unpaired UTF-16 surrogate/],
    ['{"\\udc00":1}', /unpaired UTF-16 surrogate/],
    [new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), /not valid UTF-8/],
    [new Uint8Array([0xef, 0xbb, 0xbf, 0x7b, 0x7d]), /not valid JSON/],
    ["  \n ", /empty/],
    ['{"a":1,}', /not valid JSON/],
    ['{"a":1} {"b":2}', /not valid JSON/],
    ['{"a" 1}', /not valid JSON/],
  ];
  for (const [t, re] of refused) {
    const bytes = typeof t === "string" ? enc.encode(t) : t;
    assert.throws(() => parseJsonDocument(bytes), re, String(t));
  }
  // An escaped backslash before `uD800` is text, not an escape; an odd run is one.
  assert.deepStrictEqual(parseJsonDocument(enc.encode('{"a":"\\\\ud800"}')).value, {
    a: "\\ud800",
  });
  assert.throws(() => parseJsonDocument(enc.encode('{"a":"\\\\\\ud800"}')), /unpaired/);
  // Depth 64 is allowed, and its members are found.
  const deep = '{"d":' + "[".repeat(63) + "]".repeat(63) + "}";
  assert.deepEqual([...parseJsonDocument(enc.encode(deep)).members!.keys()], ["d"]);
});

Deno.test("splice: hostile bodies (__proto__, escaped keys, huge strings, many members)", () => {
  const proto = parseJsonDocument(enc.encode('{"__proto__":{"polluted":1},"model":"a"}'));
  freezeJson(proto.value);
  const raw = proto.value as Record<string, unknown>;
  for (const out of [{ ...raw }, { ...raw, model: "b" }, { model: "b" }]) {
    assert.deepStrictEqual(sent(spliceJson(proto, out)), oldPath(out));
  }
  assert.equal(({} as Record<string, unknown>).polluted, undefined);

  const big = 'x\\n\\"'.repeat(100_000);
  const many = Array.from({ length: 2000 }, (_, i) => `"k${i}":${i}`).join(",");
  const text = `{"model":"a","content":"${big}",${many}}`;
  const doc = parseJsonDocument(enc.encode(text));
  freezeJson(doc.value);
  const v = doc.value as Record<string, unknown>;
  const out = { ...v, model: "b", k7: "changed", k8: undefined };
  assert.deepStrictEqual(sent(spliceJson(doc, out)), oldPath(out));
});

Deno.test("jsonEqual: equal only where JSON.stringify would send the same value", () => {
  const cases: [unknown, unknown, boolean][] = [
    ["a", "a", true],
    [1, 1, true],
    [0, -0, false], // the client's -0 parses to -0; JSON.stringify sent 0
    [-0, -0, false],
    [-0, 0, true],
    [NaN, 0, false],
    [[1, undefined], [1, null], false],
    [{ a: 1, b: undefined }, { a: 1 }, true],
    [{ a: 1 }, { a: 1, b: 2 }, false],
    [{ a: 1, b: 2 }, { b: 2, a: 1 }, true],
    [{ toJSON: () => 1 }, 1, false],
    [new Date(0), "1970-01-01T00:00:00.000Z", false],
    [Object.create({ inherited: 1 }), {}, false],
    [[], {}, false],
    [{}, [], false],
    [null, null, true],
    [true, true, true],
    [1n, 1, false],
  ];
  for (const [a, b, want] of cases) {
    assert.equal(jsonEqual(a, b), want, `${String(a)} ~ ${String(b)}`);
  }
});

Deno.test("freezeJson: a write to the parsed value throws instead of forwarding stale bytes", () => {
  const doc = parseJsonDocument(enc.encode('{"messages":[{"role":"user","content":"a"}]}'));
  freezeJson(doc.value);
  const v = doc.value as { messages: { content: string }[] };
  assert.throws(() => {
    v.messages[0].content = "b";
  }, TypeError);
  assert.throws(() => {
    v.messages.push({ content: "c" });
  }, TypeError);
});

Deno.test("jsonFragments: the fragments join to exactly JSON.stringify's text", () => {
  const r = rng(31);
  class Point {
    constructor(public x: number) {}
  }
  const odd = [
    undefined,
    () => 1,
    Symbol("s"),
    new Date(0),
    new Point(1),
    { toJSON: () => undefined },
    { toJSON: (k: string) => `key:${k}` },
    Object.create(null),
    Object.assign(Object.create(null), { a: 1 }),
    [undefined, () => 1],
    -0,
    NaN,
    "→\u2028\uD83D",
  ];
  const pick = () => odd[Math.floor(r() * odd.length)];
  const mixed = (depth: number): unknown => {
    const x = r();
    if (depth > 4 || x < 0.3) return r() < 0.5 ? pick() : randomValue(r, 2);
    if (x < 0.6) return Array.from({ length: Math.floor(r() * 4) }, () => mixed(depth + 1));
    const o: Record<string, unknown> = {};
    for (let i = Math.floor(r() * 4); i > 0; i--) o[randomString(r, 3)] = mixed(depth + 1);
    return o;
  };
  for (let i = 0; i < 3000; i++) {
    const v = mixed(0);
    for (const depth of [0, 1, 2, 4, 9]) {
      // As the member "k" of an object JSON.stringify serializes.
      const out: string[] = [];
      const held = JSON.stringify({ k: v });
      const text = held === "{}" ? undefined : held.slice('{"k":'.length, -1);
      assert.equal(jsonFragments(v, "k", out, depth), text !== undefined);
      assert.equal(text === undefined ? undefined : out.join(""), text);
    }
  }
  // A long conversation is spliced from many small fragments, to the same value.
  const messages = Array.from({ length: 200 }, (_, i) => ({
    role: i % 2 ? "user" : "assistant",
    content: [{ type: "text", text: `turn ${i} → ` + "x".repeat(3000) }],
  }));
  const body = enc.encode(JSON.stringify({ model: "a", messages: [] }));
  const doc = parseJsonDocument(body);
  const spliced = spliceJson(doc, { model: "a", messages });
  assert.deepStrictEqual(sent(spliced), { model: "a", messages });
});
