import assert from "node:assert/strict";
import { FaultSlot, validateFault } from "./faults.ts";

Deno.test("a fault applies until cleared, or to the next N matching requests", () => {
  const slot = new FaultSlot();
  assert.equal(slot.take("/v1/models"), null);
  slot.set({ kind: "no_done" });
  assert.equal(slot.take("/a")?.kind, "no_done");
  assert.equal(slot.take("/b")?.kind, "no_done");
  slot.set(null);
  assert.equal(slot.take("/a"), null);

  slot.set({ kind: "status", status: 503, times: 2, path: "/v1/chat/completions" });
  assert.equal(slot.take("/v1/models"), null, "other paths neither match nor consume");
  assert.equal(slot.take("/v1/chat/completions")?.kind, "status");
  assert.equal(slot.take("/v1/chat/completions")?.kind, "status");
  assert.equal(slot.take("/v1/chat/completions"), null);
  assert.equal(slot.current, null);
});

Deno.test("malformed faults are rejected, not clamped", () => {
  assert.throws(() => validateFault({ kind: "status", status: 99 }), RangeError);
  assert.throws(() => validateFault({ kind: "status", status: 503.5 }), RangeError);
  assert.throws(() => validateFault({ kind: "delay", ms: -1 }), RangeError);
  assert.throws(() => validateFault({ kind: "token_delay", ms: Number.NaN }), RangeError);
  assert.throws(() => validateFault({ kind: "reset_mid_stream", afterChunks: -1 }), RangeError);
  assert.throws(() => validateFault({ kind: "hang", times: 0 }), RangeError);
  assert.throws(() => new FaultSlot().set({ kind: "no_done", times: 1.5 }), RangeError);
  validateFault({ kind: "status", status: 429, headers: { "retry-after": "1" }, times: 1 });
});
