/**
 * The gateway under `lag_preload.ts`, pinned as in `task bench`, beside the mock: what
 * `tail_timeline.ts`, `first_chunk.ts` and `lone_commits.ts` share. `timeline()` asks the
 * gateway for its records since the last call (SIGUSR2) and reads them back.
 */
import { gatewayModel, startGateway } from "../../gateway_setup.ts";
import type { Target } from "../../load.ts";
import { spawnPinned } from "../../processes.ts";

const ROOT = new URL("../../../", import.meta.url).href;
const PRELOAD = `--preload=${ROOT}bench/probes/tail/lag_preload.ts`;

/** As `lag_preload.ts` writes it: wall-clock ms; commits as [at, mutations, sync, wall, what]. */
export interface Timeline {
  origin: number;
  lags: [number, number][];
  commits: [number, number, number, number, string?][];
}

export async function startProbedGateway(o: {
  prefix: string;
  denoFlags?: string[];
  env?: Record<string, string>;
  /** Where the gateway's stdout goes (its `--trace-gc` lines). */
  stdoutTo?: (dir: string) => string;
}) {
  const dir = await Deno.makeTempDir({ prefix: o.prefix });
  const mock = await spawnPinned(
    1,
    ["run", "-A", "bench/mock_upstream.ts"],
    /mock listening on (\S+)/,
  );
  const probe = `${dir}/gateway.probe`;
  const out = o.stdoutTo?.(dir);
  const gw = await startGateway(
    dir,
    mock.url,
    0,
    [PRELOAD, ...(o.denoFlags ?? [])],
    undefined,
    { PROBE_FILE: probe, ...o.env },
    out,
  );
  const target: Target = {
    base: gw.url,
    headers: { authorization: `Bearer ${gw.key}` },
    model: gatewayModel,
  };
  const direct: Target = { base: mock.url, headers: {}, model: (m) => m };
  return {
    gw,
    out,
    target,
    direct,
    async timeline(): Promise<Timeline> {
      Deno.kill(gw.pid, "SIGUSR2");
      await new Promise((r) => setTimeout(r, 300));
      const lines = (await Deno.readTextFile(probe)).trim().split("\n");
      return JSON.parse(lines[lines.length - 1]) as Timeline;
    },
    async stop() {
      await gw.stop();
      await mock.stop();
      await Deno.remove(dir, { recursive: true });
    },
  };
}
