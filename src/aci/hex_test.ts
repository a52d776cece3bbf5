import assert from "node:assert/strict";
import { bytesEqual, bytesToHex, hexToBytes, parseHex } from "./hex.ts";

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

Deno.test("parseHex is strict and says null; hexToBytes throws; bytesEqual compares", () => {
  assert.deepEqual(parseHex("00aBff"), Uint8Array.of(0, 0xab, 0xff));
  for (const bad of ["abc", "zz", "0x00", "0g"]) {
    assert.equal(parseHex(bad), null, bad);
    assert.throws(() => hexToBytes(bad), /invalid hex string/, bad);
  }
  assert.equal(bytesEqual(Uint8Array.of(1, 2), Uint8Array.of(1, 2)), true);
  assert.equal(bytesEqual(Uint8Array.of(1, 2), Uint8Array.of(1, 3)), false);
  assert.equal(bytesEqual(Uint8Array.of(1), Uint8Array.of(1, 0)), false);
});
