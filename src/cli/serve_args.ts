/**
 * `serve`'s command line: dev or file mode and the port (`--port`, else the
 * PORT variable main.ts reads). Bad use is a StartupError, one line for the operator.
 */
import { parseOptions } from "./args.ts";
import { StartupError } from "../app/mod.ts";

const DEFAULT_PORT = 8787;
const SERVE_USAGE = "usage: main.ts serve --dev | --config FILE [--port N]";

export interface ServeArgs {
  dev: boolean;
  configPath: string | undefined;
  /** `--port`, else the PORT variable; undefined when neither is set. */
  portFlag: string | undefined;
  port: number;
}

/** `serve --dev | --config FILE [--port N]`; `portVariable` is PORT's value. Bad use is a StartupError. */
export function serveArgs(args: string[], portVariable: string | undefined): ServeArgs {
  let opts;
  try {
    opts = parseOptions(args, { strings: ["config", "port"], booleans: ["dev"] });
  } catch (e) {
    throw new StartupError(`${(e as Error).message}\n${SERVE_USAGE}`);
  }
  const dev = opts.flags.has("dev");
  const configPath = opts.values.config;
  const portFlag = opts.values.port ?? portVariable;
  const port = portFlag === undefined ? DEFAULT_PORT : Number(portFlag);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new StartupError(`invalid port: ${portFlag}`);
  }
  if (dev === (configPath !== undefined)) throw new StartupError(SERVE_USAGE);
  return { dev, configPath, portFlag, port };
}
