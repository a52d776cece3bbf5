/**
 * Where the gateway's time goes: a separate gateway process under
 * `--cpu-prof`, driven one request at a time and then at c=32; each load's
 * window of the one profile is summarized on its own (start-up, warm-up and
 * shutdown left out).
 */
import { closedLoop, type Target } from "./load.ts";
import { gatewayModel, startGateway } from "./gateway_setup.ts";
import { summarizeProfile } from "./cpu_profile.ts";
import { fmt, renderProfile } from "./report.ts";
import { ROOT } from "./processes.ts";

export async function profileGateway(
  dir: string,
  upstreamUrl: string,
  cpu: number,
  loads: { concurrency: number; seconds: number }[],
): Promise<string> {
  await Deno.mkdir(dir, { recursive: true });
  const gw = await startGateway(dir, upstreamUrl, cpu, ["--cpu-prof", `--cpu-prof-dir=${dir}`]);
  const runs: { concurrency: number; start: number; end: number; ok: number; seconds: number }[] =
    [];
  try {
    const t: Target = {
      base: gw.url,
      headers: { authorization: `Bearer ${gw.key}` },
      model: gatewayModel,
    };
    await closedLoop(t, { concurrency: 32, seconds: 1 });
    for (const l of loads) {
      const start = performance.now();
      const r = await closedLoop(t, l);
      runs.push({ ...l, start, end: performance.now(), ok: r.ok, seconds: r.seconds });
    }
  } finally {
    await gw.stop();
  }
  const exited = performance.now();
  const file = [...Deno.readDirSync(dir)].find((e) => e.name.endsWith(".cpuprofile"));
  if (!file) return "CPU profile: the gateway wrote no .cpuprofile (did it exit cleanly?).";
  const json: unknown = JSON.parse(await Deno.readTextFile(`${dir}/${file.name}`));
  return runs.map((r) => {
    const s = summarizeProfile(json, ROOT, {
      top: 15,
      window: { fromEndMs: exited - r.start, toEndMs: exited - r.end },
    });
    return renderProfile(
      s,
      `closed loop at c=${r.concurrency} for ${fmt(r.seconds, 1)} s, ${fmt(r.ok / r.seconds, 0)} ` +
        `req/s while profiled, ${
          fmt((s.busyMs * 1000) / r.ok, 0)
        } µs of main-thread time per request`,
    );
  }).join("\n\n");
}
