import assert from "node:assert/strict";
import o200kRanks from "gpt-tokenizer/bpeRanks/o200k_base";
import cl100kRanks from "gpt-tokenizer/bpeRanks/cl100k_base";
import { CLASS_MAX, CLASSES, classOf, floorExceeds, tokenBounds, utf8Length } from "./bounds.ts";
import { countText } from "./count.ts";
import type { TokenizerName } from "./names.ts";

/** The most bytes of each class one token holds, recomputed from a vocabulary. */
function classMax(ranks: readonly (string | readonly number[])[]): number[] {
  const m = CLASSES.map(() => 0);
  for (const v of ranks) {
    if (v === undefined) continue;
    const c = CLASSES.map(() => 0);
    if (typeof v === "string") {
      for (const ch of v) {
        const cp = ch.codePointAt(0)!;
        c[classOf(cp)] += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
      }
    } else {
      // Partial UTF-8 characters: their non-ASCII bytes may belong to any non-ASCII class.
      let high = 0;
      for (const b of v) b < 0x80 ? c[classOf(b)]++ : high++;
      for (let k = CLASSES.indexOf("han"); k < CLASSES.length; k++) c[k] += high;
    }
    for (let k = 0; k < CLASSES.length; k++) m[k] = Math.max(m[k], c[k]);
  }
  return m;
}

Deno.test("the class maxima are the vocabularies' own", () => {
  assert.deepEqual(CLASS_MAX.o200k_base, classMax(o200kRanks));
  assert.deepEqual(CLASS_MAX.cl100k_base, classMax(cl100kRanks));
});

Deno.test("floor ≤ exact count ≤ ceiling on varied text", () => {
  const samples = [
    "Hello world, this is a test.",
    "a".repeat(5000),
    " ".repeat(3000) + "x",
    "東京は日本の首都です。".repeat(200),
    "中文文本没有空格".repeat(300),
    "한국어 텍스트입니다".repeat(100),
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀😀 ".repeat(100),
    "function f(x) { return x * 2; }\n".repeat(100),
    "0123456789".repeat(300),
    "-=".repeat(2000),
  ];
  for (const tok of ["o200k_base", "cl100k_base"] as TokenizerName[]) {
    for (const s of samples) {
      const b = tokenBounds(s, tok);
      const n = countText(s, tok);
      assert.ok(
        b.floor <= n && n <= b.ceiling,
        `${tok} ${s.slice(0, 20)}: ${b.floor} ≤ ${n} ≤ ${b.ceiling}`,
      );
      assert.equal(b.ceiling, new TextEncoder().encode(s).length);
      assert.equal(utf8Length(s), b.ceiling);
      // The early-stopping check agrees with the floor on each side of it.
      assert.equal(floorExceeds(s, tok, b.floor), false);
      if (b.floor > 0) assert.equal(floorExceeds(s, tok, b.floor - 1), true);
    }
  }
});
