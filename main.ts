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
import { spkiSha256FromPem } from "./src/upstream/spki.ts";
import type { CollateralSource } from "./src/verify/tdx/collateral_source.ts";
import { runKeys } from "./src/cli/keys.ts";
import { createKey } from "./src/accounts/keys.ts";
import { NANO_PER_CREDIT } from "./src/accounts/credits.ts";
import { API_KEY_VARIABLE, runVerify } from "./src/cli/verify.ts";
import { randomBytes } from "node:crypto";
import { selectQuoteProvider } from "./enclave/select_provider.ts";
import { DEV_QUOTE_WARNING } from "./enclave/dev_quote.ts";
import { type SourceProvenance, sourceProvenanceFromManifest } from "./enclave/manifest.ts";
import { tdxQuoteCheck } from "./src/verify/tdx_quote_check.ts";
import { INTEL_PCS_BASE_URL, PcsCollateralSource } from "./src/verify/tdx/collateral_source.ts";
import { collateralFromDcapQvlJson } from "./src/verify/tdx/collateral.ts";
import { type SnpTrust, snpTrustFromConfig } from "./src/verify/sev_snp/trust.ts";
import type { GpuDeps } from "./src/verify/nvidia/deps.ts";
import { gpuDepsFromConfig, type NvidiaTrust } from "./src/verify/nvidia/setup.ts";

const DEFAULT_PORT = 8787;
const DEV_STORE = ".data/dev.kv";

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  if (i === -1) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith("--")) fail(`--${name} needs a value`);
  return v;
}

/** `args` without `--name VALUE` (flags main.ts consumes before handing the rest on). */
function withoutFlags(args: string[], names: string[]): string[] {
  const drop = new Set(names.map((n) => `--${n}`));
  return args.filter((a, i) => !drop.has(a) && !drop.has(args[i - 1]));
}

function fail(msg: string): never {
  flushLog();
  console.error(msg);
  Deno.exit(2);
}

// Log lines (one per request) are written in batches: one stdout write per
// event-loop turn instead of one per request, which is measurable under load.
const logLines: string[] = [];
const logEncoder = new TextEncoder();

function log(line: Record<string, unknown>): void {
  logLines.push(JSON.stringify({ ts: new Date().toISOString(), ...line }));
  if (logLines.length === 1) setTimeout(flushLog, 0);
}

function flushLog(): void {
  if (logLines.length === 0) return;
  let bytes = logEncoder.encode(logLines.join("\n") + "\n");
  logLines.length = 0;
  try {
    while (bytes.length > 0) bytes = bytes.subarray(Deno.stdout.writeSync(bytes));
  } catch {
    // A closed stdout must not take the gateway down with it; the lines are dropped.
  }
}

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

