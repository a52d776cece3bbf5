/**
 * Entry point. Of the gateway's modules (the entry layer of
 * docs/architecture.md aside: enclave/, src/cli/, src/demo/) it is the only
 * one that touches the environment: it reads flags, variables and files,
 * opens Deno KV and the listeners, and passes down the sockets (`Deno.connect`,
 * `node:tls` connect), the global fetch, the wall and monotonic clocks, ids
 * (`randomUUID`), random bytes and jitter. Below it, only timers and the listed
 * draws of key material and ids remain (docs/architecture.md, "What touches the
 * environment"; enforced by tests/architecture_test.ts).
 *
 *   main.ts serve [--dev] [--config FILE] [--port N]   run the gateway
 *   main.ts keys <create|list|revoke|credit|show> …     manage API keys (the dashboard)
 *   main.ts verify …                                    verify receipts and reports offline
 */
import { devConfig, type GatewayConfig, parseConfig } from "./src/config/mod.ts";
import {
  assembleGateway,
  checkConfigFiles,
  connectionCap,
  createLogBuffer,
  type HostWorker,
  hostWorker,
  listenerSpkis,
  listenOn,
  openConfiguredStore,
  openFileLimit,
  openStore,
  parseWorkerSpec,
  printDevKey,
  StartupError,
  type StartupFiles,
  stopOnSignals,
  type StoreIo,
  supervise,
  type TrustIo,
  unsetKeyVariables,
  upstreamAttesters,
  upstreamTransport,
  verifyCollateral,
  workerCount,
  type WorkerProcess,
  type WorkerSpec,
} from "./src/app/mod.ts";
import type { ConnectionServer, ServeOn } from "./src/http/mod.ts";
import {
  API_KEY_VARIABLE,
  runKeys,
  runMonitor,
  runProviderVerify,
  runVerify,
  serveArgs,
  takeOptions,
  UsageError,
} from "./src/cli/mod.ts";
import { startDevUpstreams } from "./src/demo/mod.ts";
import { DEFAULT_TIERS } from "./src/admission/mod.ts";
import tls from "node:tls";
import { PROXY_VARIABLES } from "./src/upstream/mod.ts";
import {
  ADMIN_TOKEN_ENV,
  noopMetrics,
  operatorAuth,
  type ProcessStats,
} from "./src/operator/mod.ts";
import process from "node:process";

/** `verify --kind` values handled by the provider entry (src/cli/verify_provider.ts). */
const PROVIDER_KINDS = new Set(["near-ai", "tinfoil"]);
import { randomBytes } from "node:crypto";
import { gatewayIdentity } from "./enclave/gateway_identity.ts";
import {
  AMD_KDS_BASE_URL,
  kdsVcekSource,
  localVcekSource,
  pemCertificatesToDer,
  type SnpRoot,
  snpRootsFromPem,
  tdxQuoteCheck,
  type VcekSource,
} from "./src/verify/mod.ts";
import { bytesToHex } from "./src/aci/mod.ts";

/** Set by the host's supervisor in its workers' environment; the worker spec comes on stdin. */
const WORKER_VARIABLE = "GATEWAY_WORKER";

const DEV_STORE = ".data/dev.kv";
/** Development only: the dev key, reused across `task dev` restarts. */
const DEV_KEY_FILE = ".data/dev.key";

function fail(msg: string): never {
  flushLog();
  console.error(msg);
  Deno.exit(2);
}

const logBuffer = createLogBuffer({
  writeSync: (b) => Deno.stdout.writeSync(b),
  now: Date.now,
  defer: (f) => setTimeout(f, 0),
});
const log = logBuffer.log;
const flushLog = logBuffer.flush;

/** Deno's OpenTelemetry export is on (it exports console output as logs). */
const OTEL = (() => {
  try {
    return Deno.env.get("OTEL_DENO") === "true";
  } catch {
    return false; // `task verify` may read only its own variables
  }
})();

/** How long a drained server under OTEL_DENO may take to end on its own before it is ended. */
const OTEL_EXIT_GRACE_MS = 5_000;

