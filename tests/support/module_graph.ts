/**
 * The project's module graph as `deno info --json` reports it (value and
 * type-only imports alike), and the checks `tests/architecture_test.ts` runs
 * on it: imports that go up the layer table, imports between domain folders
 * outside their allowed order, imports past a folder's front door, and import
 * cycles. Test-only.
 */

/** File → the project files it imports, paths relative to the project root. */
export type ModuleGraph = Map<string, Set<string>>;

/** One row of the layer table: a rank (higher = closer to the entry point) and its path prefixes. */
export interface Layer {
  rank: number;
  name: string;
  /**
   * Folder prefixes (ending in `/`), exact files, or a file-name suffix after `*`
   * (`*_test.ts`); a suffix wins over any folder, else the longest match wins.
   */
  paths: string[];
}

interface InfoModule {
  specifier?: string;
  dependencies?: { code?: { specifier?: string }; type?: { specifier?: string } }[];
}

/**
 * Runs `deno info --json` on the entries in `root` and keeps the project's own
 * files. Several entries are read in one run through a module that imports them
 * all, written to a temporary folder outside the project and removed after.
 */
export async function moduleGraph(root: URL, entries: string | string[]): Promise<ModuleGraph> {
  const list = typeof entries === "string" ? [entries] : entries;
  const tmp = list.length > 1 ? await Deno.makeTempDir({ prefix: "module_graph_" }) : null;
  let entry = list[0];
  if (tmp) {
    entry = `${tmp}/house.ts`;
    const lines = list.map((e) => `import ${JSON.stringify(new URL(e, root).href)};`);
    await Deno.writeTextFile(entry, lines.join("\n") + "\n");
  }
  try {
    return await readGraph(root, entry);
  } finally {
    if (tmp) await Deno.remove(tmp, { recursive: true });
  }
}

async function readGraph(root: URL, entry: string): Promise<ModuleGraph> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", "--config", "deno.json", entry],
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

/** The files reachable from `from` in the graph (them included). */
export function reachable(graph: ModuleGraph, from: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const todo = [...from];
  while (todo.length > 0) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    for (const t of graph.get(f) ?? []) todo.push(t);
  }
  return seen;
}

/** The layer a file belongs to (longest matching path), or null when none names it. */
export function layerOf(layers: readonly Layer[], file: string): Layer | null {
  let best: { layer: Layer; len: number } | null = null;
  for (const layer of layers) {
    for (const p of layer.paths) {
      if (p.startsWith("*")) {
        if (file.endsWith(p.slice(1))) return layer;
        continue;
      }
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

/**
 * Folder → the folders of its layer it may import. The order is read
 * transitively: a folder may also use what the folders it lists may use.
 */
export type FolderOrder = Record<string, readonly string[]>;

/** The order as a graph of folders, to check it has no cycle (`importCycles`). */
export function orderGraph(order: FolderOrder): ModuleGraph {
  return new Map(Object.entries(order).map(([f, deps]) => [f, new Set(deps)]));
}

/** The folder of `order` that holds `file`, or null. */
function folderIn(order: FolderOrder, file: string): string | null {
  return Object.keys(order).find((f) => file.startsWith(f)) ?? null;
}

/**
 * Imports from one folder of the order to another that the order does not
 * allow, as `"from -> to"`; files `skip` names (tests) are not checked.
 */
export function outOfOrderImports(
  order: FolderOrder,
  graph: ModuleGraph,
  skip: (file: string) => boolean = () => false,
): string[] {
  const g = orderGraph(order);
  const out: string[] = [];
  for (const [from, deps] of graph) {
    const a = folderIn(order, from);
    if (a === null || skip(from)) continue;
    const allowed = reachable(g, [a]);
    for (const to of deps) {
      const b = folderIn(order, to);
      if (b !== null && !allowed.has(b)) out.push(`${from} -> ${to}`);
    }
  }
  return out.sort();
}

/** Imports from files under `paths` to project files outside `paths` and `allowed`. */
export function importsOutside(
  graph: ModuleGraph,
  paths: readonly string[],
  allowed: readonly string[],
): string[] {
  const under = (f: string, ps: readonly string[]) =>
    ps.some((p) => p.endsWith("/") ? f.startsWith(p) : f === p);
  const out: string[] = [];
  for (const [from, deps] of graph) {
    if (!under(from, paths)) continue;
    for (const to of deps) if (!under(to, [...paths, ...allowed])) out.push(`${from} -> ${to}`);
  }
  return out.sort();
}

/** A folder whose files others reach only through its front doors (`mod.ts`, published entries). */
export interface FrontDoor {
  /** The folder (ending in `/`) and any file outside it that belongs to it. */
  paths: string[];
  doors: string[];
}

/**
 * Imports from outside a folder to a file of it that is not one of its front
 * doors, as `"from -> to"`; files `skip` names (tests) are not checked.
 */
export function frontDoorBypasses(
  folders: readonly FrontDoor[],
  graph: ModuleGraph,
  skip: (file: string) => boolean = () => false,
): string[] {
  const under = (f: string, ps: readonly string[]) =>
    ps.some((p) => p.endsWith("/") ? f.startsWith(p) : f === p);
  const out: string[] = [];
  for (const [from, deps] of graph) {
    if (skip(from)) continue;
    for (const to of deps) {
      const door = folders.find((d) => under(to, d.paths) && !under(from, d.paths));
      if (door && !door.doors.includes(to)) out.push(`${from} -> ${to}`);
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
