import assert from "node:assert/strict";
import { z } from "zod";
import { parseWith } from "./zod_error.ts";
import { zodToBadParam } from "./messages/param_error.ts";
import { GatewayError } from "../http/errors.ts";

const schema = z.object({
  model: z.string(),
  max_tokens: z.number().int().positive().optional(),
  stream: z.boolean().optional(),
  content: z.union([z.string(), z.array(z.object({ text: z.string() }))]).optional(),
});

function messageOf(f: () => unknown): { param: string | null; message: string } {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof GatewayError);
    return { param: e.param, message: e.message };
  }
  throw new Error("expected a 400");
}

Deno.test("a wrong type is not reported as a missing parameter", () => {
  assert.deepEqual(messageOf(() => parseWith(schema, { model: "m", stream: "yes" })), {
    param: "stream",
    message: "invalid 'stream': Invalid input: expected boolean, received string",
  });
  assert.deepEqual(
    messageOf(() => parseWith(schema, { model: "m", max_tokens: 1.5 })).param,
    "max_tokens",
  );
  assert.doesNotMatch(
    messageOf(() => parseWith(schema, { model: "m", max_tokens: 1.5 })).message,
    /missing/,
  );
  // JSON's 1e400 parses to Infinity: a bad value, present.
  assert.doesNotMatch(
    messageOf(() => parseWith(schema, JSON.parse('{"model":"m","max_tokens":1e400}'))).message,
    /missing/,
  );
});

Deno.test("an absent field is reported as missing, also a nested one", () => {
  assert.equal(
    messageOf(() => parseWith(schema, {})).message,
    "missing required parameter 'model'",
  );
  assert.equal(
    messageOf(() => parseWith(schema, { model: "m", content: [{}] })).message,
    "missing required parameter 'content[0].text'",
  );
});

Deno.test("a body that is not an object names the body, not a missing field", () => {
  const r = messageOf(() => parseWith(schema, [1, 2]));
  assert.equal(r.param, "body");
  assert.match(r.message, /^invalid 'body': .*expected object/);
});

Deno.test("unions name the accepted shapes; the messages form prefixes the param", () => {
  const r = messageOf(() => parseWith(schema, { model: "m", content: 5 }));
  assert.equal(r.param, "content");
  assert.match(r.message, /expected string or array/);

  const parsed = schema.safeParse({ max_tokens: "x" });
  assert.ok(!parsed.success);
  const e = zodToBadParam(parsed.error, { max_tokens: "x" });
  assert.equal(e.param, "model");
  assert.equal(e.message, "model: Field required");

  const inner = z.object({ text: z.string() }).safeParse({ text: 3 });
  assert.ok(!inner.success);
  const at = zodToBadParam(inner.error, { text: 3 }, ["input", 2]);
  assert.equal(at.param, "input[2].text");
  assert.match(at.message, /^input\[2\]\.text: .*expected string, received number/);
});
