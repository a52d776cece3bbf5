import assert from "node:assert/strict";
import { openResponse } from "./e2ee_response.ts";
import type { AadContext } from "../e2ee/crypto.ts";

const ctx: AadContext = {
  algo: "x25519-aes-256-gcm-hkdf-sha256",
  model: "demo/echo",
  nonce: "00".repeat(32),
  ts: 1,
};
const secret = new Uint8Array(32).fill(7);

Deno.test("openResponse: an error member beside generated text does not switch authentication off", () => {
  for (const error of [null, { message: "x" }, "x"]) {
    const whole = {
      id: "chatcmpl-1",
      error,
      choices: [{ index: 0, message: { role: "assistant", content: "ATTACKER TEXT" } }],
    };
    assert.throws(() => openResponse("chat", whole, false, ctx, secret), /did not authenticate/);
    const chunk = {
      id: "chatcmpl-1",
      error,
      choices: [{ index: 0, delta: { content: " ATTACKER " } }],
    };
    assert.throws(() => openResponse("chat", chunk, true, ctx, secret), /did not authenticate/);
  }
});

Deno.test("openResponse: an error event (plaintext by the spec, nothing generated) passes unopened", () => {
  const body = { error: { message: "upstream failed", type: "upstream_error" } };
  openResponse("chat", body, true, ctx, secret);
  assert.deepEqual(body, { error: { message: "upstream failed", type: "upstream_error" } });
});