/**
 * Ends a drained server (or supervisor) with `code`. Under OTEL_DENO, `Deno.exit` while a
 * telemetry export is in flight can hang the process for good (the main thread parked on a
 * lock, seen in tests/otel_e2e_test.ts under load; Deno's own reports: denoland/deno#33157 and
 * #29590), so the code is set and the process ends on its own: a drained gateway holds no
 * listener, timer or store. Should something still hold it, `Deno.exit` ends it after a grace
 * period (an unreferenced timer, which holds nothing itself).
 */
function endServer(code: number): void {
  flushLog();
  if (!OTEL) Deno.exit(code);
  Deno.exitCode = code;
  Deno.unrefTimer(setTimeout(() => Deno.exit(code), OTEL_EXIT_GRACE_MS));
}

/**
 * A line written straight to a stream, past `console`: under OpenTelemetry
 * Deno exports console output as log records, and a secret (the dev key, a
 * newly created key) must never reach a collector (#31).
 */
function writeLine(stream: { writeSync(b: Uint8Array): number }): (line: string) => void {
  return (line) => {
    let bytes = new TextEncoder().encode(line + "\n");
    while (bytes.length > 0) bytes = bytes.subarray(stream.writeSync(bytes));
  };
}

/** Fetch with the deadline every trust-material download gets. */
const timedFetch = (input: RequestInfo | URL, init?: RequestInit) =>
  fetch(input, { ...init, signal: AbortSignal.timeout(15_000) });

/** The file reads and fetch that trust material and start-up checks are built with. */
const trustIo: TrustIo = {
  readDir: (p) => Deno.readDir(p),
  readFile: (p) => Deno.readFile(p),
  readTextFile: (p) => Deno.readTextFile(p),
  fetch: timedFetch,
  now: Date.now,
};
const startupFiles: StartupFiles = {
  probe: async (p) => (await Deno.open(p, { read: true })).close(),
  isDirectory: async (p) => (await Deno.stat(p)).isDirectory,
  readTextFile: (p) => Deno.readTextFile(p),
};

const storeIo: StoreIo = {
  mkdir: (dir) => Deno.mkdir(dir, { recursive: true, mode: 0o700 }),
  createPrivate: async (path) => {
    try {
      (await Deno.open(path, { createNew: true, write: true, mode: 0o600 })).close();
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    }
  },
  openKv: (path) => Deno.openKv(path),
};

// One native call into a fresh array (getRandomValues takes at most 64 KiB at a time).
const bytes = (n: number) =>
  n <= 65_536 ? crypto.getRandomValues(new Uint8Array(n)) : new Uint8Array(randomBytes(n));

async function loadConfigFile(path: string): Promise<GatewayConfig> {
  try {
    return parseConfig(await Deno.readTextFile(path));
  } catch (e) {
    fail(`${path}: ${(e as Error).message}`);
  }
}

