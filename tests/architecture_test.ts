/**
 * The layering of docs/architecture.md, enforced on the module graph of the
 * whole house (`deno info --json`, value and type-only imports): every entry
 * point (`main.ts`, `proxy.ts`, `config/generate.ts`, `enclave/`, `bench/`,
 * `tests/`, unit tests, the client library's entries and build scripts, the
 * /verify page) and every file they reach. Every file has a layer, imports only
 * go down the table (or stay in their layer), domain folders import each other
 * only in their allowed order, the client library uses only the primitives it
 * is allowed, folders with a front door are entered through it, and there is no
 * import cycle. Below the entry layer of `main.ts` nothing opens sockets, files
 * or processes, and the clocks, randomness and timers still drawn there are
 * listed with why (the lists may only shrink).
 */
import assert from "node:assert/strict";
import {
  type FolderOrder,
  type FrontDoor,
  frontDoorBypasses,
  importCycles,
  importsOutside,
  type Layer,
  layerOf,
  type ModuleGraph,
  moduleGraph,
  orderGraph,
  outOfOrderImports,
  reachable,
  unplaced,
  upwardImports,
} from "./support/module_graph.ts";

const ROOT = new URL("../", import.meta.url);

/** The layer table (docs/architecture.md, "Layers"). Higher rank = closer to the entry point. */
const LAYERS: Layer[] = [
  { rank: 9, name: "harness", paths: ["bench/", "tests/", "*_test.ts"] },
  { rank: 8, name: "client", paths: ["proxy.ts", "src/client/"] },
  {
    rank: 7,
    name: "entry",
    paths: ["main.ts", "config/generate.ts", "enclave/", "src/cli/", "src/demo/"],
  },
  { rank: 6, name: "composition", paths: ["src/app/"] },
  { rank: 4, name: "handlers", paths: ["src/handlers/"] },
  {
    rank: 3,
    name: "domain",
    paths: [
      "src/formats/",
      "src/routing/",
      "src/receipts/",
      "src/keys/",
      "src/admission/",
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
 * The domain folders' allowed dependencies among themselves (read transitively;
 * it must stay acyclic). A new edge is a design decision: add it here and in
 * the doc's table.
 */
const DOMAIN_ORDER: FolderOrder = {
  "src/catalog/": [],
  "src/tlog/": [],
  "src/keys/": [],
  "src/admission/": ["src/keys/"],
  "src/routing/": [],
  "src/formats/": ["src/catalog/"],
  "src/e2ee/": ["src/formats/"],
  "src/attestation/": ["src/e2ee/"],
  "src/sessions/": ["src/routing/"],
  "src/receipts/": ["src/routing/", "src/formats/", "src/attestation/"],
  "src/operator/": ["src/admission/", "src/formats/", "src/sessions/"],
};

/**
 * The client library is a separate program (docs/decisions/verifying-client.md):
 * the server never imports it (its rank is above the server's entry), and it
 * uses only these primitives of the server's folders.
 */
const CLIENT_MAY_IMPORT = ["src/aci/", "src/verify/", "src/e2ee/"];

/** A folder whose one front door is its `mod.ts`. */
const modDoor = (folder: string): FrontDoor => ({ paths: [folder], doors: [`${folder}mod.ts`] });

/**
 * Folders entered from outside only through their front doors (tests may reach
 * inside; see `reachesInside`). A folder comes before its sub-folders with their
 * own doors: the first that holds an import's target and not its source checks it.
 */
const FRONT_DOORS: FrontDoor[] = [
  {
    paths: ["src/client/", "proxy.ts"],
    doors: ["src/client/mod.ts", "src/client/node.ts", "src/client/browser.ts"],
  },
  modDoor("src/aci/"),
  modDoor("src/tokens/"),
  modDoor("src/config/"),
  modDoor("src/store/"),
  modDoor("src/verify/"),
  modDoor("src/upstream/"),
  modDoor("src/tlog/"),
  modDoor("src/catalog/"),
  modDoor("src/e2ee/"),
  modDoor("src/receipts/"),
  modDoor("src/routing/"),
  modDoor("src/keys/"),
  modDoor("src/admission/"),
  modDoor("src/attestation/"),
  modDoor("src/sessions/"),
  modDoor("src/operator/"),
  modDoor("src/formats/"),
  modDoor("src/http/"),
  modDoor("src/handlers/"),
  modDoor("src/app/"),
  modDoor("src/cli/"),
  modDoor("src/demo/"),
  { paths: ["src/sessions/attesters/"], doors: ["src/sessions/attesters/mod.ts"] },
];

/** Tests (beside the code or in tests/) may use any module and reach inside folders. */
const isTest = (f: string) => layerOf(LAYERS, f)?.name === "harness";

/**
 * The entries of what is bundled for browsers and npm: the client library with
 * proxy.ts, and the /verify page's script.
 */
const BUNDLE_ENTRIES = [
  "proxy.ts",
  "src/client/mod.ts",
  "src/client/node.ts",
  "src/client/browser.ts",
  "src/verify/browser/page.ts",
];

/**
 * Clocks and randomness that modules below the entry layer still draw themselves,
 * each with why (docs/architecture.md, "What touches the environment"). Everything
 * else gets its clock, ids and jitter from main.ts; the list may only shrink.
 */
const KNOWN_CLOCK_RANDOM = new Map([
  // Defaults for unit tests; app/assemble.ts always passes main.ts's clock and jitter.
  ["src/admission/admission.ts", "default monotonic clock and jitter (tests)"],
  ["src/store/group_commit.ts", "default retry jitter (tests)"],
  [
    "src/store/transient.ts",
    "retry jitter of keys.ts, credits.ts and holds.ts (not yet passed in)",
  ],
  // Key material is drawn where it is made, never carried through dependencies.
  ["src/keys/keys.ts", "API keys and key ids"],
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
  "src/admission/credits.ts",
  "src/admission/lease_pool.ts",
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
  "src/tlog/witnesses.ts",
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

/** Every TypeScript file of the project (what the house graph must cover). */
async function projectFiles(): Promise<string[]> {
  const out = ["main.ts", "proxy.ts", "config/generate.ts"];
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(new URL(dir, ROOT))) {
      const rel = `${dir}${e.name}`;
      if (e.isDirectory && !["node_modules", "fixtures"].includes(e.name)) await walk(`${rel}/`);
      else if (e.isFile && rel.endsWith(".ts")) out.push(rel);
    }
  };
  for (const dir of ["src/", "enclave/", "bench/", "tests/"]) await walk(dir);
  return out.sort();
}

/** The entry points: programs, build scripts, tests and their helpers, bundles' entries. */
function houseEntries(files: readonly string[]): string[] {
  const named = [
    "main.ts",
    "proxy.ts",
    "config/generate.ts",
    "src/client/mod.ts",
    "src/client/node.ts",
    "src/client/browser.ts", // bundled by src/client/browser/build.ts
    "src/client/npm/build.ts",
    "src/client/browser/build.ts",
    "src/verify/browser/page.ts", // bundled by enclave/build_verify_page.ts,
    "src/verify/browser/ed25519.ts", // with its browser swaps
  ];
  const runs = files.filter((f) => /^(enclave|bench|tests)\//.test(f) || f.endsWith("_test.ts"));
  return [...new Set([...named, ...runs])];
}

const graph = await moduleGraph(ROOT, "main.ts");
const files = await projectFiles();
const house = await moduleGraph(ROOT, houseEntries(files));

/**
 * What the bundles hold: they import files, never a server folder's front door.
 * Their builds swap single files of `aci/`, `e2ee/` and `verify/` for browser
 * builds, and a bundle should hold only the files it uses, not a folder's whole
 * face (with its npm dependencies). The client's own rule (CLIENT_MAY_IMPORT)
 * still holds it to its three primitives.
 */
const bundled = reachable(house, BUNDLE_ENTRIES);

/** What may reach past a front door: tests and what the bundles hold. */
const reachesInside = (f: string) => isTest(f) || bundled.has(f);

Deno.test("architecture: every module of main.ts has a layer", () => {
  assert.ok(graph.size > 100, `the graph has ${graph.size} modules`);
  assert.deepEqual(unplaced(LAYERS, graph), [], "add each new folder to LAYERS and the doc");
});

Deno.test("architecture: the house graph reaches every file of the project", () => {
  assert.ok(house.size > graph.size, `the house has ${house.size} modules`);
  assert.deepEqual(files.filter((f) => !house.has(f)), [], "an entry point that reaches it");
  assert.deepEqual(unplaced(LAYERS, house), [], "add each new folder to LAYERS and the doc");
});

Deno.test("architecture: no import goes up the layer table, from any file", () => {
  assert.deepEqual(upwardImports(LAYERS, house), [], "imports that go up (docs/architecture.md)");
});

Deno.test("architecture: domain folders import each other only in their allowed order", () => {
  const domain = LAYERS.find((l) => l.name === "domain")!;
  assert.deepEqual(Object.keys(DOMAIN_ORDER).sort(), [...domain.paths].sort());
  assert.deepEqual(importCycles(orderGraph(DOMAIN_ORDER)), [], "the order must stay acyclic");
  assert.deepEqual(outOfOrderImports(DOMAIN_ORDER, house, isTest), [], "DOMAIN_ORDER and the doc");
});

Deno.test("architecture: the client library uses only its primitives; the server never imports it", () => {
  const client = LAYERS.find((l) => l.name === "client")!;
  assert.deepEqual(importsOutside(house, client.paths, CLIENT_MAY_IMPORT), []);
  const server = [...house.keys()].filter((f) => (layerOf(LAYERS, f)?.rank ?? 9) < client.rank);
  const reached = reachable(house, server);
  assert.deepEqual([...reached].filter((f) => layerOf(LAYERS, f) === client), []);
});

Deno.test("architecture: folders with a front door are entered through it", () => {
  assert.deepEqual(
    frontDoorBypasses(FRONT_DOORS, house, reachesInside),
    [],
    "import the front door",
  );
  const topFolders = new Set(
    files.filter((f) => f.startsWith("src/")).map((f) => f.split("/").slice(0, 2).join("/") + "/"),
  );
  const doors = FRONT_DOORS.map((d) => d.paths[0]);
  assert.deepEqual(
    [...topFolders].filter((f) => !doors.includes(f)),
    [],
    "a new folder starts with a mod.ts front door (FRONT_DOORS)",
  );
  const missing = FRONT_DOORS.flatMap((d) => d.doors).filter((door) => !files.includes(door));
  assert.deepEqual(missing, [], "each front door is a file");
  const serverDoors = FRONT_DOORS.filter((d) => !d.paths.includes("src/client/")).flatMap((d) =>
    d.doors
  );
  const bundledThroughDoors = [...bundled].flatMap((f) =>
    [...house.get(f)!].filter((to) => serverDoors.includes(to)).map((to) => `${f} -> ${to}`)
  );
  assert.deepEqual(bundledThroughDoors, [], "a bundled file imports the file it uses");
});

Deno.test("architecture: no import cycle between files", () => {
  assert.deepEqual(importCycles(house), []);
});

Deno.test("architecture: an upward import from a file main.ts does not reach turns the checks red", () => {
  // Inject the import into the real house graph (no file is written): a low-layer
  // file only the client, a bench or a test uses, importing the composition layer.
  const fromMain = reachable(graph, ["main.ts"]);
  const low = [...house.keys()].find((f) =>
    !fromMain.has(f) && !isTest(f) && (layerOf(LAYERS, f)?.rank ?? 9) <= 3
  );
  assert.ok(low, "a low-layer file main.ts does not reach");
  const injected: ModuleGraph = new Map(house);
  injected.set(low, new Set([...house.get(low)!, "src/app/assemble.ts"]));
  assert.deepEqual(upwardImports(LAYERS, injected), [`${low} -> src/app/assemble.ts`]);
  // ... and a domain folder using a later one, and the server importing the client.
  const wrong: ModuleGraph = new Map(house);
  wrong.set(
    "src/tlog/log.ts",
    new Set([...house.get("src/tlog/log.ts")!, "src/receipts/service.ts"]),
  );
  wrong.set("src/aci/jcs.ts", new Set([...house.get("src/aci/jcs.ts")!, "src/client/tlog.ts"]));
  assert.deepEqual(outOfOrderImports(DOMAIN_ORDER, wrong, isTest), [
    "src/tlog/log.ts -> src/receipts/service.ts",
  ]);
  assert.deepEqual(upwardImports(LAYERS, wrong), ["src/aci/jcs.ts -> src/client/tlog.ts"]);
  const bypassing = new Set(frontDoorBypasses(FRONT_DOORS, house, isTest));
  assert.deepEqual(
    frontDoorBypasses(FRONT_DOORS, wrong, isTest).filter((e) => !bypassing.has(e)),
    ["src/aci/jcs.ts -> src/client/tlog.ts", "src/tlog/log.ts -> src/receipts/service.ts"],
  );
});

Deno.test("architecture: below the entry layer, nothing opens sockets, files or processes", async () => {
  const touching = [...(await codeBelowEntry())].filter(([, code]) => ENVIRONMENT_RE.test(code));
  assert.deepEqual(touching.map(([f]) => f), [], "pass the capability in from main.ts");
});

Deno.test("architecture: only main.ts names the runtime's non-public internals", async () => {
  // `runtimeServeOn` in main.ts checks serveHttpOnConnection at start-up and passes it down;
  // docs/architecture.md ("Layers") says what to do when the runtime changes.
  const naming: string[] = [];
  for (const f of house.keys()) {
    if (f === "main.ts" || f === "tests/architecture_test.ts") continue;
    const code = await Deno.readTextFile(new URL(f, ROOT));
    if (/\bDeno\.internal\b|serveHttpOnConnection/.test(code)) naming.push(f);
  }
  assert.deepEqual(naming, []);
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
  for (const [folder, deps] of Object.entries(DOMAIN_ORDER)) {
    const row = doc.split("\n").map((l) => l.split("|").map((c) => c.trim())).find((cells) =>
      cells[1] === `\`${folder}\``
    );
    assert.ok(row, `docs/architecture.md has no domain order row for ${folder}`);
    assert.deepEqual([...row[2].matchAll(/`([^`]+)`/g)].map((m) => m[1]), deps, folder);
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
