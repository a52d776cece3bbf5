/**
 * Provider selection under constraints. Pure: given a model's routes, the
 * providers, their current verification state and the client's constraints,
 * return the ordered candidates that satisfy every constraint, or the refusal
 * the spec prescribes. Failover only ever walks this list, so a retry can
 * never reach a provider that does not satisfy the constraints.
 */
import { badParam, GatewayError } from "../http/errors.ts";
import type { ProviderConfig } from "../config/schema.ts";
import type { RoutingConstraints } from "./provider_block.ts";

/** The verified state of one confidential upstream, as the request path sees it. */
export type VerificationState =
  | { verified: true; sessionId: string; spkiSha256: string | null; verifierId: string }
  | { verified: false; reason: string };

export interface Candidate {
  provider: ProviderConfig;
  upstreamModel: string;
  /** null for non-confidential providers. */
  verification: VerificationState | null;
  /** `<provider>:<upstream model>`, the receipt's `target_route_id`. */
  routeId: string;
}

export interface SelectInput {
  routes: { provider: string; model: string }[];
  providers: Map<string, ProviderConfig>;
  verification: (provider: string) => VerificationState | null;
  constraints: RoutingConstraints;
  modelId: string;
}

export function selectCandidates(input: SelectInput): Candidate[] {
  const { constraints: c } = input;
  let all: Candidate[] = input.routes.map((r) => {
    const provider = input.providers.get(r.provider);
    if (!provider) throw new GatewayError("internal", "route names an unknown provider");
    return {
      provider,
      upstreamModel: r.model,
      verification: provider.confidential
        ? (input.verification(provider.name) ?? unverified)
        : null,
      routeId: `${provider.name}:${r.model}`,
    };
  });

  if (c.forcedProvider !== null) {
    if (!input.providers.has(c.forcedProvider)) {
      throw badParam("x-service-provider", `unknown provider "${c.forcedProvider}"`);
    }
    all = all.filter((x) => x.provider.name === c.forcedProvider);
    if (all.length === 0) {
      throw new GatewayError(
        "model_not_found",
        `provider "${c.forcedProvider}" does not serve model ${JSON.stringify(input.modelId)}`,
        { param: "x-service-provider" },
      );
    }
  }

  if (c.zdr) {
    all = all.filter((x) => x.provider.zdr);
    if (all.length === 0) {
      throw new GatewayError(
        "no_zdr_provider",
        "no provider serving this model operates under zero data retention; the request was not sent",
        { param: "provider.zdr" },
      );
    }
  }

  // A provider that requires GPU evidence gets no prompt unless currently verified (#21).
  const gated = all.filter((x) =>
    x.provider.confidential?.require_gpu === true && x.verification?.verified !== true
  );
  if (gated.length > 0) {
    all = all.filter((x) => !gated.includes(x));
    if (all.length === 0) {
      throw new GatewayError(
        "upstream_verification_failed",
        "the upstream for this model requires verified GPU evidence and is not currently verified; the request was not sent",
      );
    }
  }

  if (c.aciVerified) {
    const verified = all.filter((x) => x.verification?.verified === true);
    if (c.aciSessionIds !== null) {
      const ids = new Set(c.aciSessionIds);
      const pinned = verified.filter((x) =>
        x.verification?.verified === true && ids.has(x.verification.sessionId)
      );
      if (pinned.length === 0) {
        throw new GatewayError(
          "session_not_accepted",
          "none of the listed aci_session_ids is a currently verified channel for this model; the request was not sent",
          { param: "provider.aci_session_ids" },
        );
      }
      return order(pinned, false);
    }
    if (verified.length === 0) {
      throw new GatewayError(
        "upstream_verification_failed",
        "no upstream for this model is attested and currently verified; the request was not sent",
        { param: "provider.aci_verified" },
      );
    }
    return order(verified, false);
  }
  return order(all, !c.verificationWaived);
}

const unverified: VerificationState = { verified: false, reason: "not verified" };

/** Priority (higher first), then verified upstreams ahead of unverified ones when preferred. */
function order(list: Candidate[], preferVerified: boolean): Candidate[] {
  return list
    .map((x, i) => ({ x, i }))
    .sort((a, b) => {
      if (preferVerified) {
        const va = a.x.verification?.verified === true ? 1 : 0;
        const vb = b.x.verification?.verified === true ? 1 : 0;
        if (va !== vb) return vb - va;
      }
      return b.x.provider.priority - a.x.provider.priority || a.i - b.i;
    })
    .map((e) => e.x);
}
