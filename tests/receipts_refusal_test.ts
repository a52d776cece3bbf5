/**
 * Refusals after authentication still carry `x-receipt-id` and a signed
 * receipt: nothing forwarded (no `request.forwarded`, and the upstreams saw
 * nothing), `response.returned` = the hash of the exact error body. Also the
 * failover trail (one `route.selected` per attempt) and an upstream failure
 * after forwarding.
 */
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import {
  asRecord,
  assertEventOrder,
  events,
  eventTypes,
  fetchReceipt,
  fetchReport,
  independentFailures,
  type Json,
  keysetOf,
  onlyEvent,
  postRaw,
  type RawExchange,
  sha256Prefixed,
  text,
} from "./support/receipt_check.ts";
import { verifyReceipt } from "../src/verify/receipt.ts";
import { plainThenBackup } from "./support/route_config.ts";

async function verified(
  gw: TestGateway,
  ex: RawExchange,
  key: string,
  unread = false,
): Promise<Json> {
  assert.match(ex.receiptId ?? "", /^rcpt-[0-9a-f]{32}$/, `status ${ex.status} has a receipt id`);
  const got = await fetchReceipt(gw.url, ex.receiptId!, key);
  assert.equal(got.status, 200);
  const receipt = asRecord(got.body);
  const { report } = await fetchReport(gw.url);
  // A body refused unread (#25: a key that cannot pay) is bound by no hash.
  const bodies = { request: unread ? undefined : ex.request, response: ex.response };
  assert.deepEqual(verifyReceipt(receipt, { report, ...bodies }).filter((c) => !c.ok), []);
  assert.deepEqual(independentFailures(receipt, keysetOf(report), bodies), []);
  assert.equal(onlyEvent(receipt, "response.returned").body_hash, sha256Prefixed(ex.response));
  return receipt;
}

const upstreamTotal = (gw: TestGateway) => gw.plain.stats.total + gw.secure.stats.total;

Deno.test("refusals after authentication (400/403/404/429/503) get a signed receipt of the error body, nothing forwarded", async () => {
  const gw = await startTestGateway();
  try {
    const broke = await gw.newKey({ credits: 0 });
    const slow = await gw.newKey({ rpm: 1 });
    const chat = (over: Json = {}) => ({
      model: "demo/echo",
      messages: [{ role: "user", content: "refuse me" }],
      ...over,
    });
    // One warm-up request uses the rpm=1 key's only slot.
    assert.equal((await postRaw(gw.url, "/v1/chat/completions", chat(), slow)).status, 200);
    gw.plain.resetStats();
    gw.secure.resetStats();

    const cases: {
      name: string;
      key: string;
      path?: string;
      body: Json;
      status: number;
      unread?: boolean;
      code: string;
    }[] = [
      {
        name: "bad parameter",
        key: gw.apiKey,
        body: chat({ temperature: 9 }),
        status: 400,
        code: "",
      },
      // Refused before its body is read (#25 item 2): its receipt binds no request body.
      {
        name: "no credits",
        key: broke,
        body: chat(),
        status: 403,
        code: "insufficient_credits",
        unread: true,
      },
      {
        name: "no zdr provider",
        key: gw.apiKey,
        body: chat({ model: "demo/vision", provider: { zdr: true } }),
        status: 404,
        code: "no_zdr_provider",
      },
      {
        name: "unknown model",
        key: gw.apiKey,
        body: chat({ model: "demo/none" }),
        status: 404,
        code: "model_not_found",
      },
      { name: "rate limited", key: slow, body: chat(), status: 429, code: "rate_limit_exceeded" },
      {
        // demo/vision is served by the plain provider only: never verified.
        name: "no verified upstream",
        key: gw.apiKey,
        body: chat({ model: "demo/vision", provider: { aci_verified: true } }),
        status: 503,
        code: "upstream_verification_failed",
      },
      {
        name: "no verified upstream, streamed",
        key: gw.apiKey,
        body: chat({ model: "demo/vision", stream: true, provider: { aci_verified: true } }),
        status: 503,
        code: "upstream_verification_failed",
      },
      {
        name: "anthropic envelope",
        key: gw.apiKey,
        path: "/v1/messages",
        body: {
          ...chat({ model: "demo/vision", provider: { aci_verified: true } }),
          max_tokens: 8,
        },
        status: 503,
        code: "",
      },
    ];
    for (const c of cases) {
      const ex = await postRaw(gw.url, c.path ?? "/v1/chat/completions", c.body, c.key);
      assert.equal(ex.status, c.status, c.name);
      const body = JSON.parse(text(ex.response));
      if (c.code) assert.equal(body.error.code, c.code, c.name);
      if (c.path === "/v1/messages") assert.equal(body.type, "error");
      const receipt = await verified(gw, ex, c.key, c.unread);
      if (c.unread) {
        const hash = onlyEvent(receipt, "request.received").body_hash;
        assert.notEqual(hash, sha256Prefixed(ex.request), `${c.name}: no body was read`);
      }
      assertEventOrder(receipt, "refused");
      assert.ok(!eventTypes(receipt).includes("request.forwarded"), c.name);
      assert.ok(!eventTypes(receipt).includes("response.received"), c.name);
      assert.equal(typeof onlyEvent(receipt, "request.refused").reason, "string");
      assert.equal(receipt.endpoint, c.path ?? "/v1/chat/completions");
      assert.equal(receipt.chat_id, null);
    }
    assert.equal(upstreamTotal(gw), 0, "no prompt left the gateway");

    // Before authentication there is nothing to bind a receipt to.
    const anon = await postRaw(gw.url, "/v1/chat/completions", chat(), null);
    assert.equal(anon.status, 401);
    assert.equal(anon.receiptId, null);
  } finally {
    await gw.close();
  }
});

