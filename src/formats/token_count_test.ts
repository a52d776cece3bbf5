import assert from "node:assert/strict";
import { textTokens } from "./token_count.ts";

Deno.test("textTokens is the UTF-8 byte length: an upper bound for byte-level tokenizers", () => {
  assert.equal(textTokens(""), 0);
  assert.equal(textTokens("a a a"), 5);
  assert.equal(textTokens("é"), 2);
  assert.equal(textTokens("日本"), 6);
  assert.equal(textTokens("😀"), 4);
  // Dense text the old chars/4 estimate undercounted: one token per word here.
  const dense = Array.from({ length: 1_000 }, () => "a").join(" ");
  assert.ok(textTokens(dense) >= 1_000);
});
