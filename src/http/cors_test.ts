import assert from "node:assert/strict";
import { corsPolicy, decorate, isPreflight, preflightResponse } from "./cors.ts";

const pf = (origin: string, method: string, headers = "authorization") =>
  new Request("http://gw/v1/x", {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": method,
      "access-control-request-headers": headers,
    },
  });

Deno.test("cors: policy, preflight grants and response decoration", () => {
  const none = corsPolicy([]);
  const one = corsPolicy(["https://App.example.com"]);
  const any = corsPolicy(["*"]);
  assert.equal(none.allowOrigin("https://app.example.com"), null);
  assert.equal(one.allowOrigin("https://app.example.com"), "https://app.example.com");
  assert.equal(one.allowOrigin("https://app.example.com.evil.net"), null);
  assert.equal(one.allowOrigin("null"), null);
  assert.equal(any.allowOrigin("http://x"), "*");
  assert.equal(any.allowOrigin(null), null);

  assert.equal(isPreflight(pf("https://a", "POST")), true);
  assert.equal(isPreflight(new Request("http://gw/", { method: "OPTIONS" })), false);

  const g = preflightResponse(pf("https://app.example.com", "post"), one, ["POST"]);
  assert.equal(g.status, 204);
  assert.equal(g.headers.get("access-control-allow-methods"), "POST");
  assert.equal(g.headers.get("access-control-allow-headers"), "authorization");
  // Malformed requested headers are not echoed.
  const odd = preflightResponse(pf("https://app.example.com", "POST", "a\u00e9b"), one, ["POST"]);
  assert.equal(odd.headers.get("access-control-allow-headers"), null);
  assert.equal(odd.headers.get("access-control-allow-origin"), "https://app.example.com");

  const res = new Response("x");
  decorate(new Request("http://gw/", { headers: { origin: "https://app.example.com" } }), res, one);
  assert.equal(res.headers.get("access-control-allow-origin"), "https://app.example.com");
  assert.match(res.headers.get("access-control-expose-headers") ?? "", /x-receipt-id/);
  assert.equal(res.headers.get("vary"), "Origin");
  const plain = new Response("x");
  decorate(new Request("http://gw/"), plain, one);
  assert.equal(plain.headers.get("vary"), null, "no Origin, nothing added");
});
