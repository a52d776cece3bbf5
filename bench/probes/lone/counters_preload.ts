/**
 * Preloaded into a server under test (`deno run --preload=…`): counts, per
 * process, what each request makes the runtime do — timers armed and
 * cleared, microtasks queued, KV commits and their mutations, KV reads,
 * stdout writes. On SIGUSR2 it appends one JSON line (the totals so far and
 * `performance.now()`) to the file `$PROBE_FILE` (the probe diffs two of them
 * around a load, and matches V8's GC trace lines by time). Only
 * for bench/probes/lone/lone_probe.ts: nothing of the product imports it.
 */
const counts: Record<string, number> = {};
const bump = (k: string, n = 1) => (counts[k] = (counts[k] ?? 0) + n);
/** With PROBE_STACKS set, timers and commits are also counted by the project frame that made them. */
const stacks = Deno.env.get("PROBE_STACKS") !== undefined;
const ROOT = new URL("../../../", import.meta.url).href;
const where = (): string => {
  const lines = (new Error().stack ?? "").split("\n").slice(3);
  const own = lines.find((l) => l.includes(ROOT) && !l.includes("bench/probes/"));
  const m = own?.match(/\((.*)\)$/) ?? own?.match(/at (.*)$/);
  return m ? m[1].replace(ROOT, "") : "(runtime)";
};
const bumpAt = (k: string, n = 1) => {
  bump(k, n);
  if (stacks) bump(`${k} @ ${where()}`, n);
};

const g = globalThis as unknown as Record<string, (...a: unknown[]) => unknown>;
for (
  const name of ["setTimeout", "setInterval", "clearTimeout", "clearInterval", "queueMicrotask"]
) {
  const orig = g[name];
  g[name] = function (this: unknown, ...a: unknown[]) {
    if (name === "setTimeout") bumpAt(Number(a[1] ?? 0) <= 0 ? "setTimeout(0)" : "setTimeout(>0)");
    else if (name === "clearTimeout") {
      if (a[0] !== undefined && a[0] !== null) bumpAt("clearTimeout");
    } else bumpAt(name);
    return orig.apply(this, a);
  };
}

// Neither class is a global: their prototypes, from an in-memory store's instances.
const mem = await Deno.openKv(":memory:");
const atomicProto = Object.getPrototypeOf(mem.atomic()) as Record<string, unknown>;
const kvProto = Object.getPrototypeOf(mem) as Record<string, unknown>;
mem.close();
const pending = new WeakMap<object, number>();
for (const m of ["set", "sum", "delete", "mutate", "min", "max", "check", "enqueue"]) {
  const orig = atomicProto[m] as (...a: unknown[]) => unknown;
  atomicProto[m] = function (this: object, ...a: unknown[]) {
    const n = m === "mutate" || m === "check" ? a.length : 1;
    bump(`kv.atomic.${m}`, n);
    // With --stacks, also by the key's first part (what is written, not only how often).
    if (stacks && m !== "mutate" && m !== "enqueue") {
      const key = (m === "check" ? (a[0] as { key?: unknown[] })?.key : a[0]) as unknown[];
      if (Array.isArray(key)) bump(`kv.atomic.${m} [${String(key[0])}]`, 1);
    }
    if (m !== "check") pending.set(this, (pending.get(this) ?? 0) + n);
    return orig.apply(this, a);
  };
}
const commit = atomicProto.commit as (...a: unknown[]) => Promise<unknown>;
atomicProto.commit = function (this: object, ...a: unknown[]) {
  bumpAt("kv.commit");
  bump("kv.commit.mutations", pending.get(this) ?? 0);
  // The commit's synchronous part (building the op's arguments, the op's own sync work), µs.
  const t0 = performance.now();
  const p = commit.apply(this, a);
  bump("kv.commit.sync µs", (performance.now() - t0) * 1000);
  // Until the commit's promise settles: the SQLite thread's transaction and the wake-up back.
  const settled = () => bump("kv.commit.wall µs", (performance.now() - t0) * 1000);
  p.then(settled, settled);
  return p;
};
for (const m of ["get", "getMany", "list", "set", "delete"]) {
  const orig = kvProto[m] as (...a: unknown[]) => unknown;
  kvProto[m] = function (this: unknown, ...a: unknown[]) {
    bumpAt(`kv.${m}`);
    return orig.apply(this, a);
  };
}
const writeSync = Deno.stdout.writeSync.bind(Deno.stdout);
Deno.stdout.writeSync = (p: Uint8Array) => {
  bump("stdout.writeSync");
  return writeSync(p);
};

// A file of its own: the server's stdout goes through a pipe whose copy may lag.
const out = Deno.env.get("PROBE_FILE");
if (out) {
  Deno.addSignalListener("SIGUSR2", () => {
    const line = JSON.stringify({ t: performance.now(), counts });
    Deno.writeTextFileSync(out, line + "\n", { append: true });
  });
}
