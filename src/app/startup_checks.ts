/**
 * What `main.ts serve` checks and derives before it listens, given the file
 * reads it does: the configuration's files are readable, the listeners' TLS
 * keys (listed in the keyset), the connection cap that fits the descriptor
 * limit, and warnings. A failure is a `StartupError` with one line naming the
 * field and the file; main.ts prints it and exits 2.
 */
import type { GatewayConfig } from "../config/mod.ts";
import { spkiSha256FromPem } from "../upstream/mod.ts";

/** A start-up failure: one line for the operator, no stack. */
export class StartupError extends Error {}

/** The file reads start-up needs (main.ts passes Deno's). */
export interface StartupFiles {
  /** Opens and closes `path` for reading; throws when it cannot. */
  probe(path: string): Promise<void>;
  isDirectory(path: string): Promise<boolean>;
  readTextFile(path: string): Promise<string>;
}

/** What went wrong reading a file, in a few words (no stack). */
export function readFailure(e: unknown): string {
  if (e instanceof Deno.errors.NotFound) return "no such file";
  if (e instanceof Deno.errors.PermissionDenied || e instanceof Deno.errors.NotCapable) {
    return "permission denied";
  }
  if (e instanceof Deno.errors.IsADirectory) return "is a directory";
  if (e instanceof Deno.errors.NotADirectory) return "not a directory";
  return e instanceof Error ? e.message : String(e);
}

/** Why a listener could not be opened, in a few words. */
export function listenFailure(e: unknown): string {
  if (e instanceof Deno.errors.AddrInUse) return "address already in use";
  if (e instanceof Deno.errors.AddrNotAvailable) return "address not available on this machine";
  if (e instanceof Deno.errors.PermissionDenied) return "permission denied (a port below 1024?)";
  return e instanceof Error ? e.message.split("\n")[0] : String(e);
}

/** Every file the configuration names is readable, or one line naming the field and the file. */
export async function checkConfigFiles(
  config: GatewayConfig,
  configPath: string,
  fs: StartupFiles,
): Promise<void> {
  const files: [string, string | undefined][] = [];
  for (const [label, l] of [["base", config.listen.base], ["tee", config.listen.tee]] as const) {
    if (!l) continue;
    if ((l.tls_cert_file === undefined) !== (l.tls_key_file === undefined)) {
      throw new StartupError(
        `${configPath}: listen.${label}: tls_cert_file and tls_key_file go together`,
      );
    }
    files.push([`listen.${label}.tls_cert_file`, l.tls_cert_file]);
    files.push([`listen.${label}.tls_key_file`, l.tls_key_file]);
  }
  files.push(["identity.manifest_path", config.identity.manifest_path]);
  for (const [field, path] of files) {
    if (path === undefined) continue;
    try {
      await fs.probe(path);
    } catch (e) {
      throw new StartupError(`${configPath}: ${field}: cannot read ${path}: ${readFailure(e)}`);
    }
  }
  const dir = config.trust.collateral_dir;
  if (dir !== undefined) {
    try {
      if (!(await fs.isDirectory(dir))) throw new Deno.errors.NotADirectory();
    } catch (e) {
      throw new StartupError(
        `${configPath}: trust.collateral_dir: cannot read ${dir}: ${readFailure(e)}`,
      );
    }
  }
}

/** A provider whose credential variable is unset would be called without credentials. */
export function unsetKeyVariables(
  config: GatewayConfig,
  env: (name: string) => string | undefined,
  configPath = "config",
): void {
  // A provider that takes no credential says so by naming no variable; one that names a
  // variable needs it set, or every request would reach it unauthenticated.
  const unset = config.providers.find((p) => p.api_key_env !== undefined && !env(p.api_key_env));
  if (unset) {
    throw new StartupError(
      `${configPath}: providers.${unset.name}.api_key_env: the variable ${unset.api_key_env} is not set ` +
        `(set it, or remove api_key_env if ${unset.name} takes no credential)`,
    );
  }
}

/**
 * The configured connection cap, lowered to fit the descriptor limit (`nofile`,
 * Infinity when unknown): each client connection may hold an upstream
 * connection too (and a TLS one is relayed over two loopback descriptors),
 * and the store and listeners need a few, so at most (limit - 64) /
 * descriptors per connection. The note says when it was lowered.
 */
export function connectionCap(
  configured: number,
  perConnection: number,
  nofile: number,
): { cap: number; note?: string } {
  const fits = Math.max(16, Math.floor((nofile - 64) / perConnection));
  if (configured <= fits) return { cap: configured };
  return {
    cap: fits,
    note:
      `limits.max_connections ${configured} lowered to ${fits} to fit the open-file limit ${nofile}`,
  };
}

/** The open-file limit in `/proc/self/limits` text, or Infinity. */
export function openFileLimit(procLimits: string | undefined): number {
  const m = procLimits?.match(/Max open files\s+(\d+)/);
  return m ? Number(m[1]) : Infinity;
}

/** The keyset lists the SPKI of every TLS key the gateway terminates with, so clients can pin it. */
export async function listenerSpkis(
  config: GatewayConfig,
  readTextFile: (path: string) => Promise<string>,
): Promise<{ spki_sha256: string; domain?: string }[]> {
  const out = new Map<string, { spki_sha256: string; domain?: string }>();
  for (const l of [config.listen.base, config.listen.tee]) {
    if (!l?.tls_cert_file) continue;
    let spki: string;
    try {
      spki = spkiSha256FromPem(await readTextFile(l.tls_cert_file));
    } catch (e) {
      throw new StartupError(
        `${l.tls_cert_file}: not a usable PEM certificate: ${(e as Error).message}`,
      );
    }
    out.set(spki, {
      spki_sha256: spki,
      ...(config.identity.subject ? { domain: config.identity.subject } : {}),
    });
  }
  return [...out.values()];
}
