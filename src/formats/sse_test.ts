import assert from "node:assert/strict";
import { encodeSseData, encodeSseEvent, SseDecoder } from "./sse.ts";
import { GatewayError } from "../http/errors.ts";

Deno.test("encodeSseEvent frames event name and JSON data", () => {
  assert.equal(encodeSseEvent("ping", { type: "ping" }), 'event: ping\ndata: {"type":"ping"}\n\n');
  assert.equal(encodeSseData({ a: 1 }), 'data: {"a":1}\n\n');
});

Deno.test("decoder: events, multi-line data, id, and the [DONE] sentinel as plain data", () => {
  const d = new SseDecoder();
  const evs = d.push(
    'event: a\ndata: {"x":1}\n\ndata: line1\ndata: line2\nid: 7\n\ndata: [DONE]\n\n',
  );
  assert.deepEqual(evs, [
    { event: "a", data: '{"x":1}' },
    { data: "line1\nline2", id: "7" },
    { data: "[DONE]" },
  ]);
  assert.deepEqual(d.end(), []);
});

Deno.test("decoder: comment keep-alives (`: PROCESSING`) are dropped, never surfaced", () => {
  const d = new SseDecoder();
  const evs = d.push(': PROCESSING\n\n: PROCESSING\n\ndata: {"ok":true}\n\n:\n\n');
  assert.deepEqual(evs, [{ data: '{"ok":true}' }]);
});

Deno.test("decoder: CRLF and CR line endings, including a CRLF split across pushes", () => {
  const d = new SseDecoder();
  const out = [
    ...d.push("data: a\r"),
    ...d.push("\n\r\n"),
    ...d.push("data: b\r\rdata: c\n\n"),
  ];
  assert.deepEqual(out, [{ data: "a" }, { data: "b" }, { data: "c" }]);
});

Deno.test("decoder: multi-byte UTF-8 split across byte slices", () => {
  const bytes = new TextEncoder().encode('data: {"t":"héllo 🌍"}\n\n');
  const d = new SseDecoder();
  const out = [];
  for (let i = 0; i < bytes.length; i++) out.push(...d.push(bytes.subarray(i, i + 1)));
  out.push(...d.end());
  assert.deepEqual(out, [{ data: '{"t":"héllo 🌍"}' }]);
});

Deno.test("decoder: leading BOM stripped; field without space; unknown fields ignored", () => {
  const d = new SseDecoder();
  assert.deepEqual(d.push("\uFEFFdata:x\nretry: 10\nfoo: bar\n\n"), [{ data: "x" }]);
});

Deno.test("decoder: a final event without trailing blank line is dispatched at end()", () => {
  const d = new SseDecoder();
  assert.deepEqual(d.push('data: {"last":1}'), []);
  assert.deepEqual(d.end(), [{ data: '{"last":1}' }]);
  assert.deepEqual(d.end(), []);
});

Deno.test("decoder: events without data are not dispatched", () => {
  const d = new SseDecoder();
  assert.deepEqual(d.push("event: lonely\n\n\n\n"), []);
});

Deno.test("decoder: an oversized pending frame is an upstream_error, not unbounded memory", () => {
  const d = new SseDecoder({ maxPendingChars: 32 });
  assert.deepEqual(d.push("data: short\n\n"), [{ data: "short" }]);
  assert.throws(
    () => d.push("data: " + "x".repeat(40)),
    (e: unknown) => e instanceof GatewayError && e.kind === "upstream_error",
  );
  assert.throws(() => new SseDecoder({ maxPendingChars: 0 }), RangeError);
});

Deno.test("decoder: empty data lines count toward the pending limit", () => {
  const d = new SseDecoder({ maxPendingChars: 1_000 });
  assert.throws(() => d.push("data:\n".repeat(2_000)));
});
