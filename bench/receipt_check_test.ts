import { strict as assert } from "node:assert";
import { receiptVerdict } from "./receipt_check.ts";

Deno.test("receipt check: equal counts and none missing is the only pass", () => {
  assert.match(receiptVerdict(2796, 2796, 0, 2500), /^every response has its receipt/);
  // A 200 whose receipt is not in the store is a defect, whatever the counts say.
  assert.match(receiptVerdict(2796, 2796, 1, 2500), /^\*\*MISMATCH\*\*: 1 of 2500/);
  // More receipts than answers counted: some client of the run was not counted.
  assert.equal(
    receiptVerdict(2796, 2681, 0, 2500),
    "**MISMATCH**: 115 receipts more than answers counted (all 2500 checked 200s have theirs)",
  );
});
