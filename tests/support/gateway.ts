/**
 * Test harness: the real gateway handler served by Deno.serve on a loopback
 * port, in front of real demo upstream HTTP servers, on an in-memory (or
 * given) KV store. Returns what a test needs to drive it with real SDKs.
 */
import { devConfig } from "../../src/config/dev.ts";
import type { GatewayConfig, ProviderConfig } from "../../src/config/schema.ts";
import { assembleGateway, type Gateway } from "../../src/app/assemble.ts";
import type { DemoUpstream } from "../../src/demo/upstream.ts";
import { startDevUpstreams } from "../../src/demo/dev_upstreams.ts";
import { productionAttesters } from "../../src/sessions/attesters.ts";
import { LocalCollateralSource } from "../../src/verify/tdx/collateral_source.ts";
import tls from "node:tls";
import { createUpstreamTransport, type UpstreamTransport } from "../../src/upstream/transport.ts";
import { createKey, type Tier } from "../../src/keys/keys.ts";
import { NANO_PER_CREDIT } from "../../src/admission/credits.ts";
import { randomBytes } from "node:crypto";
import type { AttesterDeps, UpstreamAttester } from "../../src/sessions/types.ts";
import { createDevQuoteProvider } from "../../enclave/dev_quote_provider.ts";
import type { QuoteProvider } from "../../enclave/quote_provider.ts";
import { serveConnections } from "../../src/http/connections.ts";
import { runtimeServeOn } from "../../main.ts";

/** The operator token test gateways get unless a test sets `env` itself. */
export const TEST_ADMIN_TOKEN = "test-operator-token-" + "5f3a9c".repeat(6);

export interface TestGateway {
  url: string;
  /** `${url}/v1`, what SDKs take as baseURL. */
  baseURL: string;
  apiKey: string;
  kv: Deno.Kv;
  gateway: Gateway;
  plain: DemoUpstream;
  secure: DemoUpstream;
  logs: Record<string, unknown>[];
  newKey(opts?: { tier?: Tier; credits?: number; rpm?: number; tpm?: number }): Promise<string>;
  close(): Promise<void>;
}

export interface TestGatewayOptions {
  configure?: (c: GatewayConfig) => void;
  kvPath?: string;
  now?: () => number;
  /** The gateway's monotonic clock (admission leases, phase timings); default `performance.now`. */
  monotonic?: () => number;
  /** "off": no verifier at all (nothing is ever verified). Default: the configured verifiers. */
  verification?: "off";
  attesters?: { attesterFor: (p: ProviderConfig) => UpstreamAttester; deps: AttesterDeps };
  /** Replaces the transport's pinned / private-CA connections (e.g. to observe them). */
  transport?: (t: UpstreamTransport) => Pick<UpstreamTransport, "pinned" | "dropPinned" | "withCa">;
  /** Counts TLS handshakes of pinned upstream connections. */
  onPinnedHandshake?: () => void;
  credits?: number;
  quotes?: QuoteProvider;
  /** The gateway's environment (default: GATEWAY_ADMIN_TOKEN = TEST_ADMIN_TOKEN). */
  env?: Record<string, string>;
  /**
   * Terminate TLS with this key, listed in the keyset as main.ts lists its listeners' keys
   * (`unlisted`: as if TLS ended outside the TEE, at a load balancer).
   */
  tls?: { certPem: string; keyPem: string; spkiSha256: string; unlisted?: boolean };
  /** false: nothing enters the transparency log (as the bench's `GATEWAY_TLOG=off`). */
  logEntries?: boolean;
}

export async function startTestGateway(opts: TestGatewayOptions = {}): Promise<TestGateway> {
  const now = opts.now ?? Date.now;
  const random = (n: number) => new Uint8Array(randomBytes(n));
  const ups = await startDevUpstreams({ now: Date.now, randomBytes: random });
  const { plain, secure } = ups;
  const config = devConfig(
    { plainUrl: plain.url, confidentialUrl: secure.url, confidentialCaPem: ups.caPem },
    { port: 0, storePath: ":memory:" },
  );
  opts.configure?.(config);
  const kv = await Deno.openKv(opts.kvPath ?? ":memory:");
  const logs: Record<string, unknown>[] = [];
  const attesters = opts.verification === "off" ? undefined : opts.attesters ??
    productionAttesters(config, {
      now,
      randomBytes: random,
      tlsConnect: tls.connect,
      collateral: new LocalCollateralSource(),
    });
  // The upstream transport main.ts uses (the HTTP/1.1 client unless configured otherwise).
  const upstream = createUpstreamTransport({
    choice: config.upstream.client,
    net: { connect: Deno.connect, startTls: Deno.startTls },
    tlsConnect: tls.connect,
    fetch: (url, init) => fetch(url, init),
    now: () => performance.now(),
    onPinnedHandshake: opts.onPinnedHandshake,
  });
  const gateway = assembleGateway(config, {
    kv,
    now,
    monotonic: opts.monotonic ?? (() => performance.now()),
    random: Math.random,
    fetch: upstream.fetch,
    randomBytes: random,
    randomUUID: () => crypto.randomUUID(),
    log: (l) => logs.push(l),
    env: (name) => (opts.env ?? { GATEWAY_ADMIN_TOKEN: TEST_ADMIN_TOKEN })[name],
    quotes: opts.quotes ?? createDevQuoteProvider(),
    provenance: null,
    witnessFetch: (url, init) => fetch(url, init),
  }, {
    attesters,
    transport: opts.transport?.(upstream) ?? upstream,
    logEntries: opts.logEntries,
    tlsSpkiSha256s: opts.tls && !opts.tls.unlisted
      ? [{ spki_sha256: opts.tls.spkiSha256 }]
      : undefined,
  });
  await gateway.ready;
  // Start-up warnings (the upstream model listing check) are in `logs` once a test runs.
  await gateway.modelsChecked;
  // Served as main.ts serves it: the gateway's own accept loop and deadlines.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  // TLS as listen.tee terminates it: on a loopback listener the accept loop relays to.
  const inner = opts.tls
    ? Deno.listenTls({
      hostname: "127.0.0.1",
      port: 0,
      cert: opts.tls.certPem,
      key: opts.tls.keyPem,
      alpnProtocols: ["http/1.1"],
    })
    : null;
  const server = serveConnections(listener, gateway.handler, {
    tls: inner
      ? {
        listener: inner,
        connect: () => Deno.connect({ hostname: "127.0.0.1", port: inner.addr.port }),
      }
      : undefined,
    limits: {
      maxConnections: config.limits.max_connections,
      headerTimeoutMs: config.limits.header_timeout_ms,
      idleTimeoutMs: config.limits.idle_timeout_ms,
    },
    serveOn: runtimeServeOn(),
    now: () => performance.now(),
    log: (l) => logs.push(l),
  });
  const url = `${opts.tls ? "https" : "http"}://127.0.0.1:${listener.addr.port}`;
  const newKey: TestGateway["newKey"] = async (o = {}) => {
    const { key } = await createKey(kv, {
      tier: o.tier ?? "pro",
      now,
      rpm: o.rpm,
      tpm: o.tpm,
      creditsNano: BigInt(Math.round((o.credits ?? opts.credits ?? 100) * 1e6)) *
        (NANO_PER_CREDIT / 1_000_000n),
    });
    return key;
  };
  const apiKey = await newKey();
  return {
    url,
    baseURL: `${url}/v1`,
    apiKey,
    kv,
    gateway,
    plain,
    secure,
    logs,
    newKey,
    async close() {
      await server.shutdown();
      await gateway.close();
      await ups.close();
      upstream.close();
      kv.close();
    },
  };
}
