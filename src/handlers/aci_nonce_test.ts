import assert from "node:assert/strict";
import { GatewayError } from "../http/errors.ts";
import { parseAciNonce } from "./aci_nonce.ts";

const NONCE = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

Deno.test("parseAciNonce accepts only exactly 64 lowercase hex, once", () => {
  assert.equal(parseAciNonce(null), null);
  assert.equal(parseAciNonce([]), null);
  assert.equal(parseAciNonce(NONCE), NONCE);
  assert.equal(parseAciNonce([NONCE]), NONCE);
  const bad = [
    NONCE.slice(1), // 63
    NONCE + "0", // 65
    NONCE.toUpperCase(),
    "g" + NONCE.slice(1),
    "",
    [NONCE, NONCE], // repeated
  ];
  for (const value of bad) {
    assert.throws(() => parseAciNonce(value), (e: unknown) => {
      assert.ok(e instanceof GatewayError);
      assert.equal(e.kind, "invalid_request");
      assert.equal(e.param, "nonce");
      return true;
    });
  }
});
