/**
 * The key figures under quota leases (issue #17 wart): after one request on a
 * fresh key, `GET /v1/key`, the admin API and `keys show` say one request
 * used and the exact credits spent, and show the lease the gateway took as
 * reserved (not as used or spent); once the lease is handed back, reserved is
 * 0 and the balance is exact. The gateway's clocks are fake so that the lease
 * lives exactly until the test lets it expire.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from "./support/gateway.ts";
import { fakeClock } from "./support/fake_clock.ts";
import { formatCredits, NANO_PER_CREDIT, parseCredits } from "../src/admission/credits.ts";
import { KeyDetailSchema, type OwnKey, OwnKeySchema } from "../src/admission/key_views.ts";
import { LEASE_LIFETIME_MS } from "../src/admission/leases.ts";
import { runKeys } from "../src/cli/keys.ts";
import { DEFAULT_TIERS } from "../src/admission/rate_limit.ts";

async function ownKey(gw: TestGateway, key: string): Promise<OwnKey> {
  const res = await fetch(`${gw.url}/v1/key`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(res.status, 200);
  // The answer has the documented shape (the OpenAPI document is generated from this schema).
  return OwnKeySchema.parse(await res.json());
}

/** Nano-credits per token of demo/echo, from the public catalog. */
async function prices(gw: TestGateway): Promise<{ prompt: bigint; completion: bigint }> {
  const m = await (await fetch(`${gw.baseURL}/models/demo/echo`)).json() as {
    pricing: { prompt: string; completion: string };
  };
  return { prompt: parseCredits(m.pricing.prompt), completion: parseCredits(m.pricing.completion) };
}

Deno.test("one request with a quota lease: 1 request used, the exact spend, the lease reserved, then returned", async () => {
  const wall = fakeClock(); // frozen: the rate buckets do not drain during the test
  const mono = fakeClock(0); // frozen: the lease neither idles nor ages until advanced
  const gw = await startTestGateway({ now: wall.now, monotonic: mono.now });
  try {
    const key = await gw.newKey({ tier: "pro", credits: 10 }); // 600 rpm
    const given = 10n * NANO_PER_CREDIT;
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: key, maxRetries: 0 });
    const MAX = 16;
    const res = await client.chat.completions.create({
      model: "demo/echo",
      max_tokens: MAX,
      messages: [{ role: "user", content: "how much did this cost" }],
    });
    const p = await prices(gw);
    const u = res.usage!;
    const spent = BigInt(u.prompt_tokens) * p.prompt + BigInt(u.completion_tokens) * p.completion;
    assert.ok(spent > 0n);

    const k = (await ownKey(gw, key)).data;
    assert.equal(k.usage.requests, 1);
    assert.equal(k.spent, formatCredits(spent));
    assert.equal(k.balance, formatCredits(given - spent), "given − spent, nothing else");
    // The lease the first admission took: 64 requests' worth (600 rpm / 8 > 64), each sized
    // as this request's reservation (its prompt estimate + max_tokens, at the model's prices).
    const r = k.rate_limit;
    assert.equal(r.requests_used, 1, "the request made, not the lease slice");
    assert.equal(r.requests_reserved, 64);
    assert.equal(r.requests_remaining, 600 - 1 - 64);
    assert.equal(r.tokens_reserved % 64, 0);
    const estPrompt = BigInt(r.tokens_reserved / 64 - MAX);
    assert.ok(estPrompt > 0n);
    const reserved = 64n * (estPrompt * p.prompt + BigInt(MAX) * p.completion);
    assert.equal(k.reserved, formatCredits(reserved), "the slice: 64 reservations");
    assert.equal(k.available, formatCredits(given - spent - reserved));
    assert.equal(r.tokens_used, u.prompt_tokens + u.completion_tokens, "settled to real use");

    // The same figures on the admin API and in `keys show`.
    const shown = await fetch(`${gw.url}/admin/v1/keys/${k.key_id}`, {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    const d = KeyDetailSchema.parse(await shown.json());
    assert.deepEqual(
      [d.balance, d.reserved, d.available, d.usage.spent],
      [k.balance, k.reserved, k.available, k.spent],
    );
    assert.deepEqual(
      [d.rate_limit.requests, d.rate_limit.requests_reserved, d.rate_limit.tokens_reserved],
      [1, 64, r.tokens_reserved],
    );
    const lines: string[] = [];
    const code = await runKeys(["show", k.key_id], {
      kv: gw.kv,
      print: (l) => lines.push(l),
      now: wall.now,
      tiers: DEFAULT_TIERS,
    });
    assert.equal(code, 0);
    for (
      const l of [`balance: ${k.balance}`, `reserved: ${k.reserved}`, `available: ${k.available}`]
    ) {
      assert.ok(lines.includes(l), `keys show prints ${l}`);
    }
    assert.ok(lines.some((l) => l.startsWith("rate buckets: requests=1/600 ")));

    // The lease expires: the gateway's sweep hands it back (on its own timer).
    mono.advance(LEASE_LIFETIME_MS);
    let after = (await ownKey(gw, key)).data;
    const deadline = Date.now() + 30_000;
    while (after.reserved !== "0" && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 25));
      after = (await ownKey(gw, key)).data;
    }
    assert.equal(after.reserved, "0", "the lease was handed back");
    assert.equal(after.balance, formatCredits(given - spent));
    assert.equal(after.available, after.balance);
    assert.equal(after.spent, formatCredits(spent));
    assert.deepEqual(
      [after.rate_limit.requests_used, after.rate_limit.requests_reserved],
      [1, 0],
    );
    assert.equal(after.rate_limit.tokens_used, r.tokens_used);
    assert.equal(after.rate_limit.tokens_reserved, 0);
    assert.equal(after.rate_limit.requests_remaining, 599);
  } finally {
    await gw.close();
  }
});

