import assert from "node:assert/strict";
import { bytesToHex, hexToBytes } from "./hex.ts";

Deno.test("bytesToHex: lowercase, every byte value, views at an offset", () => {
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  const hex = bytesToHex(all);
  assert.equal(hex.length, 512);
  assert.match(hex, /^[0-9a-f]+$/);
  assert.equal(hex.slice(0, 6), "000102");
  assert.equal(hex.slice(-4), "feff");
  assert.deepEqual(hexToBytes(hex), all);
  // A view into a larger buffer encodes only its own bytes.
  assert.equal(bytesToHex(all.subarray(250, 253)), "fafbfc");
  assert.equal(bytesToHex(new Uint8Array(0)), "");
});
