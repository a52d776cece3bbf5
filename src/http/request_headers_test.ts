import assert from "node:assert/strict";
import { GatewayError } from "./errors.ts";
import { metadataOf, traceIdOf } from "./request_headers.ts";

const paramOf = (f: () => unknown): string | null => {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof GatewayError);
    return e.param;
  }
  assert.fail("expected a GatewayError");
};

Deno.test("traceIdOf: the client's id, a fresh one when absent, a 400 naming the header when bad", () => {
  const h = (v?: string) => new Headers(v === undefined ? {} : { "x-service-trace-id": v });
  assert.equal(traceIdOf(h("abc-1.2:3/x_y"), () => "fresh"), "abc-1.2:3/x_y");
  assert.equal(traceIdOf(h(), () => "fresh"), "fresh");
  assert.equal(paramOf(() => traceIdOf(h("a b"), () => "fresh")), "x-service-trace-id");
  assert.equal(paramOf(() => traceIdOf(h("x".repeat(129)), () => "fresh")), "x-service-trace-id");
});

Deno.test("metadataOf: a JSON object of at most 2048 bytes, or a 400 naming the header", () => {
  const h = (v?: string) => new Headers(v === undefined ? {} : { "x-service-metadata": v });
  assert.equal(metadataOf(h()), undefined);
  assert.deepEqual(metadataOf(h('{"team":"a"}')), { team: "a" });
  for (const bad of ["[1]", "null", "3", "{", `{"a":"${"x".repeat(2048)}"}`]) {
    assert.equal(paramOf(() => metadataOf(h(bad))), "x-service-metadata", bad);
  }
});
