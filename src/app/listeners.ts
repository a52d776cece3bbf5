/**
 * The gateway's listeners: one configured listener served by the accept loop
 * (TLS terminated on a loopback relay), and the drain on SIGTERM/SIGINT.
 * main.ts passes in the sockets, files, signals and exit it may not reach.
 */
import type { GatewayConfig } from "../config/mod.ts";
import { type ConnectionServer, serveConnections, type ServeOn } from "../http/mod.ts";
import { listenFailure, StartupError } from "./startup_checks.ts";

type Listen = GatewayConfig["listen"]["base"];
type Address = { hostname: string; port: number };

/** The sockets and file reads a listener is opened with (main.ts passes Deno's). */
export interface ListenIo {
  /** `reusePort`: the host's workers each open the port (Linux SO_REUSEPORT spreads connections). */
  listen(at: Address & { reusePort?: boolean }): Deno.Listener;
  listenTls(
    o: Address & { cert: string; key: string; alpnProtocols: string[] },
  ): Deno.TlsListener;
  readTextFileSync(path: string): string;
  connect(to: Address): Promise<Deno.Conn>;
  /** Monotonic milliseconds. */
  now(): number;
  log: (line: Record<string, unknown>) => void;
  print(line: string): void;
}

/** Serves the gateway on one configured listener; a listener that cannot open is a StartupError. */
export function listenOn(
  l: Listen,
  label: string,
  config: GatewayConfig,
  o: {
    handler: Parameters<typeof serveConnections>[1];
    serveOn: ServeOn;
    cap: number;
    /** One of several workers sharing the port (docs/decisions/workers.md). */
    reusePort?: boolean;
  },
  io: ListenIo,
): ConnectionServer {
  const tls = l.tls_cert_file && l.tls_key_file;
  let listener: Deno.Listener;
  let inner: Deno.TlsListener | null = null;
  try {
    listener = io.listen({
      hostname: l.hostname,
      port: l.port,
      ...(o.reusePort ? { reusePort: true } : {}),
    });
    // TLS is terminated on a loopback listener the accept loop relays to (see TlsFront).
    if (tls) {
      inner = io.listenTls({
        hostname: "127.0.0.1",
        port: 0,
        cert: io.readTextFileSync(l.tls_cert_file!),
        key: io.readTextFileSync(l.tls_key_file!),
        alpnProtocols: ["h2", "http/1.1"],
      });
    }
  } catch (e) {
    throw new StartupError(
      `listen.${label}: cannot listen on ${l.hostname}:${l.port}: ${listenFailure(e)}`,
    );
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
      ? { listener: inner, connect: () => io.connect({ hostname: "127.0.0.1", port: innerPort! }) }
      : undefined,
    now: io.now,
    log: io.log,
  });
  const { hostname, port } = listener.addr as Deno.NetAddr;
  io.print(`gateway ${label} listening on ${tls ? "https" : "http"}://${hostname}:${port}/v1`);
  return server;
}

/** The signals, grace timer and exit a drain is run with (main.ts passes Deno's). */
export interface SignalIo {
  onSignal(signal: "SIGTERM" | "SIGINT", f: () => void): void;
  /** Resolves after `ms` (the drain's grace period). */
  delay(ms: number): Promise<void>;
  print(line: string): void;
  exit(code: number): void;
  /** Told when the drain begins: requests held open by choice (`inclusion?wait=`) answer now. */
  draining?(): void;
}

/** On SIGTERM/SIGINT: stop accepting, drain (10 s at most), close the rest, exit 0. */
export function stopOnSignals(
  servers: ConnectionServer[],
  close: () => Promise<void>,
  io: SignalIo,
): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    io.print(`${signal}: draining`);
    io.draining?.();
    const grace = io.delay(10_000);
    // shutdown() stops accepting and waits for in-flight responses, streams included.
    await Promise.race([Promise.all(servers.map((s) => s.shutdown())), grace]);
    await close();
    io.exit(0);
  };
  io.onSignal("SIGTERM", () => stop("SIGTERM"));
  io.onSignal("SIGINT", () => stop("SIGINT"));
}
