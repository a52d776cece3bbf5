import assert from "node:assert/strict";
import { CONSTRAINT_HEADERS, parseRouting } from "./provider_block.ts";
import { thrownGatewayError } from "../../tests/support/gateway_error.ts";

const none = new Headers();

/** The parameter the refusal names (every refusal here is a 400 `invalid_request`). */
function refusedParam(provider: unknown, headers: Headers = none): string | null {
  const err = thrownGatewayError(() => parseRouting(provider, headers));
  assert.equal(err.kind, "invalid_request");
  return err.param;
}

Deno.test("parseRouting: no block and no headers means no constraint", () => {
  for (const p of [undefined, null]) {
    assert.deepEqual(parseRouting(p, none), {
      zdr: false,
      aciVerified: false,
      aciSessionIds: null,
      forcedProvider: null,
      verificationWaived: false,
      only: null,
      ignore: [],
      order: null,
      allowFallbacks: true,
    });
  }
});

Deno.test("parseRouting: the OpenRouter members it implements", () => {
  const c = parseRouting({
    data_collection: "deny",
    only: ["a", "b"],
    ignore: ["c"],
    order: ["b", "a"],
    allow_fallbacks: false,
  }, none);
  assert.equal(c.zdr, true, "data_collection: deny means zero data retention");
  assert.deepEqual([c.only, c.ignore, c.order, c.allowFallbacks], [
    ["a", "b"],
    ["c"],
    ["b", "a"],
    false,
  ]);
  assert.equal(parseRouting({ data_collection: "allow" }, none).zdr, false);
  // A refusal for want of a ZDR provider names what the client sent.
  assert.equal(c.zdrParam, "provider.data_collection");
  assert.equal(parseRouting({ zdr: true, data_collection: "deny" }, none).zdrParam, undefined);
  const header = new Headers({ [CONSTRAINT_HEADERS.zdr]: "true" });
  assert.equal(parseRouting(undefined, header).zdrParam, CONSTRAINT_HEADERS.zdr);
  assert.equal(parseRouting({ zdr: true }, header).zdrParam, undefined);
});

Deno.test("parseRouting: pinned session ids imply aci_verified and are deduplicated", () => {
  const c = parseRouting({ aci_session_ids: ["s1", "s2", "s1"] }, none);
  assert.equal(c.aciVerified, true);
  assert.deepEqual(c.aciSessionIds, ["s1", "s2"]);
});

Deno.test("parseRouting: malformed or unimplemented members are refused, never ignored", () => {
  assert.equal(refusedParam("fast"), "provider");
  assert.equal(refusedParam([]), "provider");
  assert.equal(refusedParam({ sort: "price" }), "provider.sort");
  assert.equal(refusedParam({ Zdr: true }), "provider.Zdr");
  assert.equal(refusedParam({ aci_whatever: 1 }), "provider.aci_whatever");
  assert.equal(refusedParam({ zdr: "yes" }), "provider.zdr");
  assert.equal(refusedParam({ data_collection: "maybe" }), "provider.data_collection");
  assert.equal(refusedParam({ only: "a" }), "provider.only");
  assert.equal(refusedParam({ ignore: [1] }), "provider.ignore[0]");
  assert.equal(refusedParam({ aci_session_ids: "s1" }), "provider.aci_session_ids");
  assert.equal(refusedParam({ aci_session_ids: [] }), "provider.aci_session_ids");
  assert.equal(refusedParam({ aci_session_ids: [7] }), "provider.aci_session_ids[0]");
  assert.equal(
    refusedParam({ aci_session_ids: ["s1"], aci_verified: false }),
    "provider.aci_session_ids",
  );
  const many = Array.from({ length: 257 }, (_, i) => `s${i}`);
  assert.equal(refusedParam({ aci_session_ids: many }), "provider.aci_session_ids");
});

Deno.test("parseRouting: the constraint headers merge into the block; a disagreement is a 400", () => {
  const h = new Headers({
    [CONSTRAINT_HEADERS.zdr]: "true",
    [CONSTRAINT_HEADERS.aci_session_ids]: "s1, s2",
  });
  const c = parseRouting({ zdr: true }, h);
  assert.equal(c.zdr, true);
  assert.deepEqual(c.aciSessionIds, ["s1", "s2"]);
  assert.equal(
    refusedParam({ zdr: false }, new Headers({ [CONSTRAINT_HEADERS.zdr]: "true" })),
    CONSTRAINT_HEADERS.zdr,
  );
  assert.equal(
    refusedParam(undefined, new Headers({ [CONSTRAINT_HEADERS.aci_verified]: "1" })),
    CONSTRAINT_HEADERS.aci_verified,
  );
  assert.equal(
    refusedParam(undefined, new Headers({ [CONSTRAINT_HEADERS.aci_session_ids]: "s1,,s2" })),
    CONSTRAINT_HEADERS.aci_session_ids,
  );
  // The same ids in another order agree.
  const ids = new Headers({ [CONSTRAINT_HEADERS.aci_session_ids]: "s2,s1" });
  assert.deepEqual(parseRouting({ aci_session_ids: ["s1", "s2"] }, ids).aciSessionIds, [
    "s2",
    "s1",
  ]);
});

Deno.test("parseRouting: x-service-provider forces a provider; X-Upstream-Verification waives", () => {
  const c = parseRouting(
    undefined,
    new Headers({ "x-service-provider": "acme-1", "x-upstream-verification": " None " }),
  );
  assert.equal(c.forcedProvider, "acme-1");
  assert.equal(c.verificationWaived, true);
  const forced = new Headers({ "x-service-provider": "Acme!" });
  assert.equal(refusedParam(undefined, forced), "x-service-provider");
  const uv = new Headers({ "x-upstream-verification": "off" });
  assert.equal(refusedParam(undefined, uv), "x-upstream-verification");
});
