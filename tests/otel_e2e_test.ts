/**
 * OpenTelemetry (#31), against a real OTLP/HTTP receiver on loopback (JSON
 * encoding, `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), with the gateway as
 * operators run it (`task start` under `OTEL_DENO=true`):
 * - each upstream attempt is a client span, and the upstream receives its
 *   W3C `traceparent` (the gateway's own HTTP/1.1 client, not fetch);
 * - the per-request log line is exported as a log record inside that trace;
 * - the gateway's request and token counters are exported as OTel metrics;
 * - no secret is exported: not the key `task keys create` prints, not the
 *   development key `task dev` prints.
 */
import assert from "node:assert/strict";
import { baseConfig, writeConfig } from "./support/process.ts";
import { ROOT, runToEnd, spawnListening, taskArgs } from "./support/task_line.ts";

type Json = Record<string, unknown>;

/** An OTLP/HTTP receiver: every JSON export request, by signal. */
function startReceiver() {
  const got = { traces: [] as Json[], metrics: [] as Json[], logs: [] as Json[] };
  const raw: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const text = await req.text();
    raw.push(text);
    const signal = new URL(req.url).pathname.replace("/v1/", "") as keyof typeof got;
    if (signal in got && req.headers.get("content-type")?.includes("json")) {
      got[signal].push(JSON.parse(text));
    }
    return Response.json({});
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, got, raw, close: () => server.shutdown() };
}

/**
 * A fake chat upstream that records the headers of every inference request it gets (the
 * gateway's start-up listing of `/v1/models` is answered with 404 and not recorded).
 */
function startUpstream() {
  const seen: Headers[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    if (req.method === "GET") return new Response("not found", { status: 404 });
    seen.push(req.headers);
    const body = await req.json();
    if (body.stream) {
      const chunk = (c: unknown) => `data: ${JSON.stringify(c)}\n\n`;
      const base = { id: "chatcmpl-otel", object: "chat.completion.chunk", created: 1, model: "m" };
      return new Response(
        chunk({
          ...base,
          choices: [{ index: 0, delta: { content: "traced" }, finish_reason: null }],
        }) +
          chunk({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }) +
          chunk({
            ...base,
            choices: [],
            usage: { prompt_tokens: 7, completion_tokens: 1, total_tokens: 8 },
          }) +
          "data: [DONE]\n\n",
        { headers: { "content-type": "text/event-stream" } },
      );
    }
    return Response.json({
      id: "chatcmpl-otel",
      object: "chat.completion",
      created: 1,
      model: "demo-chat",
      choices: [{
        index: 0,
        message: { role: "assistant", content: "traced" },
        finish_reason: "stop",
      }],
      usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 },
    });
  });
  return { url: `http://127.0.0.1:${server.addr.port}/v1`, seen, close: () => server.shutdown() };
}

const spans = (exports: Json[]) =>
  exports.flatMap((e) =>
    (e.resourceSpans as Json[]).flatMap((r) =>
      (r.scopeSpans as Json[]).flatMap((s) => s.spans as Json[])
    )
  );
const logRecords = (exports: Json[]) =>
  exports.flatMap((e) =>
    (e.resourceLogs as Json[]).flatMap((r) =>
      (r.scopeLogs as Json[]).flatMap((s) => s.logRecords as Json[])
    )
  );
const metricNames = (exports: Json[]) =>
  new Set(
    exports.flatMap((e) =>
      (e.resourceMetrics as Json[]).flatMap((r) =>
        (r.scopeMetrics as Json[]).flatMap((s) => (s.metrics as Json[]).map((m) => m.name))
      )
    ),
  );
const bodyOf = (r: Json) => String((r.body as Json | undefined)?.stringValue ?? "");

