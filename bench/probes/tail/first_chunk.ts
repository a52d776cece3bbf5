/**
 * What a lone stream waits for before its first chunk: streams one at a time
 * through the gateway (pinned as in `task bench`, `lag_preload.ts` recording
 * its KV commits on the wall clock) and to the mock directly; prints the
 * first-chunk p50 of both and, per stream, the gateway's commits that began
 * between the request and its first chunk.
 *
 * `deno run -A bench/probes/tail/first_chunk.ts [streams]`
 */
import { gatewayModel, startGateway } from "../../gateway_setup.ts";
import { streamOnce, type Target } from "../../load.ts";
import { spawnPinned } from "../../processes.ts";
import { percentile } from "../../stats.ts";

const ROOT = new URL("../../../", import.meta.url).href;
const PRELOAD = `--preload=${ROOT}bench/probes/tail/lag_preload.ts`;

if (import.meta.main) {
  const n = Number(Deno.args[0] ?? 200);
  const dir = await Deno.makeTempDir({ prefix: "first_chunk_" });
  const mock = await spawnPinned(
    1,
    ["run", "-A", "bench/mock_upstream.ts"],
    /mock listening on (\S+)/,
  );
  const probe = `${dir}/gateway.probe`;
  const gw = await startGateway(dir, mock.url, 0, [PRELOAD], undefined, {
    PROBE_FILE: probe,
    LAG_KEYS: "1",
  });
  const client = Deno.createHttpClient({});
  try {
    const t: Target = {
      base: gw.url,
      headers: { authorization: `Bearer ${gw.key}` },
      model: gatewayModel,
    };
    const direct: Target = { base: mock.url, headers: {}, model: (m) => m };
    for (let i = 0; i < 50; i++) await streamOnce(t, client);
    Deno.kill(gw.pid, "SIGUSR2");
    await new Promise((r) => setTimeout(r, 200));
    const g: { at: number; first: number }[] = [];
    const d: number[] = [];
    for (let i = 0; i < n; i++) {
      d.push((await streamOnce(direct, client)).firstToken);
      const at = performance.timeOrigin + performance.now();
      g.push({ at, first: (await streamOnce(t, client)).firstToken });
    }
    Deno.kill(gw.pid, "SIGUSR2");
    await new Promise((r) => setTimeout(r, 300));
    const lines = (await Deno.readTextFile(probe)).trim().split("\n");
    const tl = JSON.parse(lines[lines.length - 1]) as {
      commits: [number, number, number, number, string?][];
    };
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
    await gw.stop();
    await mock.stop();
    await Deno.remove(dir, { recursive: true });
  }
}