async function serve(args: string[]): Promise<void> {
  const dev = args.includes("--dev");
  const configPath = flag(args, "config");
  const portFlag = flag(args, "port") ?? Deno.env.get("PORT");
  const port = portFlag === undefined ? DEFAULT_PORT : Number(portFlag);
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`invalid port: ${portFlag}`);
  if (dev === (configPath !== undefined)) {
    fail("usage: main.ts serve --dev | --config FILE [--port N]");
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
    await checkConfigFiles(config, configPath!);
  }
  warnUnsetKeyVariables(config);

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

  let kv: Deno.Kv;
  try {
    kv = await openStore(config.store.path);
  } catch (e) {
    fail(
      `${configPath ?? "config"}: store.path: cannot open ${config.store.path}: ${readFailure(e)}`,
    );
  }
  const proxied = PROXY_VARIABLES.some((v) => Deno.env.get(v));
  if (proxied && config.upstream.client === "http1") {
    console.error("a proxy variable is set: upstreams are reached with fetch, which honours it");
  }
  const upstream = createUpstreamTransport({
    choice: proxied ? "fetch" : config.upstream.client,
    net: { connect: Deno.connect, startTls: Deno.startTls },
    tlsConnect: tls.connect,
    fetch: (url, init) => fetch(url, init),
    now: () => performance.now(),
  });
  const verifiers = productionVerifiers(config, {
    now: Date.now,
    randomBytes: bytes,
    tlsConnect: tls.connect,
    collateral: await collateralSource(config),
    rootCaDer: config.trust.intel_root_ca_pem
      ? pemCertificatesToDer(config.trust.intel_root_ca_pem)[0]
      : undefined,
    sevSnp: await snpTrust(config),
    gpu: await gpuDeps(config.trust.nvidia ?? {}),
  });
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
    tlsSpkiSha256s: await listenerSpkis(config),
  });

  const servers: ConnectionServer[] = [];
  const serveOn = runtimeServeOn();
  const anyTls = [config.listen.base, config.listen.tee].some((l) => l?.tls_cert_file);
  const maxConnections = connectionCap(config.limits.max_connections, anyTls ? 4 : 2);
  const listen = (l: GatewayConfig["listen"]["base"], label: string) => {
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
    servers.push(serveConnections(listener, gateway.handler, {
      limits: {
        maxConnections,
        headerTimeoutMs: config.limits.header_timeout_ms,
        idleTimeoutMs: config.limits.idle_timeout_ms,
      },
      serveOn,
      tls: inner
        ? {
          listener: inner,
          connect: () => Deno.connect({ hostname: "127.0.0.1", port: innerPort! }),
        }
        : undefined,
      now: () => performance.now(),
      log,
    }));
    const { hostname, port } = listener.addr as Deno.NetAddr;
    console.error(
      `gateway ${label} listening on ${tls ? "https" : "http"}://${hostname}:${port}/v1`,
    );
  };
  // Installed before listening: a SIGTERM during start-up also drains and exits 0.
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.error(`${signal}: draining`);
    const grace = new Promise<void>((r) => setTimeout(r, 10_000));
    // shutdown() stops accepting and waits for in-flight responses, streams included.
    await Promise.race([Promise.all(servers.map((s) => s.shutdown())), grace]);
    await gateway.close();
    for (const c of closers) await c().catch(() => {});
    upstream.close();
    kv.close();
    flushLog();
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", () => stop("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => stop("SIGINT"));
  await gateway.ready;
  listen(config.listen.base, "base");
  if (config.listen.tee) listen(config.listen.tee, "tee");
  console.error(`keyset digest ${gateway.identity.current().digest}`);

  if (dev) {
    const { key } = await createKey(kv, {
      tier: "pro",
      name: "dev",
      now: Date.now,
      creditsNano: 100n * NANO_PER_CREDIT,
    });
    console.error(
      `development mode: demo upstreams ${config.providers.map((p) => p.base_url).join(", ")}`,
    );
    console.error(`development API key (pro tier, 100 credits), shown once:\n${key}`);
  }
}

/** Every file the configuration names is readable, or one line naming the field and the file. */
async function checkConfigFiles(config: GatewayConfig, configPath: string): Promise<void> {
  const files: [string, string | undefined][] = [];
  for (const [label, l] of [["base", config.listen.base], ["tee", config.listen.tee]] as const) {
    if (!l) continue;
    if ((l.tls_cert_file === undefined) !== (l.tls_key_file === undefined)) {
      fail(`${configPath}: listen.${label}: tls_cert_file and tls_key_file go together`);
    }
    files.push([`listen.${label}.tls_cert_file`, l.tls_cert_file]);
    files.push([`listen.${label}.tls_key_file`, l.tls_key_file]);
  }
  files.push(["identity.manifest_path", config.identity.manifest_path]);
  for (const [field, path] of files) {
    if (path === undefined) continue;
    try {
      (await Deno.open(path, { read: true })).close();
    } catch (e) {
      fail(`${configPath}: ${field}: cannot read ${path}: ${readFailure(e)}`);
    }
  }
  const dir = config.trust.collateral_dir;
  if (dir !== undefined) {
    try {
      if (!(await Deno.stat(dir)).isDirectory) throw new Deno.errors.NotADirectory();
    } catch (e) {
      fail(`${configPath}: trust.collateral_dir: cannot read ${dir}: ${readFailure(e)}`);
    }
  }
}

