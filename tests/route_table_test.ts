/**
 * Issue #28: one route table drives the router, the OpenAPI document and
 * the service capabilities. A row added to the table is served by the app,
 * listed in its route table and documented at its /openapi.json, with no
 * other file touched; an operator row gets the operator check.
 */
import assert from "node:assert/strict";
import { startTestGateway, TEST_ADMIN_TOKEN } from "./support/gateway.ts";
import { createApp } from "../src/app/app.ts";
import { ROUTES, routeTable } from "../src/app/routes/table.ts";
import type { RouteRow } from "../src/app/routes/row.ts";

type Json = Record<string, unknown>;

const rows: RouteRow[] = [
  {
    method: "GET",
    path: "/v1/extra/:name",
    handler: (_req, _ctx, p) => new Response(`hello ${p.name}`),
    envelope: "openai",
    auth: "none",
    doc: { summary: "An extra endpoint", tag: "operations", errors: [] },
  },
  {
    method: "GET",
    path: "/admin/v1/extra",
    handler: () => new Response("secret"),
    envelope: "openai",
    auth: "operator",
    action: "extra",
    doc: { summary: "An extra admin endpoint", tag: "admin", errors: [401, 404] },
  },
];

Deno.test("a row added to the route table is routed, listed and documented", async () => {
  const gw = await startTestGateway();
  try {
    const table = routeTable([...ROUTES.filter((r) => r.path !== "/openapi.json"), ...rows]);
    const app = createApp(gw.gateway.ctx, undefined, table);
    const res = await app(new Request("http://gw/v1/extra/world"));
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "hello world");
    assert.equal(res.headers.get("x-aci-version"), "aci/1");
    assert.ok(app.routes().some((r) => r.pattern === "/v1/extra/:name"));

    const doc = await (await app(new Request("http://gw/openapi.json"))).json() as Json;
    const paths = doc.paths as Record<string, Json>;
    assert.ok(paths["/v1/extra/{name}"]?.get);
    assert.deepEqual((paths["/admin/v1/extra"].get as Json).security, [{ operator: [] }]);

    // The operator row is behind the operator check, like every admin route.
    const denied = await app(new Request("http://gw/admin/v1/extra"));
    assert.equal(denied.status, 401);
    await denied.body?.cancel();
    const allowed = await app(
      new Request("http://gw/admin/v1/extra", {
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
      }),
    );
    assert.equal(await allowed.text(), "secret");
  } finally {
    await gw.close();
  }
});
