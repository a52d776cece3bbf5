import assert from "node:assert/strict";
import { attemptSpan } from "./trace.ts";

Deno.test("attempt spans: without OpenTelemetry every attempt shares one no-op, which injects nothing", () => {
  const a = attemptSpan("http://127.0.0.1:1/v1/chat/completions", {
    "gateway.upstream.provider": "p",
  });
  const b = attemptSpan("https://upstream.example/v1/messages", {});
  assert.equal(a, b, "no span, no URL parse, no context per attempt");
  const headers: Record<string, string> = {};
  a.inject(headers);
  assert.deepEqual(headers, {});
  assert.equal(a.run(() => 42), 42);
  a.end(200);
});
