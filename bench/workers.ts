/**
 * #27 "Every core" (docs/decisions/workers.md): what `serve.workers` costs
 * when it cannot help. One gateway with one worker and one with two workers,
 * both pinned (taskset, inherited by the workers) to the same one core and
 * measured in alternating rounds with `task bench`'s closed loop; a row gives
 * the throughput and the CPU per answered request (the whole process tree:
 * supervisor and workers) of each, the loss against one worker (target ≤ 5%
 * each: no contention tax), and every `database is locked` the gateways
 * logged plus every non-200 (target 0). In the same rounds a control, two
 * independent one-worker gateways on their own stores time-sliced on that
 * core, shows what time-slicing two processes costs with nothing shared (what
 * bounds the row when it misses). Where the machine has more than two
 * cores, a second row gives the throughput of 1, 2 and 4 workers, each
 * allowed every core but the load generator's. Alone:
 *
 *   deno run -A bench/workers.ts [--rounds N] [--seconds S]
 */
import { closedLoop, type Target } from "./load.ts";
import { gatewayModel, type GatewayUnderTest, startGateway } from "./gateway_setup.ts";
import { cpuMs, type EarlyStarts, pinTree, takeOr } from "./processes.ts";
import { median } from "./stats.ts";
import { atMost, fmt, type Row } from "./report.ts";
import { type MeasureOptions, runStandalone } from "./standalone.ts";

const CONCURRENCY = 32;
const TARGET_PCT = 5;
const TOKEN = "bench-operator-token-" + "e5f6a7b8".repeat(4);

/** Per worker: group commits, lock retries, requests (from each worker's own metrics). */
type Counts = { commits: number; retries: number; requests: number };

/**
 * Every worker's counters: metrics are per worker (a scrape reaches the worker
 * that accepted its connection), so scrape on fresh connections until each
 * worker label was seen.
 */
async function workerCounts(g: GatewayUnderTest, workers: number): Promise<Counts> {
  const seen = new Map<string, Counts>();
  for (let i = 0; i < 400 && seen.size < workers; i++) {
    const client = Deno.createHttpClient({});
    try {
      const text = await (await fetch(`${g.url}/admin/v1/metrics`, {
        headers: { authorization: `Bearer ${TOKEN}` },
        client,
      })).text();
      const worker = text.match(/worker="(\d+)"/)?.[1] ?? "0";
      const sum = (re: RegExp) =>
        text.split("\n").filter((l) => re.test(l)).reduce(
          (a, l) => a + Number(l.slice(l.lastIndexOf(" ") + 1)),
          0,
        );
      seen.set(worker, {
        commits: sum(/^gateway_group_commit_mutations_count/),
        retries: sum(/^gateway_kv_retries_total/),
        requests: sum(/^gateway_requests_total/),
      });
    } finally {
      client.close();
    }
  }
  if (seen.size < workers) throw new Error(`saw ${seen.size} of ${workers} workers' metrics`);
  const total: Counts = { commits: 0, retries: 0, requests: 0 };
  for (const c of seen.values()) {
    total.commits += c.commits;
    total.retries += c.retries;
    total.requests += c.requests;
  }
  return total;
}

/** CPU of a process and its children (a supervisor and its workers), ms. */
function treeCpuMs(pid: number): number {
  let total = cpuMs(pid);
  let children: string;
  try {
    children = Deno.readTextFileSync(`/proc/${pid}/task/${pid}/children`);
  } catch {
    return total;
  }
  for (const c of children.trim().split(/\s+/)) if (c !== "") total += treeCpuMs(Number(c));
  return total;
}

/** Lines (log and stderr) mentioning SQLite's lock error. */
async function lockErrors(g: GatewayUnderTest, stdoutFile: string): Promise<number> {
  const out = await Deno.readTextFile(stdoutFile).catch(() => "");
  const n = (s: string) => s.split("\n").filter((l) => /database is locked/i.test(l)).length;
  return n(out) + n(g.stderr.join("\n"));
}

/** A gateway of `workers` workers on `cpus` ("0" or "0-2"); resolves once all serve. */
async function start(
  dir: string,
  o: MeasureOptions,
  workers: number,
  /** A number: `--quick` may start it on every core first (bench/processes.ts). */
  cpus: string | number,
): Promise<{ g: GatewayUnderTest; stdout: string }> {
  const g = await takeOr(o.early, `workers/${dir}`, () => startRaw(dir, o, workers, cpus));
  return { g, stdout: `${dir}/stdout.log` };
}

