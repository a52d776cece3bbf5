/**
 * Prometheus metrics (issue #17 item 1): scraped from the real gateway while
 * the openai SDK loads it, every scrape parsed with a Prometheus text-format
 * parser; served only behind the operator token, never on the public surface.
 */
import OpenAI from "openai";
import assert from "node:assert/strict";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { startTestGateway, TEST_ADMIN_TOKEN, type TestGateway } from "./support/gateway.ts";

interface Sample {
  labels?: Record<string, string>;
  value?: string;
  buckets?: Record<string, string>;
  count?: string;
  sum?: string;
}
interface Family {
  name: string;
  type: string;
  metrics: Sample[];
}

async function scrape(gw: TestGateway): Promise<Map<string, Family>> {
  const res = await fetch(`${gw.url}/admin/v1/metrics`, {
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  const families = parsePrometheusTextFormat(await res.text()) as Family[];
  return new Map(families.map((f) => [f.name, f]));
}

function value(f: Family | undefined, labels: Record<string, string> = {}): number {
  const m = f?.metrics.find((s) => Object.entries(labels).every(([k, v]) => s.labels?.[k] === v));
  return m === undefined ? 0 : Number(m.value ?? m.count);
}

Deno.test("metrics: scraped under load, parsed, and consistent with the traffic", async () => {
  const gw = await startTestGateway();
  try {
    const client = new OpenAI({ baseURL: gw.baseURL, apiKey: gw.apiKey, maxRetries: 0 });
    const broke = new OpenAI({
      baseURL: gw.baseURL,
      apiKey: await gw.newKey({ credits: 0 }),
      maxRetries: 0,
    });
    const N = 120;
    let scrapes = 0;
    let loading = true;
    // Scrape continuously while the load runs; every scrape must parse.
    const scraper = (async () => {
      while (loading) {
        const m = await scrape(gw);
        assert.ok(m.has("gateway_requests_total"));
        scrapes++;
      }
    })();
    let next = 0;
    const worker = async () => {
      while (next < N) {
        const i = next++;
        if (i % 3 === 0) {
          const stream = await client.chat.completions.create({
            model: "demo/echo",
            stream: true,
            messages: [{ role: "user", content: `stream ${i}` }],
          });
          for await (const _ of stream) { /* drain */ }
        } else {
          await client.chat.completions.create({
            model: "demo/private",
            provider: { aci_verified: true },
            messages: [{ role: "user", content: `whole ${i}` }],
          } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    for (let i = 0; i < 5; i++) {
      await assert.rejects(
        broke.chat.completions.create({
          model: "demo/echo",
          messages: [{ role: "user", content: "x" }],
        }),
      );
    }
    loading = false;
    await scraper;
    assert.ok(scrapes >= 2, `scraped ${scrapes} times under load`);

    const m = await scrape(gw);
    const reqs = m.get("gateway_requests_total")!;
    assert.equal(reqs.type, "COUNTER");
    const streamed = value(reqs, {
      endpoint: "/v1/chat/completions",
      status: "200",
      model: "demo/echo",
    });
    const whole = value(reqs, {
      endpoint: "/v1/chat/completions",
      status: "200",
      model: "demo/private",
      provider: "secure",
    });
    assert.equal(streamed, N / 3);
    assert.equal(whole, N - N / 3);
    assert.equal(value(reqs, { endpoint: "/v1/chat/completions", status: "403" }), 5);
    assert.equal(value(m.get("gateway_refusals_total"), { reason: "insufficient_credits" }), 5);

    const up = m.get("gateway_upstream_wait_seconds")!;
    assert.equal(up.type, "HISTOGRAM");
    assert.equal(Number(up.metrics[0].count), N, "one upstream wait per answered request");
    const commit = m.get("gateway_receipt_commit_seconds")!;
    assert.equal(Number(commit.metrics[0].count), whole, "one commit wait per whole response");
    const own = m.get("gateway_own_duration_seconds")!;
    assert.ok(Number(own.metrics[0].count) >= N);
    const gc = m.get("gateway_group_commit_mutations")!;
    assert.ok(Number(gc.metrics[0].count) > 0);
    assert.ok(Number(gc.metrics[0].sum) >= N, "at least one mutation per receipt");
    assert.ok(value(m.get("gateway_credits_spent_total"), { model: "demo/private" }) > 0);
    assert.equal(value(m.get("gateway_upstream_verified"), { provider: "secure" }), 1);
    assert.ok(value(m.get("gateway_upstream_session_age_seconds"), { provider: "secure" }) >= 0);
    assert.ok(m.has("gateway_open_streams"));
    assert.equal(value(m.get("gateway_requests_in_flight")), 1, "only the scrape itself");
    assert.ok(m.has("gateway_kv_retries_total") && m.has("gateway_kv_errors_total"));
    // Bounded labels: route patterns, never raw paths or ids.
    for (const s of reqs.metrics) assert.ok(!String(s.labels?.endpoint).includes("rcpt-"));
  } finally {
    await gw.close();
  }
});

Deno.test("metrics: open streams are counted while they run", async () => {
  const gw = await startTestGateway();
  try {
    gw.plain.setFault({ kind: "token_delay", ms: 300 });
    gw.secure.setFault({ kind: "token_delay", ms: 300 });
    const res = await fetch(`${gw.baseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "demo/echo",
        stream: true,
        messages: [{ role: "user", content: "one two three four five" }],
      }),
    });
    const reader = res.body!.getReader();
    await reader.read(); // the stream is flowing
    assert.equal(value((await scrape(gw)).get("gateway_open_streams")), 1);
    await reader.cancel();
    gw.plain.setFault(null);
    gw.secure.setFault(null);
    for (let i = 0; i < 50; i++) {
      if (value((await scrape(gw)).get("gateway_open_streams")) === 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(value((await scrape(gw)).get("gateway_open_streams")), 0);
  } finally {
    await gw.close();
  }
});

Deno.test("metrics are never on the public surface", async () => {
  const gw = await startTestGateway();
  try {
    for (const path of ["/metrics", "/v1/metrics"]) {
      const r = await fetch(`${gw.url}${path}`);
      await r.body?.cancel();
      assert.equal(r.status, 404, path);
    }
    for (const auth of [null, `Bearer ${gw.apiKey}`]) {
      const r = await fetch(`${gw.url}/admin/v1/metrics`, {
        headers: auth ? { authorization: auth } : {},
      });
      await r.body?.cancel();
      assert.equal(r.status, 401);
    }
  } finally {
    await gw.close();
  }
});
