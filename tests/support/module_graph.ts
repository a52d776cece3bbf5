/**
 * The project's module graph as `deno info --json` reports it (value and
 * type-only imports alike), and the two checks `tests/architecture_test.ts`
 * runs on it: imports that go up the layer table, and import cycles.
 * Test-only.
 */

/** File → the project files it imports, paths relative to the project root. */
export type ModuleGraph = Map<string, Set<string>>;

/** One row of the layer table: a rank (higher = closer to the entry point) and its path prefixes. */
export interface Layer {
  rank: number;
  name: string;
  /** Folder prefixes (ending in `/`) or exact files; the longest match wins. */
  paths: string[];
}

interface InfoModule {
  specifier?: string;
  dependencies?: { code?: { specifier?: string }; type?: { specifier?: string } }[];
}

/** Runs `deno info --json <entry>` in `root` and keeps the project's own files. */
export async function moduleGraph(root: URL, entry: string): Promise<ModuleGraph> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`deno info failed: ${new TextDecoder().decode(out.stderr)}`);
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as { modules: InfoModule[] };
  const prefix = root.href.endsWith("/") ? root.href : root.href + "/";
  const local = (s: string | undefined) =>
    s?.startsWith(prefix) ? decodeURIComponent(s.slice(prefix.length)) : null;
  const graph: ModuleGraph = new Map();
  for (const m of info.modules) {
    const from = local(m.specifier);
    if (from === null) continue;
    const deps = graph.get(from) ?? new Set<string>();
    graph.set(from, deps);
    for (const d of m.dependencies ?? []) {
      for (const to of [local(d.code?.specifier), local(d.type?.specifier)]) {
        if (to !== null && to !== from) deps.add(to);
      }
    }
  }
  return graph;
}

/** The layer a file belongs to (longest matching path), or null when none names it. */
export function layerOf(layers: readonly Layer[], file: string): Layer | null {
  let best: { layer: Layer; len: number } | null = null;
  for (const layer of layers) {
    for (const p of layer.paths) {
      const hit = p.endsWith("/") ? file.startsWith(p) : file === p;
      if (hit && (!best || p.length > best.len)) best = { layer, len: p.length };
    }
  }
  return best?.layer ?? null;
}

/** Files no layer names (every module must have a place in the table). */
export function unplaced(layers: readonly Layer[], graph: ModuleGraph): string[] {
  return [...graph.keys()].filter((f) => layerOf(layers, f) === null).sort();
}

/** Every import from a lower layer to a higher one, as `"from -> to"`. */
export function upwardImports(layers: readonly Layer[], graph: ModuleGraph): string[] {
  const out: string[] = [];
  for (const [from, deps] of graph) {
    const a = layerOf(layers, from);
    for (const to of deps) {
      const b = layerOf(layers, to);
      if (a && b && b.rank > a.rank) out.push(`${from} -> ${to}`);
    }
  }
  return out.sort();
}

/** The import cycles: strongly connected components of more than one file (Tarjan). */
export function importCycles(graph: ModuleGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) cycles.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return cycles.sort((a, b) => a[0].localeCompare(b[0]));
}