/**
 * `--quick`: the first set's one-worker gateways started ahead (bench/processes.ts
 * EarlyStarts); the two-worker one is not (its supervisor watches its workers' timing).
 */
export function workersEarly(o: MeasureOptions, early: EarlyStarts): void {
  for (const name of ["one", "ctl-a", "ctl-b"]) {
    const dir = `${o.dir}/pair-0/${name}`;
    early.start(`workers/${dir}`, () => startRaw(dir, o, 1, o.serverCpu));
  }
}

async function startRaw(
  dir: string,
  o: MeasureOptions,
  workers: number,
  cpus: string | number,
): Promise<GatewayUnderTest> {
  await Deno.mkdir(dir, { recursive: true });
  const stdout = `${dir}/stdout.log`;
  const g = await startGateway(
    dir,
    o.mockUrl,
    cpus,
    [],
    undefined,
    { GATEWAY_ADMIN_TOKEN: TOKEN },
    stdout,
    undefined,
    workers,
  );
  const t0 = performance.now();
  while (workers > 1 && !g.stderr.some((l) => l === `${workers} workers serving`)) {
    if (performance.now() - t0 > 60_000) throw new Error(`workers never served:\n${g.stderr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  // Started on every core (`--quick`): its workers too, now on its one core like it.
  if (typeof cpus === "number") await pinTree(g.pid, cpus);
  return g;
}

const target = (g: GatewayUnderTest): Target => ({
  base: g.url,
  headers: { authorization: `Bearer ${g.key}` },
  model: gatewayModel,
});

/** The machine's cores (not this process's affinity: the bench pins itself to one). */
function machineCores(): number {
  return Deno.readTextFileSync("/proc/cpuinfo").split("\n").filter((l) => /^processor\s*:/.test(l))
    .length;
}

type Config = "one" | "two" | "ctl";

/**
 * One configuration under load for a round: its gateways (the control is two
 * independent single-worker gateways, each on its own store, half the
 * connections each), answered requests per second and CPU µs per request.
 */
async function measure(gs: GatewayUnderTest[], seconds: number) {
  const cpu0 = gs.reduce((a, g) => a + treeCpuMs(g.pid), 0);
  const res = await Promise.all(
    gs.map((g) => closedLoop(target(g), { concurrency: CONCURRENCY / gs.length, seconds })),
  );
  const cpu = gs.reduce((a, g) => a + treeCpuMs(g.pid), 0) - cpu0;
  const ok = res.reduce((a, r) => a + r.ok, 0);
  return {
    rps: ok / res[0].seconds,
    cpuUs: (cpu * 1000) / Math.max(1, ok),
    errors: res.reduce((a, r) => a + r.errors, 0),
  };
}

export async function workersRows(o: MeasureOptions): Promise<Row[]> {
  const rps: Record<Config, number[]> = { one: [], two: [], ctl: [] };
  const cpuUs: Record<Config, number[]> = { one: [], two: [], ctl: [] };
  let locks = 0;
  let errors = 0;
  const counts = { one: [] as Counts[], two: [] as Counts[] };
  const pairs = Math.max(1, Math.ceil(o.rounds / 2));
  const orders: Config[][] = [["one", "two", "ctl"], ["two", "ctl", "one"], ["ctl", "one", "two"]];
  for (let pair = 0; pair < pairs; pair++) {
    // Started together (start-up is most of a quick run's time), measured apart.
    const [one, two, ...ctl] = await Promise.all([
      start(`${o.dir}/pair-${pair}/one`, o, 1, o.serverCpu),
      start(`${o.dir}/pair-${pair}/two`, o, 2, o.serverCpu),
      start(`${o.dir}/pair-${pair}/ctl-a`, o, 1, o.serverCpu),
      start(`${o.dir}/pair-${pair}/ctl-b`, o, 1, o.serverCpu),
    ]);
    const gateways: Record<Config, GatewayUnderTest[]> = {
      one: [one.g],
      two: [two.g],
      ctl: ctl.map((c) => c.g),
    };
    try {
      // Warm all (tokenizers, JIT, leases) unrecorded.
      for (const c of orders[0]) await measure(gateways[c], o.warmSeconds ?? 1);
      for (let r = 0; r < 2 && rps.one.length < o.rounds; r++) {
        for (const c of orders[(pair * 2 + r) % orders.length]) {
          const m = await measure(gateways[c], o.seconds);
          errors += m.errors;
          rps[c].push(m.rps);
          cpuUs[c].push(m.cpuUs);
        }
        const at = (c: Config) =>
          `${fmt(rps[c].at(-1)!, 0)} rps ${fmt(cpuUs[c].at(-1)!, 1)} µs/req`;
        o.log(
          `workers pair ${pair + 1} round ${r + 1}: 1 worker ${at("one")}; 2 workers on the same ` +
            `core ${at("two")}; 2 independent gateways there ${at("ctl")}`,
        );
      }
      counts.one.push(await workerCounts(one.g, 1));
      counts.two.push(await workerCounts(two.g, 2));
    } finally {
      for (const g of Object.values(gateways).flat()) await g.stop();
    }
    for (const x of [one, two, ...ctl]) locks += await lockErrors(x.g, x.stdout);
  }
  // Paired per round (seconds apart, so drift cancels), then the median.
  const lossOf = (c: Config) => median(rps[c].map((x, i) => ((rps.one[i] - x) / rps.one[i]) * 100));
  const extraOf = (c: Config) =>
    median(cpuUs[c].map((x, i) => ((x - cpuUs.one[i]) / cpuUs.one[i]) * 100));
  const [loss, extra] = [lossOf("two"), extraOf("two")];
  const perReq = (cs: Counts[]) =>
    cs.reduce((a, c) => a + c.commits, 0) / Math.max(1, cs.reduce((a, c) => a + c.requests, 0));
  const retries = [...counts.one, ...counts.two].reduce((a, c) => a + c.retries, 0);
  const rows: Row[] = [{
    metric: `#27 every core: 2 workers time-sliced on one core vs 1 worker there (closed loop, ` +
      `${CONCURRENCY} conn., ${rps.one.length} rounds of ${o.seconds} s alternating on ${pairs} ` +
      `fresh sets; ${fmt(median(rps.two), 0)} vs ${fmt(median(rps.one), 0)} rps, ` +
      `${fmt(median(cpuUs.two), 1)} vs ${fmt(median(cpuUs.one), 1)} µs CPU/req; ` +
      `group commits per request ${fmt(perReq(counts.two), 3)} vs ${fmt(perReq(counts.one), 3)}, ` +
      `${retries} commits retried on a lock; throughput loss / CPU per request added; ` +
      `"database is locked" errors logged, non-200s. What bounds it, same rounds: two ` +
      `independent one-worker gateways on their own stores time-sliced on that core lose ` +
      `${fmt(lossOf("ctl"), 2)} % / add ${fmt(extraOf("ctl"), 2)} %)`,
    gateway: `${fmt(loss, 2)} % / ${fmt(extra, 2)} %; ${locks} locked, ${errors} non-200`,
    target: `≤ ${TARGET_PCT} % / ≤ ${TARGET_PCT} %; 0, 0`,
    verdict: `${atMost(loss, TARGET_PCT, "%")}; ${atMost(extra, TARGET_PCT, "%")}; ${
      locks === 0 && errors === 0 ? "met" : "**MISSED**"
    }`,
  }];
  rows.push(await scalingRow({ ...o, cores: machineCores() }));
  return rows;
}

