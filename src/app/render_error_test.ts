import assert from "node:assert/strict";
import { errorBytes, GatewayError } from "../http/errors.ts";
import type { LogLine } from "../handlers/mod.ts";
import type { Exchange } from "./exchange.ts";
import { errorRenderer } from "./render_error.ts";

function exchange(format: "openai" | "anthropic", traceId = "t-1"): Exchange {
  return {
    req: new Request("http://gw/v1/messages", { method: "POST" }),
    url: new URL("http://gw/v1/messages"),
    started: 0,
    format,
    pattern: "/v1/messages",
    info: {
      requestId: "req-9",
      traceId,
      started: 0,
      model: null,
      provider: null,
      usage: undefined,
      metadata: undefined,
      phases: {},
    },
  };
}

Deno.test("renderer: the route's envelope, the error's headers, the trace id, the code for the log", async () => {
  const logs: LogLine[] = [];
  const s = exchange("anthropic");
  const err = new GatewayError("rate_limited", "slow down", { headers: { "retry-after": "3" } });
  const res = errorRenderer((l) => logs.push(l))(s, err);
  assert.equal(res.status, 429);
  assert.equal(res.headers.get("retry-after"), "3");
  assert.equal(res.headers.get("x-service-trace-id"), "t-1");
  assert.equal(res.headers.get("content-type"), "application/json");
  assert.deepEqual(new Uint8Array(await res.arrayBuffer()), errorBytes(err, "anthropic"));
  assert.equal(s.info.errorCode, "rate_limit_exceeded");
  assert.equal(logs.length, 0);
});

Deno.test("renderer: an answered refusal keeps its own envelope and headers: the bytes its receipt bound", async () => {
  const s = exchange("anthropic");
  const first = new GatewayError("invalid_request", "bad", { param: "model" });
  const answered = first.answered(
    "openai",
    { "x-receipt-id": "rcpt-1", "x-request-id": "req-9" },
    first,
  );
  const res = errorRenderer(() => {})(s, answered);
  assert.equal(res.status, 400);
  assert.equal(res.headers.get("x-receipt-id"), "rcpt-1");
  assert.deepEqual(new Uint8Array(await res.arrayBuffer()), errorBytes(first, "openai"));
});

Deno.test("renderer: an internal error is logged once, with the request id and what was first thrown", () => {
  const logs: LogLine[] = [];
  const boom = new Error("boom");
  const answered = new GatewayError("internal", "internal server error").answered(
    "openai",
    {},
    boom,
  );
  const res = errorRenderer((l) => logs.push(l))(exchange("openai"), answered);
  assert.equal(res.status, 500);
  assert.deepEqual(logs, [{ level: "error", request_id: "req-9", error: "Error: boom" }]);
  const plain: LogLine[] = [];
  errorRenderer((l) => plain.push(l))(exchange("openai"), new TypeError("odd"));
  assert.deepEqual(plain, [{ level: "error", request_id: "req-9", error: "TypeError: odd" }]);
});
