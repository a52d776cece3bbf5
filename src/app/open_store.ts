/**
 * Opening the gateway's Deno KV store: a local file (its directory made
 * first), `:memory:`, or a KV Connect URL. main.ts passes the runtime's calls.
 */
import { readFailure, StartupError } from "./startup_checks.ts";

export interface StoreIo {
  /** Makes `dir` and its parents (new directories: owner only). */
  mkdir(dir: string): Promise<void>;
  /** Creates `path` empty with mode 0600 unless it exists (never truncates). */
  createPrivate(path: string): Promise<void>;
  openKv(path: string): Promise<Deno.Kv>;
}

/**
 * Opens the store; a local file is created owner-only first: SQLite
 * creates its `-wal` and `-shm` files with the database file's mode, so the
 * keys' digests, balances and receipts are never world-readable.
 */
export async function openStore(path: string, io: StoreIo): Promise<Deno.Kv> {
  if (!/^https?:\/\//.test(path) && path !== ":memory:") {
    const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".";
    await io.mkdir(dir);
    await io.createPrivate(path);
  }
  return await io.openKv(path);
}

/** `store.path` of a configuration; failing is a StartupError naming the field. */
export async function openConfiguredStore(
  path: string,
  configPath: string | undefined,
  io: StoreIo,
): Promise<Deno.Kv> {
  try {
    return await openStore(path, io);
  } catch (e) {
    throw new StartupError(
      `${configPath ?? "config"}: store.path: cannot open ${path}: ${readFailure(e)}`,
    );
  }
}