/** Throughput of 1, 2 and 4 workers on every core but the load's, where there are > 2. */
async function scalingRow(o: MeasureOptions & { cores: number }): Promise<Row> {
  const metric = "#27 every core: throughput of 1 / 2 / 4 workers (closed loop, " +
    `${CONCURRENCY * 2} conn.; servers on every core but the load generator's)`;
  if (o.cores <= 2) {
    return {
      metric,
      gateway: `not measured: ${o.cores} cores (one is the load generator's)`,
      target: "printed where the machine has > 2 cores",
    };
  }
  const load = o.serverCpu === 0 ? 1 : 0;
  const cpus = Array.from({ length: o.cores }, (_, i) => i).filter((c) => c !== load).join(",");
  const out: string[] = [];
  for (const n of [1, 2, 4]) {
    const { g } = await start(`${o.dir}/scale-${n}`, o, n, cpus);
    try {
      await closedLoop(target(g), { concurrency: CONCURRENCY * 2, seconds: 1 });
      const res = await closedLoop(target(g), {
        concurrency: CONCURRENCY * 2,
        seconds: o.seconds,
      });
      out.push(fmt(res.ok / res.seconds, 0));
    } finally {
      await g.stop();
    }
  }
  return { metric, gateway: `${out.join(" / ")} rps`, target: "printed" };
}

if (import.meta.main) {
  await runStandalone("workers", { rounds: 2, seconds: 3 }, (o) => workersRows(o));
}