/** `serve`: the configuration, the gateway's services, the listeners, and a drain on SIGTERM. */
async function serve(args: string[]): Promise<void> {
  const worker = Deno.env.get(WORKER_VARIABLE) === "1" ? await readWorkerSpec() : null;
  const { dev, configPath, config, closers, portOverride } = await serveConfig(args);
  if (worker === null) {
    const n = workerCount(config.serve.workers, navigator.hardwareConcurrency, Deno.build.os);
    if (n.note) console.error(n.note);
    if (n.count > 1) {
      await superviseWorkers(n.count, config);
      signalLine(dev, configPath, n.count);
      return;
    }
  } else {
    // The supervisor resolved a configured port 0 to one port all its workers share.
    config.listen.base.port = worker.spec.ports.base;
    if (config.listen.tee && worker.spec.ports.tee !== undefined) {
      config.listen.tee.port = worker.spec.ports.tee;
    }
  }
  const { quotes, provenance } = await gatewayIdentity(config, configPath, {
    readTextFile: (p) => Deno.readTextFile(p),
    print: (l) => console.error(l),
  });
  const kv = await openConfiguredStore(config.store.path, configPath, storeIo);
  const upstream = upstreamTransport(config, PROXY_VARIABLES.some((v) => Deno.env.get(v)), {
    net: { connect: Deno.connect, startTls: Deno.startTls },
    tlsConnect: tls.connect,
    fetch: (url, init) => fetch(url, init),
    now: () => performance.now(),
  }, (l) => console.error(l));
  const attesters = await upstreamAttesters(config, {
    ...trustIo,
    randomBytes: bytes,
    tlsConnect: tls.connect,
    print: (l) => console.error(l),
  });
  const gateway = await gatewayFor(config, {
    quotes,
    provenance,
    kv,
    upstream,
    attesters,
    worker: worker?.worker,
  });

  const serveOn = runtimeServeOn();
  const anyTls = [config.listen.base, config.listen.tee].some((l) => l?.tls_cert_file);
  const cap = connectionCap(
    config.limits.max_connections,
    anyTls ? 4 : 2,
    openFileLimit(procLimits()),
  );
  if (cap.note) console.error(cap.note);
  const servers: ConnectionServer[] = [];
  // Installed before listening: a SIGTERM during start-up also drains and exits 0.
  stopOnSignals(servers, async () => {
    await gateway.close();
    for (const c of closers) await c().catch(() => {});
    upstream.close();
    kv.close();
  }, {
    onSignal: (signal, f) => {
      Deno.addSignalListener(signal, f);
      // A worker whose supervisor is gone (its stdin closed, even after a kill -9) drains too.
      if (signal === "SIGTERM") worker?.supervisorGone.then(f);
    },
    // Unreferenced: once drained, the grace timer must not hold the process (endServer).
    delay: (ms) => new Promise<void>((r) => Deno.unrefTimer(setTimeout(r, ms))),
    print: (l) => console.error(l),
    exit: endServer,
    draining: () => gateway.ctx.tlog.waiters.close(),
  });
  await gateway.ready;
  if (!dev) reloadOnHangup(configPath!, worker?.spec.ports.base ?? portOverride, gateway.live);
  else {
    // Without a listener SIGHUP would end the process (no drain, no line).
    Deno.addSignalListener("SIGHUP", () => {
      log({
        level: "warn",
        msg: "SIGHUP ignored: the development defaults have no configuration file to reload",
      });
    });
  }
  const listen = (l: GatewayConfig["listen"]["base"], label: string) => {
    const server = listenOn(l, label, config, {
      handler: gateway.handler,
      serveOn,
      cap: cap.cap,
      reusePort: worker !== null,
    }, {
      listen: (at) => Deno.listen(at),
      listenTls: (o) => Deno.listenTls(o),
      readTextFileSync: (p) => Deno.readTextFileSync(p),
      connect: (to) => Deno.connect(to),
      now: () => performance.now(),
      log,
      print: (l) => console.error(l),
    });
    servers.push(server);
    gateway.ctx.metrics.connections(label, () => server.stats());
  };
  listen(config.listen.base, "base");
  if (config.listen.tee) listen(config.listen.tee, "tee");
  console.error(`keyset digest ${gateway.identity.current().digest}`);
  if (worker === null) signalLine(dev, configPath, 1);
  if (dev) {
    await printDevKey(
      config,
      {
        kv,
        now: Date.now,
        read: () => Deno.readTextFile(DEV_KEY_FILE).catch(() => null),
        save: (k) => Deno.writeTextFile(DEV_KEY_FILE, k + "\n", { mode: 0o600 }),
      },
      DEV_KEY_FILE,
      writeLine(Deno.stderr),
    );
  }
}

/**
 * The host supervisor (src/app/supervisor.ts): `count` workers, each this
 * process's own command line again with the worker variable set, told its
 * spec on stdin. Listener ports are fixed here, so a configured 0 is one
 * port for all; the E2EE seed and cache-salt secret are drawn here, so the
 * workers agree (a configured variable still wins in each worker).
 */
