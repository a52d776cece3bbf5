import assert from "node:assert/strict";
import { PreAdmission } from "./pre_admission.ts";
import { GatewayError } from "../http/errors.ts";
import type { KeyRecord } from "./keys.ts";

const key = { key_id: "k1" } as KeyRecord;
const other = { key_id: "k2" } as KeyRecord;

function refusal(remaining: string, retryAfter: string): GatewayError {
  return new GatewayError("rate_limited", "Rate limit exceeded: 60 requests per minute.", {
    headers: {
      "Retry-After": retryAfter,
      "X-RateLimit-Limit": "60",
      "X-RateLimit-Remaining": remaining,
    },
  });
}

Deno.test("pre-admission repeats a requests-per-minute refusal only while it surely holds", () => {
  let now = 1_000_000;
  const pre = new PreAdmission(() => now);
  pre.check(key); // nothing known: no refusal
  pre.note(key, refusal("0", "30"));
  assert.throws(() => pre.check(key), (e: unknown) => {
    assert.ok(e instanceof GatewayError && e.status === 429);
    assert.equal(e.headers["Retry-After"], "30");
    assert.equal(e.headers["X-RateLimit-Remaining"], "0");
    return true;
  });
  pre.check(other); // other keys are untouched
  now += 20_000;
  assert.throws(() => pre.check(key), (e: unknown) => {
    assert.equal((e as GatewayError).headers["Retry-After"], "10");
    return true;
  });
  // Retry-After is rounded up, so the refusal is repeated one second less than it says.
  now += 9_000;
  pre.check(key);
});

Deno.test("pre-admission ignores refusals that a smaller request or a settlement could change", () => {
  const pre = new PreAdmission(() => 0);
  pre.note(key, refusal("5", "30")); // tokens per minute: requests remain
  pre.check(key);
  pre.note(key, new GatewayError("insufficient_credits", "no credits"));
  pre.check(key);
  pre.note(key, refusal("0", "1")); // under two seconds: nothing surely holds
  pre.check(key);
});
