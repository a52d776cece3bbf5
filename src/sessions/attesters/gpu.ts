/**
 * The `gpu_attested` claim of an upstream from the GPU evidence its report
 * carries, verified locally with this round's nonce: asserted
 * (hardware_proven) only when every check passes for every GPU; refuted
 * when a check fails or the payload is malformed; unknown when there is no
 * payload or collateral is missing. `extra.gpu_evidence` names the failing
 * check and each GPU's architecture, versions and OCSP status.
 */
import type { Claim } from "../types.ts";
import { type GpuDeps, parseGpuPayload, verifyGpuEvidence } from "../../verify/mod.ts";
import { UNKNOWN } from "./claims.ts";

export interface GpuClaim {
  claim: Claim;
  extra: Record<string, unknown>;
}

/** Verifies `payload` (absent: null/undefined) against `nonce`; never throws. */
export async function gpuClaim(
  payload: unknown,
  nonce: Uint8Array,
  deps: GpuDeps,
  nowMs: number,
): Promise<GpuClaim> {
  if (payload === undefined || payload === null || payload === "") {
    return {
      claim: UNKNOWN,
      extra: { status: "absent", detail: "the report carries no GPU evidence" },
    };
  }
  const parsed = parseGpuPayload(payload);
  if (!parsed.ok) {
    return {
      claim: { status: "refuted", source: "verifier_derived", reason: parsed.reason },
      extra: { status: "malformed", failing_check: "evidence", detail: parsed.reason },
    };
  }
  const verdict = await verifyGpuEvidence({
    gpus: parsed.payload.gpus,
    nonce,
    deviceRootDer: deps.deviceRootDer,
    rimRootDer: deps.rimRootDer,
    collateral: deps.collateral,
    times: deps.times(nowMs),
  });
  const gpus = verdict.gpus.map((g) => ({
    arch: g.arch,
    driver_version: g.driverVersion,
    vbios_version: g.vbiosVersion,
    hwmodel: g.hwmodel,
    mode: g.mode,
    ocsp: g.ocsp,
    rim_ocsp: g.rimOcsp,
  }));
  const n = verdict.gpus.length;
  const f = verdict.failing;
  const extra: Record<string, unknown> = {
    status: verdict.status,
    gpu_count: n,
    ...(f ? { failing_gpu: f.gpu, failing_check: f.check, detail: f.detail } : {}),
    gpus,
  };
  if (verdict.status === "pass") {
    const archs = [...new Set(gpus.map((g) => g.arch))].join("/");
    return {
      claim: {
        status: "asserted",
        source: "hardware_proven",
        reason: `${n} ${archs} GPU(s): SPDM evidence bound to this round's nonce and signed by ` +
          "device keys chained to the pinned NVIDIA root; driver and VBIOS RIMs verified; " +
          "every reference measurement matches; OCSP good",
      },
      extra,
    };
  }
  const where = f ? `GPU ${f.gpu} ${f.check}: ${f.detail}` : "no GPU evidence";
  if (verdict.status === "fail") {
    return { claim: { status: "refuted", source: "verifier_derived", reason: where }, extra };
  }
  return { claim: UNKNOWN, extra };
}

/** The refusal reason when a provider requires GPU evidence and the claim is not asserted. */
export function requiredGpuShortfall(c: GpuClaim): string | null {
  if (c.claim.status === "asserted") return null;
  const e = c.extra;
  const why = e["failing_check"] ? `${e["failing_check"]}: ${e["detail"]}` : String(e["detail"]);
  return `GPU evidence required but not proven (${e["status"]}; ${why})`;
}