async function superviseWorkers(count: number, config: GatewayConfig): Promise<void> {
  if ((await Deno.permissions.query({ name: "run" })).state !== "granted") {
    fail(`serve.workers: ${count} workers need --allow-run (or set serve.workers to 1)`);
  }
  const freePort = (l: { hostname: string; port: number }) => {
    if (l.port !== 0) return l.port;
    const probe = Deno.listen({ hostname: l.hostname, port: 0 });
    const port = (probe.addr as Deno.NetAddr).port;
    probe.close();
    return port;
  };
  const ports = {
    base: freePort(config.listen.base),
    ...(config.listen.tee ? { tee: freePort(config.listen.tee) } : {}),
  };
  const host = bytesToHex(bytes(6));
  const secrets = { e2eeSeed: bytesToHex(bytes(32)), cacheSalt: bytesToHex(bytes(32)) };
  // This process's arguments after the executable: `run <flags> main.ts serve …`, or a
  // compiled binary's `serve …` (Linux only, as SO_REUSEPORT spreading is).
  const argv = Deno.readTextFileSync("/proc/self/cmdline").split("\0");
  if (argv.at(-1) === "") argv.pop();
  const sup = supervise(
    count,
    (index): WorkerSpec => ({ host, index, count, ports, ...secrets }),
    {
      spawn: (spec) => spawnWorker(argv.slice(1), spec),
      onSignal: (signal, f) => Deno.addSignalListener(signal, f),
      delay: (ms) => new Promise<void>((r) => setTimeout(r, ms)),
      now: () => performance.now(),
      print: (l) => console.error(l),
      exit: endServer,
    },
  );
  console.error(`host ${host}: starting ${count} workers`);
  await sup.ready;
}

/** One worker process: stdout (the request log) inherited, stderr relayed line by line. */
function spawnWorker(args: string[], spec: WorkerSpec): WorkerProcess {
  const child = new Deno.Command(Deno.execPath(), {
    args,
    env: { [WORKER_VARIABLE]: "1" },
    stdin: "piped",
    stdout: "inherit",
    stderr: "piped",
  }).spawn();
  // The pipe stays open: its end (this process gone, even by kill -9) makes the worker drain.
  child.stdin.getWriter().write(new TextEncoder().encode(JSON.stringify(spec) + "\n")).catch(
    () => {},
  );
  let markReady: () => void = () => {};
  const ready = new Promise<void>((r) => markReady = r);
  const print = writeLine(Deno.stderr);
  const relayed = (async () => {
    let buf = "";
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        print(line);
        if (line.startsWith("keyset digest ")) markReady();
      }
    }
    if (buf !== "") print(buf);
  })().catch(() => {});
  return {
    pid: child.pid,
    exited: Promise.all([child.status, relayed]).then(([s]) => s.code),
    ready,
    kill: (signal) => {
      try {
        child.kill(signal);
      } catch {
        // already gone
      }
    },
  };
}

/** A worker's spec (first line of stdin), and when its supervisor is gone (stdin's end). */
async function readWorkerSpec(): Promise<
  { spec: WorkerSpec; worker: HostWorker; supervisorGone: Promise<void> }
> {
  const reader = Deno.stdin.readable.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) fail(`${WORKER_VARIABLE}=1 but no worker spec came on stdin`);
    buf += dec.decode(value, { stream: true });
    const nl = buf.indexOf("\n");
    if (nl < 0) continue;
    const spec = parseWorkerSpec(buf.slice(0, nl));
    if (spec === null) fail("the worker spec on stdin is malformed");
    const supervisorGone = (async () => {
      while (!(await reader.read()).done) { /* nothing else is sent */ }
    })().catch(() => {});
    return { spec, worker: hostWorker(spec), supervisorGone };
  }
}

/**
 * Once serving: the process an operator signals (with workers, the supervisor, which
 * forwards the signal to each).
 */
function signalLine(dev: boolean, configPath: string | undefined, workers: number): void {
  console.error(
    `gateway pid ${Deno.pid}: SIGTERM drains and stops it` +
      (dev ? "" : `, SIGHUP reloads ${configPath}`) +
      (workers > 1 ? ` (supervising ${workers} workers)` : ""),
  );
}

/**
 * SIGHUP: the configuration file read again and applied live (providers, models,
 * prices; src/app/live_config.ts), validated as at start-up. A refused file
 * changes nothing and is logged; the gateway keeps serving what it had.
 */
function reloadOnHangup(
  configPath: string,
  portOverride: number | undefined,
  live: { apply(next: GatewayConfig, source: "file"): unknown },
): void {
  Deno.addSignalListener("SIGHUP", async () => {
    try {
      const next = parseConfig(await Deno.readTextFile(configPath));
      if (portOverride !== undefined) next.listen.base.port = portOverride;
      await checkConfigFiles(next, configPath, startupFiles);
      live.apply(next, "file");
    } catch (e) {
      log({
        level: "error",
        msg: "configuration refused",
        source: "file",
        path: configPath,
        error: (e as Error).message,
      });
    }
  });
}

