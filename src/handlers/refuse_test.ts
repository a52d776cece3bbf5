import assert from "node:assert/strict";
import { GatewayError } from "../http/errors.ts";
import { refuse } from "./refuse.ts";
import { fakeState } from "./stages_testing.ts";

Deno.test("refuse: the endpoint's envelope, no receipt before authentication, log facts set", async () => {
  const { s, info } = fakeState();
  s.headers.set("x-receipt-id", "rcpt-x");
  s.headers.set("x-e2ee-applied", "true");
  const res = await refuse(s, new GatewayError("invalid_request", "bad", { param: "model" }));
  assert.equal(res.status, 400);
  assert.equal(res.headers.get("content-type"), "application/json");
  assert.equal(res.headers.get("x-receipt-id"), null);
  assert.equal(res.headers.get("x-e2ee-applied"), null);
  assert.equal(res.headers.get("x-request-id"), "req-1");
  const body = await res.json();
  assert.equal(body.error.param, "model");
  assert.equal(info.refusal, "invalid_request");
  assert.equal(info.receiptId, null);
  assert.equal(typeof info.errorCode, "string");
});

Deno.test("refuse: an unexpected error is internal, logged with the request id", async () => {
  const { s, info, logs } = fakeState();
  const res = await refuse(s, new Error("boom"));
  assert.equal(res.status, 500);
  assert.equal(info.refusal, "internal");
  assert.equal(logs.length, 1);
  assert.equal(logs[0].request_id, "req-1");
});
