import assert from "node:assert/strict";
import { anthropicModelPage, toAnthropicModel } from "./anthropic_models.ts";
import { GatewayError } from "../http/errors.ts";

const objs = ["a/1", "a/2", "a/3"].map((id, i) => ({ id, name: `M${i}`, created: 1_767_225_600 }));

Deno.test("anthropic model shape: type, id, display_name, RFC 3339 created_at", () => {
  assert.deepEqual(toAnthropicModel(objs[0]), {
    type: "model",
    id: "a/1",
    display_name: "M0",
    created_at: "2026-01-01T00:00:00Z",
  });
});

Deno.test("anthropic model page: limit, after_id, before_id, has_more", () => {
  const p1 = anthropicModelPage(objs, new URLSearchParams("limit=2"));
  assert.deepEqual(p1.data.map((m) => m.id), ["a/1", "a/2"]);
  assert.equal(p1.has_more, true);
  assert.equal(p1.last_id, "a/2");
  const p2 = anthropicModelPage(objs, new URLSearchParams("limit=2&after_id=a/2"));
  assert.deepEqual(p2.data.map((m) => m.id), ["a/3"]);
  assert.equal(p2.has_more, false);
  const p0 = anthropicModelPage(objs, new URLSearchParams("limit=1&before_id=a/3"));
  assert.deepEqual(p0.data.map((m) => m.id), ["a/2"]);
  assert.equal(p0.has_more, true);
  for (const q of ["limit=0", "limit=x", "after_id=nope", "after_id=a/1&before_id=a/3"]) {
    assert.throws(() => anthropicModelPage(objs, new URLSearchParams(q)), GatewayError, q);
  }
});
