/**
 * Preloaded into the gateway by `tail_timeline.ts`: a timeline of what can hold
 * a request at 500 req/s, on the wall clock (ms since the epoch, so the client's
 * and V8's records line up). The event loop's lags (a 1 ms interval firing
 * late by more than 2 ms), each KV commit's mutations, synchronous part and
 * wall time. On SIGUSR2 appends `{ origin, lags, commits }` to `$PROBE_FILE`.
 */
const origin = performance.timeOrigin;
const lags: [number, number][] = [];
// at, mutations, sync ms, wall ms (and with LAG_KEYS, what it wrote)
const commits: [number, number, number, number, string?][] = [];
let last = performance.now();
// Unreferenced: a preload's live timer would hold the main module back.
Deno.unrefTimer(setInterval(() => {
  const now = performance.now();
  const lag = now - last - 1;
  if (lag > 2) lags.push([origin + last, lag]);
  last = now;
}, 1));

const mem = await Deno.openKv(":memory:");
const atomicProto = Object.getPrototypeOf(mem.atomic()) as Record<string, unknown>;
mem.close();
const counted = new WeakMap<object, number>();
// With LAG_KEYS set, each commit also names its mutations (op and the key's first two parts).
const named = Deno.env.get("LAG_KEYS") ? new WeakMap<object, string[]>() : null;
for (const m of ["set", "sum", "delete", "mutate", "min", "max", "enqueue", "check"]) {
  const orig = atomicProto[m] as (...a: unknown[]) => unknown;
  atomicProto[m] = function (this: object, ...a: unknown[]) {
    if (m !== "check") {
      counted.set(this, (counted.get(this) ?? 0) + (m === "mutate" ? a.length : 1));
    }
    if (named && m !== "mutate" && m !== "enqueue") {
      const key = (m === "check" ? (a[0] as { key?: unknown[] })?.key : a[0]) as unknown[];
      const list = named.get(this) ?? [];
      list.push(`${m} ${Array.isArray(key) ? key.slice(0, 2).map(String).join("/") : "?"}`);
      named.set(this, list);
    }
    return orig.apply(this, a);
  };
}
const commit = atomicProto.commit as (...a: unknown[]) => Promise<unknown>;
atomicProto.commit = function (this: object, ...a: unknown[]) {
  const t0 = performance.now();
  const p = commit.apply(this, a);
  const sync = performance.now() - t0;
  const n = counted.get(this) ?? 0;
  const what = named?.get(this)?.join(", ");
  const settled = () => commits.push([origin + t0, n, sync, performance.now() - t0, what]);
  p.then(settled, settled);
  return p;
};

const out = Deno.env.get("PROBE_FILE");
if (out) {
  Deno.addSignalListener("SIGUSR2", () => {
    Deno.writeTextFileSync(out, JSON.stringify({ origin, lags, commits }) + "\n", { append: true });
    lags.length = 0;
    commits.length = 0;
  });
}