Deno.test("a gateway stopped cleanly hands its lease back: keys show on its store reads reserved 0", async () => {
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/gw.kv`;
  const wall = fakeClock();
  try {
    const gw = await startTestGateway({ kvPath, now: wall.now, monotonic: fakeClock(0).now });
    let keyId: string, spent: bigint, reservedLive: string;
    try {
      const key = await gw.newKey({ tier: "pro", credits: 10 });
      const client = new OpenAI({ baseURL: gw.baseURL, apiKey: key, maxRetries: 0 });
      const res = await client.chat.completions.create({
        model: "demo/echo",
        messages: [{ role: "user", content: "and then the gateway stops" }],
      });
      const p = await prices(gw);
      spent = BigInt(res.usage!.prompt_tokens) * p.prompt +
        BigInt(res.usage!.completion_tokens) * p.completion;
      const k = (await ownKey(gw, key)).data;
      keyId = k.key_id;
      reservedLive = k.reserved;
    } finally {
      await gw.close(); // hands every lease back (the frozen clock never let it expire)
    }
    assert.notEqual(reservedLive, "0", "a lease was held while the gateway ran");
    const kv = await Deno.openKv(kvPath);
    try {
      const lines: string[] = [];
      const code = await runKeys(["show", keyId], {
        kv,
        print: (l) => lines.push(l),
        now: wall.now,
        tiers: DEFAULT_TIERS,
      });
      assert.equal(code, 0);
      const balance = formatCredits(10n * NANO_PER_CREDIT - spent);
      for (const l of [`balance: ${balance}`, "reserved: 0", `available: ${balance}`]) {
        assert.ok(lines.includes(l), `${l} in ${lines.join(" | ")}`);
      }
      assert.ok(lines.some((l) => l.startsWith("rate buckets: requests=1/600 ")));
      assert.ok(lines.includes("rate reserved by quota leases: requests=0 tokens=0"));
    } finally {
      kv.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
