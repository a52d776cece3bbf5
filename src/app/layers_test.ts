import assert from "node:assert/strict";
import { compose } from "../http/chain.ts";
import { corsPolicy } from "../http/cors.ts";
import type { GatewayContext } from "../handlers/context.ts";
import type { Exchange } from "./exchange.ts";
import {
  aciHeadersLayer,
  corsLayer,
  metricsLayer,
  requestLogLayer,
  serverTimingLayer,
  traceLayer,
} from "./layers.ts";
import { errorRenderer } from "./render_error.ts";

function world() {
  let clock = 0;
  const events: string[] = [];
  const ctx = {
    monotonic: () => (clock += 1),
    randomUUID: () => "fresh-id",
    identity: { current: () => ({ digest: "sha256:ks" }) },
    metrics: {
      inFlight: (d: number) => events.push(`inFlight ${d}`),
      own: (ms: number) => events.push(`own ${ms}`),
    },
    logRequest: (info: { route?: string }, status: number) =>
      events.push(`log ${info.route} ${status}`),
    log: () => {},
  } as unknown as GatewayContext;
  const run = compose<Exchange>(
    [
      requestLogLayer(ctx),
      metricsLayer(ctx),
      traceLayer(ctx, (m, p) => m === "POST" && p === "/v1/chat/completions"),
      corsLayer(corsPolicy(["https://app.example"]), (p) => p === "/v1/models" ? ["GET"] : []),
      serverTimingLayer(ctx),
      aciHeadersLayer(ctx),
    ],
    (s) => {
      s.pattern = "/v1/models";
      s.info.phases.upstream = 2;
      return new Response("ok");
    },
    errorRenderer(ctx.log),
  );
  const exchange = (req: Request): Exchange => ({
    req,
    url: new URL(req.url),
    started: 0,
    format: "openai",
    pattern: "unmatched",
    info: {
      requestId: "r",
      traceId: "",
      started: 0,
      model: null,
      provider: null,
      usage: undefined,
      metadata: undefined,
      phases: {},
    },
  });
  return { run, exchange, events };
}

Deno.test("layers: an answer gets the ACI headers, Server-Timing, the CORS grant, metrics and one log line", async () => {
  const { run, exchange, events } = world();
  const s = exchange(
    new Request("http://gw/v1/models", { headers: { origin: "https://app.example" } }),
  );
  const res = await run(s);
  assert.equal(res.headers.get("x-aci-version"), "aci/1");
  assert.equal(res.headers.get("x-aci-keyset-digest"), "sha256:ks");
  assert.equal(res.headers.get("server-timing"), "gw;dur=1.00, upstream;dur=2.00");
  assert.equal(res.headers.get("access-control-allow-origin"), "https://app.example");
  assert.equal(s.info.traceId, "fresh-id");
  assert.deepEqual(events, ["inFlight 1", "own 0", "inFlight -1", "log /v1/models 200"]);
});

Deno.test("layers: a bad trace id is a 400 in the envelope, except on an inference endpoint", async () => {
  const { run, exchange, events } = world();
  const headers = { "x-service-trace-id": "bad id!" };
  const res = await run(exchange(new Request("http://gw/v1/models", { headers })));
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error.param, "x-service-trace-id");
  assert.ok(res.headers.get("server-timing")?.startsWith("gw;dur="));
  assert.equal(events.at(-1), "log unmatched 400");

  const s = exchange(
    new Request("http://gw/v1/chat/completions", { method: "POST", headers }),
  );
  assert.equal((await run(s)).status, 200);
  assert.equal(s.info.headerError?.kind, "invalid_request");
  assert.equal(s.info.traceId, "fresh-id");
});

Deno.test("layers: a preflight of a served path is answered before the handler, and logged as such", async () => {
  const { run, exchange, events } = world();
  const res = await run(exchange(
    new Request("http://gw/v1/models", {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "GET" },
    }),
  ));
  assert.equal(res.status, 204);
  assert.equal(res.headers.get("x-aci-version"), "aci/1");
  assert.equal(events.at(-1), "log preflight 204");
});
