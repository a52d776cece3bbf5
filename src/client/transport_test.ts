import assert from "node:assert/strict";
import { fetchTransport } from "./transport.ts";

Deno.test("fetchTransport: redirects are handed back, never followed (a prompt goes nowhere else)", async () => {
  const seen: RequestInit[] = [];
  const t = fetchTransport((_i, o) => {
    seen.push(o ?? {});
    return Promise.resolve(new Response(null, { status: 307, headers: { location: "http://x/" } }));
  });
  const res = await t.send(
    new URL("https://gw.example/v1/messages"),
    { method: "POST", headers: new Headers(), body: new TextEncoder().encode("{}") },
    () => Promise.resolve(),
  );
  assert.equal(res.status, 307);
  assert.equal(seen[0].redirect, "manual");
});
