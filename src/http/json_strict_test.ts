import assert from "node:assert/strict";
import { surrogateEscape, surrogateEscapeIn } from "./json_strict.ts";

Deno.test("surrogateEscapeIn: the bytes say what the text says, escaped backslashes and all", () => {
  let seed = 41;
  const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const bits = [
    "\\",
    "\\\\",
    "\\uD8",
    "\\ud",
    "\\uDF",
    "\\uD7",
    "u",
    "d",
    "8",
    "b",
    "F",
    "é",
    "😀",
    " ",
  ];
  const enc = new TextEncoder();
  const seen = { yes: 0, no: 0 };
  for (let i = 0; i < 20_000; i++) {
    let t = "";
    for (let n = Math.floor(next() * 12); n > 0; n--) t += bits[Math.floor(next() * bits.length)];
    const expected = surrogateEscape(t);
    assert.equal(surrogateEscapeIn(enc.encode(t)), expected, JSON.stringify(t));
    // A view into a larger buffer reads only its own bytes.
    const padded = enc.encode("\\uD800" + t + "\\");
    assert.equal(surrogateEscapeIn(padded.subarray(6, padded.length - 1)), expected);
    seen[expected ? "yes" : "no"]++;
  }
  assert.ok(seen.yes > 1000 && seen.no > 1000, JSON.stringify(seen));
});
