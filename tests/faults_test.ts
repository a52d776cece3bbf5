/**
 * Faults, end to end on loopback: a hanging upstream is cut at the provider's
 * `timeout_ms` and failover never breaks a constraint; an upstream reset
 * mid-stream gives the client its format's in-band error and a finalized
 * receipt; an idle stream is cut; a client that leaves aborts the upstream.
 */
import assert from "node:assert/strict";
import { startTestGateway, type TestGateway } from "./support/gateway.ts";
import { assertEnvelope, probe } from "./support/http_probe.ts";
import { startCountingUpstream } from "./support/counting_upstream.ts";
import type { GatewayConfig } from "../src/config/schema.ts";

const TIMEOUT_MS = 400;

function shortTimeouts(c: GatewayConfig): void {
  for (const p of c.providers) p.timeout_ms = TIMEOUT_MS;
}

const prompt = "one two three four five six seven eight";

function post(gw: TestGateway, path: string, body: unknown, headers: Record<string, string> = {}) {
  return probe(`${gw.url}${path}`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${gw.apiKey}`,
      "content-type": "application/json",
      ...headers,
    },
    body: JSON.stringify(body),
  }, 10_000);
}

async function timed<T>(f: () => Promise<T>): Promise<[T, number]> {
  const t = performance.now();
  const r = await f();
  return [r, performance.now() - t];
}

async function receipt(gw: TestGateway, id: string): Promise<{ event_log: { type: string }[] }> {
  const p = await probe(`${gw.url}/v1/aci/receipts/${id}`, {
    headers: { authorization: `Bearer ${gw.apiKey}` },
  });
  assert.equal(p.status, 200, `receipt ${id}: ${p.text.slice(0, 200)}`);
  return p.json as { event_log: { type: string }[] };
}

Deno.test("a hanging upstream is cut at timeout_ms; failover honours every constraint", async () => {
  const gw = await startTestGateway({ configure: shortTimeouts });
  try {
    const chat = { model: "demo/echo", messages: [{ role: "user", content: prompt }] };
    // Which provider is tried first for demo/echo? (Verification preference decides.)
    gw.plain.resetStats();
    gw.secure.resetStats();
    assert.equal((await post(gw, "/v1/chat/completions", chat)).status, 200);
    const [first, second] = gw.plain.stats.total === 1
      ? [gw.plain, gw.secure]
      : [gw.secure, gw.plain];
    assert.equal(first.stats.total, 1);

    // The first candidate hangs: cut at the timeout, then served by the second.
    first.setFault({ kind: "hang" });
    first.resetStats();
    second.resetStats();
    for (const stream of [false, true]) {
      const [r, ms] = await timed(() => post(gw, "/v1/chat/completions", { ...chat, stream }));
      assert.equal(r.status, 200, r.text.slice(0, 200));
      assert.ok(ms >= TIMEOUT_MS - 20, `waited for the timeout (${ms} ms)`);
      assert.ok(ms < TIMEOUT_MS + 2_000, `cut near the timeout (${ms} ms)`);
      if (stream) assert.ok(r.text.endsWith("data: [DONE]\n\n"));
      // The gateway tried each candidate once, in order.
      const log = (await receipt(gw, r.headers.get("x-receipt-id")!)).event_log;
      const tried = log.filter((e) => e.type === "route.selected") as unknown as {
        target_route_id: string;
      }[];
      assert.deepEqual(tried.map((e) => e.target_route_id.split(":")[0]), [
        first.name,
        second.name,
      ]);
    }
    assert.equal(second.stats.total, 2);
    // Exactly once each: an aborted pinned request is never re-sent (see the test below).
    assert.equal(first.stats.total, 2);
    first.setFault(null);

    // zdr: only the ZDR provider qualifies; its hang is a 504, never a failover to plain.
    gw.secure.setFault({ kind: "hang" });
    gw.plain.resetStats();
    gw.secure.resetStats();
    for (const stream of [false, true]) {
      const [r, ms] = await timed(() =>
        post(gw, "/v1/chat/completions", { ...chat, stream, provider: { zdr: true } })
      );
      assert.equal(r.status, 504, r.text.slice(0, 200));
      assertEnvelope(r, "openai", "zdr hang");
      assert.equal((r.json as { error: { code: string } }).error.code, "upstream_timeout");
      assert.ok(ms >= TIMEOUT_MS - 20 && ms < TIMEOUT_MS + 2_000, `${ms} ms`);
      assert.ok(r.headers.get("x-receipt-id"), "a refused attempt still has a receipt");
    }
    // The confidential-only model and the Anthropic format behave the same.
    const priv = await post(gw, "/v1/chat/completions", { ...chat, model: "demo/private" });
    assert.equal(priv.status, 504);
    const msg = await post(gw, "/v1/messages", {
      model: "demo/echo",
      max_tokens: 16,
      messages: [{ role: "user", content: prompt }],
      provider: { zdr: true },
    });
    assert.equal(msg.status, 504);
    assertEnvelope(msg, "anthropic", "messages zdr hang");
    // A forced provider is not failed over either.
    const forced = await post(gw, "/v1/chat/completions", chat, { "x-service-provider": "secure" });
    assert.equal(forced.status, 504);
    assert.equal(gw.plain.stats.total, 0, "no constrained request reached the non-ZDR upstream");
    assert.ok(gw.secure.stats.total >= 5);
    gw.secure.setFault(null);

    // Both hang: every qualifying candidate is tried once, each cut at its timeout.
    gw.plain.setFault({ kind: "hang" });
    gw.secure.setFault({ kind: "hang" });
    const [both, ms] = await timed(() => post(gw, "/v1/chat/completions", chat));
    assert.equal(both.status, 504);
    assert.ok(ms >= 2 * TIMEOUT_MS - 40 && ms < 2 * TIMEOUT_MS + 2_000, `${ms} ms`);
  } finally {
    await gw.close();
  }
});

/**
 * Found by the test above: a request aborted at the timeout on a reused
 * keep-alive pinned (node:https) connection arrived at the upstream a second
 * time ~100 ms later, after failover: the prompt was delivered twice. The
 * gateway's pinned clients no longer reuse connections (src/app/assemble.ts).
 */
Deno.test({
  name: "a timed-out request to a verified upstream reaches it exactly once",
  fn: async () => {
    const gw = await startTestGateway({ configure: shortTimeouts });
    try {
      const chat = { model: "demo/echo", messages: [{ role: "user", content: prompt }] };
      assert.equal((await post(gw, "/v1/chat/completions", chat)).status, 200); // warm the pool
      gw.secure.setFault({ kind: "hang" });
      gw.secure.resetStats();
      const r = await post(gw, "/v1/chat/completions", { ...chat, provider: { zdr: true } });
      assert.equal(r.status, 504);
      await new Promise((res) => setTimeout(res, 500));
      assert.equal(gw.secure.stats.total, 1);
    } finally {
      await gw.close();
    }
  },
});

Deno.test("an upstream reset mid-stream: in-band error in each format and a finalized receipt", async () => {
  const gw = await startTestGateway();
  try {
    const cases: { path: string; body: Record<string, unknown>; inBand: (t: string) => boolean }[] =
      [
        {
          path: "/v1/chat/completions",
          body: { model: "demo/echo", stream: true, messages: [{ role: "user", content: prompt }] },
          inBand: (t) => {
            const last = t.trim().split("\n\n").at(-1) ?? "";
            if (!last.startsWith("data: ")) return false;
            const j = JSON.parse(last.slice(6));
            return typeof j.error?.message === "string" && typeof j.error?.type === "string";
          },
        },
        {
          path: "/v1/messages",
          body: {
            model: "demo/echo",
            max_tokens: 64,
            stream: true,
            messages: [{ role: "user", content: prompt }],
          },
          inBand: (t) => /event: error\ndata: \{"type":"error","error":\{/.test(t),
        },
        {
          path: "/v1/responses",
          body: { model: "demo/echo", stream: true, input: prompt },
          inBand: (t) => /event: response\.failed\n/.test(t) && !/response\.completed/.test(t),
        },
      ];
    for (const c of cases) {
      gw.plain.setFault({ kind: "reset_mid_stream", afterChunks: 2 });
      gw.secure.setFault({ kind: "reset_mid_stream", afterChunks: 2 });
      const r = await post(gw, c.path, c.body);
      assert.equal(r.status, 200, `${c.path}: the stream had started`);
      assert.ok(c.inBand(r.text), `${c.path}: in-band error, got ${r.text.slice(-400)}`);
      assert.ok(!r.text.includes("[DONE]") || c.path !== "/v1/chat/completions");
      const id = r.headers.get("x-receipt-id");
      assert.ok(id, `${c.path}: x-receipt-id`);
      // The terminator is released only after the receipt is durable: readable at once.
      const types = (await receipt(gw, id)).event_log.map((e) => e.type);
      assert.ok(types.includes("stream.upstream_failed"), `${c.path}: ${types.join(",")}`);
      assert.equal(types.at(-1), "response.returned", `${c.path}: finalized`);
    }
    // Non-streamed: the body is cut halfway; a 502 envelope with a receipt, not a 500.
    gw.plain.setFault({ kind: "reset_mid_stream", afterChunks: 1 });
    gw.secure.setFault({ kind: "reset_mid_stream", afterChunks: 1 });
    const whole = await post(gw, "/v1/chat/completions", {
      model: "demo/echo",
      messages: [{ role: "user", content: prompt }],
    });
    assert.equal(whole.status, 502, whole.text);
    assertEnvelope(whole, "openai", "non-streamed reset");
    const id = whole.headers.get("x-receipt-id");
    assert.ok(id);
    assert.equal((await receipt(gw, id)).event_log.at(-1)?.type, "response.returned");
  } finally {
    await gw.close();
  }
});

Deno.test("an idle upstream stream is cut at stream_idle_timeout_ms with an in-band error", async () => {
  const gw = await startTestGateway({
    configure: (c) => {
      c.limits.stream_idle_timeout_ms = 300;
    },
  });
  try {
    gw.plain.setFault({ kind: "token_delay", ms: 5_000 });
    gw.secure.setFault({ kind: "token_delay", ms: 5_000 });
    const [r, ms] = await timed(() =>
      post(gw, "/v1/chat/completions", {
        model: "demo/echo",
        stream: true,
        messages: [{ role: "user", content: prompt }],
      })
    );
    assert.equal(r.status, 200);
    assert.ok(ms < 3_000, `cut by the idle timeout, not the upstream (${ms} ms)`);
    const last = JSON.parse(r.text.trim().split("\n\n").at(-1)!.slice(6));
    assert.equal(last.error.code, "upstream_timeout");
  } finally {
    gw.plain.setFault(null);
    gw.secure.setFault(null);
    await gw.close();
  }
});

Deno.test("a client disconnect aborts the upstream request and finalizes the receipt", async () => {
  const upstream = startCountingUpstream({ chunks: 200, gapMs: 30 });
  const gw = await startTestGateway({
    configure: (c) => {
      c.providers.find((p) => p.name === "plain")!.base_url = upstream.url;
    },
  });
  try {
    for (
      const [path, body] of [
        ["/v1/chat/completions", { messages: [{ role: "user", content: "go" }] }],
        ["/v1/messages", { max_tokens: 512, messages: [{ role: "user", content: "go" }] }],
        ["/v1/responses", { input: "go" }],
      ] as [string, Record<string, unknown>][]
    ) {
      const before = { ...upstream.stats };
      const ctl = new AbortController();
      const res = await fetch(`${gw.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
        // demo/vision is routed to the plain provider only (here: the counting upstream).
        body: JSON.stringify({ ...body, model: "demo/vision", stream: true }),
        signal: ctl.signal,
      });
      assert.equal(res.status, 200);
      const id = res.headers.get("x-receipt-id")!;
      const reader = res.body!.getReader();
      let got = "";
      while (!got.includes("w2")) {
        const { value, done } = await reader.read();
        assert.ok(!done, "stream ended early");
        got += new TextDecoder().decode(value);
      }
      await reader.cancel();
      ctl.abort();
      await upstream.waitFor(
        (s) => s.cancelled === before.cancelled + 1 && s.open === 0,
        3_000,
      );
      assert.equal(upstream.stats.completed, before.completed, `${path}: not read to the end`);
      assert.ok(upstream.stats.chunksSent - before.chunksSent < 50, `${path}: upstream stopped`);
      // The receipt is finalized over what was written (poll: it lands just after the abort).
      let types: string[] = [];
      for (let i = 0; i < 50 && !types.includes("response.returned"); i++) {
        const p = await probe(`${gw.url}/v1/aci/receipts/${id}`, {
          headers: { authorization: `Bearer ${gw.apiKey}` },
        });
        if (p.status === 200) {
          types = (p.json as { event_log: { type: string }[] }).event_log.map((e) => e.type);
        } else await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(types.includes("stream.client_disconnected"), `${path}: ${types.join(",")}`);
      assert.equal(types.at(-1), "response.returned");
    }
  } finally {
    await gw.close();
    await upstream.close();
  }
});
