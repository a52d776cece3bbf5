/**
 * The price of one durable Deno KV commit on this disk (a fresh file in
 * `dir`): the floor under any design that commits before answering.
 */
import { median, percentile } from "./stats.ts";

export async function kvCommitLatency(
  dir: string,
  n = 300,
): Promise<{ p50: number; p99: number }> {
  const kv = await Deno.openKv(`${dir}/probe.kv`);
  const times: number[] = [];
  const value = { pad: "x".repeat(512) };
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await kv.set(["probe", i], value);
    times.push(performance.now() - t0);
  }
  kv.close();
  return { p50: median(times), p99: percentile(times, 99) };
}
