import assert from "node:assert/strict";
import { errorResponse, GatewayError } from "../http/errors.ts";
import { refuse } from "./refuse.ts";
import { fakeState } from "./stages_testing.ts";

/** What refuse rethrows, rendered as the app renders it (app/render_error.ts). */
async function refused(s: Parameters<typeof refuse>[0], e: unknown): Promise<Response> {
  try {
    await refuse(s, e);
  } catch (thrown) {
    assert.ok(thrown instanceof GatewayError, "refuse rethrows a GatewayError");
    assert.equal(thrown.envelope, s.ep.errorFormat, "its envelope fixed: the endpoint's");
    assert.equal(thrown.cause, e, "what was thrown is its cause");
    // The route's envelope is ignored for an answered refusal: the receipt bound the other one.
    return errorResponse(thrown, s.ep.errorFormat === "openai" ? "anthropic" : "openai");
  }
  throw new Error("refuse returned");
}

Deno.test("refuse: the endpoint's envelope, no receipt before authentication, log facts set", async () => {
  const { s, info } = fakeState();
  s.headers.set("x-receipt-id", "rcpt-x");
  s.headers.set("x-e2ee-applied", "true");
  const res = await refused(s, new GatewayError("invalid_request", "bad", { param: "model" }));
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

Deno.test("refuse: an unexpected error is internal; the renderer logs it, refuse does not", async () => {
  const { s, info, logs } = fakeState();
  const boom = new Error("boom");
  const res = await refused(s, boom);
  assert.equal(res.status, 500);
  assert.equal(info.refusal, "internal");
  assert.equal(logs.length, 0, "logged once, by the app's renderer");
});
