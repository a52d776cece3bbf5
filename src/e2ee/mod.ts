/**
 * End-to-end encryption's front door (E2EE v2): sealed fields, the gateway's keys and the service.
 * The client library imports the files it needs directly (its browser build swaps files).
 */

export { createE2eeKeyring, type E2eeKeyring } from "./keys.ts";
export { createReplayGuard } from "./replay.ts";
export { type E2eeDeps, openE2ee, type OpenedRequest } from "./service.ts";
export { verifyE2eeResponse } from "./verify.ts";
