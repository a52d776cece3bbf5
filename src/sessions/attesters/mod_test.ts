import assert from "node:assert/strict";
import {
  ACI_ATTESTER_ID,
  attesterFor,
  DEV_ATTESTER_ID,
  DSTACK_TDX_ATTESTER_ID,
  PINNED_ATTESTER_ID,
  SEV_SNP_ATTESTER_ID,
  type VerifierName,
} from "./mod.ts";

Deno.test("attesterFor: each configured name maps to its verifier", () => {
  assert.equal(attesterFor("dstack-tdx").id, DSTACK_TDX_ATTESTER_ID);
  assert.equal(attesterFor("aci").id, ACI_ATTESTER_ID);
  assert.equal(attesterFor("pinned").id, PINNED_ATTESTER_ID);
  assert.equal(attesterFor("sev-snp").id, SEV_SNP_ATTESTER_ID);
  assert.equal(attesterFor("dev").id, DEV_ATTESTER_ID);
  assert.throws(() => attesterFor("toString" as VerifierName), RangeError);
});
