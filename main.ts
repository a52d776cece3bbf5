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
import { type GatewayConfig, parseConfig } from "./src/config/schema.ts";
import { devConfig } from "./src/config/dev.ts";
import { assembleGateway } from "./src/app/assemble.ts";
import { type ConnectionServer, serveConnections, type ServeOn } from "./src/http/connections.ts";
import { startDevUpstreams } from "./src/demo/dev_upstreams.ts";
import { productionVerifiers } from "./src/sessions/verifiers.ts";
import { pemCertificatesToDer } from "./src/verify/x509/pem.ts";
import { DEFAULT_TIERS } from "./src/accounts/rate_limit.ts";
import tls from "node:tls";
import { PROXY_VARIABLES } from "./src/upstream/socket_connector.ts";
import { createUpstreamTransport } from "./src/upstream/transport.ts";
import { runKeys } from "./src/cli/keys.ts";
import { devKey } from "./src/accounts/dev_key.ts";
import { ADMIN_TOKEN_ENV, operatorAuth } from "./src/operator/admin_token.ts";
import { noopMetrics } from "./src/operator/metrics.ts";
import { API_KEY_VARIABLE, runVerify } from "./src/cli/verify.ts";
import { randomBytes } from "node:crypto";
import { selectQuoteProvider } from "./enclave/select_provider.ts";
import { DEV_QUOTE_WARNING } from "./enclave/dev_quote_provider.ts";
import { type SourceProvenance, sourceProvenanceFromManifest } from "./enclave/manifest.ts";
import { tdxQuoteCheck } from "./src/verify/tdx_quote_check.ts";
import { parseOptions, takeOptions, UsageError } from "./src/cli/args.ts";
import { createLogBuffer } from "./src/app/log_buffer.ts";
import {
  checkConfigFiles,
  connectionCap,
  listenerSpkis,
  listenFailure,
  openFileLimit,
  readFailure,
  StartupError,
  type StartupFiles,
  unsetKeyVariableWarnings,
} from "./src/app/startup_checks.ts";
import {
  collateralSource,
  gpuDeps,
  snpTrust,
  type TrustIo,
  verifyCollateral,
} from "./src/app/trust_sources.ts";

const DEFAULT_PORT = 8787;
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

// One native call into a fresh array (getRandomValues takes at most 64 KiB at a time).
const bytes = (n: number) =>
  n <= 65_536 ? crypto.getRandomValues(new Uint8Array(n)) : new Uint8Array(randomBytes(n));

async function openStore(path: string): Promise<Deno.Kv> {
  if (!/^https?:\/\//.test(path) && path !== ":memory:") {
    const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".";
    await Deno.mkdir(dir, { recursive: true });
  }
  return await Deno.openKv(path);
}

async function loadConfigFile(path: string): Promise<GatewayConfig> {
  try {
    return parseConfig(await Deno.readTextFile(path));
  } catch (e) {
    fail(`${path}: ${(e as Error).message}`);
  }
}

const SERVE_USAGE = "usage: main.ts serve --dev | --config FILE [--port N]";

/** `serve`: the configuration, the gateway's services, the listeners, and a drain on SIGTERM. */
async function serve(args: string[]): Promise<void> {
  const { dev, configPath, config, closers } = await serveConfig(args);
  const { quotes, provenance } = await gatewayIdentity(config, configPath);
  const kv = await openConfiguredStore(config, configPath);
  const upstream = upstreamTransport(config);
  const verifiers = productionVerifiers(config, {
    now: Date.now,
    randomBytes: bytes,
    tlsConnect: tls.connect,
    collateral: await collateralSource(config, trustIo),
    rootCaDer: config.trust.intel_root_ca_pem
      ? pemCertificatesToDer(config.trust.intel_root_ca_pem)[0]
      : undefined,
    sevSnp: await snpTrust(config, trustIo),
    gpu: await gpuDepsNoted(config.trust.nvidia ?? {}),
  });
  // A weak operator token stops start-up with a clear message (assembleGateway would throw).
  try {
    operatorAuth(Deno.env.get(ADMIN_TOKEN_ENV));
  } catch (e) {
    fail((e as Error).message);
  }
  const gateway = assembleGateway(config, {
    quotes,
    provenance,
    kv,
    now: Date.now,
    monotonic: () => performance.now(),
    random: Math.random,
    fetch: upstream.fetch,
    randomBytes: bytes,
    randomUUID: () => crypto.randomUUID(),
    log,
    env: (name) => Deno.env.get(name),
  }, {
    verifiers,
    transport: upstream,
    tlsSpkiSha256s: await listenerSpkis(config, (p) => Deno.readTextFile(p)),
    // Off only on request (the bench measures what metrics cost against it).
    metrics: Deno.env.get("GATEWAY_METRICS") === "off" ? noopMetrics() : undefined,
    // Process metrics (CPU, memory, event-loop lag, GC) cost ~2% of throughput in the bench:
    // opt-in.
    processMetrics: Deno.env.get("GATEWAY_PROCESS_METRICS") === "on",
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
  });
  await gateway.ready;
  const listen = (l: Listen, label: string) => {
    const server = listenOn(l, label, config, { handler: gateway.handler, serveOn, cap: cap.cap });
    servers.push(server);
    gateway.ctx.metrics.connections(label, () => server.stats());
  };
  listen(config.listen.base, "base");
  if (config.listen.tee) listen(config.listen.tee, "tee");
  console.error(`keyset digest ${gateway.identity.current().digest}`);
  if (dev) await printDevKey(kv, config);
}

