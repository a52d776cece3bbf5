import assert from "node:assert/strict";
import { leaseSlice } from "./leases.ts";

Deno.test("leaseSlice: the workers of a host each take a part, together at most one sole slice", () => {
  const rem = { req: 10_000, tok: 10_000_000, credit: 10_000_000n };
  const sole = leaseSlice(rem, 100, 1_000n, 64)!;
  assert.deepEqual(sole, { req: 64, tok: 6_400, credit: 64_000n });
  const part = leaseSlice(rem, 100, 1_000n, 64, 4)!;
  assert.deepEqual(part, { req: 16, tok: 1_600, credit: 16_000n });
  // Near a limit: an eighth of what is left, split four ways.
  const near = { req: 160, tok: 10_000_000, credit: 10_000_000n };
  assert.equal(leaseSlice(near, 100, 1_000n, 64)!.req, 20);
  assert.equal(leaseSlice(near, 100, 1_000n, 64, 4)!.req, 5);
  // A part that would hold fewer than two requests is no lease at all.
  assert.equal(leaseSlice({ ...near, req: 60 }, 100, 1_000n, 64, 4), null);
  assert.equal(leaseSlice(rem, 100, 1_000n, 64, 64), null);
});