Deno.test("failover: one route.selected per attempt, the failed attempt recorded, the receipt verifies", async () => {
  const gw = await startTestGateway({ configure: (c) => plainThenBackup(c, "demo/echo") });
  try {
    for (const stream of [false, true]) {
      gw.plain.setFault({ kind: "status", status: 500, times: 1 });
      const ex = await postRaw(gw.url, "/v1/chat/completions", {
        model: "demo/echo",
        stream,
        messages: [{ role: "user", content: "fail over" }],
      }, gw.apiKey);
      assert.equal(ex.status, 200);
      const receipt = await verified(gw, ex, gw.apiKey);
      assertEventOrder(receipt, "served");
      const routes = events(receipt).filter((e) => e.type === "route.selected");
      assert.deepEqual(routes.map((e) => e.target_route_id), [
        "plain:demo-chat",
        "backup:demo-chat",
      ]);
      assert.equal(events(receipt).filter((e) => e.type === "request.forwarded").length, 2);
      const failed = onlyEvent(receipt, "upstream.attempt_failed");
      assert.equal(failed.target_route_id, "plain:demo-chat");
      assert.equal(failed.status, 500);
      // Neither route is confidential: no upstream.verified claim at all.
      assert.ok(!eventTypes(receipt).includes("upstream.verified"));
    }
  } finally {
    await gw.close();
  }
});

Deno.test("upstream failure after forwarding: error receipt keeps request.forwarded, no response.received", async () => {
  const gw = await startTestGateway();
  try {
    // demo/echo-next has a single route: nothing to fail over to.
    gw.plain.setFault({ kind: "status", status: 503 });
    const ex = await postRaw(gw.url, "/v1/chat/completions", {
      model: "demo/echo-next",
      max_completion_tokens: 16,
      messages: [{ role: "user", content: "x" }],
    }, gw.apiKey);
    assert.equal(ex.status, 503);
    const receipt = await verified(gw, ex, gw.apiKey);
    assert.deepEqual(eventTypes(receipt), [
      "request.received",
      "middleware.forwarded",
      "route.selected",
      "request.forwarded",
      "transparency.request_modified",
      "upstream.attempt_failed",
      "response.returned",
    ]);
    assert.equal(gw.plain.stats.total, 1);
  } finally {
    await gw.close();
  }
});