/** The configuration `serve` runs: the embedded dev one (with its demo upstreams) or a file. */
async function serveConfig(args: string[]): Promise<{
  dev: boolean;
  configPath: string | undefined;
  config: GatewayConfig;
  closers: (() => Promise<void>)[];
}> {
  let opts;
  try {
    opts = parseOptions(args, { strings: ["config", "port"], booleans: ["dev"] });
  } catch (e) {
    fail(`${(e as Error).message}\n${SERVE_USAGE}`);
  }
  const dev = opts.flags.has("dev");
  const configPath = opts.values.config;
  const portFlag = opts.values.port ?? Deno.env.get("PORT");
  const port = portFlag === undefined ? DEFAULT_PORT : Number(portFlag);
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`invalid port: ${portFlag}`);
  if (dev === (configPath !== undefined)) {
    fail(SERVE_USAGE);
  }

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
  for (const w of unsetKeyVariableWarnings(config, (n) => Deno.env.get(n))) console.error(w);
  return { dev, configPath, config, closers };
}

/** The gateway's own attestation: its quote provider, and the source manifest when configured. */
async function gatewayIdentity(config: GatewayConfig, configPath: string | undefined) {
  let quotes;
  try {
    quotes = await selectQuoteProvider({
      mode: config.identity.quote_provider,
      root: config.identity.configfs_root,
      allowDev: config.identity.allow_dev_quotes,
    });
  } catch (e) {
    fail(`no TEE quote provider: ${(e as Error).message}`);
  }
  if (!quotes.hardware) console.error(DEV_QUOTE_WARNING);
  let provenance: SourceProvenance | null = null;
  if (config.identity.manifest_path) {
    try {
      provenance = sourceProvenanceFromManifest(
        JSON.parse(await Deno.readTextFile(config.identity.manifest_path)),
      );
    } catch (e) {
      fail(
        `${configPath ?? "config"}: identity.manifest_path: ${config.identity.manifest_path}: ` +
          readFailure(e),
      );
    }
  }
  return { quotes, provenance };
}

async function openConfiguredStore(
  config: GatewayConfig,
  configPath: string | undefined,
): Promise<Deno.Kv> {
  try {
    return await openStore(config.store.path);
  } catch (e) {
    fail(
      `${configPath ?? "config"}: store.path: cannot open ${config.store.path}: ${readFailure(e)}`,
    );
  }
}

/** The upstream client: over the runtime's sockets, or fetch when a proxy variable is set. */
function upstreamTransport(config: GatewayConfig) {
  const proxied = PROXY_VARIABLES.some((v) => Deno.env.get(v));
  if (proxied && config.upstream.client === "http1") {
    console.error("a proxy variable is set: upstreams are reached with fetch, which honours it");
  }
  return createUpstreamTransport({
    choice: proxied ? "fetch" : config.upstream.client,
    net: { connect: Deno.connect, startTls: Deno.startTls },
    tlsConnect: tls.connect,
    fetch: (url, init) => fetch(url, init),
    now: () => performance.now(),
  });
}

type Listen = GatewayConfig["listen"]["base"];

