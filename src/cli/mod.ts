/** The CLIs' front door. */

export { parseOptions, takeOptions, UsageError } from "./args.ts";
export { runKeys } from "./keys.ts";
export { runMonitor } from "./monitor.ts";
export { serveArgs } from "./serve_args.ts";
export { API_KEY_VARIABLE, runVerify } from "./verify.ts";
export { runProviderVerify } from "./verify_provider.ts";
