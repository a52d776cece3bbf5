/**
 * Money attacks (issue #15 item 3), on loopback: 50 parallel requests of one
 * key on every inference endpoint, each shaped so its real usage is as large
 * as the request allows (token-dense text, 128 prompts in one completions
 * request, reasoning tokens beyond the visible cap). The reservation is the
 * worst case, so the balance never goes below zero, and tokens per minute are
 * enforced on the same reservation.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { getBalance, getUsage, NANO_PER_CREDIT } from "../src/admission/credits.ts";
import { keyDigest } from "../src/keys/keys.ts";
import { digestIndexKey } from "../src/keys/kv_layout.ts";

const N = 50;
/** 1,000 one-letter words: the demo upstream counts a token per word, the old estimate one per 4 chars. */
const DENSE = Array.from({ length: 1_000 }, () => "a").join(" ");

async function keyIdOf(gw: TestGateway, key: string): Promise<string> {
  const id = (await gw.kv.get<string>(digestIndexKey(keyDigest(key)))).value;
  assert.ok(id);
  return id;
}

type Attack = (key: string) => Promise<unknown>;

function attacks(gw: TestGateway): Record<string, Attack> {
  const openai = (key: string) => new OpenAI({ apiKey: key, baseURL: gw.baseURL, maxRetries: 0 });
  return {
    "token-dense chat": (key) =>
      openai(key).chat.completions.create({
        model: "demo/echo",
        max_tokens: 1,
        messages: [{ role: "user", content: DENSE }],
      }),
    "legacy completions, 128 prompts": (key) =>
      openai(key).completions.create({
        model: "demo/echo",
        max_tokens: 8,
        prompt: Array.from({ length: 128 }, (_, i) => `p${i}`),
      }),
    "reasoning tokens": (key) =>
      openai(key).chat.completions.create({
        model: "demo/echo-next",
        max_completion_tokens: 1,
        messages: [{
          role: "user",
          content: Array.from({ length: 20 }, (_, i) => `w${i}`).join(" "),
        }],
      }),
    "token-dense embeddings": (key) =>
      openai(key).embeddings.create({ model: "demo/embed-large", input: DENSE }),
    "token-dense messages": (key) =>
      new Anthropic({ apiKey: key, baseURL: gw.url, maxRetries: 0 }).messages.create({
        model: "demo/echo",
        max_tokens: 1,
        messages: [{ role: "user", content: DENSE }],
      }),
    "token-dense responses": (key) =>
      openai(key).responses.create({ model: "demo/echo", max_output_tokens: 16, input: DENSE }),
  };
}

async function race(attack: Attack, key: string): Promise<{ ok: number; refused: number }> {
  const results = await Promise.allSettled(Array.from({ length: N }, () => attack(key)));
  let ok = 0;
  let refused = 0;
  for (const r of results) {
    if (r.status === "fulfilled") ok++;
    else {
      const status = (r.reason as { status?: number }).status;
      assert.ok(status === 403 || status === 429, `unexpected failure: ${String(r.reason)}`);
      refused++;
    }
  }
  return { ok, refused };
}

Deno.test("money: 50 parallel requests on every endpoint never take 0.001 credits below zero", async () => {
  const gw = await startTestGateway({
    configure: (c) => {
      // A reasoning model whose whole output fits a small balance a few times.
      c.models.find((m) => m.id === "demo/echo-next")!.max_output_length = 64;
    },
  });
  try {
    const credits = 0.001;
    const given = BigInt(Math.round(credits * 1e6)) * (NANO_PER_CREDIT / 1_000_000n);
    for (const [name, attack] of Object.entries(attacks(gw))) {
      const key = await gw.newKey({ tier: "enterprise", rpm: 100_000, tpm: 100_000_000, credits });
      const keyId = await keyIdOf(gw, key);
      const { ok, refused } = await race(attack, key);
      assert.equal(ok + refused, N);
      assert.ok(ok >= 1, `${name}: nothing admitted`);
      assert.ok(refused >= 1, `${name}: everything admitted`);
      // Every response was released after its settlement was durable.
      const balance = await getBalance(gw.kv, keyId);
      const usage = await getUsage(gw.kv, keyId);
      assert.ok(balance >= 0n, `${name}: balance ${balance} nano after ${ok} admitted`);
      assert.equal(usage.requests, BigInt(ok), name);
      assert.equal(balance + usage.spent_nano, given, `${name}: credits lost or created`);
    }
  } finally {
    await gw.close();
  }
});

Deno.test("money: tokens per minute hold against 50 parallel requests on every endpoint", async () => {
  const gw = await startTestGateway({
    configure: (c) => {
      c.models.find((m) => m.id === "demo/echo-next")!.max_output_length = 64;
    },
  });
  try {
    const tpm = 5_000;
    for (const [name, attack] of Object.entries(attacks(gw))) {
      const key = await gw.newKey({ tier: "enterprise", rpm: 100_000, tpm, credits: 100 });
      const keyId = await keyIdOf(gw, key);
      const t0 = Date.now();
      const { ok } = await race(attack, key);
      const elapsed = Date.now() - t0;
      const usage = await getUsage(gw.kv, keyId);
      const used = Number(usage.prompt_tokens + usage.completion_tokens);
      // The bucket refills at tpm per minute while the race runs.
      const refill = Math.ceil((tpm * elapsed) / 60_000);
      assert.ok(ok >= 1, `${name}: nothing admitted`);
      // Every reservation covers its request's real usage, so not even one request's overrun.
      assert.ok(
        used <= tpm + refill,
        `${name}: ${used} tokens used by ${ok} requests against ${tpm}/min (+${refill} refill)`,
      );
    }
  } finally {
    await gw.close();
  }
});

Deno.test("limiter: a 60/min key makes 61 requests, not 120, across a minute boundary on two gateways", async () => {
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/shared.kv`;
  // Half a second before a minute boundary, where fixed windows reset.
  let t = (Math.floor(Date.now() / 60_000) + 1) * 60_000 - 500;
  const now = () => t;
  const a = await startTestGateway({ kvPath, now });
  const b = await startTestGateway({ kvPath, now });
  try {
    const key = await a.newKey({ tier: "free", credits: 100 });
    const burst = () =>
      Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          fetch(`${(i % 2 === 0 ? a : b).url}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body: JSON.stringify({
              model: "demo/echo",
              messages: [{ role: "user", content: "hi" }],
            }),
          }).then(async (r) => {
            await r.body?.cancel();
            return r.status;
          })),
      );
    const before = await burst();
    assert.equal(before.filter((s) => s === 200).length, 60);
    t += 1_000; // across the boundary: one second's refill is one request
    const after = await burst();
    assert.equal(after.filter((s) => s === 200).length, 1, JSON.stringify(after));
    assert.equal(after.filter((s) => s === 429).length, 59);
  } finally {
    await a.close();
    await b.close();
    await Deno.remove(dir, { recursive: true });
  }
});
