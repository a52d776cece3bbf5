import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { parseInPieces, PIECES_MIN_BYTES, SPLIT_MIN, textBytes } from "./json_pieces.ts";
import { parseJsonDocument } from "./body.ts";
import { GatewayError } from "./errors.ts";

const enc = new TextEncoder();
/** Tiny documents split anyway (the defaults parse a body of tiny values whole). */
const ANY = { piece: 0, value: 0 };

// Documents below PIECES_MIN_BYTES take the whole-text parse in parseJsonDocument: the reference.
const whole = (bytes: Uint8Array) => {
  assert.ok(bytes.byteLength < PIECES_MIN_BYTES);
  return parseJsonDocument(bytes);
};

/** The whole-text verdict: the document, or the refusal's message. */
function verdict(bytes: Uint8Array): { value?: unknown; members?: unknown; error?: string } {
  try {
    const d = whole(bytes);
    return { value: d.value, members: d.members };
  } catch (e) {
    assert.ok(e instanceof GatewayError, String(e));
    return { error: e.message };
  }
}

/** In pieces (tiny split sizes, so that small documents split and chunk everywhere) agrees with the whole text. */
function agrees(bytes: Uint8Array, splitMin: number, label: string): "pieces" | "whole" {
  const ref = verdict(bytes);
  let got: ReturnType<typeof parseInPieces>;
  try {
    got = parseInPieces(bytes, 64, splitMin, ANY);
  } catch (e) {
    assert.ok(e instanceof GatewayError, `${label}: ${e}`);
    assert.equal(e.message, ref.error, label);
    return "whole";
  }
  if (got === null) {
    // Declined: the whole-text parse decides (and must be what refuses, or a non-object).
    return "whole";
  }
  assert.equal(ref.error, undefined, `${label}: pieces accepted what the whole text refuses`);
  assert.deepEqual(got.value, ref.value, label);
  assert.deepEqual(got.members, ref.members, label);
  return "pieces";
}

let seed = 29;
const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
const pick = <T>(xs: T[]) => xs[Math.floor(next() * xs.length)];

const TEXTS = [
  "plain",
  'a "quoted" \\ back\\slash\n\ttab',
  "é ü → 😀 𝄞 ✓",
  "\u0000\u001f control",
  "\\u0041 not an escape once encoded",
  "x".repeat(40),
  "ab😀".repeat(13),
];
const KEYS = ["a", "role", "content", "__proto__", "0", "12", "é", 'q"k', "k\\", "😀", ""];

