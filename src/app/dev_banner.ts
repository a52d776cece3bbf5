/**
 * What `serve --dev` prints once listening: the demo upstreams and the dev
 * key (pro tier, 100 credits), created once and reused across restarts.
 */
import type { GatewayConfig } from "../config/mod.ts";
import { devKey, type DevKeyDeps } from "../admission/mod.ts";

/** Prints the dev banner; `file` is where `read`/`save` keep the key (named in the message). */
export async function printDevKey(
  config: GatewayConfig,
  deps: DevKeyDeps,
  file: string,
  print: (line: string) => void,
): Promise<void> {
  const { key, reused } = await devKey(deps);
  print(`development mode: demo upstreams ${config.providers.map((p) => p.base_url).join(", ")}`);
  print(
    reused
      ? `development API key (reused from ${file}):\n${key}`
      : `development API key (pro tier, 100 credits, saved in ${file}):\n${key}`,
  );
}
