import assert from "node:assert/strict";
import {
  ACI_VERIFIER_ID,
  DEV_VERIFIER_ID,
  DSTACK_TDX_VERIFIER_ID,
  PINNED_VERIFIER_ID,
  SEV_SNP_VERIFIER_ID,
  verifierFor,
  type VerifierName,
} from "./mod.ts";

Deno.test("verifierFor: each configured name maps to its verifier", () => {
  assert.equal(verifierFor("dstack-tdx").id, DSTACK_TDX_VERIFIER_ID);
  assert.equal(verifierFor("aci").id, ACI_VERIFIER_ID);
  assert.equal(verifierFor("pinned").id, PINNED_VERIFIER_ID);
  assert.equal(verifierFor("sev-snp").id, SEV_SNP_VERIFIER_ID);
  assert.equal(verifierFor("dev").id, DEV_VERIFIER_ID);
  assert.throws(() => verifierFor("toString" as VerifierName), RangeError);
});
