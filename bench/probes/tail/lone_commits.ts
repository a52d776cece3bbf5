/**
 * What a lone (c=1) whole answer commits: chats one at a time through the
 * gateway (pinned as in `task bench`, `lag_preload.ts` with `LAG_KEYS`), each
 * commit that began between a request and its answer, grouped by what it
 * wrote, per request.
 *
 * `deno run -A bench/probes/tail/lone_commits.ts [requests]`
 */
import { chatBody } from "../../load.ts";
import { gatewayModel } from "../../gateway_setup.ts";
import { percentile } from "../../stats.ts";
import { startProbedGateway } from "./probed_gateway.ts";

if (import.meta.main) {
  const n = Number(Deno.args[0] ?? 500);
  const p = await startProbedGateway({ prefix: "lone_commits_", env: { LAG_KEYS: "1" } });
  const gw = p.gw;
  const client = Deno.createHttpClient({});
  const one = async () => {
    const at = performance.timeOrigin + performance.now();
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.key}`, "content-type": "application/json" },
      body: chatBody(gatewayModel("chat"), false),
      client,
    });
    await r.arrayBuffer();
    return { at, ms: performance.timeOrigin + performance.now() - at };
  };
  try {
    for (let i = 0; i < 200; i++) await one();
    await p.timeline(); // drops the warm-up's records
    const reqs: { at: number; ms: number }[] = [];
    for (let i = 0; i < n; i++) reqs.push(await one());
    const tl = await p.timeline();
    const kinds = new Map<string, { count: number; wall: number[] }>();
    for (const q of reqs) {
      for (const c of tl.commits) {
        if (c[0] < q.at || c[0] > q.at + q.ms) continue;
        // What it wrote, by key family (ids dropped).
        const what = [...new Set((c[4] ?? "").split(", ").map((w) => w.replace(/\/.*/, "")))]
          .sort().join(" + ");
        const k = kinds.get(what) ?? kinds.set(what, { count: 0, wall: [] }).get(what)!;
        k.count++;
        k.wall.push(c[3]);
      }
    }
    console.log(`${n} requests, p50 ${percentile(reqs.map((q) => q.ms), 50).toFixed(3)} ms`);
    for (const [what, k] of [...kinds].sort((a, b) => b[1].count - a[1].count)) {
      console.log(
        `  ${(k.count / n).toFixed(3)} per request, wall p50 ${
          percentile(k.wall, 50).toFixed(2)
        } ms: ${what}`,
      );
    }
  } finally {
    client.close();
    await p.stop();
  }
}