/** The gateway's services over what `serve` opened, with the environment's clocks, ids and variables. */
async function gatewayFor(
  config: GatewayConfig,
  s: {
    quotes: Parameters<typeof assembleGateway>[1]["quotes"];
    provenance: Parameters<typeof assembleGateway>[1]["provenance"];
    kv: Deno.Kv;
    upstream: ReturnType<typeof upstreamTransport>;
    attesters: Awaited<ReturnType<typeof upstreamAttesters>>;
    worker?: HostWorker;
  },
) {
  // A weak operator token stops start-up with a clear message (assembleGateway would throw).
  try {
    operatorAuth(Deno.env.get(ADMIN_TOKEN_ENV));
  } catch (e) {
    fail((e as Error).message);
  }
  return assembleGateway(config, {
    quotes: s.quotes,
    provenance: s.provenance,
    kv: s.kv,
    now: Date.now,
    monotonic: () => performance.now(),
    random: Math.random,
    fetch: s.upstream.fetch,
    randomBytes: bytes,
    randomUUID: () => crypto.randomUUID(),
    log,
    env: (name) => Deno.env.get(name),
    witnessFetch: (url, init) => fetch(url, init),
  }, {
    attesters: s.attesters,
    transport: s.upstream,
    worker: s.worker,
    tlsSpkiSha256s: await listenerSpkis(config, (p) => Deno.readTextFile(p)),
    // Off only on request (the bench measures what metrics cost against it).
    metrics: Deno.env.get("GATEWAY_METRICS") === "off" ? noopMetrics() : undefined,
    // Off only for the bench's with/without comparison (bench/tlog_cost.ts): never in service.
    logEntries: Deno.env.get("GATEWAY_TLOG") !== "off",
    // Process metrics (CPU, memory, event-loop lag, GC) cost ~2% of throughput in the bench:
    // opt-in.
    processMetrics: Deno.env.get("GATEWAY_PROCESS_METRICS") === "on",
    processStats,
    runtimeVersion: Deno.version.deno,
    // Under OTEL_DENO=true the per-request line goes through console.log, exported by Deno
    // as a log record inside the request's trace (src/app/otel.ts); stdout gets it either way.
    otelLog: OTEL
      ? (line) => console.log(JSON.stringify({ ts: new Date().toISOString(), ...line }))
      : undefined,
  });
}

/** The configuration `serve` runs: the embedded dev one (with its demo upstreams) or a file. */
async function serveConfig(args: string[]): Promise<{
  dev: boolean;
  configPath: string | undefined;
  config: GatewayConfig;
  closers: (() => Promise<void>)[];
  /** `--port` (or PORT), which wins over the file's port, also when it is reloaded. */
  portOverride: number | undefined;
}> {
  const { dev, configPath, portFlag, port } = serveArgs(args, Deno.env.get("PORT"));

  const closers: (() => Promise<void>)[] = [];
  let config: GatewayConfig;
  if (dev) {
    const ups = await startDevUpstreams({ now: Date.now, randomBytes: bytes, demoNow: Date.now });
    closers.push(() => ups.close());
    config = devConfig(
      { plainUrl: ups.plain.url, confidentialUrl: ups.secure.url, confidentialCaPem: ups.caPem },
      { port, storePath: DEV_STORE },
    );
  } else {
    config = await loadConfigFile(configPath!);
    if (portFlag !== undefined) config.listen.base.port = port;
    if (config.development) {
      fail(`${configPath}: "development": true is reserved for the embedded dev configuration`);
    }
    await checkConfigFiles(config, configPath!, startupFiles);
  }
  unsetKeyVariables(config, (n) => Deno.env.get(n), configPath);
  return {
    dev,
    configPath,
    config,
    closers,
    portOverride: portFlag === undefined ? undefined : port,
  };
}

/**
 * The runtime's HTTP server on one accepted connection (what `Deno.serve` runs
 * per connection; not public API, hence checked at start-up). It lets the
 * gateway own the accept loop: see src/http/connections.ts.
 */
