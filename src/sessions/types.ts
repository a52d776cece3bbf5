/**
 * Attested sessions (ACI `aci/1`): the immutable, content-addressed record of
 * an upstream enclave the gateway verified and the channel it pinned, and the
 * verifier interface that produces them. `session_id = hex(sha256(JCS(doc)))`;
 * the id is not inside the document.
 */
import type { ProviderConfig } from "../config/mod.ts";
import type { TlsObservation } from "../upstream/mod.ts";

export type ClaimSource =
  | "hardware_proven"
  | "verifier_derived"
  | "provider_asserted"
  | "operator_asserted";

/** `source`/`reason` appear only when the status is not `unknown`. */
export type Claim =
  | { status: "unknown" }
  | { status: "asserted" | "refuted"; source: ClaimSource; reason?: string };

export interface SessionClaims {
  tee_attested: Claim;
  tcb_up_to_date: Claim;
  os_known_good: Claim;
  serving_software_known_good: Claim;
  gpu_attested: Claim;
  model_weights_provenance: Claim;
  /** Provider-specific claims (e.g. the raw TCB status and advisories). */
  extra?: Record<string, Claim | Record<string, unknown>>;
}

export type ChannelBinding =
  | { type: "tls_spki_sha256"; origin: string; spki_sha256: string }
  | {
    type: "e2ee_public_key_sha256";
    provider: string;
    key_id?: string;
    algorithm: string;
    public_key_sha256: string;
  };

export interface SessionDocument {
  api_version: "aci/1";
  upstream_name: string;
  /** The verified upstream origin, e.g. `https://host:port`. */
  endpoint: string;
  verifier_id: string;
  /** Unix seconds when the material was verified. */
  established_at: number;
  /** Unix seconds; never after the evidence's own validity. */
  expires_at: number;
  /** Omitted when the verifier established no identity. */
  identity?: Record<string, unknown>;
  channel_binding: ChannelBinding[];
  claims: SessionClaims;
  /** The exact bytes the verifier consumed: `data:<type>;base64,…` and `sha256:<hex of decoded data>`. */
  evidence: { digest: string; data: string };
}

/** What a verifier is asked to verify. */
export interface AttestationTarget {
  name: string;
  /** The provider's base URL (https). */
  baseUrl: string;
  provider: ProviderConfig;
}

/** What a TLS observation reports (defined beside the code that makes it). */
export type { TlsObservation } from "../upstream/mod.ts";

export interface AttesterDeps {
  now: () => number;
  randomBytes: (n: number) => Uint8Array;
  /** Handshake with the origin (CA verification on, `ca` PEM trust anchors when given) and report its key. */
  observeTls: (origin: string, ca?: string) => Promise<TlsObservation>;
  /** A fetch that only talks to a server presenting this SPKI (checked before any byte is written). */
  pinnedFetch: (
    spkiSha256: string,
    ca?: string,
  ) => (url: string, init?: RequestInit) => Promise<Response>;
  /** TDX collateral (Intel PCS/PCCS or local files) and the pinned Intel root (DER); tests pass their own. */
  tdx: {
    collateral: import("../verify/mod.ts").CollateralSource;
    rootCaDer?: Uint8Array;
  };
  /** Pinned AMD roots and the VCEK source, when SEV-SNP upstreams are configured. */
  sevSnp?: import("../verify/mod.ts").SnpTrust;
  /** NVIDIA GPU evidence: pinned roots, RIM/OCSP collateral and the verification clock per artefact. */
  gpu: import("../verify/mod.ts").GpuDeps;
}

export type AttestationOutcome =
  | { ok: true; document: SessionDocument; spkiSha256: string }
  | { ok: false; reason: string };

/** Verifiers never throw: every failure is `{ ok: false, reason }`. */
export interface UpstreamAttester {
  readonly id: string;
  verify(target: AttestationTarget, deps: AttesterDeps): Promise<AttestationOutcome>;
}
