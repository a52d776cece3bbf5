import assert from "node:assert/strict";
import { createLogBuffer } from "./log_buffer.ts";

Deno.test("log buffer: lines of one turn go out in one write, stamped with the clock", () => {
  const writes: string[] = [];
  const deferred: (() => void)[] = [];
  const buf = createLogBuffer({
    // A short writer: at most 10 bytes a call, as a pipe may take.
    writeSync: (b) => {
      writes.push(new TextDecoder().decode(b.subarray(0, 10)));
      return Math.min(10, b.length);
    },
    now: () => Date.UTC(2026, 0, 1),
    defer: (f) => deferred.push(f),
  });
  buf.log({ event: "a" });
  buf.log({ event: "b" });
  assert.equal(deferred.length, 1, "one flush per turn");
  assert.equal(writes.length, 0);
  deferred[0]();
  assert.equal(
    writes.join(""),
    '{"ts":"2026-01-01T00:00:00.000Z","event":"a"}\n{"ts":"2026-01-01T00:00:00.000Z","event":"b"}\n',
  );
  buf.flush();
  assert.equal(writes.join("").split("\n").length, 3, "nothing written twice");
});

Deno.test("log buffer: a failing writer drops the lines and does not throw", () => {
  const buf = createLogBuffer({
    writeSync: () => {
      throw new Error("closed");
    },
    now: () => 0,
    defer: () => deferrals++,
  });
  let deferrals = 0;
  buf.log({ event: "x" });
  buf.flush();
  buf.log({ event: "y" });
  assert.equal(deferrals, 2, "the dropped line left the buffer empty");
});
