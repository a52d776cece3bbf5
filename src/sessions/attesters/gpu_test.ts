import assert from "node:assert/strict";
import { defaultGpuDeps } from "../../verify/nvidia/deps.ts";
import { fullNrasPayload, hexToBytes, vector } from "../../../tests/support/nvidia_fixtures.ts";
import { gpuClaim, requiredGpuShortfall } from "./gpu.ts";

const FULL = vector("hopper-550.90.07-FULL");
const NOW = Date.parse("2025-08-21T12:00:00Z");

Deno.test("gpu claim: absent, malformed and unverifiable payloads, and what require_gpu says", async () => {
  const deps = defaultGpuDeps();
  const nonce = hexToBytes(FULL.nonce);
  const absent = await gpuClaim(null, nonce, deps, NOW);
  assert.deepEqual(absent.claim, { status: "unknown" });
  assert.equal(absent.extra.status, "absent");
  assert.match(requiredGpuShortfall(absent)!, /\(absent; the report carries no GPU evidence\)/);

  const malformed = await gpuClaim("{", nonce, deps, NOW);
  assert.deepEqual(malformed.claim, {
    status: "refuted",
    source: "verifier_derived",
    reason: "GPU payload is not JSON",
  });
  assert.match(
    requiredGpuShortfall(malformed)!,
    /\(malformed; evidence: GPU payload is not JSON\)/,
  );

  // Genuine evidence without collateral: nothing refuted, nothing proven.
  const bare = await gpuClaim(fullNrasPayload(), nonce, deps, NOW);
  assert.deepEqual(bare.claim, { status: "unknown" });
  assert.equal(bare.extra.status, "unverifiable");
  assert.equal(bare.extra.failing_check, "device_ocsp");
  assert.deepEqual(bare.extra.gpus, [{
    arch: "HOPPER",
    driver_version: "550.90.07",
    vbios_version: "96.00.9F.00.01",
    hwmodel: "GH100 A01 GSP BROM",
    mode: null,
    ocsp: "unavailable",
    rim_ocsp: "unavailable",
  }]);
  assert.match(requiredGpuShortfall(bare)!, /\(unverifiable; device_ocsp: no OCSP response for/);
});