/** A provider whose credential variable is unset would be called without credentials. */
function warnUnsetKeyVariables(config: GatewayConfig): void {
  for (const p of config.providers) {
    if (p.api_key_env !== undefined && !Deno.env.get(p.api_key_env)) {
      console.error(
        `warning: providers.${p.name}.api_key_env: the variable ${p.api_key_env} is not set; ` +
          `requests to ${p.name} carry no credential`,
      );
    }
  }
}

function listenFailure(e: unknown): string {
  if (e instanceof Deno.errors.AddrInUse) return "address already in use";
  if (e instanceof Deno.errors.AddrNotAvailable) return "address not available on this machine";
  if (e instanceof Deno.errors.PermissionDenied) return "permission denied (a port below 1024?)";
  return e instanceof Error ? e.message.split("\n")[0] : String(e);
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

/**
 * The configured connection cap, lowered to fit the descriptor limit: each
 * client connection may hold an upstream connection too (and a TLS one is
 * relayed over two loopback descriptors), and the store and listeners need a
 * few, so at most (limit - 64) / descriptors per connection.
 */
function connectionCap(configured: number, perConnection: number): number {
  let nofile = Infinity;
  try {
    const m = Deno.readTextFileSync("/proc/self/limits").match(/Max open files\s+(\d+)/);
    if (m) nofile = Number(m[1]);
  } catch {
    // not Linux: keep the configured cap
  }
  const fits = Math.max(16, Math.floor((nofile - 64) / perConnection));
  if (configured <= fits) return configured;
  console.error(
    `limits.max_connections ${configured} lowered to ${fits} to fit the open-file limit ${nofile}`,
  );
  return fits;
}

/** The keyset lists the SPKI of every TLS key the gateway terminates with, so clients can pin it. */
async function listenerSpkis(
  config: GatewayConfig,
): Promise<{ spki_sha256: string; domain?: string }[]> {
  const out = new Map<string, { spki_sha256: string; domain?: string }>();
  for (const l of [config.listen.base, config.listen.tee]) {
    if (!l?.tls_cert_file) continue;
    let spki: string;
    try {
      spki = spkiSha256FromPem(await Deno.readTextFile(l.tls_cert_file));
    } catch (e) {
      fail(`${l.tls_cert_file}: not a usable PEM certificate: ${(e as Error).message}`);
    }
    out.set(spki, {
      spki_sha256: spki,
      ...(config.identity.subject ? { domain: config.identity.subject } : {}),
    });
  }
  return [...out.values()];
}

/** TDX collateral: a local directory of `<fmspc>.json` files (offline), or Intel PCS / a PCCS. */
async function collateralSource(config: GatewayConfig): Promise<CollateralSource> {
  const dir = config.trust.collateral_dir;
  if (dir) {
    const byFmspc = new Map<string, Awaited<ReturnType<CollateralSource["get"]>>>();
    for await (const e of Deno.readDir(dir)) {
      const m = e.name.match(/^([0-9a-fA-F]{12})\.json$/);
      if (!m) continue;
      const c = collateralFromDcapQvlJson(await Deno.readTextFile(`${dir}/${e.name}`));
      if (!c.ok) fail(`trust.collateral_dir: ${e.name}: ${c.reason}`);
      byFmspc.set(m[1].toLowerCase(), c.collateral);
    }
    return {
      get: (fmspc) => {
        const c = byFmspc.get(fmspc.toLowerCase());
        return c
          ? Promise.resolve(c)
          : Promise.reject(new Error(`no collateral for FMSPC ${fmspc} in ${dir}`));
      },
    };
  }
  return new PcsCollateralSource({
    baseUrl: config.trust.pcs_url ?? INTEL_PCS_BASE_URL,
    fetch: (input: RequestInfo | URL, init?: RequestInit) =>
      fetch(input, { ...init, signal: AbortSignal.timeout(15_000) }),
    now: Date.now,
  });
}

/** SEV-SNP trust from `trust.sev_snp`: the pinned AMD roots; VCEKs from a directory or the KDS. */
async function snpTrust(config: GatewayConfig): Promise<SnpTrust | undefined> {
  const c = config.trust.sev_snp;
  if (!c) return undefined;
  let vcekFiles: Uint8Array[] | undefined;
  if (c.vcek_dir !== undefined) {
    vcekFiles = [];
    try {
      for await (const e of Deno.readDir(c.vcek_dir)) {
        if (e.isFile && e.name.endsWith(".der")) {
          vcekFiles.push(await Deno.readFile(`${c.vcek_dir}/${e.name}`));
        }
      }
    } catch (e) {
      fail(`trust.sev_snp.vcek_dir: cannot read ${c.vcek_dir}: ${readFailure(e)}`);
    }
  }
  const t = snpTrustFromConfig(c, {
    vcekFiles,
    fetch: (url) => fetch(url, { signal: AbortSignal.timeout(15_000) }),
  });
  if (!t.ok) fail(`trust.sev_snp.${t.reason}`);
  return t.trust;
}

/** GPU evidence roots and collateral (`trust.nvidia`); `--collateral DIR` of `verify` overrides. */
async function gpuDeps(c: NvidiaTrust): Promise<GpuDeps> {
  const r = await gpuDepsFromConfig(c, {
    readDir: (p) => Deno.readDir(p),
    readFile: (p) => Deno.readFile(p),
    fetch: (input: RequestInfo | URL, init?: RequestInit) =>
      fetch(input, { ...init, signal: AbortSignal.timeout(15_000) }),
    now: Date.now,
  });
  if (!r.ok) fail(r.reason);
  if (c.collateral_dir) console.error(r.note);
  return r.deps;
}

async function keys(args: string[]): Promise<void> {
  const configPath = flag(args, "config");
  const rest = withoutFlags(args, ["config"]);
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

/** What went wrong reading a file, in a few words (no stack). */
function readFailure(e: unknown): string {
  if (e instanceof Deno.errors.NotFound) return "no such file";
  if (e instanceof Deno.errors.PermissionDenied || e instanceof Deno.errors.NotCapable) {
    return "permission denied";
  }
  if (e instanceof Deno.errors.IsADirectory) return "is a directory";
  if (e instanceof Deno.errors.NotADirectory) return "not a directory";
  return e instanceof Error ? e.message : String(e);
}

async function verify(args: string[]): Promise<void> {
  // Collateral options are ours; everything else belongs to the verify command.
  const collateralFile = flag(args, "collateral");
  const pccs = flag(args, "pccs-url");
  const rest = withoutFlags(args, ["collateral", "pccs-url"]);
  let source;
  // A directory is GPU collateral (RIMs and OCSP responses, #21); a file is TDX collateral.
  let gpuDir = false;
  if (collateralFile) {
    try {
      gpuDir = (await Deno.stat(userPath(collateralFile))).isDirectory;
    } catch (e) {
      fail(`--collateral: cannot read ${userPath(collateralFile)}: ${readFailure(e)}`);
    }
  }
  const gpu = await gpuDeps(
    gpuDir && collateralFile ? { collateral_dir: userPath(collateralFile) } : {},
  );
  if (collateralFile && !gpuDir) {
    let text: string;
    try {
      text = await Deno.readTextFile(userPath(collateralFile));
    } catch (e) {
      fail(`--collateral: cannot read ${userPath(collateralFile)}: ${readFailure(e)}`);
    }
    const c = collateralFromDcapQvlJson(text);
    if (!c.ok) fail(`--collateral ${collateralFile}: ${c.reason}`);
    const collateral = c.collateral;
    source = { get: () => Promise.resolve(collateral) };
  } else {
    source = new PcsCollateralSource({
      baseUrl: pccs ?? INTEL_PCS_BASE_URL,
      fetch: (input: RequestInfo | URL, init?: RequestInit) =>
        fetch(input, { ...init, signal: AbortSignal.timeout(15_000) }),
      now: Date.now,
    });
  }
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

if (import.meta.main) {
  const [cmd, ...args] = Deno.args;
  switch (cmd ?? "serve") {
    case "serve":
      await serve(args);
      break;
    case "keys":
      await keys(args);
      break;
    case "verify":
      await verify(args);
      break;
    default:
      fail("usage: main.ts serve|keys|verify …");
  }
}
