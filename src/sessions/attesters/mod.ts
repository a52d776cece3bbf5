/**
 * Upstream verifiers by configured name and the production wiring of their
 * dependencies (TLS observation and pinned fetch over the `connect` main.ts
 * passes in; the clock, nonce source and TDX collateral come from the caller). Session ids: `sessions/store.ts`.
 */
import type { ProviderConfig } from "../../config/mod.ts";
import type { AttesterDeps, UpstreamAttester } from "../types.ts";
import { observeTls, pinnedOneShotFetch, type TlsConnect } from "../../upstream/mod.ts";
import { defaultGpuDeps, type GpuDeps } from "../../verify/mod.ts";
import { aciAttester } from "./aci.ts";
import { devAttester } from "./dev.ts";
import { dstackTdxAttester } from "./dstack_tdx.ts";
import { pinnedAttester } from "./pinned.ts";
import { sevSnpAttester } from "./sev_snp.ts";
import { nearAiAttester } from "./near_ai.ts";
import { tinfoilAttester } from "./tinfoil.ts";

export { ACI_ATTESTER_ID, aciAttester } from "./aci.ts";
export { DEV_ATTESTER_ID, devAttester } from "./dev.ts";
export { DSTACK_TDX_ATTESTER_ID, dstackTdxAttester } from "./dstack_tdx.ts";
export { PINNED_ATTESTER_ID, pinnedAttester } from "./pinned.ts";
export { SEV_SNP_ATTESTER_ID, sevSnpAttester } from "./sev_snp.ts";
export { NEAR_AI_ATTESTER_ID, nearAiAttester } from "./near_ai.ts";
export { TINFOIL_ATTESTER_ID, tinfoilAttester } from "./tinfoil.ts";
// What the answer-signature check (sessions/answer_signatures.ts) shares with the verifiers.
export { fetchEvidence, parseJsonObject, v1Url } from "./endpoint.ts";
export { AttestationFailure } from "./outcome.ts";

/** The names `provider.confidential.verifier` accepts. */
export type VerifierName = NonNullable<ProviderConfig["confidential"]>["verifier"];

const ATTESTERS: Record<VerifierName, UpstreamAttester> = {
  "dstack-tdx": dstackTdxAttester,
  "aci": aciAttester,
  "sev-snp": sevSnpAttester,
  "near-ai": nearAiAttester,
  "tinfoil": tinfoilAttester,
  "pinned": pinnedAttester,
  "dev": devAttester,
};

/** The verifier for a configured name; throws on a name the config schema would not accept. */
export function attesterFor(name: VerifierName): UpstreamAttester {
  const v = Object.hasOwn(ATTESTERS, name) ? ATTESTERS[name] : undefined;
  if (!v) throw new RangeError(`unknown upstream verifier ${JSON.stringify(name)}`);
  return v;
}

/** Inputs of {@link createAttesterDeps}. */
export interface AttesterDepsOptions {
  /** Epoch milliseconds. */
  now: () => number;
  tdx: AttesterDeps["tdx"];
  /** AMD roots and VCEK source for `sev-snp` upstreams. */
  sevSnp?: AttesterDeps["sevSnp"];
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
export function createAttesterDeps(o: AttesterDepsOptions): AttesterDeps {
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
