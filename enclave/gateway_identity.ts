/**
 * The gateway's own attestation at start-up: its quote provider (configfs or
 * the development one, with the warning when not hardware), and the source
 * manifest when `identity.manifest_path` is set, read with main.ts's file read.
 * A failure is a StartupError, one line for the operator.
 */
import type { GatewayConfig } from "../src/config/mod.ts";
import { readFailure, StartupError } from "../src/app/mod.ts";
import { selectQuoteProvider } from "./select_provider.ts";
import { DEV_QUOTE_WARNING } from "./dev_quote_provider.ts";
import { type SourceProvenance, sourceProvenanceFromManifest } from "./manifest.ts";

export async function gatewayIdentity(
  config: GatewayConfig,
  configPath: string | undefined,
  io: { readTextFile(path: string): Promise<string>; print(line: string): void },
) {
  let quotes;
  try {
    quotes = await selectQuoteProvider({
      mode: config.identity.quote_provider,
      root: config.identity.configfs_root,
      allowDev: config.identity.allow_dev_quotes,
    });
  } catch (e) {
    throw new StartupError(`no TEE quote provider: ${(e as Error).message}`);
  }
  if (!quotes.hardware) io.print(DEV_QUOTE_WARNING);
  let provenance: SourceProvenance | null = null;
  const path = config.identity.manifest_path;
  if (path) {
    try {
      provenance = sourceProvenanceFromManifest(JSON.parse(await io.readTextFile(path)));
    } catch (e) {
      throw new StartupError(
        `${configPath ?? "config"}: identity.manifest_path: ${path}: ${readFailure(e)}`,
      );
    }
  }
  return { quotes, provenance };
}
