import assert from "node:assert/strict";
import {
  asGatewayError,
  badParam,
  ERROR_KINDS,
  errorBody,
  errorBytes,
  errorCodeOf,
  type ErrorKind,
  errorResponse,
  GatewayError,
} from "./errors.ts";

Deno.test("errors: every kind has an HTTP error status and both envelopes' types", () => {
  for (const [kind, info] of Object.entries(ERROR_KINDS)) {
    assert.ok(info.status >= 400 && info.status < 600, kind);
    assert.ok(info.type.length > 0 && info.anthropic.length > 0, kind);
    assert.equal(new GatewayError(kind as ErrorKind, "m").status, info.status);
  }
});

Deno.test("errors: the OpenAI envelope carries type, code and the parameter at fault", () => {
  const e = badParam("temperature", "temperature must be between 0 and 2");
  assert.equal(e.status, 400);
  assert.deepEqual(errorBody(e, "openai"), {
    error: {
      message: "temperature must be between 0 and 2",
      type: "invalid_request_error",
      code: null,
      param: "temperature",
    },
  });
  assert.equal(errorCodeOf(e), "invalid_request_error");
  const nf = new GatewayError("not_found", "no such endpoint");
  assert.deepEqual(errorBody(nf, "openai"), {
    error: { message: "no such endpoint", type: "not_found", code: "not_found", param: null },
  });
  assert.equal(errorCodeOf(nf), "not_found");
});

Deno.test("errors: the Anthropic envelope is Anthropic's shape; a 401 also says invalid_api_key", () => {
  const e = new GatewayError("not_found", "no such endpoint");
  assert.deepEqual(errorBody(e, "anthropic"), {
    type: "error",
    error: { type: "not_found_error", message: "no such endpoint" },
  });
  const key = new GatewayError("invalid_api_key", "bad key");
  assert.deepEqual(errorBody(key, "anthropic"), {
    type: "error",
    error: { type: "authentication_error", message: "bad key", code: "invalid_api_key" },
  });
});

Deno.test("errors: headers travel with the error; anything else thrown is an opaque 500", () => {
  const e = new GatewayError("method_not_allowed", "no", { headers: { Allow: "GET" } });
  assert.equal(e.status, 405);
  assert.deepEqual(e.headers, { Allow: "GET" });
  assert.equal(asGatewayError(e), e);
  const internal = asGatewayError(new Error("secret stack detail"));
  assert.equal(internal.kind, "internal");
  assert.equal(internal.status, 500);
  assert.equal(internal.message, "internal server error");
  assert.equal(errorCodeOf(internal), "internal_error");
});

Deno.test("errors: errorBytes is the envelope's JSON, the bytes a response carries", async () => {
  const err = badParam("model", "no such model");
  for (const format of ["openai", "anthropic"] as const) {
    const bytes = errorBytes(err, format);
    assert.equal(new TextDecoder().decode(bytes), JSON.stringify(errorBody(err, format)));
    assert.deepEqual(new Uint8Array(await errorResponse(err, format).arrayBuffer()), bytes);
  }
});

Deno.test("errors: an answered error keeps its kind and cause, and its own envelope and headers win", async () => {
  const first = new GatewayError("rate_limited", "slow down", { headers: { "retry-after": "2" } });
  const answered = first.answered("anthropic", { "retry-after": "2", "x-receipt-id": "r1" }, first);
  assert.equal(answered.kind, "rate_limited");
  assert.equal(answered.cause, first);
  const res = errorResponse(answered, "openai");
  assert.equal(res.status, 429);
  assert.equal(res.headers.get("content-type"), "application/json");
  assert.equal(res.headers.get("x-receipt-id"), "r1");
  assert.equal(res.headers.get("retry-after"), "2");
  assert.deepEqual(new Uint8Array(await res.arrayBuffer()), errorBytes(first, "anthropic"));
});
