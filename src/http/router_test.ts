import assert from "node:assert/strict";
import { type Handler, Router } from "./router.ts";
import { thrownGatewayError } from "../../tests/support/gateway_error.ts";

type Ctx = { calls: string[] };
const h = (name: string): Handler<Ctx> => (_req, ctx, params) => {
  ctx.calls.push(`${name} ${JSON.stringify(params)}`);
  return new Response(name);
};

function table(): Router<Ctx> {
  return new Router<Ctx>()
    .on("GET", "/v1/models", h("list"))
    .on("GET", "/v1/models/:vendor/:model", h("model"))
    .on("POST", "/v1/chat/completions", h("chat"))
    .on("GET", "/v1/aci/receipts/:id", h("receipt"))
    .on("DELETE", "/v1/aci/receipts/:id", h("delete"))
    .on("GET", "/v1/aci/receipts/:id", h("shadowed"));
}

Deno.test("router: literal and captured segments; the pattern (never the raw path) is reported", async () => {
  const r = table();
  const ctx: Ctx = { calls: [] };
  const m = r.match("GET", "/v1/models/acme/big%20model");
  assert.equal(m.pattern, "/v1/models/:vendor/:model");
  assert.deepEqual(m.params, { vendor: "acme", model: "big model" });
  const res = await m.handler(new Request("http://x/"), ctx, m.params);
  assert.equal(await res.text(), "model");
  assert.deepEqual(r.match("GET", "/v1/models").params, {});
  // Empty segments are ignored: a trailing or doubled slash names the same route.
  assert.equal(r.match("GET", "/v1/models/").pattern, "/v1/models");
  assert.equal(r.match("POST", "//v1//chat/completions").pattern, "/v1/chat/completions");
  // The first route registered for a method and path wins.
  const first = r.match("GET", "/v1/aci/receipts/abc");
  await first.handler(new Request("http://x/"), ctx, first.params);
  assert.deepEqual(ctx.calls.at(-1), 'receipt {"id":"abc"}');
});

Deno.test("router: HEAD is served by the GET handler, nothing else is", () => {
  const r = table();
  assert.equal(r.match("HEAD", "/v1/models").pattern, "/v1/models");
  const e = thrownGatewayError(() => r.match("HEAD", "/v1/chat/completions"));
  assert.equal(e.kind, "method_not_allowed");
});

Deno.test("router: a known path with another method is 405 with Allow; an unknown path is 404", () => {
  const r = table();
  const e = thrownGatewayError(() => r.match("PUT", "/v1/aci/receipts/abc"));
  assert.equal(e.status, 405);
  assert.equal(e.message, "method PUT is not allowed on this path");
  // Each method once, in registration order.
  assert.deepEqual(e.headers, { Allow: "GET, DELETE" });
  assert.deepEqual(r.allowedMethods("/v1/aci/receipts/x"), ["GET", "DELETE"]);

  for (const path of ["/v1/nope", "/v1/models/a", "/v1/models/a/b/c", "/", ""]) {
    const nf = thrownGatewayError(() => r.match("GET", path));
    assert.equal(nf.status, 404, path);
    assert.equal(nf.kind, "not_found");
    assert.equal(nf.message, "no such endpoint");
  }
  // Segments are case-sensitive.
  assert.equal(thrownGatewayError(() => r.match("GET", "/V1/models")).status, 404);
  assert.deepEqual(r.allowedMethods("/v1/nope"), []);
});

Deno.test("router: a capture that does not percent-decode does not match (404, not a 500)", () => {
  const r = table();
  const e = thrownGatewayError(() => r.match("GET", "/v1/aci/receipts/%E0%A4%A"));
  assert.equal(e.status, 404);
  // Decoded captures may contain a slash; they are still one segment.
  assert.deepEqual(r.match("GET", "/v1/aci/receipts/a%2Fb").params, { id: "a/b" });
});
