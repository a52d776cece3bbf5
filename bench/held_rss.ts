/**
 * RSS of a server holding many slow streams open (issue #19's "RSS per open
 * stream"): shared by `task bench` and bench/probes/tls_stream_rss/tls_stream_rss.ts.
 */
import { holdStreams, type Target } from "./load.ts";
import { rssBytes } from "./processes.ts";
import { sleep } from "../src/store/transient.ts";
import type { HeldWaits } from "./plan.ts";

/** The full plan's waits (bench/plan.ts; `--quick` passes shorter ones). */
const WAITS: HeldWaits = { settleMs: 500, idleMs: 1000, afterMs: 2000 };

export interface HeldRss {
  idle: number;
  open: number;
  after: number;
}

/**
 * RSS of `pid` idle, with `n` slow streams open through it, and 2 s (`waits`) after
 * they closed. Run on a fresh server (after a small warm-up of the stream
 * path): a heap already grown by earlier load would absorb the streams and
 * hide their cost.
 */
export async function measureHeld(
  t: Target,
  pid: number,
  mockUrl: string,
  n: number,
  client?: Deno.HttpClient,
  waits: HeldWaits = WAITS,
): Promise<HeldRss> {
  const cycle = async (k: number, atPeak?: () => void) => {
    const h = await holdStreams(t, k);
    await sleep(waits.settleMs);
    atPeak?.();
    const release = await fetch(`${mockUrl}/release`, { method: "POST", client });
    await release.body?.cancel();
    const completed = await h.drain();
    h.close();
    if (completed !== k) throw new Error(`only ${completed} of ${k} held streams completed`);
  };
  await cycle(50);
  await sleep(waits.idleMs);
  const idle = rssBytes(pid);
  let open = 0;
  await cycle(n, () => (open = rssBytes(pid)));
  await sleep(waits.afterMs);
  return { idle, open, after: rssBytes(pid) };
}
