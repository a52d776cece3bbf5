/**
 * The layering of docs/architecture.md, enforced on the module graph of
 * `main.ts` (`deno info --json`, value and type-only imports): every file has
 * a layer, imports only go down the table (or stay in their layer), and there
 * is no import cycle. Below the entry layer nothing opens sockets, files or
 * processes, and the clocks, randomness and timers still drawn there are listed
 * with why (the list may only shrink).
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
      "src/operator/",
      "src/tlog/",
    ],
  },
  { rank: 2, name: "services", paths: ["src/upstream/", "src/store/", "src/verify/"] },
  { rank: 1, name: "foundation", paths: ["src/http/", "src/config/", "src/tokens/"] },
  { rank: 0, name: "primitives", paths: ["src/aci/"] },
];

/**
 * Clocks and randomness that modules below the entry layer still draw themselves,
 * each with why (docs/architecture.md, "What touches the environment"). Everything
 * else gets its clock, ids and jitter from main.ts; the list may only shrink.
 */
const KNOWN_CLOCK_RANDOM = new Map([
  // Defaults for unit tests; app/assemble.ts always passes main.ts's clock and jitter.
  ["src/accounts/admission.ts", "default monotonic clock and jitter (tests)"],
  ["src/store/group_commit.ts", "default retry jitter (tests)"],
  [
    "src/store/transient.ts",
    "retry jitter of keys.ts, credits.ts and holds.ts (not yet passed in)",
  ],
  // Key material is drawn where it is made, never carried through dependencies.
  ["src/accounts/keys.ts", "API keys and key ids"],
  ["src/aci/ed25519.ts", "the workload's Ed25519 key"],
  ["src/aci/signer.ts", "the workload's secp256k1 key"],
  ["src/e2ee/crypto.ts", "the ephemeral X25519 key of a sealed field"],
  // A response id when the upstream gave none (threading ids through the translators: not yet).
  ["src/formats/messages/ids.ts", "msg_ id without an upstream id"],
  ["src/formats/responses/build.ts", "resp_ id without an upstream id"],
  // Not gateway code: the /verify page's script as a string constant, run by the browser
  // (its fresh nonce comes from the browser's crypto.getRandomValues).
  ["src/verify/browser/bundle.gen.ts", "the /verify page's script, run in the browser"],
]);

/**
 * Modules below the entry layer that schedule timers (deadlines, sweeps, batching,
 * retries). A timer reads nothing from the environment and its periods come from
 * the configuration; each new one is listed here and in the doc.
 */
const KNOWN_TIMERS = new Set([
  "src/accounts/credits.ts",
  "src/accounts/lease_pool.ts",
  "src/app/replica_upkeep.ts",
  "src/e2ee/service.ts",
  "src/handlers/stream_ticker.ts",
  "src/http/body.ts",
  "src/http/connections.ts",
  "src/http/deadlines.ts",
  "src/receipts/refusals.ts",
  "src/sessions/manager.ts",
  "src/store/group_commit.ts",
  "src/store/transient.ts",
  "src/tlog/log.ts",
  "src/upstream/chunk_reader.ts",
  "src/upstream/pinned_tls.ts",
  "src/upstream/tls_observe.ts",
  // The /verify page's script (run by the browser): it waits a moment for a pending inclusion proof.
  "src/verify/browser/bundle.gen.ts",
]);

/** Sockets, files, processes, variables: what only the entry layer should reach. */
const ENVIRONMENT_RE = new RegExp(
  String.raw`\bDeno\.(openKv|env|args|exit|read\w*|write\w*|open|mkdir|remove|stat\w*|` +
    String.raw`chmod|copyFile|makeTemp\w*|connect\w*|startTls|listen\w*|serve|` +
    String.raw`createHttpClient|Command|execPath)\b|^import (?!type\b).*"node:(tls|https|http|fs|` +
    String.raw`fs/promises|child_process)"`,
  "m",
);

/** Clocks and randomness: what main.ts passes in (`now`, `monotonic`, `random`, `randomUUID`, `randomBytes`). */
const CLOCK_RANDOM_RE = new RegExp(
  String.raw`\b(performance\.now|Date\.now|Math\.random|crypto\.(randomUUID|getRandomValues))\b|` +
    String.raw`\bnew Date\(\)|\b(generateKeyPairSync|randomSecretKey)\(|` +
    String.raw`^import (?!type\b)[^;]*\b(randomBytes|randomUUID|randomInt)\b[^;]*"node:crypto"`,
  "m",
);

const TIMER_RE = /\bset(Timeout|Interval)\(/;

/** The code of each module below the entry layer, comment lines removed. */
async function codeBelowEntry(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const file of graph.keys()) {
    if (layerOf(LAYERS, file)?.name === "entry") continue;
    const code = (await Deno.readTextFile(new URL(file, ROOT)))
      .split("\n")
      .filter((l) => !/^\s*(\/\/|\*|\/\*)/.test(l))
      .join("\n");
    out.set(file, code);
  }
  return out;
}

const graph = await moduleGraph(ROOT, "main.ts");

Deno.test("architecture: every module of main.ts has a layer", () => {
  assert.ok(graph.size > 100, `the graph has ${graph.size} modules`);
  assert.deepEqual(unplaced(LAYERS, graph), [], "add each new folder to LAYERS and the doc");
});

Deno.test("architecture: no import goes up the layer table", () => {
  assert.deepEqual(upwardImports(LAYERS, graph), [], "imports that go up (docs/architecture.md)");
});

Deno.test("architecture: no import cycle between files", () => {
  assert.deepEqual(importCycles(graph), []);
});

Deno.test("architecture: below the entry layer, nothing opens sockets, files or processes", async () => {
  const touching = [...(await codeBelowEntry())].filter(([, code]) => ENVIRONMENT_RE.test(code));
  assert.deepEqual(touching.map(([f]) => f), [], "pass the capability in from main.ts");
});

Deno.test("architecture: below the entry layer, only the listed modules draw clocks, randomness or timers", async () => {
  const code = await codeBelowEntry();
  const drawing = [...code].filter(([, c]) => CLOCK_RANDOM_RE.test(c)).map(([f]) => f).sort();
  assert.deepEqual(drawing, [...KNOWN_CLOCK_RANDOM.keys()].sort(), "pass it in from main.ts");
  const timers = [...code].filter(([, c]) => TIMER_RE.test(c)).map(([f]) => f).sort();
  assert.deepEqual(timers, [...KNOWN_TIMERS].sort(), "list a new timer here and in the doc");
  const doc = Deno.readTextFileSync(new URL("docs/architecture.md", ROOT));
  for (const f of [...KNOWN_CLOCK_RANDOM.keys(), ...KNOWN_TIMERS]) {
    assert.ok(doc.includes(f.replace(/^src\//, "")), `docs/architecture.md names ${f}`);
  }
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
  assert.equal(layerOf(LAYERS, "src/http/router.ts")?.name, "foundation");
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
  for (
    const code of [
      "const t0 = performance.now();",
      "id: crypto.randomUUID(),",
      "opts.random ?? Math.random",
      'import { createHash, randomUUID } from "node:crypto";',
      "x25519.utils.randomSecretKey()",
    ]
  ) assert.ok(CLOCK_RANDOM_RE.test(code), code);
  for (const code of ["ctx.monotonic()", "randomBytes: (n: number) => Uint8Array;", "now: Date"]) {
    assert.ok(!CLOCK_RANDOM_RE.test(code), code);
  }
});
