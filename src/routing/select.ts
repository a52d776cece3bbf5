/**
 * Provider selection under constraints. Pure: given a model's routes, the
 * providers, their current verification state and the client's constraints,
 * return the ordered candidates that satisfy every constraint, or the refusal
 * the spec prescribes. Failover only ever walks this list, so a retry can
 * never reach a provider that does not satisfy the constraints.
 */
import { badParam, GatewayError } from "../http/mod.ts";
import type { ProviderConfig } from "../config/mod.ts";
import type { RoutingConstraints } from "./provider_block.ts";

/**
 * What a verified session proves about the TEE: `hardware_proven` (its
 * `tee_attested` claim comes from hardware evidence), `development_switch`
 * (the dev verifier under `confidential.dev_counts_for_aci_verified`), or
 * `not_hardware_proven` (pinned, or dev without the switch). Only the first
 * two satisfy `aci_verified`.
 */
export type TeeAttested = "hardware_proven" | "development_switch" | "not_hardware_proven";

/** The verified state of one confidential upstream, as the request path sees it. */
export type VerificationState =
  | {
    verified: true;
    sessionId: string;
    spkiSha256: string | null;
    verifierId: string;
    teeAttested: TeeAttested;
  }
  | { verified: false; reason: string };

/** Whether a candidate's session satisfies `aci_verified`. */
export function satisfiesAciVerified(v: VerificationState | null): boolean {
  return v?.verified === true && v.teeAttested !== "not_hardware_proven";
}

/**
 * Whether a candidate may receive a prompt at all: a confidential upstream
 * fails closed without a current verified session, unless the operator opted
 * it out (`confidential.allow_unverified`).
 */
export function mayReceivePrompt(c: Candidate): boolean {
  if (!c.provider.confidential || c.verification?.verified === true) return true;
  // require_gpu is not relaxed by the opt-out: no GPU proof, no prompt.
  return c.provider.confidential.allow_unverified === true &&
    c.provider.confidential.require_gpu !== true;
}

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

// Long as one pass of checks in order, each a few lines; splitting them would hide the order.
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
  all = applyProviderLists(all, c, input);

  if (c.zdr) {
    all = all.filter((x) => x.provider.zdr);
    if (all.length === 0) {
      throw new GatewayError(
        "no_zdr_provider",
        "no provider serving this model operates under zero data retention; the request was not sent",
        { param: c.zdrParam ?? "provider.zdr" },
      );
    }
  }

  // Fail closed: a confidential upstream without a current verified session
  // receives nothing, whatever the request says (unless the operator opted it out).
  const failing = all.filter((x) => !mayReceivePrompt(x));
  all = all.filter(mayReceivePrompt);
  if (all.length === 0) {
    const names = failing.map((x) => x.provider.name).join(", ");
    throw new GatewayError(
      "upstream_verification_failed",
      `the confidential upstream${failing.length === 1 ? "" : "s"} serving this model (${names}) ` +
        `${failing.length === 1 ? "has" : "have"} no current verified session; the request ` +
        "was not sent",
    );
  }

  if (c.aciVerified) {
    const verified = all.filter((x) => satisfiesAciVerified(x.verification));
    if (c.aciSessionIds !== null) {
      const ids = new Set(c.aciSessionIds);
      const pinned = verified.filter((x) =>
        x.verification?.verified === true && ids.has(x.verification.sessionId)
      );
      if (pinned.length === 0) {
        throw new GatewayError(
          "session_not_accepted",
          "none of the listed aci_session_ids is a currently verified, hardware-attested channel for this model; the request was not sent",
          { param: "provider.aci_session_ids" },
        );
      }
      return preferenceOrder(order(pinned, false), c, input.modelId);
    }
    if (verified.length === 0) {
      const weak = all.some((x) => x.verification?.verified === true);
      throw new GatewayError(
        "upstream_verification_failed",
        weak
          ? "no upstream for this model has a session whose tee_attested claim is hardware_proven (pinned and development sessions do not satisfy aci_verified); the request was not sent"
          : "no upstream for this model is attested and currently verified; the request was not sent",
        { param: "provider.aci_verified" },
      );
    }
    return preferenceOrder(order(verified, false), c, input.modelId);
  }
  return preferenceOrder(order(all, !c.verificationWaived), c, input.modelId);
}

/** OpenRouter's `only` / `ignore` lists: every name must be a configured provider. */
function applyProviderLists(
  all: Candidate[],
  c: RoutingConstraints,
  input: SelectInput,
): Candidate[] {
  const known = (list: string[], param: string) =>
    list.forEach((name, i) => {
      if (!input.providers.has(name)) {
        throw badParam(`${param}[${i}]`, `unknown provider ${JSON.stringify(name.slice(0, 64))}`);
      }
    });
  if (c.only !== null) known(c.only, "provider.only");
  known(c.ignore, "provider.ignore");
  if (c.order !== null) known(c.order, "provider.order");
  const before = all.length;
  if (c.only !== null) {
    const only = new Set(c.only);
    all = all.filter((x) => only.has(x.provider.name));
  }
  if (c.ignore.length > 0) {
    const ignore = new Set(c.ignore);
    all = all.filter((x) => !ignore.has(x.provider.name));
  }
  if (all.length === 0 && before > 0) {
    throw new GatewayError(
      "model_not_found",
      `no provider allowed by provider.only / provider.ignore serves model ${
        JSON.stringify(input.modelId)
      }; the request was not sent`,
      { param: c.only !== null ? "provider.only" : "provider.ignore" },
    );
  }
  return all;
}

/**
 * OpenRouter's `order` (listed providers first, in that order) and
 * `allow_fallbacks: false` (only the listed providers, or only the first
 * candidate when no order is given).
 */
function preferenceOrder(list: Candidate[], c: RoutingConstraints, modelId: string): Candidate[] {
  let out = list;
  if (c.order !== null) {
    const rank = new Map(c.order.map((n, i) => [n, i]));
    const listed = list
      .filter((x) => rank.has(x.provider.name))
      .sort((a, b) => rank.get(a.provider.name)! - rank.get(b.provider.name)!);
    out = c.allowFallbacks
      ? [...listed, ...list.filter((x) => !rank.has(x.provider.name))]
      : listed;
    if (out.length === 0) {
      throw new GatewayError(
        "model_not_found",
        `no provider listed in provider.order can serve model ${
          JSON.stringify(modelId)
        } under the request's constraints, and allow_fallbacks is false; the request was not sent`,
        { param: "provider.order" },
      );
    }
  } else if (!c.allowFallbacks) out = list.slice(0, 1);
  return out;
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
