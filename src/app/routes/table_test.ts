/**
 * The route table is the one list of endpoints: each row is one OpenAPI
 * operation and the inference rows are the service capabilities, E2EE's
 * endpoints among them. (tests/route_table_test.ts: a row added to the table
 * is routed and documented by the running app.)
 */
import assert from "node:assert/strict";
import { E2EE_ENDPOINTS } from "../../e2ee/fields.ts";
import { capabilitiesOf, envelopeOf, operationsOf, type RouteRow } from "./row.ts";
import { ROUTES, routeTable, SERVICE_CAPABILITIES } from "./table.ts";

const keyOf = (r: RouteRow) => `${r.method} ${r.path}`;

Deno.test("route table: one row per method and path, each an OpenAPI operation", () => {
  const keys = ROUTES.map(keyOf);
  assert.equal(new Set(keys).size, keys.length, "a method and path appear once");
  assert.deepEqual(operationsOf(ROUTES).map(([k]) => k), keys);
  assert.ok(keys.includes("GET /openapi.json"));
  for (const [key, op] of operationsOf(ROUTES)) {
    const row = ROUTES.find((r) => keyOf(r) === key)!;
    assert.equal(op.auth, row.auth, key);
    assert.equal(op.anthropic === true, envelopeOf(row) === "anthropic", key);
    assert.equal(op.inference === true, row.inference !== undefined, key);
  }
});

Deno.test("route table: inference rows are the pipeline's endpoints and the capabilities", () => {
  const inference = ROUTES.filter((r) => r.inference);
  for (const r of inference) {
    assert.equal(r.method, "POST");
    assert.equal(r.path, r.inference?.endpoint);
  }
  assert.deepEqual(SERVICE_CAPABILITIES.endpoints, inference.map((r) => r.path));
  assert.deepEqual(SERVICE_CAPABILITIES.endpoints, [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/messages",
    "/v1/responses",
  ]);
  assert.deepEqual(SERVICE_CAPABILITIES.formats, [
    "openai.chat_completions",
    "openai.completions",
    "openai.embeddings",
    "anthropic.messages",
    "openai.responses",
  ]);
  // E2EE v2's field table (shared with the client, so not derived) names only inference rows.
  for (const path of Object.keys(E2EE_ENDPOINTS)) {
    assert.ok(inference.some((r) => r.path === path), path);
  }
});

Deno.test("route table: operator rows name their audit action; the Anthropic envelope is the Messages routes'", () => {
  for (const r of ROUTES) {
    if (r.auth === "operator") assert.ok(r.action, keyOf(r));
    assert.equal(r.auth === "operator", r.path.startsWith("/admin/"), keyOf(r));
  }
  assert.deepEqual(
    ROUTES.filter((r) => envelopeOf(r) === "anthropic").map(keyOf),
    ["POST /v1/messages", "POST /v1/messages/count_tokens"],
  );
});

Deno.test("route table: a row added is in the document and, for inference, in the capabilities", async () => {
  const extra: RouteRow = {
    method: "POST",
    path: "/v1/extra",
    inference: {
      endpoint: "/v1/extra",
      errorFormat: "openai",
      plan: () => {
        throw new Error("not planned in this test");
      },
    },
    format: "openai.extra",
    auth: "key",
    doc: { summary: "An extra endpoint", tag: "inference", errors: [400] },
  };
  const table = routeTable([...ROUTES.filter((r) => r.path !== "/openapi.json"), extra]);
  assert.ok(capabilitiesOf(table).endpoints.includes("/v1/extra"));
  assert.ok(capabilitiesOf(table).formats.includes("openai.extra"));
  const docRow = table.find((r) => r.path === "/openapi.json");
  assert.ok(docRow?.handler);
  const res = await docRow.handler(new Request("http://gw/openapi.json"), null as never, {});
  const doc = await res.json() as { paths: Record<string, Record<string, unknown>> };
  assert.ok(doc.paths["/v1/extra"]?.post);
  assert.equal(Object.keys(doc.paths).length, new Set(table.map((r) => r.path)).size);
});
