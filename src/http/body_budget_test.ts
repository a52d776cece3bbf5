import assert from "node:assert/strict";
import { BodyBudget } from "./body_budget.ts";
import { GatewayError } from "./errors.ts";
import { readBody } from "./body.ts";

const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("body budget: one key waits behind its own share; other keys go ahead", async () => {
  const b = new BodyBudget({ global: 100, perKey: 40 });
  const a1 = b.ticket("a");
  const a2 = b.ticket("a");
  const c1 = b.ticket("c");
  await a1.reserve(30);
  let a2Granted = false;
  const a2Wait = a2.reserve(30).then(() => a2Granted = true);
  await c1.reserve(40); // another key is not held back by a's waiter
  await tick();
  assert.equal(a2Granted, false, "a's second body waits for a's share");
  assert.equal(b.used, 70);
  a1.release();
  await a2Wait;
  assert.equal(b.used, 70);
  a2.release();
  c1.release();
  a1.release(); // idempotent
  assert.equal(b.used, 0);
});

Deno.test("body budget: the global limit is first come, first served", async () => {
  const b = new BodyBudget({ global: 50, perKey: 50 });
  const big = b.ticket("x");
  await big.reserve(40);
  const order: string[] = [];
  const y = b.ticket("y");
  const z = b.ticket("z");
  const yWait = y.reserve(30).then(() => order.push("y"));
  const zWait = z.reserve(5).then(() => order.push("z")); // fits, but y came first
  await tick();
  assert.deepEqual(order, []);
  big.release();
  await Promise.all([yWait, zWait]);
  assert.deepEqual(order, ["y", "z"]);
});

Deno.test("body budget: a body larger than a limit runs alone; an aborted wait leaves the queue", async () => {
  const b = new BodyBudget({ global: 10, perKey: 10 });
  const huge = b.ticket("k");
  await huge.reserve(25); // nothing else held: allowed, alone
  const next = b.ticket("k");
  const ac = new AbortController();
  const wait = next.reserve(5, ac.signal);
  ac.abort(new GatewayError("request_timeout", "late"));
  await assert.rejects(wait, (e: unknown) => e instanceof GatewayError);
  assert.equal(b.waiting, 0);
  huge.release();
  assert.equal(b.used, 0);
  await next.reserve(5);
  assert.equal(b.used, 5);
});

Deno.test("readBody: waits for budget, honours its deadline, and releases nothing it did not take", async () => {
  const b = new BodyBudget({ global: 10, perKey: 10 });
  const holder = b.ticket("k");
  await holder.reserve(10);
  const post = () =>
    new Request("http://x/", {
      method: "POST",
      body: "0123456789",
      headers: { "content-length": "10" },
    });
  const req = post();
  const t = b.ticket("k");
  const t0 = performance.now();
  await assert.rejects(
    readBody(req, 100, { timeoutMs: 200, reserve: t.reserve }),
    (e: unknown) => e instanceof GatewayError && e.kind === "request_timeout" && e.status === 408,
  );
  assert.ok(performance.now() - t0 >= 190);
  t.release();
  assert.equal(b.used, 10);
  holder.release();
  // With room, the same body reads whole, its declared length reserved.
  const ok = b.ticket("k");
  const body = await readBody(
    post(),
    100,
    { timeoutMs: 1_000, reserve: ok.reserve },
  );
  assert.equal(new TextDecoder().decode(body), "0123456789");
  assert.equal(b.used, 10);
  ok.release();
});

Deno.test("readBody: a chunked body reserves in steps up to the size limit", async () => {
  const b = new BodyBudget({ global: 1 << 30, perKey: 1 << 30 });
  const t = b.ticket("k");
  const body = await readBody(
    new Request("http://x/", { method: "POST", body: "0123456789" }),
    100,
    { timeoutMs: 1_000, reserve: t.reserve },
  );
  assert.equal(body.length, 10);
  assert.equal(b.used, 100, "one step, capped at the limit");
  t.release();
  assert.equal(b.used, 0);
});

Deno.test("readBody: a body that stops arriving is cut at the deadline (408)", async () => {
  const stalled = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(new TextEncoder().encode('{"a":'));
    },
  });
  const req = new Request("http://x/", { method: "POST", body: stalled });
  const b = new BodyBudget({ global: 1 << 20, perKey: 1 << 20 });
  await assert.rejects(
    readBody(req, 1 << 20, { timeoutMs: 100, reserve: b.ticket("k").reserve }),
    (e: unknown) => e instanceof GatewayError && e.kind === "request_timeout",
  );
});
