/**
 * Summarizes a V8 `.cpuprofile` (as written by `deno run --cpu-prof`): where
 * the gateway's CPU time goes, by function (self and inclusive) and by area
 * (project module folder, npm package, Deno runtime, GC, idle).
 */

export interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface Share {
  name: string;
  ms: number;
  /** Share of the busy (non-idle) time, 0..1. */
  share: number;
}

export interface ProfileSummary {
  totalMs: number;
  busyMs: number;
  selfTop: Share[];
  /** Inclusive time of the project's own functions (`src/`), heaviest first. */
  projectInclusiveTop: Share[];
  areas: Share[];
}

function parseProfile(v: unknown): CpuProfile {
  const o = v as Partial<CpuProfile> | null;
  if (!o || !Array.isArray(o.nodes) || !Array.isArray(o.samples) || !Array.isArray(o.timeDeltas)) {
    throw new Error("not a .cpuprofile");
  }
  return o as CpuProfile;
}

/** `fn file.ts:line` relative to the project, or the runtime URL. */
export function label(f: CallFrame, root: string): string {
  const url = f.url.startsWith("file://") ? f.url.slice(7) : f.url;
  const where = url.startsWith(root)
    ? url.slice(root.length)
    : url.replace(/^.*\/node_modules\//, "");
  const fn = f.functionName || "(anonymous)";
  return where ? `${fn} ${where}:${f.lineNumber + 1}` : fn;
}

function area(f: CallFrame, root: string): string {
  const url = f.url.startsWith("file://") ? f.url.slice(7) : f.url;
  if (!url) return f.functionName.startsWith("(") ? f.functionName : "(native/builtin)";
  if (url.startsWith(root)) {
    const rel = url.slice(root.length).split("/");
    return rel.length > 2 ? `${rel[0]}/${rel[1]}/` : rel.join("/");
  }
  const npm = url.match(/registry\.npmjs\.org\/((?:@[^/]+\/)?[^/@]+)/) ??
    url.match(/node_modules\/((?:@[^/]+\/)?[^/@]+)/);
  if (npm) return `npm:${npm[1]}`;
  if (url.startsWith("ext:") || url.startsWith("node:")) {
    return `deno runtime (${url.split("/")[0]})`;
  }
  return url;
}

function top(m: Map<string, number>, busy: number, n: number): Share[] {
  return [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([name, us]) => ({
    name,
    ms: us / 1000,
    share: us / busy,
  }));
}

/** A profile's samples' times, the window's bounds in them, and its nodes by id and parent. */
function indexProfile(json: unknown, window?: { fromEndMs: number; toEndMs: number }) {
  const p = parseProfile(json);
  const stamps: number[] = [];
  let at = 0;
  for (const dt of p.timeDeltas) stamps.push(at += dt);
  const from = window ? at - window.fromEndMs * 1000 : -Infinity;
  const to = window ? at - window.toEndMs * 1000 : Infinity;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of p.nodes) {
    byId.set(node.id, node);
    for (const c of node.children ?? []) parent.set(c, node.id);
  }
  return { p, stamps, from, to, byId, parent };
}

/**
 * `window` keeps only samples taken between `fromEndMs` and `toEndMs` before
 * the profile's last sample (to leave start-up and shutdown out).
 */
export function summarizeProfile(
  json: unknown,
  root: string,
  opts: { top?: number; window?: { fromEndMs: number; toEndMs: number } } = {},
): ProfileSummary {
  const { p, stamps, from, to, byId, parent } = indexProfile(json, opts.window);
  const n = opts.top ?? 12;
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  const areas = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (let i = 0; i < p.samples.length; i++) {
    // timeDeltas[i] is the time before sample i; attribute it to that sample.
    const dt = p.timeDeltas[i] ?? 0;
    if (stamps[i] < from || stamps[i] > to) continue;
    total += dt;
    const leaf = byId.get(p.samples[i]);
    if (!leaf) continue;
    if (leaf.callFrame.functionName === "(idle)") {
      idle += dt;
      continue;
    }
    const name = label(leaf.callFrame, root);
    self.set(name, (self.get(name) ?? 0) + dt);
    const a = area(leaf.callFrame, root);
    areas.set(a, (areas.get(a) ?? 0) + dt);
    const seen = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      if (!f.url.startsWith(`file://${root}src/`)) continue;
      const l = label(f, root);
      if (seen.has(l)) continue;
      seen.add(l);
      incl.set(l, (incl.get(l) ?? 0) + dt);
    }
  }
  const busy = Math.max(1, total - idle);
  return {
    totalMs: total / 1000,
    busyMs: busy / 1000,
    selfTop: top(self, busy, n),
    projectInclusiveTop: top(incl, busy, n),
    areas: top(areas, busy, n),
  };
}

/**
 * Where a function's self time was spent: for each sample whose leaf is named
 * `fn`, the nearest project frame (`src/`) above it, or the leaf's own
 * caller when no project frame is on the stack; heaviest first.
 */
export function callersOf(
  json: unknown,
  root: string,
  fn: string,
  window?: { fromEndMs: number; toEndMs: number },
): Share[] {
  const { p, stamps, from, to, byId, parent } = indexProfile(json, window);
  const by = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    if (stamps[i] < from || stamps[i] > to) continue;
    const leaf = byId.get(p.samples[i]);
    if (!leaf || leaf.callFrame.functionName !== fn) continue;
    const dt = p.timeDeltas[i] ?? 0;
    total += dt;
    let name = "(no caller)";
    const up = parent.get(leaf.id);
    if (up !== undefined) name = label(byId.get(up)!.callFrame, root);
    for (let id = parent.get(leaf.id); id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      if (f.url.startsWith(`file://${root}src/`)) {
        name = label(f, root);
        break;
      }
    }
    by.set(name, (by.get(name) ?? 0) + dt);
  }
  return top(by, Math.max(1, total), 20);
}
