import assert from "node:assert/strict";
import { PreAdmission } from "./pre_admission.ts";
import { GatewayError } from "../http/errors.ts";
import type { KeyRecord } from "../keys/keys.ts";

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

Deno.test("pre-admission: a key that cannot pay is refused, the verdict is shared and reused for a second", async () => {
  let now = 0;
  let reads = 0;
  let pays = false;
  const pre = new PreAdmission(() => now, {
    mayPay: () => {
      reads++;
      return Promise.resolve(pays);
    },
  });
  const refused = (e: unknown) => e instanceof GatewayError && e.status === 403;
  await assert.rejects(pre.admissible(key), refused);
  await assert.rejects(pre.admissible(key), refused);
  assert.equal(reads, 1, "one read for both");
  pays = true; // topped up elsewhere: seen once the verdict is a second old
  now += 999;
  await assert.rejects(pre.admissible(key), refused);
  now += 1;
  await pre.admissible(key);
  assert.equal(reads, 2);
  // A credit refusal from admission is the verdict too.
  pre.note(key, new GatewayError("insufficient_credits", "no credits"), false);
  await assert.rejects(pre.admissible(key), refused);
});

Deno.test("pre-admission: refusals fill a per-key bucket of the key's requests per minute", async () => {
  let now = 0;
  const tiers = {
    free: { rpm: 3, tpm: 1000 },
    pro: { rpm: 600, tpm: 1000 },
    enterprise: { rpm: 6000, tpm: 1000 },
  };
  const free = { key_id: "f", tier: "free" } as KeyRecord;
  const pre = new PreAdmission(() => now, { tiers });
  const bad = new GatewayError("invalid_request", "bad");
  for (let i = 0; i < 3; i++) {
    await pre.admissible(free);
    pre.note(free, bad);
  }
  await assert.rejects(pre.admissible(free), (e: unknown) => {
    assert.ok(e instanceof GatewayError && e.status === 429);
    assert.equal(e.headers["X-RateLimit-Remaining"], "0");
    assert.equal(e.message, "Rate limit exceeded: 3 requests per minute.");
    return true;
  });
  await pre.admissible({ ...free, key_id: "other" } as KeyRecord); // other keys untouched
  now += 20_000; // a third of a minute drains one request
  await pre.admissible(free);
  // count_tokens: charged whether or not it is refused.
  pre.charge(free);
  assert.throws(() => pre.charge(free), (e: unknown) => (e as GatewayError).status === 429);
});
