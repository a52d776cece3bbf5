import assert from "node:assert/strict";
import { sha256Hex } from "../../aci/digest.ts";
import { INTEL_SGX_ROOT_CA_DER } from "./intel_root.ts";

Deno.test("the embedded Intel SGX Root CA is the one Intel publishes (SHA-256 of its DER)", () => {
  assert.equal(
    sha256Hex(INTEL_SGX_ROOT_CA_DER),
    "44a0196b2b99f889b8e149e95b807a350e7424964399e885a7cbb8ccfab674d3",
  );
});
