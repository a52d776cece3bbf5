/**
 * What a lone stream waits for before its first chunk: streams one at a time
 * through the gateway (pinned as in `task bench`, `lag_preload.ts` recording
 * its KV commits on the wall clock) and to the mock directly; prints the
 * first-chunk p50 of both and, per stream, the gateway's commits that began
 * between the request and its first chunk.
 *
 * `deno run -A bench/probes/tail/first_chunk.ts [streams]`
 */
import { streamOnce } from "../../load.ts";
import { percentile } from "../../stats.ts";
import { startProbedGateway } from "./probed_gateway.ts";

if (import.meta.main) {
  const n = Number(Deno.args[0] ?? 200);
  const p = await startProbedGateway({ prefix: "first_chunk_", env: { LAG_KEYS: "1" } });
  const client = Deno.createHttpClient({});
  try {
    const { target: t, direct } = p;
    for (let i = 0; i < 50; i++) await streamOnce(t, client);
    await p.timeline(); // drops the warm-up's records
    const g: { at: number; first: number }[] = [];
    const d: number[] = [];
    for (let i = 0; i < n; i++) {
      d.push((await streamOnce(direct, client)).firstToken);
      const at = performance.timeOrigin + performance.now();
      g.push({ at, first: (await streamOnce(t, client)).firstToken });
    }
    const tl = await p.timeline();
    const firsts = g.map((x) => x.first);
    console.log(
      `first chunk p50: gateway ${percentile(firsts, 50).toFixed(3)} ms, direct ${
        percentile(d, 50).toFixed(3)
      } ms`,
    );
    let before = 0;
    const shapes = new Map<string, number>();
    for (const x of g) {
      const cs = tl.commits.filter((c) => c[0] >= x.at && c[0] <= x.at + x.first);
      before += cs.length;
      if (Deno.env.get("FIRST_CHUNK_RAW") && cs.length > 0) {
        console.log(
          `first ${x.first.toFixed(2)}: ` +
            cs.map((c) =>
              `+${(c[0] - x.at).toFixed(2)} ${c[1]}m wall ${c[3].toFixed(2)} ${c[4] ?? ""}`
            )
              .join("; "),
        );
      }
      for (const c of cs) {
        const k = `${c[1]} mutations`;
        shapes.set(k, (shapes.get(k) ?? 0) + 1);
      }
    }
    const split = (has: boolean) =>
      g.filter((x) => tl.commits.some((c) => c[0] >= x.at && c[0] <= x.at + x.first) === has).map((
        x,
      ) => x.first);
    const [withC, without] = [split(true), split(false)];
    console.log(
      `first chunk p50 of streams with a commit begun before it: ${
        withC.length ? percentile(withC, 50).toFixed(3) : "-"
      } ms (${withC.length}); without: ${
        without.length ? percentile(without, 50).toFixed(3) : "-"
      } ms (${without.length})`,
    );
    console.log(
      `commits begun before a stream's first chunk: ${
        (before / g.length).toFixed(2)
      } per stream; ` +
        `by size: ${
          [...shapes].map(([k, v]) => `${k} ×${v}`).join(", ")
        }; all commits ${tl.commits.length}`,
    );
  } finally {
    client.close();
    await p.stop();
  }
}
