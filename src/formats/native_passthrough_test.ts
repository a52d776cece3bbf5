import assert from "node:assert/strict";
import { nativeBody } from "./native_passthrough.ts";

Deno.test("nativeBody: the candidate's model, no provider block, defaults only where absent", () => {
  const body = { model: "alias", provider: { order: ["p"] }, input: "hi", max_output_tokens: 5 };
  assert.deepEqual(
    JSON.parse(JSON.stringify(nativeBody(body, "upstream-m", { max_output_tokens: 9 }))),
    { model: "upstream-m", input: "hi", max_output_tokens: 5 },
  );
  assert.deepEqual(
    JSON.parse(
      JSON.stringify(nativeBody({ model: "a", input: "x" }, "u", { max_output_tokens: 9 })),
    ),
    { model: "u", input: "x", max_output_tokens: 9 },
  );
});