/** Serves the gateway on one configured listener (TLS terminated on a loopback relay). */
function listenOn(
  l: Listen,
  label: string,
  config: GatewayConfig,
  o: { handler: Parameters<typeof serveConnections>[1]; serveOn: ServeOn; cap: number },
): ConnectionServer {
  const tls = l.tls_cert_file && l.tls_key_file;
  let listener: Deno.Listener;
  let inner: Deno.TlsListener | null = null;
  try {
    listener = Deno.listen({ hostname: l.hostname, port: l.port });
    // TLS is terminated on a loopback listener the accept loop relays to (see TlsFront).
    if (tls) {
      inner = Deno.listenTls({
        hostname: "127.0.0.1",
        port: 0,
        cert: Deno.readTextFileSync(l.tls_cert_file!),
        key: Deno.readTextFileSync(l.tls_key_file!),
        alpnProtocols: ["h2", "http/1.1"],
      });
    }
  } catch (e) {
    fail(`listen.${label}: cannot listen on ${l.hostname}:${l.port}: ${listenFailure(e)}`);
  }
  const innerPort = (inner?.addr as Deno.NetAddr | undefined)?.port;
  const server = serveConnections(listener, o.handler, {
    limits: {
      maxConnections: o.cap,
      headerTimeoutMs: config.limits.header_timeout_ms,
      idleTimeoutMs: config.limits.idle_timeout_ms,
    },
    serveOn: o.serveOn,
    tls: inner
      ? {
        listener: inner,
        connect: () => Deno.connect({ hostname: "127.0.0.1", port: innerPort! }),
      }
      : undefined,
    now: () => performance.now(),
    log,
  });
  const { hostname, port } = listener.addr as Deno.NetAddr;
  console.error(
    `gateway ${label} listening on ${tls ? "https" : "http"}://${hostname}:${port}/v1`,
  );
  return server;
}

/** On SIGTERM/SIGINT: stop accepting, drain (10 s at most), close the rest, exit 0. */
function stopOnSignals(servers: ConnectionServer[], close: () => Promise<void>): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.error(`${signal}: draining`);
    const grace = new Promise<void>((r) => setTimeout(r, 10_000));
    // shutdown() stops accepting and waits for in-flight responses, streams included.
    await Promise.race([Promise.all(servers.map((s) => s.shutdown())), grace]);
    await close();
    flushLog();
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", () => stop("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => stop("SIGINT"));
}

/** Development mode: the dev key (pro tier, 100 credits), created once and reused across restarts. */
async function printDevKey(kv: Deno.Kv, config: GatewayConfig): Promise<void> {
  const { key, reused } = await devKey({
    kv,
    now: Date.now,
    read: () => Deno.readTextFile(DEV_KEY_FILE).catch(() => null),
    save: (k) => Deno.writeTextFile(DEV_KEY_FILE, k + "\n", { mode: 0o600 }),
  });
  console.error(
    `development mode: demo upstreams ${config.providers.map((p) => p.base_url).join(", ")}`,
  );
  console.error(
    reused
      ? `development API key (reused from ${DEV_KEY_FILE}):\n${key}`
      : `development API key (pro tier, 100 credits, saved in ${DEV_KEY_FILE}):\n${key}`,
  );
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

/** `/proc/self/limits`, where there is one (Linux). */
function procLimits(): string | undefined {
  try {
    return Deno.readTextFileSync("/proc/self/limits");
  } catch {
    return undefined; // not Linux: keep the configured cap
  }
}

/** GPU trust material; the note says where local collateral came from. */
async function gpuDepsNoted(c: Parameters<typeof gpuDeps>[0]) {
  const r = await gpuDeps(c, trustIo);
  if (r.note) console.error(r.note);
  return r.deps;
}

async function keys(args: string[]): Promise<void> {
  const { values, rest } = takeOptions(args, ["config"]);
  const configPath = values.config;
  const config = configPath ? await loadConfigFile(configPath) : undefined;
  const kv = await openStore(config?.store.path ?? DEV_STORE);
  const tiers = config?.tiers ?? DEFAULT_TIERS;
  const code = await runKeys(rest, { kv, print: (l) => console.log(l), now: Date.now, tiers });
  kv.close();
  Deno.exit(code);
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

async function verify(args: string[]): Promise<void> {
  // Collateral options are ours; everything else belongs to the verify command.
  const { values, rest } = takeOptions(args, ["collateral", "pccs-url"]);
  const path = values.collateral === undefined ? undefined : userPath(values.collateral);
  const { source, gpu, note } = await verifyCollateral(path, values["pccs-url"], {
    ...trustIo,
    isDirectory: startupFiles.isDirectory,
  });
  if (note) console.error(note);
  const code = await runVerify(rest, {
    now: Date.now,
    quoteCheck: tdxQuoteCheck({ source, now: Date.now }),
    fetch: (input, init) => fetch(input, init),
    readFile: (p) => Deno.readFile(userPath(p)),
    print: (l) => console.log(l),
    randomBytes: bytes,
    apiKey: Deno.env.get(API_KEY_VARIABLE) || undefined,
    gpu,
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
    default:
      fail("usage: main.ts serve|keys|verify …");
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
