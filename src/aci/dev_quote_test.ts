import assert from "node:assert/strict";
import {
  DEV_QUOTE_LENGTH,
  DEV_QUOTE_MAGIC,
  devQuote,
  isDevQuote,
  parseDevQuote,
} from "./dev_quote.ts";
import { sha256 } from "./digest.ts";

Deno.test("dev quote: magic || slot || sha256(magic || slot), round trip", () => {
  const slot = new Uint8Array(64).map((_, i) => i);
  const q = devQuote(slot);
  assert.equal(q.length, DEV_QUOTE_LENGTH);
  assert.equal(new TextDecoder().decode(q.subarray(0, 19)), DEV_QUOTE_MAGIC);
  assert.deepEqual(q.subarray(19, 83), slot);
  assert.deepEqual(q.subarray(83), sha256(q.subarray(0, 83)));
  assert.ok(isDevQuote(q));
  assert.deepEqual(parseDevQuote(q), slot);
});

Deno.test("dev quote: tampering or truncation is detected", () => {
  const q = devQuote(new Uint8Array(64));
  const t = q.slice();
  t[30] ^= 1;
  assert.throws(() => parseDevQuote(t), /digest/);
  assert.throws(() => parseDevQuote(q.subarray(0, q.length - 1)), /length/);
  assert.ok(!isDevQuote(new Uint8Array(600)));
  assert.throws(() => devQuote(new Uint8Array(32)));
});
