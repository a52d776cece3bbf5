import assert from "node:assert/strict";
import { jcsBytes } from "./jcs.ts";
import { sha256, sha256Prefixed } from "./digest.ts";
import { receiptEntry, receiptEntryOfDigest, receiptLeafHash } from "./log_entry.ts";
import { leafHash } from "./merkle.ts";
import { bytesToHex } from "./hex.ts";

Deno.test("a receipt's log entry is the JCS of its kind and digest, byte for byte", () => {
  for (const jcs of ['{"a":1}', '{"api_version":"aci/1","note":"é \\u0000 😀"}', ""]) {
    const expected = jcsBytes({ kind: "receipt", receipt_digest: sha256Prefixed(jcs) });
    assert.deepEqual(receiptEntry(jcs), expected);
    assert.deepEqual(receiptEntryOfDigest(sha256(jcs)), expected);
  }
});

Deno.test("a receipt's leaf hash from its digest is the leaf hash of its entry, call after call", () => {
  const digests = ["", "a", '{"x":1}', "é😀"].map((t) => sha256(t));
  digests.push(new Uint8Array(32), new Uint8Array(32).fill(0xff));
  const got = digests.map((d) => bytesToHex(receiptLeafHash(d)));
  digests.forEach((d, i) => assert.equal(got[i], bytesToHex(leafHash(receiptEntryOfDigest(d)))));
});
