/**
 * The layering of docs/architecture.md, enforced on the module graph of
 * `main.ts` (`deno info --json`, value and type-only imports): every file has
 * a layer, imports only go down the table (or stay in their layer), and there
 * is no import cycle. The upward imports that exist today are listed below,
 * each with what removes it; a new one fails, and so does a listed one that
 * no longer exists, so the list only shrinks.
 */
import assert from "node:assert/strict";
import {
  importCycles,
  type Layer,
  layerOf,
  type ModuleGraph,
  moduleGraph,
  unplaced,
  upwardImports,
} from "./support/module_graph.ts";

const ROOT = new URL("../", import.meta.url);

/** The layer table (docs/architecture.md, "Layers"). Higher rank = closer to the entry point. */
const LAYERS: Layer[] = [
  { rank: 7, name: "entry", paths: ["main.ts", "enclave/", "src/cli/", "src/demo/"] },
  { rank: 6, name: "composition", paths: ["src/app/"] },
  { rank: 5, name: "router", paths: ["src/http/router.ts"] },
  { rank: 4, name: "handlers", paths: ["src/handlers/"] },
  {
    rank: 3,
    name: "domain",
    paths: [
      "src/formats/",
      "src/routing/",
      "src/receipts/",
      "src/accounts/",
      "src/sessions/",
      "src/attestation/",
      "src/catalog/",
      "src/e2ee/",
    ],
  },
  { rank: 2, name: "services", paths: ["src/upstream/", "src/store/", "src/verify/"] },
  { rank: 1, name: "foundation", paths: ["src/http/", "src/config/", "src/tokens/"] },
  { rank: 0, name: "primitives", paths: ["src/aci/"] },
];

/**
 * Upward imports that exist today (issue #18 item 1). Each is to be removed,
 * never added to: the fix is named above each group.
 */
const KNOWN_UPWARD = new Set([
  // Handlers name the composition's `GatewayContext`: each handler should declare the narrow
  // dependencies it uses (an interface in handlers/), which the context satisfies.
  "src/handlers/attestation.ts -> src/app/context.ts",
  "src/handlers/catalog.ts -> src/app/context.ts",
  "src/handlers/count_tokens.ts -> src/app/context.ts",
  "src/handlers/pipeline.ts -> src/app/context.ts",
  "src/handlers/receipts.ts -> src/app/context.ts",
  "src/handlers/sessions.ts -> src/app/context.ts",
  "src/handlers/stream_response.ts -> src/app/context.ts",
  // forward.ts writes receipt events and walks routing's candidates: failover moves to routing/,
  // forward.ts keeps one attempt and reports outcomes to its caller.
  "src/upstream/forward.ts -> src/receipts/recorder.ts",
  "src/upstream/forward.ts -> src/routing/select.ts",
  // Upstream verifiers implement interfaces that live in sessions/: upstream verification moves
  // into sessions/ (verify/ keeps the offline evidence checks), sockets come in as parameters.
  "src/sessions/upstream/aci.ts -> src/sessions/types.ts",
  "src/sessions/upstream/claims.ts -> src/sessions/types.ts",
  "src/sessions/upstream/dev.ts -> src/sessions/types.ts",
  "src/sessions/upstream/dstack_tdx.ts -> src/sessions/types.ts",
  "src/sessions/upstream/endpoint.ts -> src/sessions/types.ts",
  "src/sessions/upstream/gpu.ts -> src/sessions/types.ts",
  "src/sessions/upstream/mod.ts -> src/sessions/types.ts",
  "src/sessions/upstream/outcome.ts -> src/sessions/types.ts",
  "src/sessions/upstream/pinned.ts -> src/sessions/types.ts",
  "src/sessions/upstream/sev_snp.ts -> src/sessions/types.ts",
]);

/**
 * Modules below the entry layer that open sockets, files or processes themselves
 * (docs/architecture.md, "What touches the environment"). Each should receive the
 * capability from main.ts instead; the list may only shrink.
 */
const KNOWN_ENVIRONMENT = new Set([
  // Upstream verification observes a TLS key with its own node:tls handshake.
  "src/upstream/tls_observe.ts",
  // The verifiers' pinned one-shot fetch gets node:tls `connect` here, not from main.ts.
  "src/sessions/upstream/mod.ts",
]);