export function runtimeServeOn(): ServeOn {
  const internal = (Deno as unknown as Record<symbol, Record<string, unknown>>)[
    (Deno as unknown as { internal: symbol }).internal
  ];
  const serveOn = internal?.serveHttpOnConnection;
  if (typeof serveOn !== "function") {
    fail("this Deno runtime does not expose serveHttpOnConnection; run Deno 2.9.6");
  }
  type Served = ReturnType<ServeOn>;
  // No abort signal: aborting a connection the runtime has just closed throws from
  // inside its listener (an uncaught BadResource); `shutdown()` tolerates that.
  return (conn, handler, onError) =>
    (serveOn as (...a: unknown[]) => Served)(conn, undefined, handler, onError, () => {});
}

const startTimeSeconds = Date.now() / 1000 - performance.now() / 1000;

/** This process's CPU and memory, read when the metrics are scraped (never per request). */
function processStats(): ProcessStats {
  const cpu = process.cpuUsage();
  const mem = Deno.memoryUsage();
  let openFds: number | undefined;
  try {
    openFds = [...Deno.readDirSync("/proc/self/fd")].length;
  } catch {
    openFds = undefined; // not Linux
  }
  return {
    cpuUserSeconds: cpu.user / 1e6,
    cpuSystemSeconds: cpu.system / 1e6,
    residentBytes: mem.rss,
    heapUsedBytes: mem.heapUsed,
    startTimeSeconds,
    openFds,
  };
}

/** `/proc/self/limits`, where there is one (Linux). */
function procLimits(): string | undefined {
  try {
    return Deno.readTextFileSync("/proc/self/limits");
  } catch {
    return undefined; // not Linux: keep the configured cap
  }
}

async function keys(args: string[]): Promise<void> {
  const { values, rest } = takeOptions(args, ["config"]);
  const configPath = values.config;
  const config = configPath ? await loadConfigFile(configPath) : undefined;
  const kv = await openStore(config?.store.path ?? DEV_STORE, storeIo);
  const tiers = config?.tiers ?? DEFAULT_TIERS;
  const code = await runKeys(rest, { kv, print: writeLine(Deno.stdout), now: Date.now, tiers });
  kv.close();
  // Under OTEL_DENO, Deno.exit during a telemetry export can hang the process; once the
  // store is closed nothing keeps the event loop alive, so the command ends on its own.
  if (OTEL) Deno.exitCode = code;
  else Deno.exit(code);
}

/**
 * A path the user typed, resolved against the directory they ran the command
 * in: `deno task` runs in the project root and passes that directory as INIT_CWD.
 */
function userPath(path: string): string {
  if (path.startsWith("/")) return path;
  const base = Deno.env.get("INIT_CWD") ?? Deno.cwd();
  return `${base.replace(/\/+$/, "")}/${path}`;
}

/** `--amd-roots` (ASK+ARK PEM pairs) and `--vcek` (DER or PEM; else the AMD KDS) for `verify`. */
async function auditSnpTrust(
  rootsPath: string | undefined,
  vcekPath: string | undefined,
): Promise<{ snpRoots: SnpRoot[]; snpVcek: VcekSource }> {
  let snpRoots: SnpRoot[] = [];
  if (rootsPath !== undefined) {
    const parsed = snpRootsFromPem(await Deno.readTextFile(userPath(rootsPath)));
    if (!parsed.ok) fail(`--amd-roots ${rootsPath}: ${parsed.reason}`);
    snpRoots = parsed.roots;
  }
  if (vcekPath === undefined) {
    return {
      snpRoots,
      snpVcek: kdsVcekSource({ baseUrl: AMD_KDS_BASE_URL, fetch: (url) => fetch(url) }),
    };
  }
  const bytes = await Deno.readFile(userPath(vcekPath));
  const pem = pemCertificatesToDer(new TextDecoder().decode(bytes));
  return { snpRoots, snpVcek: localVcekSource(pem.length ? pem : [bytes], vcekPath) };
}

