/**
 * Upstream verifiers by configured name and the production wiring of their
 * dependencies (TLS observation and pinned fetch over the `connect` main.ts
 * passes in; the clock, nonce source and TDX collateral come from the caller). Session ids: `sessions/store.ts`.
 */
import type { ProviderConfig } from "../../config/mod.ts";
import type { UpstreamVerifier, VerifierDeps } from "../types.ts";
import { observeTls, pinnedOneShotFetch, type TlsConnect } from "../../upstream/mod.ts";
import { defaultGpuDeps, type GpuDeps } from "../../verify/mod.ts";
import { aciVerifier } from "./aci.ts";
import { devVerifier } from "./dev.ts";
import { dstackTdxVerifier } from "./dstack_tdx.ts";
import { pinnedVerifier } from "./pinned.ts";
import { sevSnpVerifier } from "./sev_snp.ts";
import { nearAiVerifier } from "./near_ai.ts";
import { tinfoilVerifier } from "./tinfoil.ts";

export { ACI_VERIFIER_ID, aciVerifier } from "./aci.ts";
export { DEV_VERIFIER_ID, devVerifier } from "./dev.ts";
export { DSTACK_TDX_VERIFIER_ID, dstackTdxVerifier } from "./dstack_tdx.ts";
export { PINNED_VERIFIER_ID, pinnedVerifier } from "./pinned.ts";
export { SEV_SNP_VERIFIER_ID, sevSnpVerifier } from "./sev_snp.ts";
export { NEAR_AI_VERIFIER_ID, nearAiVerifier } from "./near_ai.ts";
export { TINFOIL_VERIFIER_ID, tinfoilVerifier } from "./tinfoil.ts";
// What the answer-signature check (sessions/answer_signatures.ts) shares with the verifiers.
export { fetchEvidence, parseJsonObject, v1Url } from "./endpoint.ts";
export { VerificationFailure } from "./outcome.ts";

/** The names `provider.confidential.verifier` accepts. */
export type VerifierName = NonNullable<ProviderConfig["confidential"]>["verifier"];

const VERIFIERS: Record<VerifierName, UpstreamVerifier> = {
  "dstack-tdx": dstackTdxVerifier,
  "aci": aciVerifier,
  "sev-snp": sevSnpVerifier,
  "near-ai": nearAiVerifier,
  "tinfoil": tinfoilVerifier,
  "pinned": pinnedVerifier,
  "dev": devVerifier,
};

/** The verifier for a configured name; throws on a name the config schema would not accept. */
export function verifierFor(name: VerifierName): UpstreamVerifier {
  const v = Object.hasOwn(VERIFIERS, name) ? VERIFIERS[name] : undefined;
  if (!v) throw new RangeError(`unknown upstream verifier ${JSON.stringify(name)}`);
  return v;
}

/** Inputs of {@link createVerifierDeps}. */
export interface VerifierDepsOptions {
  /** Epoch milliseconds. */
  now: () => number;
  tdx: VerifierDeps["tdx"];
  /** AMD roots and VCEK source for `sev-snp` upstreams. */
  sevSnp?: VerifierDeps["sevSnp"];
  /** The nonce source (main.ts passes the system's). */
  randomBytes: (n: number) => Uint8Array;
  /** node:tls `connect` (main.ts passes it: nothing below opens sockets itself). */
  tlsConnect: TlsConnect;
  /** Bound on each TLS connect + handshake; default 10 000 ms. */
  connectTimeoutMs?: number;
  /** GPU evidence roots, collateral and times; default built-in roots and no collateral. */
  gpu?: GpuDeps;
}

/**
 * Verifier dependencies over real sockets. The pinned fetch keeps no pool:
 * verification is rare, and a socket left behind would outlive the check.
 */
export function createVerifierDeps(o: VerifierDepsOptions): VerifierDeps {
  const timeoutMs = o.connectTimeoutMs ?? 10_000;
  return {
    now: o.now,
    randomBytes: o.randomBytes,
    observeTls: (origin, ca) => observeTls(o.tlsConnect, origin, ca, { timeoutMs }),
    pinnedFetch: (spkiSha256, ca) =>
      pinnedOneShotFetch(o.tlsConnect, { spkiSha256, ca, connectTimeoutMs: timeoutMs }),
    tdx: o.tdx,
    ...(o.sevSnp ? { sevSnp: o.sevSnp } : {}),
    gpu: o.gpu ?? defaultGpuDeps(),
  };
}