/** Sockets, files, processes, variables: what only the entry layer should reach. */
const ENVIRONMENT_RE = new RegExp(
  String.raw`\bDeno\.(openKv|env|args|exit|read\w*|write\w*|open|mkdir|remove|stat\w*|` +
    String.raw`chmod|copyFile|makeTemp\w*|connect\w*|startTls|listen\w*|serve|` +
    String.raw`createHttpClient|Command|execPath)\b|^import (?!type\b).*"node:(tls|https|http|fs|` +
    String.raw`fs/promises|child_process)"`,
  "m",
);

const graph = await moduleGraph(ROOT, "main.ts");

Deno.test("architecture: every module of main.ts has a layer", () => {
  assert.ok(graph.size > 100, `the graph has ${graph.size} modules`);
  assert.deepEqual(unplaced(LAYERS, graph), [], "add each new folder to LAYERS and the doc");
});

Deno.test("architecture: no new upward import, and no listed one that is gone", () => {
  const found = upwardImports(LAYERS, graph);
  const added = found.filter((e) => !KNOWN_UPWARD.has(e));
  assert.deepEqual(added, [], "imports that go up the layer table (docs/architecture.md)");
  const gone = [...KNOWN_UPWARD].filter((e) => !found.includes(e));
  assert.deepEqual(gone, [], "fixed: remove these from KNOWN_UPWARD");
});

Deno.test("architecture: no import cycle between files", () => {
  assert.deepEqual(importCycles(graph), []);
});

Deno.test("architecture: below the entry layer, only the listed modules touch the environment", async () => {
  const touching: string[] = [];
  for (const file of graph.keys()) {
    if (layerOf(LAYERS, file)?.name === "entry") continue;
    const code = (await Deno.readTextFile(new URL(file, ROOT)))
      .split("\n")
      .filter((l) => !/^\s*(\/\/|\*|\/\*)/.test(l))
      .join("\n");
    if (ENVIRONMENT_RE.test(code)) touching.push(file);
  }
  assert.deepEqual(touching.sort(), [...KNOWN_ENVIRONMENT].sort());
});

Deno.test("architecture: docs/architecture.md lists the same layer table", () => {
  const doc = Deno.readTextFileSync(new URL("docs/architecture.md", ROOT));
  for (const layer of LAYERS) {
    const row = doc.split("\n").map((l) => l.split("|").map((c) => c.trim())).find((cells) =>
      cells[1] === String(layer.rank) && cells[2] === layer.name
    );
    assert.ok(row, `docs/architecture.md has no table row "${layer.rank} | ${layer.name}"`);
    const listed = [...row[3].matchAll(/`([^`]+)`/g)].map((m) => m[1]);
    assert.deepEqual(listed, layer.paths, `paths of the ${layer.name} row`);
  }
});

Deno.test("architecture checks: an upward edge, a cycle and an unplaced file are found", () => {
  const g: ModuleGraph = new Map([
    ["src/aci/a.ts", new Set(["src/http/errors.ts"])],
    ["src/http/errors.ts", new Set<string>()],
    ["src/handlers/x.ts", new Set(["src/handlers/y.ts", "src/aci/a.ts"])],
    ["src/handlers/y.ts", new Set(["src/app/context.ts"])],
    ["src/app/context.ts", new Set(["src/handlers/x.ts"])],
    ["src/nowhere/z.ts", new Set<string>()],
  ]);
  assert.equal(layerOf(LAYERS, "src/http/router.ts")?.name, "router");
  assert.equal(layerOf(LAYERS, "src/http/errors.ts")?.name, "foundation");
  assert.deepEqual(upwardImports(LAYERS, g), [
    "src/aci/a.ts -> src/http/errors.ts",
    "src/handlers/y.ts -> src/app/context.ts",
  ]);
  assert.deepEqual(importCycles(g), [[
    "src/app/context.ts",
    "src/handlers/x.ts",
    "src/handlers/y.ts",
  ]]);
  assert.deepEqual(unplaced(LAYERS, g), ["src/nowhere/z.ts"]);
  for (const code of ["await Deno.connectTls({})", 'import tls from "node:tls";', "Deno.env.get"]) {
    assert.ok(ENVIRONMENT_RE.test(code), code);
  }
  for (const code of ['import type { IncomingMessage } from "node:http";', "kv: Deno.Kv"]) {
    assert.ok(!ENVIRONMENT_RE.test(code), code);
  }
});
