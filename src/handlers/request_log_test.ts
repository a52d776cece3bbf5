import assert from "node:assert/strict";
import type { LogLine } from "./context.ts";
import type { RequestInfo } from "./request_info.ts";
import { type ObservedRequest, requestLogger } from "./request_log.ts";

Deno.test("requestLogger: one metrics count and one line, with latency and no content", () => {
  const observed: ObservedRequest[] = [];
  const lines: LogLine[] = [];
  const log = requestLogger({
    metrics: { request: (o) => observed.push(o) },
    now: () => 1_250,
    emit: (line, o, ms) => {
      lines.push(line);
      assert.equal(o, observed.at(-1), "the observed request is the one counted");
      assert.equal(ms, 250, "latency from the request start");
    },
  });
  const info: RequestInfo = {
    requestId: "req-1",
    traceId: "t-1",
    started: 1_000,
    model: "demo/echo",
    provider: "demo",
    usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
    metadata: undefined,
    phases: {},
    route: "/v1/chat/completions",
    keyId: "key_1",
  } as RequestInfo;
  log(info, 200);
  assert.equal(observed.length, 1);
  assert.equal(observed[0].route, "/v1/chat/completions");
  assert.equal(lines.length, 1);
  assert.equal(lines[0].outcome, "ok");
  assert.equal(lines[0].latency_ms, 250);
  assert.equal(lines[0].key_id, "key_1");
  assert.equal(lines[0].prompt_tokens, 3);
  log({ ...info, route: undefined }, 429);
  assert.equal(observed[1].route, "unmatched");
  assert.equal(lines[1].outcome, "refused");
});
