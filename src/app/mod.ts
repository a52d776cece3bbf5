/** The composition's front door: assembly, the request handler and the start-up checks. */

export { assembleGateway, type HostWorker } from "./assemble.ts";
export { printDevKey } from "./dev_banner.ts";
export { listenOn, stopOnSignals } from "./listeners.ts";
export { createLogBuffer } from "./log_buffer.ts";
export { openConfiguredStore, openStore, type StoreIo } from "./open_store.ts";
export {
  checkConfigFiles,
  connectionCap,
  listenerSpkis,
  openFileLimit,
  readFailure,
  StartupError,
  type StartupFiles,
  unsetKeyVariables,
} from "./startup_checks.ts";
export {
  hostWorker,
  parseWorkerSpec,
  supervise,
  workerCount,
  type WorkerProcess,
  type WorkerSpec,
} from "./supervisor.ts";
export { type TrustIo, verifyCollateral } from "./trust_sources.ts";
export { upstreamTransport } from "./upstream_client.ts";
export { upstreamAttesters } from "./upstream_attesters.ts";
