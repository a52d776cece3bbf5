import assert from "node:assert/strict";
import { bytesEqual, bytesToHex, hexToBytes } from "./hex.ts";

Deno.test("hexToBytes is strict; bytesToHex is lowercase", () => {
  assert.deepEqual(hexToBytes("00aBff"), Uint8Array.of(0, 0xab, 0xff));
  assert.equal(hexToBytes("abc"), null);
  assert.equal(hexToBytes("zz"), null);
  assert.equal(hexToBytes("0x00"), null);
  assert.equal(bytesToHex(Uint8Array.of(0, 0xab, 0xff)), "00abff");
  assert.equal(bytesEqual(Uint8Array.of(1, 2), Uint8Array.of(1, 2)), true);
  assert.equal(bytesEqual(Uint8Array.of(1, 2), Uint8Array.of(1, 3)), false);
  assert.equal(bytesEqual(Uint8Array.of(1), Uint8Array.of(1, 0)), false);
});