async function until(what: string, ok: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

Deno.test("OpenTelemetry: upstream client spans with traceparent, the request line and metrics exported, no secret", async () => {
  const receiver = startReceiver();
  const upstream = startUpstream();
  const dir = await Deno.makeTempDir();
  const otelEnv = {
    OTEL_DENO: "true",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_METRIC_EXPORT_INTERVAL: "300",
    OTEL_SERVICE_NAME: "gateway-under-test",
  };
  try {
    const cfg = await writeConfig(
      dir,
      baseConfig({ upstreamUrl: upstream.url, storePath: `${dir}/gw.kv` }),
    );
    // The key `task keys create` prints once, made with the OTel export on.
    const created = await runToEnd(
      Deno.execPath(),
      [...await taskArgs("keys"), "--config", cfg, "create", "--tier", "pro", "--credits", "5"],
      { env: otelEnv, timeoutMs: 30_000 },
    );
    assert.equal(created.code, 0, created.stderr.join("\n") + created.stdout.join("\n"));
    const key = created.stdout.at(-1)!;
    assert.match(key, /^cgw-/);

    const gw = await spawnListening(
      Deno.execPath(),
      [...await taskArgs("start"), "--config", cfg],
      { env: otelEnv },
    );
    let requestId = "";
    try {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "demo/echo",
          messages: [{ role: "user", content: "trace me" }],
        }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      requestId = res.headers.get("x-request-id")!;
      await res.body?.cancel();

      // The upstream got a W3C traceparent…
      assert.equal(upstream.seen.length, 1);
      const tp = upstream.seen[0].get("traceparent");
      assert.match(tp ?? "", /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
      const [, traceId, parentId] = tp!.split("-");
      // …naming the gateway's client span of that attempt, exported.
      await until(
        "the client span",
        () => spans(receiver.got.traces).some((s) => s.spanId === parentId),
      );
      const client = spans(receiver.got.traces).find((s) => s.spanId === parentId)!;
      assert.equal(client.traceId, traceId);
      assert.equal(client.kind, 3); // SPAN_KIND_CLIENT
      assert.equal(client.name, "POST /v1/chat/completions");
      const attrs = Object.fromEntries(
        (client.attributes as { key: string; value: Json }[]).map((a) => [a.key, a.value]),
      );
      assert.deepEqual(attrs["gateway.upstream.provider"], { stringValue: "plain" });
      assert.equal(Number(Object.values(attrs["http.response.status_code"])[0]), 200);

      // The request's log line, as a log record in the same trace.
      await until(
        "the request log record",
        () => logRecords(receiver.got.logs).some((r) => bodyOf(r).includes(requestId)),
      );
      const record = logRecords(receiver.got.logs).find((r) => bodyOf(r).includes(requestId))!;
      assert.equal(record.traceId, traceId);
      const line = JSON.parse(bodyOf(record));
      assert.equal(line.otel_trace_id, traceId);
      assert.equal(line.status, 200);
      assert.equal(line.prompt_tokens, 7);
      // stdout still has it (the operator's usual log).
      assert.ok(gw.stdout.some((l) => l.includes(requestId)));

      // A stream logs when it ends, after its handler returned: still inside its trace.
      const streamed = await fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "demo/echo",
          stream: true,
          messages: [{ role: "user", content: "trace my stream" }],
        }),
      });
      const streamId = streamed.headers.get("x-request-id")!;
      await streamed.text();
      const streamTrace = upstream.seen[1].get("traceparent")!.split("-")[1];
      await until(
        "the stream's log record",
        () => logRecords(receiver.got.logs).some((r) => bodyOf(r).includes(streamId)),
      );
      const streamRecord = logRecords(receiver.got.logs).find((r) => bodyOf(r).includes(streamId))!;
      assert.equal(streamRecord.traceId, streamTrace);

      // The gateway's own counters, as OTel metrics.
      await until("the gateway's metrics", () => {
        const names = metricNames(receiver.got.metrics);
        return names.has("gateway.requests") && names.has("gateway.tokens");
      });
    } finally {
      assert.equal((await gw.stop()).code, 0);
    }

    // `task dev` prints its development key: never exported either.
    const devDir = await Deno.makeTempDir();
    const devArgs = (await taskArgs("dev")).map((a) => a === "main.ts" ? `${ROOT}main.ts` : a);
    const dev = await spawnListening(Deno.execPath(), [...devArgs, "--port", "0"], {
      cwd: devDir,
      env: { ...otelEnv, OTEL_SERVICE_NAME: "gateway-dev-under-test" },
    });
    try {
      await until("the dev key", () => dev.stderr.some((l) => l.startsWith("cgw-")));
      const devKey = dev.stderr.find((l) => l.startsWith("cgw-"))!;
      // Something of this process was exported (its start-up lines), so absence means something.
      await until(
        "the dev process's logs",
        () =>
          receiver.got.logs.some((e) =>
            JSON.stringify(e).includes("gateway-dev-under-test") &&
            JSON.stringify(e).includes("keyset digest")
          ),
      );
      assert.equal((await dev.stop()).code, 0);
      for (const text of receiver.raw) {
        assert.ok(!text.includes(devKey), "the dev key was exported");
        assert.ok(!text.includes(key), "the created key was exported");
      }
    } finally {
      await dev.stop();
      await Deno.remove(devDir, { recursive: true });
    }
  } finally {
    await upstream.close();
    await receiver.close();
    await Deno.remove(dir, { recursive: true });
  }
});