function value(depth: number): unknown {
  const r = next();
  if (depth > 5 || r < 0.35) {
    return pick<unknown>([
      pick(TEXTS),
      pick(TEXTS) + pick(TEXTS),
      0,
      -1.5e-7,
      12345678901234567890,
      true,
      false,
      null,
    ]);
  }
  if (r < 0.65) return Array.from({ length: Math.floor(next() * 5) }, () => value(depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = Math.floor(next() * 5); i > 0; i--) {
    Object.defineProperty(o, pick(KEYS), {
      value: value(depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return o;
}

/** Serialized with random whitespace around every token. */
function spaced(v: unknown): string {
  const ws = () => pick(["", "", " ", "\n", "\t ", "\r\n  "]);
  if (Array.isArray(v)) {
    return "[" + ws() + v.map((x) => ws() + spaced(x) + ws()).join(",") + ws() + "]";
  }
  if (v !== null && typeof v === "object") {
    return "{" + ws() +
      Object.entries(v).map(([k, x]) =>
        ws() + JSON.stringify(k) + ws() + ":" + ws() + spaced(x) + ws()
      )
        .join(",") +
      ws() + "}";
  }
  return JSON.stringify(v);
}

function doc(): string {
  const o: Record<string, unknown> = {};
  for (let i = 1 + Math.floor(next() * 4); i > 0; i--) {
    Object.defineProperty(o, pick(KEYS), {
      value: value(1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return ws0() + spaced(o) + ws0();
}
const ws0 = () => pick(["", " ", "\n"]);

Deno.test("in pieces: random documents parse to the whole text's value and member ranges", () => {
  const taken = { pieces: 0, whole: 0 };
  for (let i = 0; i < 1500; i++) {
    const text = doc();
    for (const splitMin of [1, 7, 64]) taken[agrees(enc.encode(text), splitMin, text)]++;
  }
  // Valid objects are all taken in pieces.
  assert.equal(taken.whole, 0, JSON.stringify(taken));
});

Deno.test("in pieces: a changed byte is refused or read exactly as the whole text reads it", () => {
  const bytesOf = ['"', "\\", "{", "}", "[", "]", ",", ":", " ", "0", "u", "n", "\u0001"];
  const taken = { pieces: 0, whole: 0 };
  for (let i = 0; i < 3000; i++) {
    const b = enc.encode(doc());
    const at = Math.floor(next() * b.length);
    const mutated = next() < 0.5
      ? new Uint8Array([...b.subarray(0, at), pick(bytesOf).charCodeAt(0), ...b.subarray(at + 1)])
      : new Uint8Array([...b.subarray(0, at), pick(bytesOf).charCodeAt(0), ...b.subarray(at)]);
    if (verdict(mutated).error === "request body is not valid UTF-8") continue;
    taken[agrees(mutated, pick([1, 5, 64]), new TextDecoder().decode(mutated))]++;
  }
  assert.ok(taken.pieces > 100 && taken.whole > 100, JSON.stringify(taken));
});

Deno.test("in pieces: named edge cases", () => {
  const cases = [
    `{"messages":[ ],"a":{},"b":[[],[ ]],"c":[{}]}`,
    `{"__proto__":{"x":1},"y":[1,2]}`,
    `\uFEFF{"a":1}`, // a BOM: refused, as by the whole text
    `{"a":1} x`,
    `{"a":1}{"b":2}`,
    `{"a":1,}`,
    `{"a":[1,,2]}`,
    `{"a" 1}`,
    `{"a":1 "b":2}`,
    `{"a":[1:2]}`,
    `{"a":"\\uD83D\\uDE00 pair","b":"\\uD83D lone"}`,
    `{"a":"${"\\\\".repeat(20)}\\u0041${"\\\\".repeat(3)}\\"x"}`,
    `{"a":{"b":{"c":{"d":{"e":{"a":1,"a":2}}}}}}`,
    `{"k\\u0041":1,"kA":2}`,
    `{"a":"${"é😀\\n".repeat(30)}"}`,
    `[{"a":1}]`,
    `{"a":"unterminated}`,
  ];
  for (const c of cases) {
    for (const splitMin of [1, 2, 3, 4, 5, 6, 9, 17]) agrees(enc.encode(c), splitMin, c);
  }
  // A lone surrogate split from its pair by a chunk cut still joins; a lone one is refused.
  const pair = enc.encode(`{"a":"${"x".repeat(9)}\\uD83D\\uDE00${"y".repeat(9)}"}`);
  for (let m = 1; m < 30; m++) assert.equal(agrees(pair, m, "pair"), "pieces");
  assert.throws(() => whole(enc.encode(`{"a":"\\uD83D"}`)), /unpaired/);
  assert.equal(parseInPieces(enc.encode(`{"a":"\\uD83D x"}`), 64, 2, ANY), null);
  // Depth: the same refusal as the whole text.
  const deep = `{"a":${"[".repeat(70)}${"]".repeat(70)}}`;
  assert.throws(() => parseInPieces(enc.encode(deep), 64, 8, ANY), /nesting deeper than 64/);
});

Deno.test("in pieces: a long string is a rope of chunks equal to the whole string", () => {
  const text = 'fn main() {\n\tprintln!("é → 😀\\\\");\n}\n'.repeat(5000);
  const body = enc.encode(
    JSON.stringify({ model: "m", messages: [{ role: "user", content: text }] }),
  );
  assert.ok(body.byteLength >= PIECES_MIN_BYTES);
  const got = parseInPieces(body, 64);
  assert.ok(got !== null);
  const v = got.value as { messages: { content: string }[] };
  assert.equal(v.messages[0].content, text);
  // And parseJsonDocument takes this path for a body this size.
  assert.deepEqual(parseJsonDocument(body).value, JSON.parse(new TextDecoder().decode(body)));
});

Deno.test("in pieces: a rope's UTF-8 length is noted exactly, and found only for the same string", () => {
  const texts = [
    'fn main() {\n\tprintln!("é → 😀\\\\");\n}\n'.repeat(3000),
    "😀".repeat(40_000), // pairs written raw
    "x" + "\uD83D\uDE00".repeat(30_000), // written as escapes below, cut between halves
  ];
  for (const t of texts) {
    const json = JSON.stringify({ messages: [{ role: "user", content: t }, "tail"] })
      .replaceAll("😀", "\\uD83D\\uDE00");
    for (const splitMin of [SPLIT_MIN, 1000, 1001, 1003]) {
      const got = parseInPieces(enc.encode(json), 64, splitMin, ANY);
      assert.ok(got !== null);
      const m = (got.value as { messages: [{ content: string }] }).messages[0];
      assert.equal(m.content, t);
      assert.equal(textBytes(m, "content", m.content), Buffer.byteLength(t, "utf8"), `${splitMin}`);
      assert.equal(textBytes(m, "content", t.slice(1) + "y"), undefined);
      assert.equal(textBytes(m, "role", "user"), undefined);
    }
  }
});

Deno.test("in pieces: a body of many tiny values is declined early and parsed whole", () => {
  const values = `{"a":[${"1,".repeat(100_000)}1],"b":[${"{},".repeat(40_000)}{}]}`;
  const bytes = enc.encode(values);
  assert.equal(parseInPieces(bytes, 64), null);
  assert.deepEqual(parseJsonDocument(bytes).value, JSON.parse(values));
  // A conversation of a few hundred messages is not: each piece is a message.
  const turns = JSON.stringify({
    messages: Array.from(
      { length: 300 },
      (_, i) => ({ role: "user", content: `${i} `.repeat(300) }),
    ),
  });
  assert.ok(parseInPieces(enc.encode(turns), 64) !== null);
});
