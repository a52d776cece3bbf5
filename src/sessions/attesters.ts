/**
 * The production wiring of upstream verification: the verifier each provider
 * names, the TDX trust root and collateral source from `trust`, and a fetch
 * that trusts a provider's private CA (`tls_ca_pem`) for the requests made
 * before it is verified. The development verifier only exists in the
 * development configuration.
 */
import type { GatewayConfig, ProviderConfig } from "../config/mod.ts";
import type { AttesterDeps, UpstreamAttester } from "./types.ts";
import { attesterFor, createAttesterDeps } from "./attesters/mod.ts";
import type { CollateralSource, GpuDeps } from "../verify/mod.ts";
import { GatewayError } from "../http/mod.ts";
import type { TlsConnect } from "../upstream/mod.ts";
import { PolicyRegistry } from "./policy/registry.ts";

export function productionAttesters(
  config: GatewayConfig,
  opts: {
    now: () => number;
    /** The nonce source and node:tls `connect`, from main.ts. */
    randomBytes: (n: number) => Uint8Array;
    tlsConnect: TlsConnect;
    collateral: CollateralSource;
    rootCaDer?: Uint8Array;
    /** AMD roots and VCEK source (from `trust.sev_snp`), for `sev-snp` upstreams. */
    sevSnp?: AttesterDeps["sevSnp"];
    /** GPU evidence roots and collateral; default built-in roots, no collateral. */
    gpu?: GpuDeps;
  },
): {
  attesterFor: (p: ProviderConfig) => UpstreamAttester;
  deps: AttesterDeps;
  policies: PolicyRegistry;
} {
  return {
    // Measurement policies: signed by the operator keys `trust.measurement_policy_keys` pins.
    policies: new PolicyRegistry(config.trust.measurement_policy_keys),
    attesterFor: (p) => {
      const name = p.confidential?.verifier;
      if (!name) throw new GatewayError("internal", "not a confidential provider");
      if (name === "dev" && !config.development) {
        return {
          id: "refused",
          verify: () =>
            Promise.resolve({ ok: false, reason: "the dev verifier is development-only" }),
        };
      }
      return attesterFor(name);
    },
    deps: createAttesterDeps({
      now: opts.now,
      tdx: { collateral: opts.collateral, rootCaDer: opts.rootCaDer },
      sevSnp: opts.sevSnp,
      gpu: opts.gpu,
      randomBytes: opts.randomBytes,
      tlsConnect: opts.tlsConnect,
    }),
  };
}
