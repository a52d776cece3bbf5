/**
 * Opening the gateway's Deno KV store: a local file (its directory made
 * first), `:memory:`, or a KV Connect URL. main.ts passes the runtime's calls.
 */
import { readFailure, StartupError } from "./startup_checks.ts";

export interface StoreIo {
  /** Makes `dir` and its parents. */
  mkdir(dir: string): Promise<void>;
  openKv(path: string): Promise<Deno.Kv>;
}

export async function openStore(path: string, io: StoreIo): Promise<Deno.Kv> {
  if (!/^https?:\/\//.test(path) && path !== ":memory:") {
    const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".";
    await io.mkdir(dir);
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
