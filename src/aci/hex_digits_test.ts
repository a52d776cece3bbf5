import assert from "node:assert/strict";
import { writeHexDigits, writeLowerHex } from "./hex_digits.ts";
import { bytesToHex } from "./hex.ts";

Deno.test("hex digits: written in place as bytesToHex spells them, and read back by writeLowerHex", () => {
  const src = Uint8Array.from({ length: 40 }, (_, i) => (i * 37 + 5) & 0xff);
  const out = new Uint8Array(70).fill(0x2e);
  writeHexDigits(src, 4, 32, out, 3);
  const text = new TextDecoder().decode(out);
  assert.equal(text.slice(3, 67), bytesToHex(src.subarray(4, 36)));
  assert.equal(text.slice(0, 3) + text.slice(67), "......"); // nothing written outside
  const back = new Uint8Array(32);
  writeLowerHex(text, 3, 32, back, 0);
  assert.deepEqual(back, src.subarray(4, 36));
});
