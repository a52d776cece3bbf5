/** A request state over a fake context, for the stages' unit tests. */
import type { GatewayContext, LogLine } from "./context.ts";
import { type InferenceEndpoint, InferenceState } from "./inference_state.ts";
import type { RequestInfo } from "./request_info.ts";

export function fakeState(ctxParts: Partial<Record<keyof GatewayContext, unknown>> = {}) {
  const logs: LogLine[] = [];
  let clock = 0;
  const ctx = {
    monotonic: () => (clock += 5),
    log: (l: LogLine) => logs.push(l),
    catalog: { providers: new Map() },
    verification: () => null,
    preAdmission: { note: () => {} },
    ...ctxParts,
  } as unknown as GatewayContext;
  const ep: InferenceEndpoint = {
    endpoint: "/v1/chat/completions",
    errorFormat: "openai",
    plan: () => {
      throw new Error("not planned in this test");
    },
  };
  const info: RequestInfo = {
    requestId: "req-1",
    traceId: "trace-1",
    started: 0,
    model: null,
    provider: null,
    usage: undefined,
    metadata: undefined,
    phases: {},
  };
  const s = new InferenceState(new Request("http://gw/v1/chat/completions"), ctx, ep, info);
  return { s, info, logs };
}
