import assert from "node:assert/strict";
import { responseIdOf, StreamIdFinder } from "./response_id.ts";

Deno.test("responseIdOf: top-level id, then message.id / response.id, else null", () => {
  assert.equal(responseIdOf({ id: "chatcmpl-1", message: { id: "x" } }), "chatcmpl-1");
  assert.equal(responseIdOf({ type: "message_start", message: { id: "msg_a" } }), "msg_a");
  assert.equal(responseIdOf({ type: "response.created", response: { id: "resp_b" } }), "resp_b");
  assert.equal(responseIdOf({ object: "list", data: [] }), null);
  assert.equal(responseIdOf({ id: "" }), null);
  assert.equal(responseIdOf({ id: 7 }), null);
  assert.equal(responseIdOf([{ id: "a" }]), null);
  assert.equal(responseIdOf(null), null);
});

Deno.test("StreamIdFinder: the first id in SSE text split anywhere, then stops", () => {
  const f = new StreamIdFinder();
  f.push('event: message_start\ndata: {"type":"message_st');
  assert.equal(f.id, null);
  f.push('art","message":{"id":"msg_1"}}\n\n');
  assert.equal(f.id, "msg_1");
  f.push('data: {"id":"other"}\n\n');
  assert.equal(f.id, "msg_1");

  const g = new StreamIdFinder();
  g.push("data: [DONE]\n\n");
  assert.equal(g.id, null);
  g.push('data: {"id":"cmpl-2"}\n\n');
  assert.equal(g.id, "cmpl-2");
});
