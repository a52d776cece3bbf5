/**
 * OpenAPI 3.1 at /openapi.json (issue #17 item 5): served by the real
 * gateway, valid for a maintained OpenAPI validator, documenting every route
 * of the route table and nothing else, with request bodies generated from
 * the zod schemas that validate them.
 */
import assert from "node:assert/strict";
import { compileErrors, validate } from "@readme/openapi-parser";
import { z } from "zod";
import { startTestGateway } from "./support/gateway.ts";
import { chatRequestSchema } from "../src/formats/chat/request.ts";
import { MessagesRequestSchema } from "../src/formats/messages/schema.ts";
import { OwnKeySchema } from "../src/admission/key_views.ts";

type Json = Record<string, unknown>;

Deno.test("/openapi.json: valid OpenAPI 3.1, every route documented and nothing else", async () => {
  const gw = await startTestGateway();
  try {
    const res = await fetch(`${gw.url}/openapi.json`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /application\/json/);
    const doc = await res.json() as Json;
    assert.equal(doc.openapi, "3.1.0");

    // A maintained validator (structure against the 3.1 schema, plus its own rules).
    const result = await validate(structuredClone(doc) as never);
    assert.ok(result.valid, result.valid ? "" : compileErrors(result));
    // …which does reject a broken document (a path parameter not declared).
    const broken = structuredClone(doc) as Json;
    const p = (broken.paths as Record<string, Json>)["/v1/aci/receipts/{id}"].get as Json;
    delete p.parameters;
    assert.equal((await validate(broken as never)).valid, false);

    // The route table, as OpenAPI paths, equals the documented operations.
    const table = gw.gateway.handler.routes()
      .map((r) => `${r.method.toLowerCase()} ${r.pattern.replace(/:([a-z_]+)/g, "{$1}")}`)
      .sort();
    const paths = doc.paths as Record<string, Json>;
    const documented = Object.entries(paths)
      .flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m} ${p}`))
      .sort();
    assert.deepEqual(documented, table);
    assert.ok(table.length >= 25);

    // Request bodies are the zod schemas' JSON Schema.
    const body = (p: string) =>
      ((((paths[p].post as Json).requestBody as Json).content as Json)["application/json"] as Json)
        .schema;
    const gen = (s: z.ZodType) => {
      const j = z.toJSONSchema(s, { target: "draft-2020-12", io: "input", unrepresentable: "any" });
      delete (j as Json).$schema;
      return j;
    };
    assert.deepEqual(body("/v1/chat/completions"), gen(chatRequestSchema));
    assert.deepEqual(body("/v1/messages"), gen(MessagesRequestSchema));
    // …and the key holder's own key, every figure of it (balance, reserved, available, …).
    const keyOk = ((paths["/v1/key"].get as Json).responses as Json)["200"] as Json;
    assert.deepEqual(
      ((keyOk.content as Json)["application/json"] as Json).schema,
      gen(OwnKeySchema),
    );

    // Errors and headers: inference answers document the receipt and rate-limit headers,
    // the Anthropic route its own envelope.
    const chat = paths["/v1/chat/completions"].post as Json;
    const ok = (chat.responses as Json)["200"] as Json;
    for (
      const h of ["x-receipt-id", "x-aci-keyset-digest", "server-timing", "x-ratelimit-remaining"]
    ) {
      assert.ok(h in (ok.headers as Json), h);
    }
    assert.ok("text/event-stream" in (ok.content as Json));
    const responses = chat.responses as Json;
    for (const s of ["400", "401", "403", "429", "502", "503"]) assert.ok(s in responses, s);
    const msg429 = ((paths["/v1/messages"].post as Json).responses as Json)["429"] as Json;
    assert.equal(
      ((msg429.content as Json)["application/json"] as Json).schema &&
        (((msg429.content as Json)["application/json"] as Json).schema as Json).$ref,
      "#/components/schemas/AnthropicError",
    );
    // Admin operations need the operator token; /healthz may be called without.
    assert.deepEqual((paths["/admin/v1/keys"].get as Json).security, [{ operator: [] }]);
  } finally {
    await gw.close();
  }
});

Deno.test("a route added to the table without documentation is caught", async () => {
  const { createApp } = await import("../src/app/app.ts");
  const gw = await startTestGateway();
  try {
    const handler = createApp(gw.gateway.ctx, (router) => {
      router.on("GET", "/v1/undocumented", () => new Response("x"));
    });
    const doc = await (await handler(new Request("http://gw/openapi.json"))).json() as Json;
    const documented = new Set(Object.keys(doc.paths as Json));
    const missing = handler.routes()
      .map((r) => r.pattern.replace(/:([a-z_]+)/g, "{$1}"))
      .filter((p) => !documented.has(p));
    assert.deepEqual(missing, ["/v1/undocumented"]);
  } finally {
    await gw.close();
  }
});
