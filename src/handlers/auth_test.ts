import assert from "node:assert/strict";
import { credentialHeader } from "./auth.ts";

Deno.test("credentialHeader: Authorization wins, x-api-key becomes a bearer, none is null", () => {
  assert.equal(credentialHeader(new Headers({ authorization: "Bearer a" })), "Bearer a");
  assert.equal(
    credentialHeader(new Headers({ authorization: "Bearer a", "x-api-key": "b" })),
    "Bearer a",
  );
  assert.equal(credentialHeader(new Headers({ "x-api-key": "b" })), "Bearer b");
  assert.equal(credentialHeader(new Headers()), null);
});
