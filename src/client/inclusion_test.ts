import assert from "node:assert/strict";
import { fetchInclusionProof, type InclusionDeps } from "./inclusion.ts";
import type { Transport } from "./transport.ts";

/**
 * A gateway in a fake clock: `answer(url, t)` says what it answers to a request sent at t
 * and how long it held it; the client's sleeps move the same clock.
 */
function gateway(answer: (url: URL, t: number) => { status: number; heldMs: number }) {
  let t = 0;
  const asked: string[] = [];
  const transport: Transport = {
    pinning: true,
    send: (url) => {
      asked.push(url.search);
      const a = answer(url, t);
      t += a.heldMs;
      const body = a.status === 200 ? '{"leaf_index":0}' : '{"error":{}}';
      return Promise.resolve(
        new Response(body, { status: a.status, headers: { "retry-after": "1" } }),
      );
    },
    close: () => {},
  };
  const deps = (over: Partial<InclusionDeps> = {}): InclusionDeps => ({
    baseURL: "https://gw.example/v1",
    transport,
    tlsCheck: () => Promise.resolve(),
    auth: new Headers(),
    waitMs: 15_000,
    now: () => t,
    sleep: (ms) => {
      t += ms;
      return Promise.resolve();
    },
    ...over,
  });
  return { asked, deps, now: () => t };
}

/** The log's next checkpoint includes the receipt at `at` ms. */
const waitingGateway = (at: number) => (url: URL, t: number) => {
  const wait = Number(url.searchParams.get("wait") ?? "0");
  if (t >= at) return { status: 200, heldMs: 1 };
  if (t + wait >= at) return { status: 200, heldMs: at - t };
  return { status: 503, heldMs: wait };
};

Deno.test("inclusion: one request that the gateway holds until the checkpoint", async () => {
  const g = gateway(waitingGateway(140));
  const got = await fetchInclusionProof("r1", g.deps());
  assert.deepEqual(got, { proof: { leaf_index: 0 } });
  assert.deepEqual(g.asked, ["?wait=5000"], "no polling");
  assert.equal(g.now(), 140);
});

Deno.test("inclusion: a wait that ran out is asked again, up to the policy's limit", async () => {
  const g = gateway(waitingGateway(7_000));
  assert.deepEqual(await fetchInclusionProof("r1", g.deps()), { proof: { leaf_index: 0 } });
  assert.deepEqual(g.asked, ["?wait=5000", "?wait=5000"]);
  const never = gateway(waitingGateway(Infinity));
  const failed = await fetchInclusionProof("r1", never.deps({ waitMs: 6_000 }));
  assert.ok("ok" in failed && !failed.ok);
  assert.deepEqual(never.asked, ["?wait=5000", "?wait=1000"]);
  assert.equal(never.now(), 6_000);
});

Deno.test("inclusion: a gateway that ignores wait (503 at once) is polled as before", async () => {
  const g = gateway((_url, t) => ({ status: t >= 120 ? 200 : 503, heldMs: 2 }));
  assert.deepEqual(await fetchInclusionProof("r1", g.deps()), { proof: { leaf_index: 0 } });
  assert.equal(g.asked[0], "?wait=5000");
  assert.ok(g.asked.length > 3, `${g.asked.length} requests`);
  assert.ok(g.asked.slice(1).every((q) => q === ""), "polled without wait");
  // One that refuses the parameter outright.
  const strict = gateway((url, t) => ({
    status: url.searchParams.has("wait") ? 400 : t >= 60 ? 200 : 503,
    heldMs: 2,
  }));
  assert.deepEqual(await fetchInclusionProof("r1", strict.deps()), { proof: { leaf_index: 0 } });
  assert.ok(strict.asked.slice(1).every((q) => q === ""));
});

Deno.test("inclusion: deferred asks late and plainly first, then waits at the gateway", async () => {
  const soon = gateway(waitingGateway(200));
  assert.deepEqual(await fetchInclusionProof("r1", soon.deps({ patient: true })), {
    proof: { leaf_index: 0 },
  });
  assert.deepEqual(soon.asked, [""], "in a checkpoint by the first ask");
  const slow = gateway(waitingGateway(900));
  assert.deepEqual(await fetchInclusionProof("r1", slow.deps({ patient: true })), {
    proof: { leaf_index: 0 },
  });
  assert.equal(slow.asked.length, 2);
  assert.equal(slow.asked[0], "");
  assert.match(slow.asked[1], /^\?wait=\d+$/);
  assert.equal(slow.now(), 900);
});

Deno.test("inclusion: a refusal other than 503 fails at once", async () => {
  const g = gateway(() => ({ status: 404, heldMs: 1 }));
  const failed = await fetchInclusionProof("r1", g.deps());
  assert.ok("ok" in failed && !failed.ok && /HTTP 404/.test(failed.detail));
  assert.equal(g.asked.length, 1);
});
