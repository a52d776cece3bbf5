import assert from "node:assert/strict";
import { Router } from "../http/router.ts";
import { missError } from "./route_miss.ts";

const r = new Router<null>()
  .on("GET", "/v1/models", () => new Response())
  .on("GET", "/v1/aci/receipts/:id", () => new Response())
  .on("DELETE", "/v1/aci/receipts/:id", () => new Response());

function errorOf(method: string, path: string) {
  const m = r.match(method, path);
  assert.ok(m.handler === null, "expected a miss");
  return missError(method, m);
}

Deno.test("a known path with another method is 405 with Allow; an unknown path is 404", () => {
  const e = errorOf("PUT", "/v1/aci/receipts/abc");
  assert.equal(e.status, 405);
  assert.equal(e.kind, "method_not_allowed");
  assert.equal(e.message, "method PUT is not allowed on this path");
  assert.deepEqual(e.headers, { Allow: "GET, DELETE" });
  assert.equal(errorOf("POST", "/v1/aci/receipts/abc").status, 405);

  for (const path of ["/v1/nope", "/v1/models/a", "/", "", "/v1/aci/receipts/%E0%A4%A"]) {
    const nf = errorOf("GET", path);
    assert.equal(nf.status, 404, path);
    assert.equal(nf.kind, "not_found");
    assert.equal(nf.message, "no such endpoint");
  }
});
