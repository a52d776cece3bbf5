import assert from "node:assert/strict";
import { jcsBytes } from "./jcs.ts";
import { sha256, sha256Prefixed } from "./digest.ts";
import { receiptEntry, receiptEntryOfDigest } from "./log_entry.ts";

Deno.test("a receipt's log entry is the JCS of its kind and digest, byte for byte", () => {
  for (const jcs of ['{"a":1}', '{"api_version":"aci/1","note":"é \\u0000 😀"}', ""]) {
    const expected = jcsBytes({ kind: "receipt", receipt_digest: sha256Prefixed(jcs) });
    assert.deepEqual(receiptEntry(jcs), expected);
    assert.deepEqual(receiptEntryOfDigest(sha256(jcs)), expected);
  }
});
