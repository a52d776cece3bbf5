import assert from "node:assert/strict";
import { operatorAuth } from "./admin_token.ts";

const TOKEN = "op-" + "x".repeat(40);

Deno.test("operator token: absent means off, weak is refused, check is exact", () => {
  assert.equal(operatorAuth(undefined), null);
  assert.equal(operatorAuth(""), null);
  assert.throws(() => operatorAuth("short"), /at least 32/);
  assert.throws(() => operatorAuth("a b".repeat(20)), /without spaces/);
  const auth = operatorAuth(TOKEN)!;
  assert.equal(auth.check(`Bearer ${TOKEN}`), true);
  assert.equal(auth.check(`bearer  ${TOKEN} `), true);
  assert.equal(auth.check(`Bearer ${TOKEN}x`), false);
  assert.equal(auth.check(`Bearer ${TOKEN.slice(0, -1)}`), false);
  assert.equal(auth.check(TOKEN), false);
  assert.equal(auth.check(null), false);
  assert.equal(auth.check("Bearer "), false);
});
