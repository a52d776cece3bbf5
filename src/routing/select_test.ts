import assert from "node:assert/strict";
import { selectCandidates, type VerificationState } from "./select.ts";
import { parseRouting } from "./provider_block.ts";
import type { ProviderConfig } from "../config/schema.ts";
import { GatewayError } from "../http/errors.ts";

function provider(name: string, extra: Partial<ProviderConfig> = {}): ProviderConfig {
  return {
    name,
    base_url: `https://${name}.example`,
    zdr: false,
    priority: 0,
    timeout_ms: 1000,
    native_formats: [],
    ...extra,
  };
}

const conf = (verifier: "dstack-tdx" | "pinned", more = {}) => ({
  verifier,
  allowed_mrtd: [],
  allowed_compose_hashes: [],
  session_ttl_seconds: 3600,
  reverify_margin_seconds: 300,
  ...more,
});

const session = (teeAttested: "hardware_proven" | "not_hardware_proven"): VerificationState => ({
  verified: true,
  sessionId: (teeAttested === "hardware_proven" ? "a" : "b").repeat(64),
  spkiSha256: null,
  verifierId: "x",
  teeAttested,
});

function select(
  block: unknown,
  states: Record<string, VerificationState>,
  providers: ProviderConfig[],
): string[] {
  return selectCandidates({
    routes: providers.map((p) => ({ provider: p.name, model: "m" })),
    providers: new Map(providers.map((p) => [p.name, p])),
    verification: (n) => states[n] ?? null,
    constraints: parseRouting(block, new Headers()),
    modelId: "x/m",
  }).map((c) => c.provider.name);
}

function refusal(f: () => unknown): { code: string; param: string | null } {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof GatewayError);
    return { code: e.kind, param: e.param };
  }
  throw new Error("not refused");
}

const tee = provider("tee", { zdr: true, priority: 10, confidential: conf("dstack-tdx") });
const pin = provider("pin", { zdr: true, priority: 5, confidential: conf("pinned") });
const plain = provider("plain");
const all = [tee, pin, plain];
const failed: VerificationState = { verified: false, reason: "quote rejected" };

Deno.test("fail closed: an unverified confidential upstream is never a candidate, whatever the request", () => {
  const states = { tee: failed, pin: session("not_hardware_proven") };
  assert.deepEqual(select(undefined, states, all), ["pin", "plain"]);
  assert.deepEqual(select({ zdr: true }, states, all), ["pin"]);
  assert.equal(
    refusal(() => select(undefined, states, [tee])).code,
    "upstream_verification_failed",
  );
  // The explicit opt-out keeps it as a candidate for requests without aci_verified.
  const optOut = provider("tee", {
    ...tee,
    confidential: conf("dstack-tdx", { allow_unverified: true }),
  });
  // (It keeps its configured priority: the operator chose to serve from it.)
  assert.deepEqual(select(undefined, states, [optOut, plain]), ["tee", "plain"]);
  assert.equal(
    refusal(() => select({ aci_verified: true }, states, [optOut])).code,
    "upstream_verification_failed",
  );
});

Deno.test("aci_verified and aci_session_ids need a hardware_proven session", () => {
  const states = { tee: session("hardware_proven"), pin: session("not_hardware_proven") };
  assert.deepEqual(select({ aci_verified: true }, states, all), ["tee"]);
  assert.deepEqual(select(undefined, states, all), ["tee", "pin", "plain"]);
  assert.equal(
    refusal(() => select({ aci_verified: true }, states, [pin, plain])).code,
    "upstream_verification_failed",
  );
  assert.equal(
    refusal(() => select({ aci_session_ids: ["b".repeat(64)] }, states, all)).code,
    "session_not_accepted",
  );
  // A string that is not a session id matches nothing: 503, not 400.
  assert.equal(
    refusal(() => select({ aci_session_ids: ["not-hex"] }, states, all)).code,
    "session_not_accepted",
  );
});

Deno.test("OpenRouter preferences: only, ignore, order, allow_fallbacks, data_collection", () => {
  const states = { tee: session("hardware_proven"), pin: session("not_hardware_proven") };
  assert.deepEqual(select({ only: ["plain", "pin"] }, states, all), ["pin", "plain"]);
  assert.deepEqual(select({ ignore: ["tee"] }, states, all), ["pin", "plain"]);
  assert.deepEqual(select({ order: ["plain", "pin"] }, states, all), ["plain", "pin", "tee"]);
  assert.deepEqual(select({ order: ["plain"], allow_fallbacks: false }, states, all), ["plain"]);
  assert.deepEqual(select({ allow_fallbacks: false }, states, all), ["tee"]);
  assert.deepEqual(select({ data_collection: "deny" }, states, all), ["tee", "pin"]);
  assert.deepEqual(select({ data_collection: "allow" }, states, all), ["tee", "pin", "plain"]);
  // Preferences never relax constraints.
  assert.deepEqual(select({ aci_verified: true, order: ["plain", "tee"] }, states, all), ["tee"]);
  assert.equal(
    refusal(() => select({ zdr: true, only: ["plain"] }, states, all)).code,
    "no_zdr_provider",
  );
  assert.deepEqual(refusal(() => select({ only: ["nope"] }, states, all)), {
    code: "invalid_request",
    param: "provider.only[0]",
  });
  assert.deepEqual(refusal(() => select({ Zdr: true }, states, all)), {
    code: "invalid_request",
    param: "provider.Zdr",
  });
  assert.deepEqual(refusal(() => select({ sort: "price" }, states, all)), {
    code: "invalid_request",
    param: "provider.sort",
  });
});
