import assert from "node:assert/strict";
import { type Handler, type Match, type Miss, Router } from "./router.ts";

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

function hit(m: Match<Ctx> | Miss): Match<Ctx> {
  assert.ok(m.handler !== null, "expected a match");
  return m;
}

function miss(m: Match<Ctx> | Miss): Miss {
  assert.ok(m.handler === null, "expected a miss");
  return m;
}

Deno.test("router: literal and captured segments; the pattern (never the raw path) is reported", async () => {
  const r = table();
  const ctx: Ctx = { calls: [] };
  const m = hit(r.match("GET", "/v1/models/acme/big%20model"));
  assert.equal(m.pattern, "/v1/models/:vendor/:model");
  assert.deepEqual(m.params, { vendor: "acme", model: "big model" });
  const res = await m.handler(new Request("http://x/"), ctx, m.params);
  assert.equal(await res.text(), "model");
  assert.deepEqual(hit(r.match("GET", "/v1/models")).params, {});
  // Empty segments are ignored: a trailing or doubled slash names the same route.
  assert.equal(hit(r.match("GET", "/v1/models/")).pattern, "/v1/models");
  assert.equal(hit(r.match("POST", "//v1//chat/completions")).pattern, "/v1/chat/completions");
  // The first route registered for a method and path wins.
  const first = hit(r.match("GET", "/v1/aci/receipts/abc"));
  await first.handler(new Request("http://x/"), ctx, first.params);
  assert.deepEqual(ctx.calls.at(-1), 'receipt {"id":"abc"}');
});

Deno.test("router: HEAD is served by the GET handler, nothing else is", () => {
  const r = table();
  assert.equal(hit(r.match("HEAD", "/v1/models")).pattern, "/v1/models");
  assert.deepEqual(miss(r.match("HEAD", "/v1/chat/completions")).allowed, ["POST"]);
});

Deno.test("router: a known path with another method is a miss naming its methods; an unknown path names none", () => {
  const r = table();
  // Each method once, in registration order.
  assert.deepEqual(miss(r.match("PUT", "/v1/aci/receipts/abc")).allowed, ["GET", "DELETE"]);
  assert.deepEqual(r.allowedMethods("/v1/aci/receipts/x"), ["GET", "DELETE"]);

  for (const path of ["/v1/nope", "/v1/models/a", "/v1/models/a/b/c", "/", ""]) {
    assert.deepEqual(miss(r.match("GET", path)).allowed, [], path);
  }
  // Segments are case-sensitive.
  assert.deepEqual(miss(r.match("GET", "/V1/models")).allowed, []);
  assert.deepEqual(r.allowedMethods("/v1/nope"), []);
});

Deno.test("router: a capture that does not percent-decode does not match (unknown path, not a 500)", () => {
  const r = table();
  assert.deepEqual(miss(r.match("GET", "/v1/aci/receipts/%E0%A4%A")).allowed, []);
  // Decoded captures may contain a slash; they are still one segment.
  assert.deepEqual(hit(r.match("GET", "/v1/aci/receipts/a%2Fb")).params, { id: "a/b" });
});
