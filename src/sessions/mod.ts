/**
 * Sessions' front door: attested sessions with upstreams and their verification
 * (the verifiers through `upstream/mod.ts`).
 */

export {
  type AnsweredExchange,
  type AnswerSignatures,
  createAnswerSignatures,
} from "./answer_signatures.ts";
export { createVerificationManager, type VerificationManager } from "./manager.ts";
export { SignedPolicy } from "./policy/document.ts";
export { PolicyRegistry } from "./policy/registry.ts";
export { createSessionStore, type SessionStore } from "./store.ts";
export type { AttesterDeps, UpstreamAttester } from "./types.ts";
export { productionAttesters } from "./attesters.ts";
