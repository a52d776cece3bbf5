import assert from "node:assert/strict";
import { BodyHasher, sha256, sha256Hex, sha256Parts, sha256Prefixed } from "./digest.ts";
import { bytesToHex } from "./hex.ts";

const ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

Deno.test("digest: sha256 of string and bytes agree with the FIPS 180 'abc' vector", () => {
  assert.equal(sha256Hex("abc"), ABC);
  assert.equal(sha256Hex(new TextEncoder().encode("abc")), ABC);
  assert.equal(sha256Prefixed("abc"), "sha256:" + ABC);
  assert.equal(sha256("abc").length, 32);
});

Deno.test("digest: BodyHasher over chunks equals the hash of the whole body", () => {
  const body = new TextEncoder().encode('data: {"a":1}\n\ndata: [DONE]\n\n');
  const h = new BodyHasher();
  for (let i = 0; i < body.length; i += 5) h.update(body.subarray(i, i + 5));
  assert.equal(h.byteCount, body.length);
  assert.equal(h.digest(), sha256Prefixed(body));
  assert.equal(h.digest(), sha256Prefixed(body), "digest is repeatable");
  assert.throws(() => h.update(new Uint8Array([1])));
});

Deno.test("digest: BodyHasher of nothing is the empty-string hash", () => {
  const h = new BodyHasher();
  assert.equal(h.byteCount, 0);
  assert.equal(
    h.digest(),
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
  );
});

Deno.test("digest: sha256 and sha256Parts give the raw hash; parts hash as one concatenation", () => {
  assert.equal(bytesToHex(sha256("abc")), ABC);
  const enc = new TextEncoder();
  assert.equal(bytesToHex(sha256Parts([enc.encode("a"), enc.encode(""), enc.encode("bc")])), ABC);
  // Views into a shared slab: later hashes (past a slab's end too) never change earlier ones.
  const made = Array.from(
    { length: 300 },
    (_, i) => [i, sha256Parts([enc.encode(String(i))])] as const,
  );
  for (const [i, h] of made) {
    assert.equal(h.length, 32);
    assert.equal(bytesToHex(h), sha256Hex(String(i)));
  }
});

Deno.test("digest: sha256Parts over views, strings and parts past the scratch buffer is the hash of their concatenation", () => {
  const enc = new TextEncoder();
  const bytes = new Uint8Array(3000).map((_, i) => (i * 7) % 256);
  const cases: (Uint8Array | string)[][] = [
    [bytes.subarray(5, 70)], // one view, not from offset 0
    [new Uint8Array([1]), bytes.subarray(10, 42), bytes.subarray(100, 132)], // a node's shape
    [bytes.subarray(0, 600), bytes.subarray(600, 1100)], // past the 1 KiB scratch
    ["é😀", bytes.subarray(3, 9)], // a string among bytes
    [new Uint8Array(0), new Uint8Array(0)],
  ];
  for (const parts of cases) {
    const whole = new Uint8Array(
      parts.flatMap((p) => [...(typeof p === "string" ? enc.encode(p) : p)]),
    );
    assert.equal(bytesToHex(sha256Parts(parts)), sha256Hex(whole));
  }
  // The scratch is reused: a longer input first must not leak into a shorter one after it.
  const long = sha256Parts([bytes.subarray(0, 500), bytes.subarray(500, 1000)]).slice();
  const short = sha256Parts([bytes.subarray(0, 1), bytes.subarray(1, 2)]);
  assert.equal(bytesToHex(short), sha256Hex(bytes.subarray(0, 2)));
  assert.equal(bytesToHex(long), sha256Hex(bytes.subarray(0, 1000)));
});
