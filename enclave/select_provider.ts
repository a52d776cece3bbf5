/**
 * Chooses the gateway's quote provider from its configuration. It never falls
 * back to the dev provider silently: without configfs-tsm, `auto` fails unless
 * the operator explicitly allowed dev quotes.
 */

import {
  createConfigfsTsmProvider,
  DEFAULT_TSM_ROOT,
  detectConfigfsTsm,
  type TsmFs,
} from "./configfs_tsm.ts";
import { createDevQuoteProvider } from "./dev_quote.ts";
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

/** The provider for `mode`; throws with a clear reason instead of degrading. */
export async function selectQuoteProvider(
  options: SelectQuoteProviderOptions,
): Promise<QuoteProvider> {
  const root = options.root ?? DEFAULT_TSM_ROOT;
  const mode: string = options.mode;
  switch (mode) {
    case "dev":
      return createDevQuoteProvider();
    case "configfs":
      if (!(await detectConfigfsTsm(root, options.fs))) {
        throw new Error(
          `quote mode "configfs": no configfs-tsm report directory at ${root} ` +
            "(needs a TDX or SEV-SNP guest on Linux >= 6.7, root, and read/write access to that path)",
        );
      }
      return createConfigfsTsmProvider({ root, fs: options.fs });
    case "auto":
      if (await detectConfigfsTsm(root, options.fs)) {
        return createConfigfsTsmProvider({ root, fs: options.fs });
      }
      if (options.allowDev) return createDevQuoteProvider();
      throw new Error(
        `quote mode "auto": no configfs-tsm report directory at ${root} and dev quotes are ` +
          "not allowed; run inside a TDX/SEV-SNP guest or explicitly allow the insecure dev provider",
      );
    default:
      throw new Error(`unknown quote mode ${JSON.stringify(mode)}: use configfs, dev or auto`);
  }
}
