/**
 * The verifying client library (runtime-neutral entry: no TLS pinning; Node
 * and Deno callers use `node.ts`, which adds it). See verifying_fetch.ts.
 */
export {
  createVerifyingFetch,
  type Verdict,
  type VerifyingFetch,
  type VerifyingFetchOptions,
} from "./verifying_fetch.ts";
export { AciVerificationError, type VerificationCode } from "./errors.ts";
export { type ClientPolicy, type ClientPolicyInput, parsePolicy } from "./policy.ts";
export { fetchTransport, type Transport, type TransportRequest } from "./transport.ts";
export type { AttestedGateway } from "./attest.ts";
export type { Check } from "../verify/checks.ts";
