/**
 * A test gateway whose shared models are served only by the plain demo
 * upstream, reached through a recording proxy: tests see the exact bodies the
 * gateway sent upstream (what was mapped, renamed or withheld).
 */
import type { GatewayConfig } from "../../src/config/schema.ts";
import { startTestGateway, type TestGateway, type TestGatewayOptions } from "./gateway.ts";
import { type RecordingProxy, startRecordingProxy } from "./recording_proxy.ts";
import { plainRoutesOnly } from "./route_config.ts";

export interface RecordedGateway {
  gw: TestGateway;
  proxy: RecordingProxy;
  /** The JSON bodies the gateway sent upstream to `path`, in order. */
  sent(path: string): Record<string, unknown>[];
}

export async function withRecordedGateway(
  fn: (r: RecordedGateway) => Promise<void>,
  configure?: (c: GatewayConfig) => void,
  opts: TestGatewayOptions = {},
): Promise<void> {
  let proxy: RecordingProxy | undefined;
  const gw = await startTestGateway({
    ...opts,
    configure: (c) => {
      plainRoutesOnly(c);
      const plain = c.providers.find((p) => p.name === "plain")!;
      proxy = startRecordingProxy(plain.base_url.replace(/\/$/, ""));
      plain.base_url = proxy.url;
      configure?.(c);
    },
  });
  const p = proxy!;
  try {
    await fn({
      gw,
      proxy: p,
      sent: (path) =>
        p.exchanges.filter((e) => e.path === path).map((e) =>
          JSON.parse(new TextDecoder().decode(e.request))
        ),
    });
  } finally {
    await gw.close();
    await p.close();
  }
}
