/**
 * Chooses the gateway's quote provider from its configuration. It never falls
 * back to the dev provider silently: without configfs-tsm, `auto` fails unless
 * the operator explicitly allowed dev quotes, and `dev` needs that consent too.
 * A configfs-tsm path the process may not touch (Deno 2.9 allows paths under
 * `/sys` only with `--allow-all`) is neither present nor absent: every mode
 * fails, naming the fix, because the machine may well be a TEE guest.
 */

import {
  createConfigfsTsmProvider,
  DEFAULT_TSM_ROOT,
  probeConfigfsTsm,
  type TsmFs,
} from "./configfs_tsm.ts";
import { createDevQuoteProvider } from "./dev_quote_provider.ts";
import type { QuoteProvider } from "./quote_provider.ts";

export type QuoteMode = "configfs" | "dev" | "auto";

export interface SelectQuoteProviderOptions {
  mode: QuoteMode;
  /** configfs-tsm report directory (default `/sys/kernel/config/tsm/report`). */
  root?: string;
  /** Lets `auto` use the dev provider when no TEE is present. */
  allowDev: boolean;
  /** File operations for configfs-tsm (tests pass the imitation's adapter). */
  fs?: TsmFs;
}

/** Why the gateway could not look at `root`, and the two ways out. */
function outOfReach(root: string): Error {
  return new Error(
    `configfs-tsm at ${root} is out of this process's reach: Deno allows paths under /sys ` +
      "only with --allow-all (denoland/deno#27564); run with --allow-all as `deno task start` " +
      "and the compiled binary do, or bind-mount configfs outside /sys " +
      "(mount --bind /sys/kernel/config /run/configfs) and set identity.configfs_root to " +
      "/run/configfs/tsm/report",
  );
}

/** The provider for `mode`; throws with a clear reason instead of degrading. */
export async function selectQuoteProvider(
  options: SelectQuoteProviderOptions,
): Promise<QuoteProvider> {
  const root = options.root ?? DEFAULT_TSM_ROOT;
  const mode: string = options.mode;
  switch (mode) {
    case "dev":
      if (!options.allowDev) {
        throw new Error(
          'quote mode "dev" issues worthless development quotes and needs ' +
            "identity.allow_dev_quotes: true",
        );
      }
      return createDevQuoteProvider();
    case "configfs": {
      const found = await probeConfigfsTsm(root, options.fs);
      if (found === "out_of_reach") throw outOfReach(root);
      if (found === "absent") {
        throw new Error(
          `quote mode "configfs": no configfs-tsm report directory at ${root} ` +
            "(needs a TDX or SEV-SNP guest on Linux >= 6.7, root, and read/write access to that path)",
        );
      }
      return createConfigfsTsmProvider({ root, fs: options.fs });
    }
    case "auto": {
      const found = await probeConfigfsTsm(root, options.fs);
      if (found === "present") return createConfigfsTsmProvider({ root, fs: options.fs });
      if (found === "out_of_reach") throw outOfReach(root);
      if (options.allowDev) return createDevQuoteProvider();
      throw new Error(
        `quote mode "auto": no configfs-tsm report directory at ${root} and dev quotes are ` +
          "not allowed; run inside a TDX/SEV-SNP guest or set identity.allow_dev_quotes: true " +
          "(insecure development quotes)",
      );
    }
    default:
      throw new Error(`unknown quote mode ${JSON.stringify(mode)}: use configfs, dev or auto`);
  }
}