/** `--tdx-root`: the one certificate (PEM or DER) an auditor pins TDX collateral to. */
async function auditRoot(path: string): Promise<Uint8Array> {
  const bytes = await Deno.readFile(userPath(path));
  const pem = pemCertificatesToDer(new TextDecoder().decode(bytes));
  if (pem.length > 1) fail(`--tdx-root ${path}: expected one certificate, found ${pem.length}`);
  return pem[0] ?? bytes;
}

async function verify(args: string[]): Promise<void> {
  // Provider kinds with their own evidence shapes (NEAR AI, Tinfoil) read their own options.
  const kind = args[args.indexOf("--kind") + 1];
  if (args.includes("--kind") && PROVIDER_KINDS.has(kind)) {
    Deno.exit(
      await runProviderVerify(args, {
        readFile: (p) => Deno.readFile(userPath(p)),
        print: (l) => console.log(l),
        now: Date.now,
      }),
    );
  }
  // Collateral options are ours; everything else belongs to the verify command.
  const { values, rest } = takeOptions(args, [
    "collateral",
    "pccs-url",
    "amd-roots",
    "vcek",
    "tdx-root",
  ]);
  const path = values.collateral === undefined ? undefined : userPath(values.collateral);
  const { source, gpu, note } = await verifyCollateral(path, values["pccs-url"], {
    ...trustIo,
    isDirectory: startupFiles.isDirectory,
  });
  if (note) console.error(note);
  const snp = await auditSnpTrust(values["amd-roots"], values.vcek);
  const tdxRootCaDer = values["tdx-root"] === undefined
    ? undefined
    : await auditRoot(values["tdx-root"]);
  const code = await runVerify(rest, {
    now: Date.now,
    quoteCheck: tdxQuoteCheck({ source, now: Date.now, rootCaDer: tdxRootCaDer }),
    trust: { tdxSource: source, gpu, ...snp, ...(tdxRootCaDer ? { tdxRootCaDer } : {}) },
    fetch: (input, init) => fetch(input, init),
    readFile: (p) => Deno.readFile(userPath(p)),
    print: (l) => console.log(l),
    randomBytes: bytes,
    apiKey: Deno.env.get(API_KEY_VARIABLE) || undefined,
    gpu,
  });
  Deno.exit(code);
}

async function monitor(args: string[]): Promise<void> {
  const { source } = await verifyCollateral(undefined, undefined, {
    ...trustIo,
    isDirectory: startupFiles.isDirectory,
  });
  const code = await runMonitor(args, {
    fetch: (input, init) => fetch(input, init),
    readTextFile: async (p) => {
      try {
        return await Deno.readTextFile(userPath(p));
      } catch (e) {
        if (e instanceof Deno.errors.NotFound) return null;
        throw e;
      }
    },
    writeTextFile: async (p, text, o) => {
      // Written whole, then renamed: a crash never leaves half a state file.
      const path = userPath(p);
      await Deno.writeTextFile(`${path}.tmp`, text, o?.secret ? { mode: 0o600 } : {});
      if (o?.secret) await Deno.chmod(`${path}.tmp`, 0o600); // an old .tmp keeps its mode
      await Deno.rename(`${path}.tmp`, path);
    },
    print: (l) => console.log(l),
    randomBytes: bytes,
    now: Date.now,
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
    quoteCheck: tdxQuoteCheck({ source, now: Date.now }),
    serve: (hostname, port, handler) => {
      const server = Deno.serve({ hostname, port, onListen: () => {} }, handler);
      return { url: `http://${hostname}:${server.addr.port}`, finished: server.finished };
    },
  });
  Deno.exit(code);
}

async function dispatch(cmd: string, args: string[]): Promise<void> {
  switch (cmd) {
    case "serve":
      return await serve(args);
    case "keys":
      return await keys(args);
    case "verify":
      return await verify(args);
    case "monitor":
      return await monitor(args);
    default:
      fail("usage: main.ts serve|keys|verify|monitor …");
  }
}

if (import.meta.main) {
  const [cmd, ...args] = Deno.args;
  try {
    await dispatch(cmd ?? "serve", args);
  } catch (e) {
    // Start-up and usage failures are one line for the operator; anything else is a bug.
    if (e instanceof StartupError || e instanceof UsageError) fail(e.message);
    throw e;
  }
}
